//! The blob store's size limit (`blob_store_max`, DESIGN §17): when a run ends over it, the
//! captures of the oldest runs are evicted, never the latest run of a pipeline's; what became
//! non-reproducible is named; `reproduce` says which input's blob is gone and reuse runs the
//! unit it cannot restore.

use crate::support::{Apollo, Output};

/// One unit that turns its input (lower case) into its output (upper case): every run with a
/// new input captures two new blobs of about the input's size. `reuse: true` so that a later
/// run with an old input looks for the old run's outputs.
fn pipeline(limit: &str) -> String {
    format!(
        "blob_store_max: {limit}
defaults:
  reuse: true
units:
  - name: gen
    inputs: [data/in.txt]
    outputs: [out/gen.txt]
    execute: bin/count gen && mkdir -p out && tr a-z A-Z < data/in.txt > out/gen.txt
"
    )
}

/// A second pipeline in the same state directory, with its own input and output.
const OTHER: &str = "units:
  - name: other
    inputs: [data/other.txt]
    outputs: [out/other.txt]
    execute: mkdir -p out && tr a-z A-Z < data/other.txt > out/other.txt
";

/// 8 KiB of lower-case text peculiar to `tag`.
fn content(tag: &str) -> String {
    let line = format!("{tag} lower case line of the input\n");
    line.repeat(8 * 1024 / line.len() + 1)
}

/// Whether the blob of `content` is in the project's blob store.
fn has_blob(apollo: &Apollo, content: &str) -> bool {
    let sha = apollo_core::hash::sha256_hex(content.as_bytes());
    apollo
        .path(&format!(".apollo/blobs/sha256/{}/{}", &sha[..2], &sha[2..]))
        .is_file()
}

/// Runs `args` and returns the output and the id of the run it created.
fn run_new(apollo: &mut Apollo, args: &[&str]) -> (Output, String) {
    let before = apollo.run_ids();
    let output = apollo.args(args).run();
    let created: Vec<String> = (apollo.run_ids().into_iter())
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(created.len(), 1, "{created:?}\n{output:?}");
    (output, created[0].clone())
}

#[test]
fn the_oldest_runs_captures_are_evicted_and_named_never_the_latest_runs() {
    let mut apollo = Apollo::new();
    // Each run of either pipeline captures 16 KiB; the definitions take a few more. 40 KiB
    // hold the latest run of each pipeline and one older run, not two.
    apollo.config(&pipeline("40KiB"));
    apollo.file("other.yaml", OTHER);
    apollo.file("data/other.txt", &content("other"));
    let (output, other_run) = run_new(&mut apollo, &["run", "other.yaml"]);
    output.code(0);

    let inputs: Vec<String> = ["first", "second", "third"]
        .iter()
        .map(|tag| content(tag))
        .collect();
    let outputs: Vec<String> = inputs.iter().map(|text| text.to_uppercase()).collect();
    let mut runs = Vec::new();
    let mut stderrs = Vec::new();
    for input in &inputs {
        apollo.file("data/in.txt", input);
        let (output, run) = run_new(&mut apollo, &["run"]);
        output.code(0);
        runs.push(run);
        stderrs.push(output.stderr);
    }
    assert_eq!(apollo.count("gen"), 3);

    // The first run fits; the second's end evicts the first run; the third's the second.
    assert!(
        !stderrs[0].contains("blob_store_max"),
        "nothing to evict yet: {}",
        stderrs[0]
    );
    for (index, evicted) in [(1, &runs[0]), (2, &runs[1])] {
        let stderr = &stderrs[index];
        assert!(
            stderr.contains("warning: blob store over blob_store_max (")
                && stderr.contains(&format!(
                    "> 40 KiB): evicted the captures of run {evicted} ("
                ))
                && stderr.contains("its units can no longer be reproduced"),
            "run {index}: {stderr}"
        );
        assert!(!stderr.contains(&other_run), "{stderr}");
    }
    // The two older runs' own blobs are gone, the latest run's and the other pipeline's stay.
    for index in 0..2 {
        assert!(!has_blob(&apollo, &inputs[index]), "input of run {index}");
        assert!(!has_blob(&apollo, &outputs[index]), "output of run {index}");
    }
    assert!(has_blob(&apollo, &inputs[2]) && has_blob(&apollo, &outputs[2]));
    assert!(has_blob(&apollo, &content("other")));
    assert!(has_blob(&apollo, &content("other").to_uppercase()));
    // The journals are untouched: each still names what it captured.
    let journal = apollo.journal_text();
    assert!(journal.contains("unit_files"), "{journal}");

    // Reproducing the evicted attempt names the input whose blob is gone.
    let output = apollo.args(&["reproduce", &runs[0], "gen"]).run();
    assert!(
        output.stderr.contains(
            "warning: input data/in.txt was captured, but its blob is no longer in the blob \
             store (evicted under blob_store_max, or deleted): taken from the current disk"
        ),
        "{output:?}"
    );
    // Taken from the disk as it is now (the third input): the output differs.
    output.code(1);
    assert!(
        output.stdout.contains("outputs differ: out/gen.txt"),
        "{output:?}"
    );

    // Reuse of the first run's result: its output is not on disk and its blob is gone, so
    // the unit runs (it cannot be restored), and writes the right output.
    apollo.file("data/in.txt", &inputs[0]);
    std::fs::remove_file(apollo.path("out/gen.txt")).unwrap();
    let (output, _) = run_new(&mut apollo, &["run"]);
    output.code(0);
    assert_eq!(apollo.count("gen"), 4, "{output:?}");
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/gen.txt")).unwrap(),
        outputs[0]
    );
}

