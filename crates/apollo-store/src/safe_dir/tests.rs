use super::*;

#[test]
fn a_checked_tail_is_created_below_missing_parents_and_never_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b/runs/r1/journal");
    let opened = Dir::open_checked_tail(&deep, 3, true, false).unwrap();
    assert_eq!(opened.path(), deep);
    assert!(deep.is_dir());

    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join("a/b/runs/r2")).unwrap();
    let error = Dir::open_checked_tail(&dir.path().join("a/b/runs/r2/journal"), 3, true, false)
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::UnexpectedFileType {
                found: "a symbolic link",
                ..
            }
        ),
        "{error}"
    );
    assert!(!outside.join("journal").exists());
}

#[test]
fn files_are_written_atomically_and_links_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("name")).unwrap();
    let opened = Dir::open(dir.path()).unwrap();
    assert!(opened.open_file("name", Access::Read).is_err());
    assert!(opened.create_new_file("name").is_err());
    opened.write_file_atomic("name", b"new", true).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("name")).unwrap(),
        "new"
    );
    assert_eq!(
        opened.entry_type("name").unwrap(),
        Some(FileType::RegularFile)
    );
}

#[test]
fn a_held_file_has_the_identity_its_name_has_and_its_links_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segment");
    let file = File::create(&path).unwrap();
    let held = held_state(&file, &path).unwrap();
    assert_eq!(Some(held.id), path_id(&path).unwrap());
    assert_eq!(held.n_links, 1);
    std::fs::hard_link(&path, dir.path().join("second")).unwrap();
    assert_eq!(held_state(&file, &path).unwrap().n_links, 2);
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(dir.path().join("second")).unwrap();
    assert_eq!(held_state(&file, &path).unwrap().n_links, 0);
    // Another file at the name is another identity.
    std::fs::write(&path, "other").unwrap();
    assert_ne!(Some(held.id), path_id(&path).unwrap());
    // A folder's descriptor too.
    let opened = Dir::open(dir.path()).unwrap();
    assert_eq!(
        Some(opened.held_state().unwrap().id),
        path_id(dir.path()).unwrap()
    );
}
