use super::*;

fn store() -> (tempfile::TempDir, BlobStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path().join("blobs"), Durability::Fsync).unwrap();
    (dir, store)
}

/// A restore's temporary file is in `blobs/tmp` (the destination on the same
/// filesystem): killed before its rename, it leaves nothing in the user's folder, and the
/// next sweep removes it.
#[test]
fn a_restore_cut_off_before_its_rename_leaves_nothing_in_the_output_folder() {
    let (dir, store) = store();
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    let dest = out.join("big.bin");
    let temp = RestoreTemp::create(&store, &out, &dest).unwrap();
    assert!(
        temp.path.starts_with(dir.path().join("blobs").join("tmp")),
        "{}",
        temp.path.display()
    );
    // Killed here: the temporary stays where apollo sweeps, not beside the output.
    drop(temp);
    assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
    assert_eq!(store.sweep_temporary().unwrap(), 1);

    // And a whole restore leaves nothing behind in either place.
    let source = dir.path().join("source");
    fs::write(&source, b"restored bytes").unwrap();
    let blob = store.put_file(&source).unwrap();
    store.restore(&blob.sha256, &dest, 0o644).unwrap();
    assert_eq!(fs::read(&dest).unwrap(), b"restored bytes");
    assert_eq!(fs::read_dir(&out).unwrap().count(), 1);
    assert_eq!(store.sweep_temporary().unwrap(), 0);
}

#[test]
fn a_restored_file_never_gets_setuid_setgid_or_sticky_bits() {
    let (dir, store) = store();
    let source = dir.path().join("tool");
    fs::write(&source, "#!/bin/sh\n").unwrap();
    let blob = store.put_file(&source).unwrap();
    let dest = dir.path().join("restored");
    // A recorded mode comes from the state directory: 0o6755 there must not make a
    // setuid program of a restored output (apollo may run as root).
    store.restore(&blob.sha256, &dest, 0o7755).unwrap();
    let mode = fs::metadata(&dest).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755);
}

#[test]
fn the_same_content_is_one_blob_named_by_its_hash() {
    let (dir, store) = store();
    let mut refs = Vec::new();
    for name in ["a", "b", "c"] {
        let path = dir.path().join(name);
        fs::write(&path, b"same bytes").unwrap();
        refs.push(store.put_file(&path).unwrap());
    }
    assert!(refs.iter().all(|blob| *blob == refs[0]));
    assert_eq!(
        store.bytes_written(),
        10,
        "the same content is written once"
    );
    assert_eq!(refs[0].sha256, apollo_core::hash::sha256_hex(b"same bytes"));
    assert_eq!(refs[0].size, 10);
    assert_eq!(store.iter().unwrap(), vec![refs[0].clone()]);
    assert!(store.contains(&refs[0].sha256));
    let tmp: Vec<_> = fs::read_dir(dir.path().join("blobs/tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "no temporary file is left behind");
}

#[test]
fn a_small_blob_the_store_has_costs_no_file() {
    let (dir, store) = store();
    let path = dir.path().join("small");
    fs::write(&path, b"seen before").unwrap();
    let first = store.put_file(&path).unwrap();
    let source = File::open(&path).unwrap();
    let mut pending = store.begin_blob(&source, 11).unwrap();
    pending.write(b"seen before").unwrap();
    assert_eq!(
        fs::read_dir(dir.path().join("blobs/tmp")).unwrap().count(),
        0
    );
    Box::new(pending).commit(&first.sha256).unwrap();
    assert_eq!(
        fs::read_dir(dir.path().join("blobs/tmp")).unwrap().count(),
        0
    );
    assert_eq!(store.iter().unwrap(), vec![first]);
}

/// `blobs/tmp` replaced by a symbolic link (to a user's folder, say) is refused: the
/// sweep never removes what is behind it, and no capture is written through it.
#[test]
fn a_temporary_folder_replaced_by_a_link_is_refused_and_what_it_points_to_stays() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("precious");
    fs::write(&precious, b"a user's file").unwrap();
    let store = BlobStore::open(dir.path().join("blobs"), Durability::Fsync).unwrap();
    let tmp = dir.path().join("blobs/tmp");
    fs::remove_dir(&tmp).unwrap();
    std::os::unix::fs::symlink(outside.path(), &tmp).unwrap();

    let swept = store.sweep_temporary();
    assert!(
        matches!(swept, Err(StoreError::UnexpectedFileType { .. })),
        "{swept:?}"
    );
    assert!(
        precious.exists(),
        "the sweep removed a file behind the link"
    );
    let reopened = BlobStore::open(dir.path().join("blobs"), Durability::Fsync);
    assert!(
        matches!(reopened, Err(StoreError::UnexpectedFileType { .. })),
        "{reopened:?}"
    );
    let input = dir.path().join("input");
    fs::write(&input, vec![7u8; 200_000]).unwrap();
    assert!(
        store.put_file(&input).is_err(),
        "a capture went through the link"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    // A missing temporary folder is nothing to sweep.
    fs::remove_file(&tmp).unwrap();
    assert_eq!(store.sweep_temporary().unwrap(), 0);
}

/// A blob's prefix folder (`blobs/sha256/ab`) planted as a symbolic link: the blob is
/// refused, nothing is renamed through the link, and no temporary file stays behind.
#[test]
fn a_prefix_folder_planted_as_a_link_takes_no_blob() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path().join("blobs"), Durability::Fsync).unwrap();
    let content = vec![9u8; 200_000];
    let hash = apollo_core::hash::sha256_hex(&content);
    std::os::unix::fs::symlink(
        outside.path(),
        dir.path().join("blobs/sha256").join(&hash[..2]),
    )
    .unwrap();
    let input = dir.path().join("input");
    fs::write(&input, &content).unwrap();
    let stored = store.put_file(&input);
    assert!(stored.is_err(), "{stored:?}");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    assert_eq!(
        fs::read_dir(dir.path().join("blobs/tmp")).unwrap().count(),
        0,
        "the temporary file is removed"
    );
}

