//! Declared inputs and outputs that never end — `/dev/zero`, a FIFO — or that take longer to
//! hash than the unit's timeout: a unit failure with a clear message, never a hang, and
//! SIGTERM still stops apollo at once (issue 12, "nothing blocks outside a timeout").

use crate::support::{Apollo, mkfifo};

/// A sparse file of 1 TiB: hashing it takes many minutes, reading it costs no disk.
fn huge_file(apollo: &Apollo, relative: &str) {
    let file = std::fs::File::create(apollo.path(relative)).unwrap();
    file.set_len(1 << 40).unwrap();
}

#[test]
fn an_input_that_never_ends_fails_its_unit_and_the_others_run() {
    let mut apollo = Apollo::new();
    mkfifo(&apollo.path("pipe"));
    apollo.config(
        "units:
  - name: zero
    inputs: [/dev/zero]
    execute: bin/count zero
  - name: fifo
    inputs: [pipe]
    execute: bin/count fifo
  - name: other
    execute: bin/count other
",
    );
    let output = apollo.args(&["run", "--keep-going"]).run();
    output.code(1);
    let journal = apollo.journal_text();
    assert!(
        journal.contains("input file `/dev/zero`: it is a character device, not a regular file"),
        "{journal}"
    );
    assert!(
        journal.contains("pipe`: it is a FIFO, not a regular file"),
        "{journal}"
    );
    assert_eq!((apollo.count("zero"), apollo.count("fifo")), (0, 0));
    assert_eq!(apollo.count("other"), 1);
    apollo.assert_no_processes_left();
}

#[test]
fn an_output_that_never_ends_fails_its_unit() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: makes_fifo
    outputs: [out.fifo]
    execute: mkfifo out.fifo
",
    );
    let output = apollo.args(&["run"]).run();
    output.code(1);
    let journal = apollo.journal_text();
    assert!(
        journal.contains("out.fifo`: it is a FIFO, not a regular file"),
        "{journal}"
    );
    apollo.assert_no_processes_left();
}