#[test]
fn a_reused_output_whose_blob_is_kept_is_restored_without_running() {
    // The control for the reuse above: with no limit the same steps restore from the store.
    let mut apollo = Apollo::new();
    apollo.config(&pipeline("none"));
    for tag in ["first", "second", "third"] {
        apollo.file("data/in.txt", &content(tag));
        let (output, _) = run_new(&mut apollo, &["run"]);
        output.code(0);
        assert!(!output.stderr.contains("blob_store_max"), "{output:?}");
    }
    assert!(has_blob(&apollo, &content("first")));
    apollo.file("data/in.txt", &content("first"));
    std::fs::remove_file(apollo.path("out/gen.txt")).unwrap();
    let (output, _) = run_new(&mut apollo, &["run"]);
    output.code(0);
    assert_eq!(apollo.count("gen"), 3, "restored, not run: {output:?}");
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/gen.txt")).unwrap(),
        content("first").to_uppercase()
    );
}

#[test]
fn when_the_latest_runs_alone_exceed_the_limit_they_are_kept_and_said_so() {
    let mut apollo = Apollo::new();
    apollo.config(&pipeline("1KiB"));
    apollo.file("data/in.txt", &content("only"));
    let (output, _) = run_new(&mut apollo, &["run"]);
    output.code(0);
    assert!(
        output
            .stderr
            .contains("warning: blob store over blob_store_max (")
            && output
                .stderr
                .contains("the latest run of each pipeline and unfinished runs need")
            && output.stderr.contains("more than that: kept"),
        "{output:?}"
    );
    assert!(has_blob(&apollo, &content("only")));
    assert!(has_blob(&apollo, &content("only").to_uppercase()));
}

#[test]
fn blob_store_max_is_a_size_or_none_at_the_top_level() {
    let mut apollo = Apollo::new();
    apollo.config(&pipeline("lots"));
    let output = apollo.args(&["check"]).run();
    assert_ne!(output.code, Some(0), "{output:?}");
    assert!(
        output
            .stderr
            .contains("invalid size `lots` for `blob_store_max`")
            || output
                .stdout
                .contains("invalid size `lots` for `blob_store_max`"),
        "{output:?}"
    );
    apollo.config(
        "units:
  - name: gen
    blob_store_max: 1GiB
    execute: \"true\"
",
    );
    let output = apollo.args(&["check"]).run();
    assert_ne!(
        output.code,
        Some(0),
        "a unit has no blob_store_max: {output:?}"
    );
    for limit in ["none", "0", "20GiB", "1048576"] {
        apollo.config(&pipeline(limit));
        apollo.args(&["check"]).run().code(0);
    }
}

#[test]
fn reproducing_an_attempt_captured_with_capture_none_names_every_input() {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "a\n");
    apollo.config(
        "units:
  - name: copy
    inputs: [data/in.txt, data/gone.txt]
    outputs: [copy.txt]
    capture: none
    execute: cat data/in.txt data/gone.txt > copy.txt
",
    );
    apollo.file("data/gone.txt", "b\n");
    apollo.args(&["run"]).run().code(0);
    std::fs::remove_file(apollo.path("data/gone.txt")).unwrap();
    let output = apollo.args(&["reproduce", "latest", "copy"]).run();
    assert!(
        output.stderr.contains(
            "warning: input data/in.txt was not captured (capture: none): taken from the current disk"
        ) && output.stderr.contains(
            "warning: input data/gone.txt was not captured (capture: none) and is no longer on disk: missing"
        ),
        "{output:?}"
    );
    // The unit fails without its input: an outcome that differs, said plainly, no panic.
    output.code(1);
    assert!(
        output
            .stdout
            .contains("outcome differs: recorded succeeded, now failed"),
        "{output:?}"
    );
}

/// Copies `from` into `to`, folders and files.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

