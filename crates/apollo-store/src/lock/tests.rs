//! The lock's tests: holders, probes, and the probe that never tries the lock.

use super::*;

#[test]
fn the_holder_check_tells_a_live_pid_from_a_free_one() {
    assert!(crate::process::exists(std::process::id()));
    // Above any pid_max Linux allows (2^22): no process has it.
    assert!(!crate::process::exists(i32::MAX as u32));
    assert!(!crate::process::exists(u32::MAX));
    // Pid 0 is no process: never told dead, so a lock naming it stays held.
    assert!(crate::process::exists(0));
}

#[test]
fn a_second_writer_is_refused_with_the_holders_pid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let first = StateLock::acquire(&path, false).unwrap();
    // flock locks belong to open file descriptions: a second open in the same process
    // conflicts exactly as another process would.
    let error = StateLock::acquire(&path, false).unwrap_err();
    match &error {
        StoreError::Locked { pid, .. } => assert_eq!(*pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other}"),
    }
    assert!(
        error
            .to_string()
            .contains(&format!("pid {}", std::process::id())),
        "{error}"
    );
    assert!(StateLock::probe(&path).unwrap().is_some());
    drop(first);
    assert!(StateLock::probe(&path).unwrap().is_none());
    let _again = StateLock::acquire(&path, false).unwrap();
    assert!(path.exists());
}

#[test]
fn a_probe_reads_proc_locks_and_leaves_the_lock_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let lock = StateLock::acquire(&path, false).unwrap();
    let file = File::open(&path).unwrap();
    if std::path::Path::new("/proc/locks").exists() {
        assert_eq!(held_in_proc_locks(&file), Some(true));
        drop(lock);
        assert_eq!(held_in_proc_locks(&file), Some(false));
        // Probing a free lock takes nothing: it is still free for a writer's
        // non-blocking attempt while the probe's own file is open.
        assert!(StateLock::probe(&path).unwrap().is_none());
        let _writer = StateLock::acquire(&path, false).unwrap();
        assert!(StateLock::probe(&path).unwrap().is_some());
    }
}

#[test]
fn the_holder_names_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let mut lock = StateLock::acquire(&path, false).unwrap();
    let run: crate::RunId = "20261130T021507Z-3f9a".parse().unwrap();
    lock.set_run(&run).unwrap();
    let holder = StateLock::probe(&path).unwrap().unwrap();
    assert_eq!(holder.run.as_deref(), Some("20261130T021507Z-3f9a"));
    assert_eq!(holder.pid, Some(std::process::id()));
}

#[test]
fn a_probe_that_never_locks_reads_the_holder_on_a_network_filesystem() {
    const NFS: i64 = 0x6969;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    let lock = StateLock::acquire(&path, false).unwrap();
    let file = File::open(&path).unwrap();
    // On "NFS" (a faked filesystem kind) the recorded holder answers: this process, alive.
    let holder = judge_without_locking(&file, Some(NFS)).expect("held");
    assert_eq!(holder.pid, Some(std::process::id()));
    assert!(!holder.unverified, "a holder on this host is checked");
    // The probe took nothing: a writer's non-blocking attempt from another open file
    // description still meets the first lock, not the probe's.
    assert!(matches!(
        StateLock::acquire(&path, false),
        Err(StoreError::Locked { .. })
    ));
    // Released: the writer emptied the file, which reads as free.
    drop(lock);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    assert_eq!(judge_without_locking(&file, Some(NFS)), None);
    assert!(StateLock::probe_without_locking(&path).unwrap().is_none());
}

#[test]
fn a_recorded_holder_is_judged_by_host_boot_and_pid() {
    let holder = |pid: u32, host: &str, boot: Option<&str>| LockHolder {
        pid: Some(pid),
        host: Some(host.to_owned()),
        boot: boot.map(str::to_owned),
        ..LockHolder::default()
    };
    let me = std::process::id();
    // This host, this boot, a live pid: held.
    let judged = judge_recorded_holder(holder(me, "here", Some("b1")), "here", Some("b1"));
    assert!(judged.is_some_and(|held| !held.unverified));
    // A dead pid (above any pid_max), or a pid of an earlier boot: free.
    assert_eq!(
        judge_recorded_holder(holder(i32::MAX as u32, "here", None), "here", None),
        None
    );
    assert_eq!(
        judge_recorded_holder(holder(me, "here", Some("b0")), "here", Some("b1")),
        None
    );
    // Another host: cannot be told from here, said so.
    let judged = judge_recorded_holder(holder(me, "there", None), "here", None);
    assert!(judged.is_some_and(|held| held.unverified));
    // Nothing recorded (an emptied file): free.
    assert_eq!(
        judge_recorded_holder(LockHolder::default(), "here", None),
        None
    );
}
