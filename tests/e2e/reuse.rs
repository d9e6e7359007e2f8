//! Reuse across runs (`reuse: true`, issue 13): a second `apollo run` with nothing changed
//! executes nothing and says what it reused; an edited input, a changed command, a deleted
//! output rerun exactly what they touch; `--no-reuse` runs everything; the reuse index is
//! derived and found again when it is deleted, garbled or torn.

use crate::support::Apollo;

/// `fetch` → `clean` → `report` ← `other`, all `reuse: true` (from `defaults`), each counting
/// its executions and writing its declared output.
const PIPELINE: &str = "defaults:
  reuse: true
units:
  - name: fetch
    inputs: [data/raw.csv]
    outputs: [out/fetched.csv]
    execute: bin/count fetch && mkdir -p out && cp data/raw.csv out/fetched.csv
  - name: clean
    deps: [fetch]
    outputs: [out/clean.csv]
    execute: bin/count clean && sort out/fetched.csv > out/clean.csv
  - name: other
    inputs: [data/other.csv]
    outputs: [out/other.csv]
    execute: bin/count other && mkdir -p out && cp data/other.csv out/other.csv
  - name: report
    deps: [clean, other]
    outputs: [out/report.txt]
    execute: bin/count report && cat out/clean.csv out/other.csv > out/report.txt
";

const UNITS: [&str; 4] = ["fetch", "clean", "other", "report"];

fn project() -> Apollo {
    let apollo = Apollo::new();
    apollo
        .config(PIPELINE)
        .file("data/raw.csv", "b\na\n")
        .file("data/other.csv", "x\n");
    apollo
}

/// How many times each unit executed, in `UNITS` order.
pub(crate) fn counts(apollo: &Apollo) -> Vec<usize> {
    UNITS.iter().map(|unit| apollo.count(unit)).collect()
}

/// A project whose pipeline ran once, successfully; returns the run's id.
pub(crate) fn ran_once() -> (Apollo, String) {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    assert_eq!(counts(&apollo), [1, 1, 1, 1]);
    let first = apollo.run_ids().pop().unwrap();
    (apollo, first)
}

#[test]
fn a_second_run_with_nothing_changed_executes_nothing_and_says_reused() {
    let (mut apollo, first) = ran_once();
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert_eq!(counts(&apollo), [1, 1, 1, 1], "{}", output.stdout);
    // Counted in the summary; a line per reused unit only with `--explain` (or `-v`).
    assert!(
        output.stdout.contains("0 succeeded, 4 reused, 0 failed"),
        "{}",
        output.stdout
    );
    assert_eq!(output.stdout.lines().count(), 2, "{}", output.stdout);
    let output = apollo.args(&["run", "-v"]).run();
    output.code(0);
    for unit in UNITS {
        let line = format!("reused   {unit:<6}  inputs identical to run {first} attempt 1");
        assert!(output.stdout.contains(&line), "{line}\n{}", output.stdout);
    }
    assert_eq!(apollo.run_ids().len(), 3, "new runs, not resumes");
    assert_eq!(
        apollo
            .journal_text()
            .matches("\"kind\":\"unit_reused\"")
            .count(),
        8,
        "four in each of the two runs that reused"
    );
    // A later run reuses the same original attempts (not the earlier runs' reuse records).
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert!(
        output
            .stdout
            .contains(&format!("inputs identical to run {first} attempt 1")),
        "{}",
        output.stdout
    );
    assert_eq!(counts(&apollo), [1, 1, 1, 1]);
}

#[test]
fn an_edited_input_reruns_exactly_its_unit_and_what_is_downstream() {
    let (mut apollo, first) = ran_once();
    apollo.file("data/other.csv", "y\n");
    let plan = apollo.args(&["run", "--dry-run"]).run();
    plan.code(0);
    assert!(
        plan.stdout.contains(&format!(
            "runs, not reused: input file data/other.csv changed since run {first} attempt 1"
        )),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains(&format!(
            "reused: inputs identical to run {first} attempt 1"
        )),
        "{}",
        plan.stdout
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(counts(&apollo), [1, 1, 2, 2]);
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/report.txt")).unwrap(),
        "a\nb\ny\n"
    );
}

