//! The state directory is apollo's and checked (issue 12): a symlinked lock file, a segment
//! that is a FIFO, the state directory or lock file deleted mid-run, a file size limit.

use std::path::Path;

use crate::support::{Apollo, SAFETY_TIMEOUT, mkfifo};

const TWO_UNITS: &str = "units:
  - name: a
    execute: bin/count a
  - name: b
    deps: [a]
    execute: bin/count b
";

#[test]
fn a_lock_file_that_is_a_symlink_is_refused_and_its_target_never_written() {
    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    std::fs::write(apollo.path("precious"), "keep me\n").unwrap();
    std::fs::remove_file(apollo.path(".apollo/lock")).unwrap();
    std::os::unix::fs::symlink(apollo.path("precious"), apollo.path(".apollo/lock")).unwrap();
    let output = apollo.args(&["run", "--fresh"]).run();
    output.code(2);
    assert!(output.stderr.contains("symbolic link"), "{}", output.stderr);
    assert_eq!(
        std::fs::read_to_string(apollo.path("precious")).unwrap(),
        "keep me\n"
    );
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 1));
}

#[test]
fn a_segment_that_is_a_fifo_makes_read_commands_fail_not_hang() {
    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().pop().unwrap();
    let segment = apollo.path(&format!(".apollo/runs/{run}/journal/000001.log"));
    std::fs::remove_file(&segment).unwrap();
    mkfifo(&segment);
    // Each invocation is bounded by the helper's safety timeout (it kills a hung apollo, and
    // the exit code is then `None`).
    let output = apollo.args(&["verify"]).run();
    output.code(3);
    assert!(
        output.stdout.contains("not a regular file")
            || output.stderr.contains("not a regular file"),
        "{output:?}"
    );
    let output = apollo.args(&["runs"]).run();
    assert!(output.code.is_some(), "apollo runs hung");
    assert!(output.stdout.contains("corrupt"), "{output:?}");
    let output = apollo.args(&["replay", &run]).run();
    output.code(3);
}

#[test]
fn deleting_the_state_directory_mid_run_stops_apollo_before_the_next_unit() {
    // `git clean -xdf` on an ignored `.apollo` while a run is active.
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: rm -rf .apollo && bin/count a
  - name: b
    deps: [a]
    execute: bin/count b
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(6);
    assert!(
        output.stderr.contains("state directory changed"),
        "{}",
        output.stderr
    );
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 0));
    assert!(!output.stdout.contains(" ok"), "{}", output.stdout);
}

#[test]
fn deleting_the_lock_file_mid_run_stops_apollo_before_the_next_unit() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: rm .apollo/lock && bin/count a
  - name: b
    deps: [a]
    execute: bin/count b
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(6);
    assert!(output.stderr.contains("lock"), "{}", output.stderr);
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 0));
}

#[test]
fn a_file_size_limit_is_a_journal_io_error_not_a_silent_death() {
    let apollo = Apollo::new();
    let mut units = String::from("units:\n");
    for n in 0..40 {
        units.push_str(&format!(
            "  - name: unit_with_a_rather_long_name_{n:03}\n    execute: \"true\"\n"
        ));
    }
    apollo.config(&units);
    // `ulimit -f 1`: 512 or 1024 bytes, whatever the shell's block; the run's first records
    // need more than that.
    #[allow(clippy::disallowed_methods)] // The test spawns the binary under test.
    let mut child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("ulimit -f 1 && exec \"$0\" run")
        .arg(crate::support::apollo_bin())
        .current_dir(apollo.root())
        .env("NO_COLOR", "1")
        .env_remove("APOLLO_STATE_DIR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let captured = apollo_tests::wait_captured(&mut child, SAFETY_TIMEOUT);
    assert_eq!(captured.code, Some(6), "{}", captured.stderr);
    assert!(
        captured.stderr.contains("file size limit"),
        "{}",
        captured.stderr
    );
}

#[test]
fn a_run_folder_moved_away_mid_attempt_is_not_recreated_by_the_attempt_s_output() {
    // A `mv` or a `git clean` of the run folder while a unit runs: the unit's output used to
    // recreate `runs/<id>/units/<unit>/<attempt>/` at the old path, a run folder with nothing
    // but logs in it.
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: mv .apollo/runs/$APOLLO_RUN_ID moved-run && echo output after the move && bin/count a
  - name: b
    deps: [a]
    execute: bin/count b
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(6);
    assert_eq!((apollo.count("a"), apollo.count("b")), (1, 0));
    let left: Vec<_> = std::fs::read_dir(apollo.path(".apollo/runs"))
        .expect("runs folder")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the moved run folder came back: {left:?}\n{}",
        output.stderr
    );
    assert!(apollo.path("moved-run/journal").is_dir());
    assert!(
        output
            .stderr
            .contains("removed or replaced apollo's state directory")
            && !output.stderr.contains("free space"),
        "the advice fits a moved run folder, not a full disk: {}",
        output.stderr
    );
}