#[test]
fn reproducing_an_attempt_recorded_before_capture_existed_says_what_it_cannot_compare() {
    // The checked-in state directory of journal format 1.0 (no manifests, no blobs but the
    // definition snapshot): `fetch` wrote fetched.txt, `transform` needed a file nobody
    // declared.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../apollo-store/tests/fixtures/format-1.0");
    let mut apollo = Apollo::new();
    for folder in ["runs", "blobs"] {
        copy_tree(
            &fixture.join(folder),
            &apollo.path(&format!(".apollo/{folder}")),
        );
    }
    let original = apollo.run_ids().pop().unwrap();
    let output = apollo.args(&["reproduce", &original, "fetch"]).run();
    output.code(0);
    assert!(
        output.stderr.contains(
            "warning: attempt 1 recorded no output manifest (it was recorded before capture \
             existed): its outputs cannot be compared"
        ),
        "{output:?}"
    );
    assert!(
        output
            .stdout
            .contains("reproduced: outputs not compared: none recorded"),
        "{output:?}"
    );
    let output = apollo
        .args(&["reproduce", &original, "fetch", "--format", "json"])
        .run();
    output.code(0);
    let value: serde_json::Value = serde_json::from_str(output.stdout.trim()).unwrap();
    assert_eq!(value["outputs_unrecorded"], true, "{value}");
    // An outcome that differs is said plainly: an error of the unit, not of apollo.
    let output = apollo.args(&["reproduce", &original, "transform"]).run();
    output.code(1);
    assert!(
        output
            .stdout
            .contains("outcome differs: recorded succeeded, now failed"),
        "{output:?}"
    );
}

#[test]
fn a_resumed_run_that_ends_over_the_limit_evicts_too() {
    let mut apollo = Apollo::new();
    let gated = |limit: &str| {
        format!(
            "{}  - name: gate
    deps: [gen]
    outputs: [out/gate.txt]
    execute: test -f markers/ok && rev data/in.txt > out/gate.txt
",
            pipeline(limit)
        )
    };
    apollo.config(&gated("none"));
    apollo.release("ok");
    apollo.file("data/in.txt", &content("first"));
    let (output, first) = run_new(&mut apollo, &["run"]);
    output.code(0);
    std::fs::remove_file(apollo.path("markers/ok")).unwrap();
    apollo.file("data/in.txt", &content("second"));
    let (output, second) = run_new(&mut apollo, &["run"]);
    output.code(1);
    assert!(
        has_blob(&apollo, &content("first")),
        "no limit: nothing evicted"
    );
    // Resumed under a limit that holds one run's captures (24 KiB): at its end (it captured
    // gate's output) the first run's go.
    apollo.release("ok");
    apollo.config(&gated("30KiB"));
    let output = apollo.args(&["resume", &second]).run();
    output.code(0);
    assert!(
        output
            .stderr
            .contains(&format!("evicted the captures of run {first} (")),
        "{output:?}"
    );
    assert!(!has_blob(&apollo, &content("first")));
    assert!(has_blob(&apollo, &content("second")));
    assert!(has_blob(&apollo, &content("second").to_uppercase()));
}

/// `apollo backup` counts the captured files it copies, not only the runs' folders (issue 36
/// item 18: "backed up 1 run (0.0 MiB)" for a run whose 1 MiB output it had just copied).
#[test]
fn backup_reports_the_blobs_it_copied_in_its_size() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: big\n    outputs: [big.bin]\n    execute: head -c 1048576 /dev/zero | tr '\\\\0' x > big.bin\n",
    );
    apollo.args(&["run"]).run().code(0);
    let dest = apollo.path("backup");
    let output = apollo.args(&["backup", dest.to_str().unwrap()]).run();
    output.code(0);
    assert!(
        output.stdout.contains("1.0 MiB of blobs"),
        "{}",
        output.stdout
    );
    // Nothing new the second time.
    let again = apollo.args(&["backup", dest.to_str().unwrap()]).run();
    assert!(
        again.stdout.contains("backed up 0 runs"),
        "{}",
        again.stdout
    );
}

/// A succeeded run whose `on_finish` hook ran is finished, so its captures can be evicted
/// (issue 35: the hook's records after `run_finished` made such a run read as incomplete,
/// and eviction protects incomplete runs).
#[test]
fn the_captures_of_an_older_run_whose_hook_ran_are_evicted() {
    let mut apollo = Apollo::new();
    // One run's captures (16 KiB and a definition) fit in 24 KiB, two do not.
    apollo.config(&format!("on_finish: bin/count hook\n{}", pipeline("24KiB")));
    apollo.file("data/in.txt", &content("first"));
    let (output, first) = run_new(&mut apollo, &["run"]);
    output.code(0);
    apollo.file("data/in.txt", &content("second"));
    let (output, _) = run_new(&mut apollo, &["run"]);
    output.code(0);
    assert_eq!(apollo.count("hook"), 2);
    assert!(
        output
            .stderr
            .contains(&format!("evicted the captures of run {first} (")),
        "{output:?}"
    );
    assert!(!has_blob(&apollo, &content("first")));
    assert!(has_blob(&apollo, &content("second")));
}