#[test]
fn a_changed_command_reruns_its_unit_and_an_unchanged_output_keeps_downstream_reused() {
    let (mut apollo, _) = ran_once();
    apollo.config(&PIPELINE.replace("sort out/fetched.csv", "sort -u out/fetched.csv"));
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert!(
        output
            .stdout
            .contains("runs, not reused: command execute changed since run"),
        "{}",
        output.stdout
    );
    // `clean` wrote the same bytes, so `report`'s inputs are identical: reused.
    assert_eq!(counts(&apollo), [1, 2, 1, 1]);
}

#[test]
fn no_reuse_runs_everything() {
    let (mut apollo, _) = ran_once();
    apollo.args(&["run", "--no-reuse"]).run().code(0);
    assert_eq!(counts(&apollo), [2, 2, 2, 2]);
    assert!(!apollo.journal_text().contains("unit_reused"));
}

#[test]
fn a_deleted_or_changed_output_is_restored_from_the_blob_store_and_a_damaged_blob_is_never_used() {
    let (mut apollo, _first) = ran_once();
    let clean = std::fs::read(apollo.path("out/clean.csv")).unwrap();
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    apollo.file("out/other.csv", "tampered\n");
    // A plan writes nothing: it says the units are reused (they would be restored) and leaves
    // the workspace as it is.
    let plan = apollo.args(&["run", "--dry-run"]).run();
    plan.code(0);
    assert!(!plan.stdout.contains("runs, not reused"), "{}", plan.stdout);
    assert!(!apollo.path("out/clean.csv").exists(), "a dry run restored");
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/other.csv")).unwrap(),
        "tampered\n"
    );
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(
        counts(&apollo),
        [1, 1, 1, 1],
        "restored, not run: {}",
        output.stdout
    );
    assert_eq!(std::fs::read(apollo.path("out/clean.csv")).unwrap(), clean);
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/other.csv")).unwrap(),
        "x\n"
    );

    // A blob damaged on disk (same length, other bytes) is never restored: the unit runs.
    let blob = apollo
        .find_blob(&clean)
        .expect("out/clean.csv was captured");
    let mut damaged = clean.clone();
    damaged[0] ^= 0x01;
    std::fs::write(&blob, &damaged).unwrap();
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(counts(&apollo), [1, 2, 1, 1], "{}", output.stdout);
    assert_eq!(std::fs::read(apollo.path("out/clean.csv")).unwrap(), clean);
}

#[test]
fn a_deleted_garbled_or_torn_index_is_rebuilt_and_gives_the_same_answer() {
    let (mut apollo, first) = ran_once();
    apollo.args(&["run"]).run().code(0);
    let index = apollo.path(".apollo/index/reuse");
    assert!(index.is_file(), "the index is kept in the state directory");
    let mut bytes = std::fs::read(&index).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&index, &bytes).unwrap();
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert!(
        output
            .stderr
            .contains("the reuse index fails its checksum; rebuilt it"),
        "{}",
        output.stderr
    );
    assert_eq!(counts(&apollo), [1, 1, 1, 1]);

    // What a SIGKILL mid-write could leave if the write were not atomic: a torn index and a
    // temporary file beside it. The next run is still right.
    let bytes = std::fs::read(&index).unwrap();
    std::fs::write(&index, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(apollo.path(".apollo/index/.reuse.tmp-dead"), &bytes[..10]).unwrap();
    apollo.file("data/raw.csv", "c\na\n");
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert_eq!(counts(&apollo), [2, 2, 1, 2], "{}", output.stdout);
    assert!(
        !apollo.path(".apollo/index/.reuse.tmp-dead").exists(),
        "a dead writer's temporary file is cleaned up"
    );

    std::fs::remove_file(&index).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(counts(&apollo), [2, 2, 1, 2], "{}", output.stdout);
    assert!(
        output.stdout.contains(&format!("run {first} attempt 1")),
        "{}",
        output.stdout
    );
}