#[test]
fn a_latest_run_whose_folder_was_moved_away_is_exit_3_not_a_silent_new_run() {
    // The run folder of an unfinished run moved away between two `apollo run`s (a `mv`, an
    // `rm -rf` of one run): the next run must not start over what it did.
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: bin/count a
  - name: b
    deps: [a]
    execute: bin/count b && exit 1
",
    );
    apollo.args(&["run"]).run().code(1);
    let run = apollo.run_ids().pop().expect("a run");
    std::fs::rename(
        apollo.path(&format!(".apollo/runs/{run}")),
        apollo.path("moved-run"),
    )
    .expect("move the run folder");
    let output = apollo.args(&["run"]).run();
    output.code(3);
    assert!(
        output.stderr.contains(&run) && output.stderr.contains("--fresh"),
        "{}",
        output.stderr
    );
    assert_eq!(
        (apollo.count("a"), apollo.count("b")),
        (1, 1),
        "nothing ran"
    );
    // Put back, it resumes; `--fresh` starts a new run instead.
    std::fs::rename(
        apollo.path("moved-run"),
        apollo.path(&format!(".apollo/runs/{run}")),
    )
    .expect("move it back");
    apollo.args(&["run"]).run().code(1);
    assert_eq!(
        (apollo.count("a"), apollo.count("b")),
        (1, 2),
        "resumed: a not redone"
    );
    std::fs::remove_dir_all(apollo.path(&format!(".apollo/runs/{run}"))).expect("delete it");
    apollo.args(&["run"]).run().code(3);
    apollo.args(&["run", "--fresh"]).run().code(1);
    assert_eq!((apollo.count("a"), apollo.count("b")), (2, 3));
    apollo.args(&["run"]).run().code(1);
    assert_eq!(
        (apollo.count("a"), apollo.count("b")),
        (2, 4),
        "the fresh run resumed"
    );
}

#[test]
fn deleting_a_succeeded_run_s_folder_does_not_block_the_next_run() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: a
    execute: bin/count a
",
    );
    apollo.args(&["run"]).run().code(0);
    std::fs::remove_dir_all(apollo.path(".apollo/runs")).expect("clean up old runs");
    std::fs::create_dir(apollo.path(".apollo/runs")).expect("runs folder");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("a"), 2);
}

/// A pipeline whose first run fails (unit `a` waits for the file `go`) and whose `on_finish`
/// hook counts its runs (`hook`) and prints a line: the run is resumed once `go` exists, and its hook runs again.
const HOOKED_UNTIL_GO: &str = "on_finish: bin/count hook && echo hook-output
units:
  - name: a
    execute: test -f go && bin/count a
";

/// Runs [`HOOKED_UNTIL_GO`] once (it fails), lets `plant` tamper with the run's `hooks/`
/// folder, and resumes the run; the resume's output.
fn resume_after_planting_in_hooks(
    apollo: &mut Apollo,
    plant: impl FnOnce(&Apollo, &Path),
) -> crate::support::Output {
    apollo.config(HOOKED_UNTIL_GO);
    apollo.args(&["run"]).run().code(1);
    let run = apollo.run_ids().pop().expect("a run");
    let hooks = apollo.path(&format!(".apollo/runs/{run}/hooks"));
    assert!(
        hooks.join("summary.json").is_file(),
        "the first run's summary"
    );
    plant(apollo, &hooks);
    std::fs::write(apollo.path("go"), "").unwrap();
    let output = apollo.args(&["run"]).run();
    assert_eq!(apollo.run_ids(), [run], "the run was resumed");
    output
}