#[test]
fn inputs_that_take_longer_than_the_timeout_to_hash_time_the_unit_out() {
    let mut apollo = Apollo::new();
    huge_file(&apollo, "huge.bin");
    apollo.config(
        "units:
  - name: huge
    timeout: 1s
    inputs: [huge.bin]
    execute: bin/count huge
  - name: other
    execute: bin/count other
",
    );
    let output = apollo.args(&["run", "--keep-going"]).run();
    output.code(1);
    let journal = apollo.journal_text();
    assert!(journal.contains(r#""status":"timed_out""#), "{journal}");
    assert!(
        journal.contains("huge.bin`: hashing it did not finish within the unit's timeout of 1s"),
        "{journal}"
    );
    assert_eq!((apollo.count("huge"), apollo.count("other")), (0, 1));
}

#[test]
fn sigterm_stops_apollo_while_it_hashes_a_huge_input() {
    let mut apollo = Apollo::new();
    huge_file(&apollo, "huge.bin");
    // `huge` comes first: hashing it on the engine thread would keep `side` from ever
    // starting (and SIGTERM from being heard).
    apollo.config(
        "units:
  - name: huge
    inputs: [huge.bin]
    execute: bin/count huge
  - name: side
    execute: bin/block side
",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("side.started");
    running.signal(libc::SIGTERM);
    running.wait().code(130);
    assert_eq!(apollo.count("huge"), 0);
    assert!(!apollo.journal_text().contains(r#""unit":"huge""#));
    apollo.assert_no_processes_left();
}

#[test]
fn check_warns_about_a_declared_file_that_is_not_a_regular_file() {
    let mut apollo = Apollo::new();
    mkfifo(&apollo.path("pipe"));
    apollo.config(
        "units:
  - name: reads
    inputs: [pipe, missing.csv]
    outputs: [/dev/null]
    execute: bin/count reads
",
    );
    let output = apollo.args(&["check"]).run();
    output.code(0);
    assert!(
        output.stderr.contains("input file `")
            && output
                .stderr
                .contains("pipe` of unit `reads` is a FIFO, not a regular file"),
        "{}",
        output.stderr
    );
    assert!(
        output
            .stderr
            .contains("output file `/dev/null` of unit `reads` is a character device"),
        "{}",
        output.stderr
    );
    assert!(!output.stderr.contains("missing.csv"), "{}", output.stderr);
}

#[test]
fn sigterm_stops_apollo_while_it_rehashes_a_done_unit_s_huge_output() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: writer
    outputs: [out.bin]
    execute: bin/count writer && echo small > out.bin
  - name: side
    execute: test -e go && bin/block side
",
    );
    // First run: `writer` succeeds, `side` fails; the resume re-checks `writer`'s output.
    apollo.args(&["run", "--keep-going"]).run().code(1);
    huge_file(&apollo, "out.bin");
    std::fs::write(apollo.path("go"), b"").unwrap();
    // `writer` comes first: re-hashing its output on the engine thread would keep `side`
    // from ever starting (and SIGTERM from being heard).
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("side.started");
    running.signal(libc::SIGTERM);
    running.wait().code(130);
    // Stopped while its output was being checked: neither reused nor run again.
    assert_eq!(apollo.count("writer"), 1);
    apollo.assert_no_processes_left();
}

/// An input glob that matches a folder stands for every file under it, and for the folder
/// itself (issue 36 item 18): a file edited in `data/sub/`, or an empty folder added, makes a
/// `reuse: true` unit run again instead of reusing an output made from what was there before.
#[test]
fn a_folder_an_input_glob_matches_is_hashed_with_everything_under_it() {
    let mut apollo = Apollo::new();
    apollo.file("data/top.txt", "a\n");
    apollo.file("data/sub/x.txt", "1\n");
    apollo.config(
        "units:
  - name: g
    inputs: [\"data/*\"]
    outputs: [o.txt]
    reuse: true
    execute: bin/count g && cat data/top.txt data/sub/x.txt > o.txt && ls data >> o.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("g"), 1, "nothing changed: reused");
    apollo.file("data/sub/x.txt", "2\n");
    let edited = apollo.args(&["run", "--explain"]).run();
    edited.code(0);
    assert_eq!(
        apollo.count("g"),
        2,
        "a file under a matched folder changed: {edited:?}"
    );
    assert!(
        std::fs::read_to_string(apollo.path("o.txt"))
            .unwrap()
            .contains("2\n"),
        "the output is made from the file as it is now"
    );
    std::fs::create_dir(apollo.path("data/empty")).unwrap();
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        apollo.count("g"),
        3,
        "an empty folder appeared among the matches"
    );
    apollo.args(&["run"]).run().code(0);
    assert_eq!(apollo.count("g"), 3, "and nothing changed since");
}

/// `inputs: ["*"]` never stands for the state directory (or another hidden folder such as
/// `.git`): its journals change at every run, and reading its blobs would capture the store
/// into itself.
#[test]
fn an_input_glob_never_walks_the_state_directory() {
    let mut apollo = Apollo::new();
    apollo.file("data/x.txt", "1\n");
    apollo.file("data/.cache/y.txt", "1\n");
    apollo.config("units:\n  - name: all\n    inputs: [\"*\"]\n    execute: \"true\"\n");
    apollo.args(&["run"]).run().code(0);
    let show = apollo.args(&["show", "latest", "all"]).run();
    assert!(show.stdout.contains("data/x.txt"), "{}", show.stdout);
    let hidden = (show.stdout.lines())
        .filter(|line| line.trim_start().starts_with("file "))
        .find(|line| line.contains(".apollo") || line.contains(".cache"));
    assert_eq!(hidden, None, "{}", show.stdout);
}

/// A plain folder named as an input is refused by a run ("a directory, not a regular file"):
/// `apollo check` says so first, and how to name its files (issue 36 item 18).
#[test]
fn check_warns_about_a_folder_named_as_an_input_and_suggests_a_glob() {
    let mut apollo = Apollo::new();
    apollo.file("data/a.csv", "1\n");
    apollo
        .config("units:\n  - name: load\n    inputs: [data, \"data/*\"]\n    execute: \"true\"\n");
    let check = apollo.args(&["check"]).run();
    check.code(0);
    let said = format!("{}{}", check.stdout, check.stderr);
    assert!(
        said.contains("is a folder")
            && said.contains("`data`")
            && said.contains("data/**")
            && said.contains("data/*")
            && said.contains("1 warning"),
        "{said}"
    );
    let run = apollo.args(&["run"]).run();
    assert!(
        format!("{}{}", run.stdout, run.stderr).contains("directory"),
        "{run:?}"
    );
}

/// A restore SIGKILLed mid-copy leaves `.NAME.apollo-restore-XXXXXXXX` beside its output when
/// the blob store is on another filesystem (issue 36 item 7): inside a folder output it is
/// never recorded as an output, and the next run removes it and says so.
#[test]
fn a_restore_temp_file_in_a_folder_output_is_never_recorded_and_the_next_run_removes_it() {
    let mut apollo = Apollo::new();
    let temp = "out/.big.bin.apollo-restore-0123abcd";
    // The first attempt leaves one behind, as a killed restore would (after the run started,
    // so that run's own sweep leaves it alone); a later one does not.
    apollo.config(&format!(
        "units:\n  - name: make\n    outputs: [out]\n    execute: mkdir -p out && (test -e out/a.txt || echo half > {temp}) && echo made > out/a.txt\n"
    ));
    apollo.args(&["run"]).run().code(0);
    assert!(apollo.path(temp).exists(), "the attempt wrote it");
    let show = apollo.args(&["show", "latest", "make"]).run();
    assert!(show.stdout.contains("out/a.txt"), "{}", show.stdout);
    let recorded = (show.stdout.lines()).any(|line| line.trim_start().starts_with(temp));
    assert!(!recorded, "not an output file: {}", show.stdout);

    let next = apollo.args(&["run"]).run();
    next.code(0);
    assert!(
        next.stderr.contains("removed 1 temporary file") && next.stderr.contains(temp),
        "{}",
        next.stderr
    );
    assert!(!apollo.path(temp).exists(), "the next run removed it");
}