#[test]
fn reused_units_are_counted_apart_in_runs_replay_show_and_diff() {
    let (mut apollo, first) = ran_once();
    apollo.args(&["run"]).run().code(0);
    let runs = apollo.args(&["runs"]).run();
    runs.code(0);
    assert!(runs.stdout.contains("4/4 ok (4 reused)"), "{}", runs.stdout);
    let json = apollo.args(&["runs", "--format", "json"]).run();
    assert!(json.stdout.contains("\"reused\": 4"), "{}", json.stdout);

    let replay = apollo.args(&["replay", "latest"]).run();
    replay.code(0);
    assert!(
        replay
            .stdout
            .contains(&format!("inputs identical to run {first} attempt 1")),
        "{}",
        replay.stdout
    );
    assert!(replay.stdout.contains("4 reused"), "{}", replay.stdout);
    let json = apollo.args(&["replay", "latest", "--format", "json"]).run();
    assert_eq!(
        json.stdout.matches("\"kind\":\"unit_reused\"").count(),
        4,
        "{}",
        json.stdout
    );

    let show = apollo.args(&["show", "latest", "clean"]).run();
    show.code(0);
    assert!(show.stdout.contains(": reused\n"), "{}", show.stdout);
    assert!(
        show.stdout
            .contains(&format!("inputs identical to run {first} attempt 1")),
        "{}",
        show.stdout
    );

    apollo.args(&["verify"]).run().code(0);

    // Reusing a success is no difference between the runs; the statuses say which was which.
    let diff = apollo.args(&["diff", &first, "latest"]).run();
    diff.code(0);
    assert!(diff.stdout.contains("reused"), "{}", diff.stdout);
}

#[test]
fn an_input_rewritten_with_the_same_size_and_mtime_is_still_detected() {
    let (mut apollo, _) = ran_once();
    assert!(
        apollo.path(".apollo/index/hashes").is_file(),
        "the hash cache is kept in the state directory"
    );
    let raw = apollo.path("data/raw.csv");
    let mtime = std::fs::metadata(&raw).unwrap().modified().unwrap();
    // Same size, same mtime to the nanosecond: only the content (and the ctime, which no one
    // can set) differs — the case a (size, mtime) cache gets wrong.
    std::fs::write(&raw, "c\na\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&raw)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(std::fs::metadata(&raw).unwrap().modified().unwrap(), mtime);
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert!(
        output
            .stdout
            .contains("input file data/raw.csv changed since run"),
        "{}",
        output.stdout
    );
    assert_eq!(counts(&apollo), [2, 2, 1, 2]);
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/report.txt")).unwrap(),
        "a\nc\nx\n"
    );
}

/// SIGKILL while apollo writes the reuse index (its temporary file is there): the next run
/// still reuses exactly what it should. The index is deleted before each try so that every
/// run rewrites it; a try whose apollo finished before its temporary file was seen still
/// checks the next run.
/// SIGKILLs `running` the moment a temporary file whose name starts with one of `prefixes`
/// is in `dir` (a file being written there), while `go_on` holds and apollo runs; whether it
/// was sent.
fn kill_while_writing(
    running: &mut crate::support::Running,
    dir: &std::path::Path,
    prefixes: &[&str],
    go_on: impl Fn() -> bool,
) -> bool {
    let deadline = std::time::Instant::now() + crate::support::SAFETY_TIMEOUT;
    while std::time::Instant::now() < deadline && go_on() && running.is_running() {
        let writing = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                prefixes.iter().any(|prefix| name.starts_with(prefix))
            })
        });
        if writing {
            running.signal(libc::SIGKILL);
            return true;
        }
        std::thread::yield_now();
    }
    false
}