#[test]
fn a_hook_summary_planted_as_a_link_is_replaced_and_its_target_never_written() {
    let mut apollo = Apollo::new();
    std::fs::write(apollo.path("precious"), "keep me\n").unwrap();
    let output = resume_after_planting_in_hooks(&mut apollo, |apollo, hooks| {
        std::fs::remove_file(hooks.join("summary.json")).unwrap();
        std::os::unix::fs::symlink(apollo.path("precious"), hooks.join("summary.json")).unwrap();
    });
    output.code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("precious")).unwrap(),
        "keep me\n"
    );
    let run = apollo.run_ids().pop().unwrap();
    let summary = apollo.path(&format!(".apollo/runs/{run}/hooks/summary.json"));
    assert!(
        std::fs::symlink_metadata(&summary).unwrap().is_file(),
        "the link was replaced by the summary"
    );
}

#[test]
fn a_hook_summary_planted_as_a_fifo_is_replaced_not_blocked_on() {
    let mut apollo = Apollo::new();
    let output = resume_after_planting_in_hooks(&mut apollo, |_, hooks| {
        std::fs::remove_file(hooks.join("summary.json")).unwrap();
        mkfifo(&hooks.join("summary.json"));
    });
    // A hang is killed by the helper's safety timeout: no exit code.
    output.code(0);
    assert_eq!(apollo.count("a"), 1);
}

#[test]
fn a_hooks_folder_planted_as_a_link_gets_no_summary_behind_it() {
    let mut apollo = Apollo::new();
    let elsewhere = apollo.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let output = resume_after_planting_in_hooks(&mut apollo, |apollo, hooks| {
        std::fs::remove_dir_all(hooks).unwrap();
        std::os::unix::fs::symlink(apollo.path("elsewhere"), hooks).unwrap();
    });
    // A hook's trouble never changes the run's status; it is told.
    output.code(0);
    assert!(
        !elsewhere.join("summary.json").exists(),
        "the summary was written through the link"
    );
    assert!(
        output
            .stderr
            .contains("the run summary could not be written"),
        "{}",
        output.stderr
    );
    assert!(
        apollo.journal_text().contains("symbolic link"),
        "the hook's record says why"
    );
}

#[test]
fn a_hooks_folder_planted_as_a_link_gets_no_hook_output_behind_it() {
    let mut apollo = Apollo::new();
    let elsewhere = apollo.path("elsewhere");
    std::fs::create_dir_all(elsewhere.join("on_finish")).unwrap();
    let output = resume_after_planting_in_hooks(&mut apollo, |apollo, hooks| {
        std::fs::remove_dir_all(hooks).unwrap();
        std::os::unix::fs::symlink(apollo.path("elsewhere"), hooks).unwrap();
    });
    output.code(0);
    assert!(
        !elsewhere.join("on_finish/stdout").exists(),
        "the hook's output was written through the link"
    );
    // The hook still ran (it is how someone hears how the run ended); its record says its
    // output was not kept, and why.
    assert_eq!(apollo.count("hook"), 2, "{}", output.stderr);
    let journal = apollo.journal_text();
    assert!(
        journal.contains("its output was not kept") && journal.contains("symbolic link"),
        "{journal}"
    );
}

