use super::unnamed::held_elsewhere;
use super::*;
use spares::Availability;
use std::io::Write;

fn named(dir: &Path, name: &str) -> LogFile {
    LogFile::open(&LogSpares::default(), dir, name, true).unwrap()
}

/// Whether unnamed files work in `dir` (they do on ext4, xfs, btrfs, tmpfs). Where they
/// do not, named files are used and a test of unnamed files has nothing to check: it
/// prints a visible `SKIPPED: …` and passes, except under `CI=true`, where it fails.
fn unnamed_files_work(dir: &Path) -> bool {
    let works = LogFile::open(&LogSpares::default(), dir, "probe", false)
        .is_ok_and(|log| log.home.is_some())
        && create_unnamed(dir).is_ok_and(|(file, _)| held_elsewhere(&file) == Availability::Free);
    if !works {
        let what = format!(
            "O_TMPFILE, /proc/self/fd and write leases in {}",
            dir.display()
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "this test needs {what} (under CI=true that is a failure, not a skip)"
        );
        // Straight to stderr: the test harness captures `eprintln!` of passing tests.
        let _ = std::io::stderr().write_all(format!("SKIPPED: needs {what}\n").as_bytes());
    }
    works
}
/// A temporary folder where unnamed files work, or `None` (said on stderr) where they
/// do not, and the test has nothing to check.
fn unnamed_files_root() -> Option<tempfile::TempDir> {
    let root = tempfile::tempdir().unwrap();
    unnamed_files_work(root.path()).then_some(root)
}

#[test]
fn hashes_exactly_the_requested_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = named(dir.path(), "stdout");
    log.for_child()
        .unwrap()
        .write_all(b"before|hello\n|after")
        .unwrap();
    assert_eq!(log.len().unwrap(), 19);
    // sha256("hello\n")
    assert_eq!(
        log.sha256_of_range(7, 13).unwrap(),
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
    // The empty range is the hash of nothing.
    assert_eq!(
        log.sha256_of_range(3, 3).unwrap(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn reopening_appends_instead_of_truncating() {
    let dir = tempfile::tempdir().unwrap();
    named(dir.path(), "stderr")
        .for_child()
        .unwrap()
        .write_all(b"one")
        .unwrap();
    let again = named(dir.path(), "stderr");
    again.for_child().unwrap().write_all(b"two").unwrap();
    assert_eq!(std::fs::read(dir.path().join("stderr")).unwrap(), b"onetwo");
}

#[test]
fn output_is_never_written_through_a_symbolic_link() {
    let dir = tempfile::tempdir().unwrap();
    let spares = LogSpares::default();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    // The file is a link.
    let log_dir = dir.path().join("units/a/1");
    std::fs::create_dir_all(&log_dir).unwrap();
    std::os::unix::fs::symlink(&victim, log_dir.join("stdout")).unwrap();
    assert!(LogFile::open(&spares, &log_dir, "stdout", true).is_err());
    // The unit's folder is a link.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("units/b")).unwrap();
    let error = LogFile::open(&spares, &dir.path().join("units/b/1"), "stdout", true)
        .expect_err("a linked folder is refused");
    assert!(error.to_string().contains("not a folder"), "{error}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
}

#[test]
fn output_named_at_the_end_never_goes_through_a_linked_folder() {
    // A hook's folder (`runs/<id>/hooks`) planted as a link to a folder that has the
    // hook's sub-folder: the link at the end is refused, and the copy it falls back to
    // must be refused too.
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("on_finish")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.path().join("hooks")).unwrap();
    let log_dir = root.path().join("hooks/on_finish");
    let log = LogFile::open(&spares, &log_dir, "stdout", false).unwrap();
    log.for_child().unwrap().write_all(b"hook output").unwrap();
    let error = log
        .finish(&spares, None)
        .expect_err("a linked folder is refused");
    assert!(error.contains("not a folder"), "{error}");
    assert!(!elsewhere.join("on_finish/stdout").exists());
}

#[test]
fn a_silent_attempt_creates_nothing_and_its_file_is_reused() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    std::fs::create_dir(root.path().join("units")).unwrap();
    let first_dir = root.path().join("units/a/1");
    let log = LogFile::open(&spares, &first_dir, "stdout", false).unwrap();
    log.finish(&spares, None).unwrap();
    assert!(!root.path().join("units/a").exists(), "nothing named");
    assert_eq!(spares.spares.lock().unwrap().len(), 1);
    let second_dir = root.path().join("units/b/1");
    let log = LogFile::open(&spares, &second_dir, "stdout", false).unwrap();
    assert!(
        spares.spares.lock().unwrap().is_empty(),
        "the spare was reused"
    );
    log.for_child().unwrap().write_all(b"out").unwrap();
    log.finish(&spares, None).unwrap();
    assert_eq!(std::fs::read(second_dir.join("stdout")).unwrap(), b"out");
    assert!(
        spares.spares.lock().unwrap().is_empty(),
        "a named file is not reused"
    );
}

#[test]
fn a_file_named_early_keeps_what_is_written_after() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    let dir = root.path().join("u/1");
    let log = LogFile::open(&spares, &dir, "stdout", false).unwrap();
    let mut child = log.for_child().unwrap();
    child.write_all(b"early ").unwrap();
    log.name_now().unwrap();
    child.write_all(b"late").unwrap();
    log.finish(&spares, None).unwrap();
    assert_eq!(std::fs::read(dir.join("stdout")).unwrap(), b"early late");
}

#[test]
fn output_written_after_a_silent_attempt_goes_to_that_attempt() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    let first = root.path().join("a/1");
    let log = LogFile::open(&spares, &first, "stdout", false).unwrap();
    // A process that escaped the attempt's group still holds the file.
    let mut escaped = log.for_child().unwrap();
    log.finish(&spares, None).unwrap();
    escaped.write_all(b"too late").unwrap();
    let second = root.path().join("b/1");
    let log = LogFile::open(&spares, &second, "stdout", false).unwrap();
    assert_eq!(log.len().unwrap(), 0, "the next attempt starts empty");
    assert_eq!(std::fs::read(first.join("stdout")).unwrap(), b"too late");
}