#[test]
fn sigkill_while_the_index_is_written_leaves_the_next_run_correct() {
    let (mut apollo, _) = ran_once();
    let index_dir = apollo.path(".apollo/index");
    let index = index_dir.join("reuse");
    let mut n_killed_mid_write = 0;
    for _ in 0..10 {
        let _ = std::fs::remove_file(&index);
        let n_runs = apollo.run_ids().len();
        let mut running = apollo.args(&["run"]).spawn();
        let killed = kill_while_writing(&mut running, &index_dir, &[".reuse.tmp-"], || {
            !index.exists()
        });
        let output = running.wait();
        if killed && output.code.is_none() {
            n_killed_mid_write += 1;
            // The index is written before the run is created: nothing was left to resume.
            assert_eq!(
                apollo.run_ids().len(),
                n_runs,
                "a run was created before the index"
            );
        }
        // Whatever the kill interrupted, the next run reuses everything.
        let output = apollo.args(&["run"]).run();
        output.code(0);
        assert_eq!(counts(&apollo), [1, 1, 1, 1], "{}", output.stdout);
        assert!(index.is_file());
    }
    println!("killed mid-write {n_killed_mid_write} times out of 10");
    apollo.assert_no_processes_left();
}

#[test]
fn a_unit_whose_outputs_are_a_glob_and_a_folder_is_reused_and_its_files_restored() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: split
    reuse: true
    outputs: [\"out/parts/*.csv\", out/dir]
    execute: bin/count split && mkdir -p out/parts out/dir && echo 1 > out/parts/a.csv && echo 2 > out/parts/b.csv && echo 3 > out/dir/c.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(apollo.count("split"), 1, "reused: {}", output.stdout);
    std::fs::remove_file(apollo.path("out/parts/b.csv")).unwrap();
    std::fs::remove_dir_all(apollo.path("out/dir")).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(
        apollo.count("split"),
        1,
        "restored, not run: {}",
        output.stdout
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/parts/b.csv")).unwrap(),
        "2\n"
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/dir/c.txt")).unwrap(),
        "3\n"
    );
}

/// SIGKILL while units reused from an earlier run wait, unsynced, for company in a batch (a
/// batch of only `unit_reused` records is held while other units run, see
/// `Pacer::may_hold_reuses`): whatever was lost, the resume reuses those units again and
/// executes none of them.
#[test]
fn sigkill_while_reused_units_wait_for_their_commit_loses_no_work() {
    let mut units = String::from(
        "max_parallel: 2\nunits:\n  - name: gate\n    execute: bin/count gate && bin/block gate\n",
    );
    for n in 0..200 {
        units.push_str(&format!(
            "  - name: r{n}\n    reuse: true\n    outputs: [out/r{n}]\n    \
             execute: bin/count r{n} && mkdir -p out && echo {n} > out/r{n}\n"
        ));
    }
    let mut apollo = Apollo::new();
    apollo.config(&units);
    apollo.release("gate.release");
    apollo.args(&["run"]).run().code(0);
    std::fs::remove_file(apollo.path("markers/gate.release")).unwrap();
    std::fs::remove_file(apollo.path("markers/gate.started")).unwrap();

    // The gate runs (and blocks) while the 200 others are checked and reused.
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("gate.started");
    running.signal(libc::SIGKILL);
    running.wait();
    let durable = apollo
        .journal_text()
        .matches("\"kind\":\"unit_reused\"")
        .count();
    println!("unit_reused records durable when apollo was killed: {durable} of 200");

    apollo.release("gate.release");
    let output = apollo.args(&["run"]).run();
    output.code(0);
    for n in 0..200 {
        assert_eq!(apollo.count(&format!("r{n}")), 1, "r{n}: {}", output.stdout);
    }
    assert_eq!(apollo.run_ids().len(), 2, "the killed run was resumed");
    apollo.assert_no_processes_left();
}

