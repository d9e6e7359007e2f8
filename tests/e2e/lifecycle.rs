//! A run's lifecycle as every command sees it (issue 35): what is recorded after
//! `run_finished` (hooks, marks) never changes whether a run finished; a glob output present on
//! disk is never "missing"; a damaged latest run is reported, never skipped.

use crate::support::Apollo;

/// Each run's `status` in `apollo runs --format json`, oldest first.
fn statuses(apollo: &mut Apollo) -> Vec<String> {
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    assert_eq!(runs["schema"], "apollo.runs/2");
    runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["status"].as_str().unwrap().to_owned())
        .collect()
}

/// A pipeline with any hook finished, and every command says so: `runs`, the next `run` (a
/// new run, the hook firing once per run), `backup`.
#[test]
fn a_pipeline_with_a_hook_finishes_and_its_next_run_is_a_new_run() {
    let mut apollo = Apollo::new();
    apollo
        .config("on_finish: bin/count hook\nunits:\n  - name: only\n    execute: bin/count only\n");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("hook"), 1);

    assert_eq!(statuses(&mut apollo), ["succeeded"], "a run whose hook ran");

    // The nightly job runs again: a new run, not a resume of a finished one.
    let second = apollo.args(&["run"]).run();
    second.code(0);
    assert!(
        !second.stderr.contains("resuming run"),
        "a finished run is never resumed:\n{}",
        second.stderr
    );
    assert_eq!(apollo.run_ids().len(), 2, "{}", second.stderr);
    assert_eq!(apollo.count("hook"), 2, "the hook fires once per run");

    let destination = apollo.path("backup-copy");
    let backup = apollo
        .args(&["backup", destination.to_str().unwrap()])
        .run();
    backup.code(0);
    for id in apollo.run_ids() {
        assert!(
            destination.join("runs").join(&id).exists(),
            "backup copies finished run {id}:\n{}{}",
            backup.stdout,
            backup.stderr
        );
    }
}

/// `prune --keep-runs 1` deletes the older of two succeeded runs whose `on_finish` hook ran:
/// each is a finished run of its own (issue 35: the hook made a run read as unfinished, the
/// next `run` resumed it, and prune found one run, the latest, to keep).
#[test]
fn prune_deletes_an_older_succeeded_run_whose_hook_ran() {
    let mut apollo = Apollo::new();
    apollo.config("on_finish: bin/count hook\nunits:\n  - name: only\n    execute: 'true'\n");
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("hook"), 2);
    let ids = apollo.run_ids();
    assert_eq!(ids.len(), 2, "two runs, not one resumed");
    let pruned = apollo.args(&["prune", "--keep-runs", "1"]).run();
    pruned.code(0);
    assert!(
        pruned.stdout.contains(&format!("deleted {}", ids[0])),
        "{}",
        pruned.stdout
    );
    assert_eq!(apollo.run_ids(), ids[1..], "{}", pruned.stdout);
}

/// A failed run whose `on_failure` hook ran stays failed (not "incomplete"), and the next `run`
/// resumes it (a failed run is resumable) without firing the hook twice for the same end.
#[test]
fn a_failed_run_with_a_hook_is_failed_not_incomplete() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_failure: bin/count hook\nunits:\n  - name: bad\n    execute: bin/count bad; test -e markers/go\n",
    );
    apollo.args(&["run"]).run().code(1);
    assert_eq!(statuses(&mut apollo), ["failed"]);
    apollo.release("go");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("bad"), 2);
    assert_eq!(
        apollo.count("hook"),
        1,
        "on_failure fired for the failure only"
    );
    assert_eq!(statuses(&mut apollo), ["succeeded"]);
}

/// A glob output whose files are there is not "missing" on a resume: the unit that made them
/// is done, and a non-idempotent one does not stop the resume for a human.
#[test]
fn a_glob_output_present_on_disk_is_not_missing_on_resume() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: split\n    idempotent: false\n    execute: bin/count split; mkdir -p parts; echo a > parts/1.part; echo b > parts/2.part\n    outputs: [\"parts/*.part\"]\n  - name: after\n    deps: [split]\n    execute: bin/count after; test -e markers/go\n",
    );
    apollo.args(&["run"]).run().code(1);
    apollo.release("go");
    let resumed = apollo.args(&["run"]).run();
    resumed.code(0);
    assert!(!resumed.stderr.contains("is missing"), "{}", resumed.stderr);
    assert_eq!(apollo.count("split"), 1, "{}", resumed.stderr);
    assert_eq!(apollo.count("after"), 2);
}