/// `prune` lists the blobs, then removes those no run keeps: a prefix folder replaced
/// by a link in between (to another store's prefix folder, say) must not make it remove
/// what is behind the link, and a link is never listed or counted as a stored blob.
#[test]
fn a_prefix_folder_swapped_for_a_link_after_listing_loses_nothing_behind_it() {
    let (dir, store) = store();
    let input = dir.path().join("input");
    fs::write(&input, b"kept elsewhere").unwrap();
    let blob = store.put_file(&input).unwrap();
    assert_eq!(store.iter().unwrap(), vec![blob.clone()]);

    // Another store's prefix folder with a blob of the same name.
    let outside = tempfile::tempdir().unwrap();
    let theirs = outside.path().join(&blob.sha256[2..]);
    fs::write(&theirs, b"kept elsewhere").unwrap();
    let prefix = dir.path().join("blobs/sha256").join(&blob.sha256[..2]);
    fs::remove_file(prefix.join(&blob.sha256[2..])).unwrap();
    fs::remove_dir(&prefix).unwrap();
    std::os::unix::fs::symlink(outside.path(), &prefix).unwrap();

    let removed = store.remove(&blob.sha256);
    assert!(
        matches!(removed, Err(StoreError::UnexpectedFileType { .. })),
        "{removed:?}"
    );
    assert!(theirs.exists(), "remove deleted a file behind the link");
    assert!(store.iter().unwrap().is_empty(), "a link is not a blob");
    assert!(!store.contains(&blob.sha256), "a link is not a blob");
    let restored = store.restore(&blob.sha256, &dir.path().join("out"), 0o644);
    assert!(restored.is_err(), "{restored:?}");

    // `blobs/sha256` itself a link: refused, not read through.
    let sha_dir = dir.path().join("blobs/sha256");
    fs::remove_file(&prefix).unwrap();
    fs::remove_dir(&sha_dir).unwrap();
    let other = tempfile::tempdir().unwrap();
    fs::create_dir(other.path().join(&blob.sha256[..2])).unwrap();
    fs::write(
        other.path().join(&blob.sha256[..2]).join(&blob.sha256[2..]),
        b"kept elsewhere",
    )
    .unwrap();
    std::os::unix::fs::symlink(other.path(), &sha_dir).unwrap();
    assert!(matches!(
        store.iter(),
        Err(StoreError::UnexpectedFileType { .. })
    ));
    assert!(store.remove(&blob.sha256).is_err());
    assert!(
        (other.path().join(&blob.sha256[..2]).join(&blob.sha256[2..])).exists(),
        "remove deleted a file behind the link"
    );
}