/// A new run writes the reuse index back covering itself at its end (from what it appended),
/// so the next run reads no journal to bring it up to date.
#[test]
fn a_run_leaves_the_reuse_index_covering_its_own_journal() {
    let (mut apollo, _) = ran_once();
    apollo.args(&["run"]).run().code(0);
    apollo.file("data/other.csv", "y\n");
    apollo.args(&["run"]).run().code(0);
    assert_eq!(counts(&apollo), [1, 1, 2, 2]);
    // Brought up to date by a refresh, the index reads no journal: it covers every run,
    // each to its journal's end (a run covered short of it would be read again).
    let state = apollo_store::StateDir::open_existing(apollo.path(".apollo")).unwrap();
    let (_, refresh) = apollo_store::ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(refresh.rebuilt, None);
    assert_eq!(
        refresh.runs_read, 0,
        "every run is covered to its journal's end"
    );
    // A run whose journal grew since is read again.
    let last = apollo.run_ids().pop().unwrap();
    let journal = apollo.path(&format!(".apollo/runs/{last}/journal/000001.log"));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(journal)
        .unwrap();
    std::io::Write::write_all(&mut file, b"x").unwrap();
    let (_, refresh) = apollo_store::ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(refresh.runs_read, 1);
}

/// The reuse index that runs leave (each covering itself at its end, a no-op run named beside
/// the index file) answers as one rebuilt from every journal, through the real run path:
/// reruns after an edit, an edit undone (an older success reused again), no-op runs.
#[test]
fn the_index_runs_leave_answers_as_one_rebuilt_from_every_journal() {
    let (mut apollo, _) = ran_once();
    apollo.args(&["run"]).run().code(0);
    apollo.file("data/raw.csv", "c\na\n");
    apollo.args(&["run"]).run().code(0);
    apollo.file("data/raw.csv", "b\na\n");
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(counts(&apollo), [2, 2, 1, 2]);
    assert!(
        apollo.path(".apollo/index/reuse-covered-since").is_file(),
        "the last run reused every unit's latest success: named beside the index file"
    );
    let text = apollo.journal_text();
    let identity = text
        .split("\"identity\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let state = apollo_store::StateDir::open_existing(apollo.path(".apollo")).unwrap();
    let answers = |index: &apollo_store::ReuseIndex| {
        let source = index.source(&identity, None);
        let answers: Vec<_> = UNITS
            .iter()
            .map(|unit| {
                apollo_core::engine::ReuseSource::latest(&source, unit).map(|candidate| {
                    (
                        candidate.run_id,
                        candidate.attempt,
                        candidate.input_hash,
                        candidate.output_hash,
                    )
                })
            })
            .collect();
        (answers, index.len())
    };
    let (kept, refresh) = apollo_store::ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(refresh.runs_read, 0, "every run is covered");
    std::fs::remove_file(apollo.path(".apollo/index/reuse")).unwrap();
    std::fs::remove_file(apollo.path(".apollo/index/reuse-covered-since")).unwrap();
    let (rebuilt, refresh) = apollo_store::ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(refresh.runs_read, 5);
    assert_eq!(answers(&kept), answers(&rebuilt));
    assert_eq!(
        answers(&kept).1,
        7,
        "two successes each of fetch, clean and report, one of other"
    );
}

/// apollo SIGKILLed while it brings the reuse index up to date at the end of a run (the index
/// file, or the file beside it, half written): the run itself is finished and stays so, and
/// the next run reads the journal the index missed and reuses everything.
#[test]
fn sigkill_while_a_run_covers_itself_in_the_index_leaves_the_next_run_correct() {
    let (mut apollo, _) = ran_once();
    apollo.args(&["run"]).run().code(0);
    let index_dir = apollo.path(".apollo/index");
    let mut n_killed_mid_write = 0;
    for round in 0..10 {
        // Alternately a run that changes the index (rewritten) and one that does not (the
        // file beside it written).
        apollo.file("data/other.csv", if round % 2 == 0 { "x\n" } else { "z\n" });
        let mut running = apollo.args(&["run"]).spawn();
        let temporary = [".reuse.tmp-", ".reuse-covered-since.tmp-"];
        let killed = kill_while_writing(&mut running, &index_dir, &temporary, || true);
        let output = running.wait();
        if killed && output.code.is_none() {
            n_killed_mid_write += 1;
        }
        // Whatever the kill interrupted, the next run finds every unit done and runs nothing.
        let before = counts(&apollo);
        let output = apollo.args(&["run"]).run();
        output.code(0);
        assert_eq!(counts(&apollo), before, "{}", output.stdout);
        assert!(
            output.stdout.contains("0 succeeded, 4 reused"),
            "{}",
            output.stdout
        );
    }
    println!("killed mid-write {n_killed_mid_write} times out of 10");
    apollo.assert_no_processes_left();
}

#[test]
fn a_recorded_output_the_unit_does_not_declare_is_never_written() {
    let (mut apollo, first) = ran_once();
    let victim = apollo.path("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let absolute = victim.to_str().unwrap().to_owned();
    // The record of `clean`'s outputs also lists the user's input, a file outside the project
    // and a path climbing out of the declared one, each with the captured blob of clean.csv.
    apollo.record_extra_outputs(
        &first,
        "clean",
        &["data/raw.csv", &absolute, "out/clean.csv/../../victim.txt"],
    );
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(
        std::fs::read_to_string(apollo.path("data/raw.csv")).unwrap(),
        "b\na\n"
    );
    // Not restored: the unit ran again and wrote its output itself.
    assert_eq!(counts(&apollo), [1, 2, 1, 1], "{}", output.stdout);
    assert!(
        output.stdout.contains("not among its declared outputs"),
        "{}",
        output.stdout
    );
}

/// `prune --keep-runs 1` keeps the runs whose outputs the kept latest run reused (the rule
/// blob eviction keeps): a deleted output is still restored afterwards, not run again.
#[test]
fn prune_keeps_what_the_latest_run_reused_so_its_outputs_stay_restorable() {
    let (mut apollo, first) = ran_once();
    apollo.args(&["run"]).run().code(0);
    assert_eq!(counts(&apollo), [1, 1, 1, 1], "the second run reused all");
    let pruned = apollo.args(&["prune", "--keep-runs", "1"]).run();
    pruned.code(0);
    assert!(
        pruned
            .stdout
            .contains(&format!("kept {first} (a kept run reused its outputs)")),
        "{}",
        pruned.stdout
    );
    let clean = apollo.find_blob(b"a\nb\n");
    assert!(
        clean.is_some(),
        "the reused output's blob stays: {}",
        pruned.stdout
    );
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert_eq!(
        counts(&apollo),
        [1, 1, 1, 1],
        "restored, not run: {}",
        output.stdout
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/clean.csv")).unwrap(),
        "a\nb\n"
    );
}

/// `--dry-run` in a reuse chain whose first unit must run says its dependent runs only if that
/// output changes, else is reused — what the real run then does (issue 35: it predicted "run").
#[test]
fn dry_run_says_a_reusable_dependent_runs_only_if_its_upstream_output_changes() {
    let mut apollo = Apollo::new();
    apollo.config(
        "defaults:\n  reuse: true\nunits:\n  - name: first\n    inputs: [in.txt]\n    outputs: [first.txt]\n    execute: bin/count first; cut -c1 in.txt > first.txt\n  - name: second\n    deps: [first]\n    outputs: [second.txt]\n    execute: bin/count second; cat first.txt > second.txt\n",
    );
    apollo.file("in.txt", "x1\n");
    apollo.args(&["run"]).run().code(0);
    // The input changes, the first unit's output will not.
    apollo.file("in.txt", "x2\n");
    let plan = apollo.args(&["run", "--dry-run"]).run();
    plan.code(0);
    assert!(
        plan.stdout
            .contains("second  runs after first, unless their output comes out as an earlier run's did: then reused"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("(1 of them only if an upstream output changes, else reused)"),
        "{}",
        plan.stdout
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("first"), apollo.count("second")), (2, 1));
}