/// The journal of the pipeline's latest run (the one `latest/` names: its `run_started` was
/// acknowledged) lost its records: `run` stops with exit 3 naming `--fresh` instead of resuming
/// an older run or starting over; `verify` and `runs` report it.
#[test]
fn a_latest_run_whose_journal_lost_its_records_is_damage_not_skipped() {
    for damage in ["header only", "empty", "journal removed"] {
        let mut apollo = Apollo::new();
        apollo.config("units:\n  - name: a\n    execute: bin/count a; test -e markers/go\n");
        // An older failed run, then the latest one (both failed: resumable).
        apollo.args(&["run"]).run().code(1);
        apollo.args(&["run", "--fresh"]).run().code(1);
        let ids = apollo.run_ids();
        assert_eq!(ids.len(), 2);
        let latest = &ids[1];
        let journal = apollo.path(&format!(".apollo/runs/{latest}/journal"));
        let mut segments: Vec<_> = std::fs::read_dir(&journal)
            .unwrap()
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .collect();
        segments.sort();
        match damage {
            "header only" => {
                let bytes = std::fs::read(&segments[0]).unwrap();
                let header_end = bytes.iter().position(|&byte| byte == b'\n').unwrap() + 1;
                std::fs::write(&segments[0], &bytes[..header_end]).unwrap();
            }
            "empty" => std::fs::write(&segments[0], b"").unwrap(),
            _ => std::fs::remove_dir_all(&journal).unwrap(),
        }

        apollo.release("go");
        let run = apollo.args(&["run"]).run();
        run.code(3);
        assert!(
            run.stderr.contains(latest.as_str()) && run.stderr.contains("--fresh"),
            "{damage}: {}",
            run.stderr
        );
        assert_eq!(apollo.count("a"), 2, "{damage}: nothing ran");

        let verify = apollo.args(&["verify"]).run();
        verify.code(3);
        assert!(
            verify.stderr.contains(latest.as_str()),
            "{damage}: {}{}",
            verify.stdout,
            verify.stderr
        );
        assert_eq!(statuses(&mut apollo), ["failed", "corrupt"], "{damage}");

        // `--fresh` is the way on.
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
}

/// `apollo stop` while a hook runs ends the hook (recorded interrupted), never waits for it;
/// the run keeps the status it had; stop says the run had ended; the hook never fires again.
#[test]
fn apollo_stop_during_a_hook_ends_the_hook_and_the_run_keeps_its_status() {
    let mut apollo = Apollo::new();
    apollo.config(
        "on_finish:\n  execute: bin/count hook; bin/block hook\n  timeout: 1h\nunits:\n  - name: only\n    execute: bin/count only\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("hook.started");
    let stop = apollo.args(&["stop"]).run();
    stop.code(0);
    assert!(
        stop.stdout.contains("had already succeeded"),
        "{}",
        stop.stdout
    );
    let out = running.wait();
    assert!(
        !apollo.path("markers/hook.release").exists(),
        "the hook was never released: stop ended it"
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let journal = apollo.journal_text();
    assert!(
        journal.contains(r#""kind":"hook_finished","hook":"on_finish","run_status":"succeeded","status":"interrupted""#),
        "{journal}"
    );
    assert_eq!(statuses(&mut apollo), ["succeeded"]);
    // The next run is a new one: the hook fires for it, never again for the first.
    apollo.release("hook.release");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("hook"), 2);
    assert_eq!(apollo.run_ids().len(), 2);
}

/// Includes are regular files within a bound; a params file may be a pipe (issue 36 item 14:
/// `include: [/dev/zero]` grew until the OOM killer, a FIFO hung `check` forever).
#[test]
fn an_include_that_is_a_device_or_a_fifo_is_refused_and_a_params_pipe_is_read() {
    let mut apollo = Apollo::new();
    apollo.config("include: [/dev/zero]\nunits:\n  - name: a\n    execute: 'true'\n");
    let check = apollo.args(&["check"]).run();
    check.code(2);
    assert!(
        check.stderr.contains("a character device"),
        "{}",
        check.stderr
    );

    crate::support::mkfifo(&apollo.path("more.yaml"));
    apollo.config("include: [more.yaml]\nunits:\n  - name: a\n    execute: 'true'\n");
    let check = apollo.args(&["check"]).run();
    check.code(2);
    assert!(check.stderr.contains("a FIFO"), "{}", check.stderr);

    apollo.config(
        "params:\n  word: {type: string}\nunits:\n  - name: a\n    execute: echo ${params.word} > got\n",
    );
    let run = apollo.args(&["run"]).run_under(&[
        "bash",
        "-c",
        r#"exec "$0" "$@" --params-file <(printf 'word: seven\n')"#,
    ]);
    run.code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("got")).unwrap(),
        "seven\n"
    );
}

/// A pipeline's `name:` is the config's text: `run` and `runs` print it escaped, never as
/// terminal control sequences (issue 36 item 17).
#[test]
fn a_pipeline_name_with_control_characters_is_printed_escaped() {
    let mut apollo = Apollo::new();
    apollo.config("name: \"evil\\e[2J\\nname\"\nunits:\n  - name: a\n    execute: 'true'\n");
    let run = apollo.args(&["run"]).run();
    run.code(0);
    assert!(!run.stdout.contains('\x1b'), "{:?}", run.stdout);
    assert!(
        run.stdout.contains("evil\\u{1b}[2J\\nname"),
        "{}",
        run.stdout
    );
    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(!runs.stdout.contains('\x1b'), "{:?}", runs.stdout);
}

/// `--keep-runs` and `--keep-days` each keep runs, and a run goes only when neither keeps it
/// (issue 36 item 18: `--keep-runs 2 --keep-days 0` deleted the runs it was asked to keep).
#[test]
fn prune_keeps_what_either_rule_keeps() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: 'true'\n");
    for _ in 0..3 {
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
    let ids = apollo.run_ids();
    let pruned = apollo
        .args(&["prune", "--keep-runs", "2", "--keep-days", "0"])
        .run();
    pruned.code(0);
    assert!(
        pruned.stdout.contains(&format!("deleted {}", ids[0])),
        "{}",
        pruned.stdout
    );
    assert_eq!(apollo.run_ids(), ids[1..], "{}", pruned.stdout);
    assert!(
        pruned.stdout.contains("pruned 1 run, freed ") && pruned.stdout.contains(" of blobs)"),
        "the total counts runs and blobs: {}",
        pruned.stdout
    );
}

/// `-j N` above what `max_cpus` allows says so once (issue 35), and the run still runs.
#[test]
fn a_j_above_the_cpus_allowed_says_so_once() {
    let mut apollo = Apollo::new();
    apollo.config(
        "max_cpus: 1\nunits:\n  - name: a\n    execute: 'true'\n  - name: b\n    execute: 'true'\n",
    );
    let run = apollo.args(&["run", "-j", "4"]).run();
    run.code(0);
    assert_eq!(
        run.stderr
            .matches("note: -j 4: at most 1 local unit run at once here: `max_cpus: 1`")
            .count(),
        1,
        "{}",
        run.stderr
    );
    let within = apollo.args(&["run", "--fresh", "-j", "1"]).run();
    within.code(0);
    assert!(!within.stderr.contains("note: -j"), "{}", within.stderr);
}

/// `apollo stop` by another user names the permission, not the pid (issue 36 item 18: "pid N
/// … is not an apollo holding this state directory's lock" when the apollo was someone
/// else's), and signals nothing.
#[test]
fn stop_as_another_user_says_whose_apollo_it_is_and_signals_nothing() {
    if !apollo_core::testing::require(
        rustix::process::geteuid().is_root(),
        "root (to run `apollo stop` as another user)",
        "run the tests as root",
    ) {
        return;
    }
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: slow\n    execute: bin/block slow\n");
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("slow.started");
    // Another user may read the state directory (one made by an older apollo, or shared).
    readable_by_all(apollo.root());
    let stop = apollo.args(&["stop"]).run_under(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ]);
    stop.code(2);
    assert!(
        stop.stderr.contains("another user") && stop.stderr.contains("nothing was signalled"),
        "{}",
        stop.stderr
    );
    assert!(!stop.stderr.contains("is not an apollo"), "{}", stop.stderr);
    apollo.release("slow.release");
    running.wait().code(0);
}