#[test]
fn naming_into_an_existing_file_appends_to_it() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    std::fs::write(root.path().join("stdout"), b"before ").unwrap();
    let log = LogFile::open(&spares, root.path(), "stdout", false).unwrap();
    log.for_child().unwrap().write_all(b"after").unwrap();
    log.finish(&spares, None).unwrap();
    assert_eq!(
        std::fs::read(root.path().join("stdout")).unwrap(),
        b"before after"
    );
}

#[test]
fn a_name_that_cannot_be_linked_mid_attempt_loses_nothing_at_the_end() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    std::fs::write(root.path().join("stdout"), b"before ").unwrap();
    let log = LogFile::open(&spares, root.path(), "stdout", false).unwrap();
    let mut child = log.for_child().unwrap();
    child.write_all(b"early ").unwrap();
    assert!(log.name_now().is_err(), "the name is taken: no link");
    child.write_all(b"late").unwrap();
    drop(child);
    log.finish(&spares, None).unwrap();
    assert_eq!(
        std::fs::read(root.path().join("stdout")).unwrap(),
        b"before early late"
    );
}

#[test]
fn an_attempt_cut_short_still_keeps_its_output() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let dir = root.path().join("u/1");
    let log = LogFile::open(&LogSpares::default(), &dir, "stderr", false).unwrap();
    log.for_child().unwrap().write_all(b"panic ahead").unwrap();
    drop(log);
    assert_eq!(std::fs::read(dir.join("stderr")).unwrap(), b"panic ahead");
}

#[test]
fn a_file_an_escaped_process_holds_is_not_reused_and_is_named_when_dropped() {
    let Some(root) = unnamed_files_root() else {
        return;
    };
    let spares = LogSpares::default();
    let log = LogFile::open(&spares, &root.path().join("a/1"), "stdout", false).unwrap();
    let escaped = log.for_child().unwrap();
    log.finish(&spares, None).unwrap();
    let next = LogFile::open(&spares, &root.path().join("b/1"), "stdout", false).unwrap();
    next.finish(&spares, None).unwrap();
    assert_eq!(
        spares.spares.lock().unwrap().len(),
        2,
        "the held one was skipped"
    );
    drop(spares);
    assert!(
        root.path().join("a/1/stdout").exists(),
        "named for what the escaped process writes later"
    );
    assert!(
        !root.path().join("b").exists(),
        "a free spare is just closed"
    );
    drop(escaped);
}