/// A FIFO planted under a blob's name is refused at once: restoring it neither hangs on
/// the open nor writes anything.
#[test]
fn a_fifo_planted_as_a_blob_is_refused_without_waiting() {
    let (dir, store) = store();
    let hash = apollo_core::hash::sha256_hex(b"never written");
    let prefix = dir.path().join("blobs/sha256").join(&hash[..2]);
    fs::create_dir(&prefix).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        prefix.join(&hash[2..]),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert!(!store.contains(&hash));
    assert!(store.iter().unwrap().is_empty());
    let dest = dir.path().join("out");
    let restored = store.restore(&hash, &dest, 0o644);
    assert!(
        matches!(restored, Err(StoreError::UnexpectedFileType { .. })),
        "{restored:?}"
    );
    assert!(!dest.exists());
    store.remove(&hash).unwrap();
    assert!(!prefix.join(&hash[2..]).exists());
}

#[test]
fn a_crash_mid_write_leaves_no_named_blob_and_the_sweep_removes_the_rest() {
    let (dir, store) = store();
    let path = dir.path().join("input");
    fs::write(&path, vec![7u8; 200_000]).unwrap();
    let source = File::open(&path).unwrap();
    let mut pending = store.begin_blob(&source, 200_000).unwrap();
    if pending.copy.is_none() {
        pending.write(&[7u8; 65_536]).unwrap();
    }
    // A SIGKILL now: no destructor runs, no rename happens.
    std::mem::forget(pending);
    assert!(
        store.iter().unwrap().is_empty(),
        "a half-written blob has no name"
    );
    assert_eq!(store.sweep_temporary().unwrap(), 1);
    // The next capture of the same file is whole.
    let blob = store.put_file(&path).unwrap();
    assert_eq!(blob.size, 200_000);
    let restored = dir.path().join("restored");
    assert_eq!(
        store.restore(&blob.sha256, &restored, 0o640).unwrap(),
        200_000
    );
    assert_eq!(fs::read(&restored).unwrap(), vec![7u8; 200_000]);
    assert_eq!(
        fs::metadata(&restored).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[test]
fn a_bit_flipped_blob_is_corruption_and_writes_nothing() {
    let (dir, store) = store();
    let path = dir.path().join("data.csv");
    fs::write(&path, b"a,b\n1,2\n").unwrap();
    let blob = store.put_file(&path).unwrap();
    let blob_path = store.path(&blob.sha256).unwrap();
    let mut bytes = fs::read(&blob_path).unwrap();
    bytes[2] ^= 0x01;
    fs::set_permissions(&blob_path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&blob_path, &bytes).unwrap();
    let dest = dir.path().join("out/restored.csv");
    fs::create_dir_all(dest.parent().unwrap()).unwrap();
    fs::write(&dest, b"previous").unwrap();
    let error = store.restore(&blob.sha256, &dest, 0o644).unwrap_err();
    assert_eq!(error.kind(), crate::ErrorKind::Corruption, "{error}");
    assert!(error.to_string().contains("hashes to"), "{error}");
    assert_eq!(fs::read(&dest).unwrap(), b"previous", "never a wrong file");
    let leftovers = fs::read_dir(dest.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left beside it");
    let missing = store.restore(&"0".repeat(64), &dest, 0o644).unwrap_err();
    assert_eq!(missing.kind(), crate::ErrorKind::NotFound);
    assert!(store.path("../../etc/passwd").is_err());
}