/// A state directory another user's modes keep out is a permission problem (exit 2, saying
/// whose it is to fix), not "free space or fix the disk" (exit 6) — issue 36 item 18.
#[test]
fn a_state_directory_one_may_not_read_is_a_permission_error_not_a_disk_error() {
    if !apollo_core::testing::require(
        rustix::process::geteuid().is_root(),
        "root (to read a state directory as another user)",
        "run the tests as root",
    ) {
        return;
    }
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: one\n    execute: \"true\"\n");
    apollo.args(&["run"]).run().code(0);
    // The project and `.apollo` may be entered, `runs/` (0700, root's) may not.
    for path in [apollo.root().to_path_buf(), apollo.path(".apollo")] {
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let runs = apollo.args(&["runs"]).run_under(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ]);
    runs.code(2);
    assert!(
        runs.stderr.contains("Permission denied") && runs.stderr.contains("owner"),
        "{}",
        runs.stderr
    );
    assert!(!runs.stderr.contains("free space"), "{}", runs.stderr);
}

/// `chmod -R a+rX`: every file readable, every folder enterable by every user.
fn readable_by_all(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::symlink_metadata(path).unwrap();
    if metadata.file_type().is_symlink() {
        return;
    }
    let extra = if metadata.is_dir() { 0o555 } else { 0o444 };
    let mode = metadata.permissions().mode() | extra;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            readable_by_all(&entry.unwrap().path());
        }
    }
}