/// Every file below `folder`, sorted (a link is listed, not followed).
fn files_below(folder: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(files_below(&path));
        } else {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn prune_refuses_runs_or_blobs_linked_to_another_project_and_leaves_its_state_whole() {
    let mut other = Apollo::new();
    other.config(TWO_UNITS);
    other.args(&["run"]).run().code(0);
    other.args(&["run", "--fresh"]).run().code(0);
    let their_runs = other.run_ids();
    let their_blobs = files_below(&other.path(".apollo/blobs/sha256"));
    assert!(their_runs.len() == 2 && !their_blobs.is_empty());

    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    for (folder, target) in [("blobs", ".apollo/blobs"), ("runs", ".apollo/runs")] {
        let planted = apollo.path(&format!(".apollo/{folder}"));
        let real = apollo.path(&format!(".apollo/{folder}.real"));
        std::fs::rename(&planted, &real).unwrap();
        std::os::unix::fs::symlink(other.path(target), &planted).unwrap();
        for args in [&["prune", "--keep-runs", "1"][..], &["runs"][..]] {
            let output = apollo.args(args).run();
            output.code(2);
            assert!(
                output.stderr.contains("symbolic link")
                    && output.stderr.contains(&format!(".apollo/{folder}"))
                    && output.stderr.contains("help:"),
                "{args:?}: {}",
                output.stderr
            );
        }
        std::fs::remove_file(&planted).unwrap();
        std::fs::rename(&real, &planted).unwrap();
    }
    assert_eq!(other.run_ids(), their_runs);
    assert_eq!(
        files_below(&other.path(".apollo/blobs/sha256")),
        their_blobs
    );
    // The project's own state, put back, prunes as before.
    apollo.args(&["prune", "--keep-runs", "1"]).run().code(0);
}

#[test]
fn a_damaged_sequence_file_is_named_with_what_it_holds_and_how_to_mend_it() {
    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run", "--fresh"]).run().code(0);
    let first = apollo.run_ids().remove(0);
    let sequence = apollo.path(&format!(".apollo/runs/{first}/sequence"));
    std::fs::write(&sequence, "garbage\n").unwrap();
    // Runs are never ordered (or pruned) by a guess: every command that orders them stops,
    // naming the file, and says what it held and what to do.
    for args in [
        &["runs"][..],
        &["run"][..],
        &["prune", "--keep-runs", "1"][..],
    ] {
        let output = apollo.args(args).run();
        output.code(3);
        assert!(
            output.stderr.contains(&format!("runs/{first}/sequence"))
                && output.stderr.contains("creation order")
                && !output.stderr.contains("--salvage"),
            "{args:?}: {}",
            output.stderr
        );
    }
    assert_eq!(apollo.count("a"), 2, "nothing ran");
    std::fs::write(&sequence, "1\n").unwrap();
    apollo.args(&["runs"]).run().code(0);
    assert_eq!(apollo.run_ids().len(), 2, "nothing was pruned");
}

#[test]
fn a_unit_name_climbing_out_of_the_run_folder_in_a_journal_reads_no_log_there() {
    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    let run = apollo.run_ids().pop().unwrap();
    // The journal, rewritten with every checksum right, calls unit `a` by a name that climbs
    // from `runs/<run>/units/` to the project, where a file named like a log waits.
    let climbing = "../../../../secrets";
    apollo.rewrite_journal(&run, |event| {
        let json = serde_json::to_string(event).unwrap();
        let renamed = json.replace("\"unit\":\"a\"", &format!("\"unit\":\"{climbing}\""));
        *event = serde_json::from_str(&renamed).unwrap();
    });
    std::fs::create_dir_all(apollo.path("secrets/1")).unwrap();
    std::fs::write(apollo.path("secrets/1/stdout"), "secret\n").unwrap();
    for args in [
        &["logs", &run, climbing][..],
        &["logs", &run][..],
        &["show", &run, climbing][..],
    ] {
        let output = apollo.args(args).run();
        assert!(
            !output.stdout.contains("secret\n") && !output.stderr.contains("secret\n"),
            "{args:?}: {output:?}"
        );
        // Said, not silently skipped: the name is not a folder name.
        assert!(
            (output.stdout.contains("cannot be used as a folder name")
                || output.stderr.contains("cannot be used as a folder name")),
            "{args:?}: {output:?}"
        );
    }
}

#[test]
fn prune_stopped_by_a_run_it_cannot_read_says_which_and_what_to_do() {
    let mut apollo = Apollo::new();
    apollo.config(TWO_UNITS);
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run", "--fresh"]).run().code(0);
    let first = apollo.run_ids().remove(0);
    let journal = apollo.path(&format!(".apollo/runs/{first}/journal"));
    let aside = apollo.path("journal-aside");
    std::fs::rename(&journal, &aside).unwrap();
    // A link to itself: unreadable even for root.
    std::os::unix::fs::symlink("journal", &journal).unwrap();
    let blobs = apollo.blobs();
    let output = apollo.args(&["prune", "--keep-runs", "1"]).run();
    output.code(3);
    assert!(
        output
            .stderr
            .contains("prune stopped before removing anything")
            && output
                .stderr
                .contains(&format!("run {first} cannot be read"))
            && output.stderr.contains("move it out of `runs/`")
            && !output.stderr.contains("free space"),
        "{}",
        output.stderr
    );
    assert_eq!(apollo.blobs(), blobs, "nothing was removed");
    std::fs::remove_file(&journal).unwrap();
    std::fs::rename(&aside, &journal).unwrap();
    apollo.args(&["prune", "--keep-runs", "1"]).run().code(0);
}
