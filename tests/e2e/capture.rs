//! Capture (issue 13): declared input files are kept in the blob store as they are hashed,
//! declared outputs (files, directories, globs) after a success, and each attempt's manifest is
//! recorded in a `unit_files` record.

use std::path::PathBuf;

use crate::support::Apollo;

/// The `unit_files` records of the journal, as JSON.
fn unit_files(apollo: &Apollo) -> Vec<serde_json::Value> {
    apollo
        .journal_text()
        .lines()
        .filter_map(|line| {
            serde_json::from_str::<serde_json::Value>(line.splitn(3, ' ').nth(2)?).ok()
        })
        .filter(|json| json["kind"] == "unit_files")
        .collect()
}

#[test]
fn the_same_input_declared_by_three_units_over_three_runs_is_one_blob() {
    let mut apollo = Apollo::new();
    apollo.file("data/shared.csv", "a,b\n1,2\n");
    apollo.config(
        "defaults:
  capture: inputs
units:
  - name: one
    inputs: [data/shared.csv]
    execute: \"true\"
  - name: two
    inputs: [data/*.csv]
    execute: \"true\"
  - name: three
    inputs: [data/shared.csv]
    execute: \"true\"
",
    );
    for _ in 0..3 {
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
    // Only the definition snapshot (one for the three identical runs) and the input.
    let sha = apollo_core::hash::sha256_hex(b"a,b\n1,2\n");
    let input_blobs: Vec<_> = apollo
        .blobs()
        .into_iter()
        .filter(|path| path.to_string_lossy().ends_with(&sha[2..]))
        .collect();
    assert_eq!(input_blobs.len(), 1, "{:?}", apollo.blobs());
    assert_eq!(apollo.blobs().len(), 2, "{:?}", apollo.blobs());
    assert_eq!(std::fs::read(&input_blobs[0]).unwrap(), b"a,b\n1,2\n");
    let records = unit_files(&apollo);
    assert_eq!(records.len(), 9, "three units, three runs");
    for record in records {
        assert_eq!(record["side"], "inputs");
        assert_eq!(record["files"][0]["path"], "data/shared.csv");
        assert_eq!(record["files"][0]["sha256"], sha);
        assert_eq!(record["files"][0]["size"], 8);
        assert!(record["files"][0].get("not_captured").is_none(), "{record}");
    }
}

#[test]
fn an_input_over_the_cap_keeps_its_hash_only_and_says_so() {
    let mut apollo = Apollo::new();
    // Sparse: 3 MiB that cost no disk.
    let big = std::fs::File::create(apollo.path("big.bin")).unwrap();
    big.set_len(3 << 20).unwrap();
    apollo.file("small.txt", "small");
    apollo.config(
        "units:
  - name: read
    inputs: [big.bin, small.txt]
    capture_max_file: 1MiB
    execute: \"true\"
",
    );
    apollo.args(&["run"]).run().code(0);
    let records = unit_files(&apollo);
    assert_eq!(records.len(), 1, "{records:?}");
    let files = &records[0]["files"];
    assert_eq!(files[0]["path"], "big.bin");
    assert_eq!(files[0]["size"], 3 << 20);
    assert_eq!(files[0]["not_captured"], "3 MiB > 1 MiB");
    assert_eq!(files[1]["path"], "small.txt");
    assert!(files[1].get("not_captured").is_none());
    let sha_big = files[0]["sha256"].as_str().unwrap().to_owned();
    assert!(
        !apollo
            .blobs()
            .iter()
            .any(|path| path.to_string_lossy().ends_with(&sha_big[2..])),
        "the big input has no blob"
    );
}

#[test]
fn a_directory_and_a_glob_output_are_captured_file_by_file() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:
  - name: make
    outputs: [out/, reports/*.txt]
    execute: mkdir -p out/sub reports && echo x > out/sub/x && echo y > out/y && echo r > reports/r.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    let records = unit_files(&apollo);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["side"], "outputs");
    let paths: Vec<&str> = records[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["out/sub/x", "out/y", "reports/r.txt"]);
    for file in records[0]["files"].as_array().unwrap() {
        let sha = file["sha256"].as_str().unwrap();
        let blob = apollo.path(&format!(".apollo/blobs/sha256/{}/{}", &sha[..2], &sha[2..]));
        assert!(blob.is_file(), "{file}");
    }
    // A glob that matches nothing is a missing output.
    apollo.config(
        "units:
  - name: make
    outputs: [reports/*.csv]
    execute: \"true\"
",
    );
    let output = apollo.args(&["run", "--fresh"]).run();
    output.code(1);
    assert!(
        output.stdout.contains("missing") || output.stderr.contains("missing"),
        "{output:?}"
    );
}

#[test]
fn prune_keeps_exactly_the_blobs_kept_runs_need() {
    let mut apollo = Apollo::new();
    // Each run writes an output of its own (the run's number) from an input of its own.
    apollo.config(
        "units:
  - name: copy
    inputs: [data/in.txt]
    outputs: [out.txt]
    execute: cp data/in.txt out.txt
",
    );
    for run in 1..=3 {
        apollo.file("data/in.txt", &format!("run {run}\n"));
        apollo.args(&["run", "--fresh"]).run().code(0);
    }
    // Per run one content (the input, copied to the output), plus one definition snapshot.
    assert_eq!(apollo.blobs().len(), 4, "{:?}", apollo.blobs());
    // A crash mid-write leaves a temporary file; prune sweeps it too.
    apollo.file(".apollo/blobs/tmp/blob-deadbeef", "half a blob");
    let output = apollo.args(&["prune", "--keep-runs", "1"]).run();
    output.code(0);
    assert!(
        output
            .stdout
            .contains("deleted 2 blobs no kept run references (12 B), kept 2"),
        "{}",
        output.stdout
    );
    let kept: Vec<Vec<u8>> = apollo
        .blobs()
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    assert_eq!(kept.len(), 2);
    assert!(
        kept.contains(&b"run 3\n".to_vec()),
        "the kept run's capture stays"
    );
    assert!(!apollo.path(".apollo/blobs/tmp/blob-deadbeef").exists());
    // Nothing left to collect: a second prune removes nothing.
    let output = apollo.args(&["prune", "--keep-runs", "1"]).run();
    assert!(
        output.stdout.contains("deleted 0 blobs"),
        "{}",
        output.stdout
    );
    assert_eq!(apollo.blobs().len(), 2);

    // backup copies the blobs its runs reference.
    let dest = apollo.path("backup");
    let dest_arg = dest.to_string_lossy().into_owned();
    apollo.args(&["backup", &dest_arg]).run().code(0);
    let sha = apollo_core::hash::sha256_hex(b"run 3\n");
    assert_eq!(
        std::fs::read(dest.join(format!("blobs/sha256/{}/{}", &sha[..2], &sha[2..]))).unwrap(),
        b"run 3\n"
    );
}

const REPRODUCIBLE: &str = "units:
  - name: up
    inputs: [data/in.txt]
    outputs: [mid.txt]
    execute: cp data/in.txt mid.txt
  - name: sorted
    deps: [up]
    inputs: [mid.txt]
    outputs: [out/sorted.txt]
    execute: mkdir -p out && sort -r mid.txt > out/sorted.txt
  - name: stamp
    outputs: [stamp.txt]
    execute: date +%s%N > stamp.txt
";

/// A project of [`REPRODUCIBLE`] with `input` as its data, run once.
pub(crate) fn reproducible(input: &str) -> Apollo {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", input);
    apollo.config(REPRODUCIBLE);
    apollo.args(&["run"]).run().code(0);
    apollo
}

#[test]
fn reproduce_reruns_with_the_inputs_it_had_and_never_touches_the_originals() {
    let mut apollo = reproducible("a\nb\nc\n");
    // After the run: its input is edited and its output deleted.
    apollo.file("mid.txt", "edited since\n");
    std::fs::remove_file(apollo.path("out/sorted.txt")).unwrap();
    let scratch = apollo.path("scratch");
    let scratch_arg = scratch.to_string_lossy().into_owned();
    let output = apollo
        .args(&["reproduce", "latest", "sorted", "--into", &scratch_arg])
        .run();
    output.code(0);
    assert!(
        output.stdout.contains("reproduced: 1 output identical"),
        "{output:?}"
    );
    // The reproduction ran with the input as it was, in the scratch directory.
    assert_eq!(
        std::fs::read_to_string(scratch.join("mid.txt")).unwrap(),
        "a\nb\nc\n"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("out/sorted.txt")).unwrap(),
        "c\nb\na\n"
    );
    // The originals are as the user left them.
    assert_eq!(
        std::fs::read_to_string(apollo.path("mid.txt")).unwrap(),
        "edited since\n"
    );
    assert!(!apollo.path("out/sorted.txt").exists());
    // It is a run of its own, linked to the original; `latest` still names the original.
    let journal = apollo.journal_text();
    assert!(journal.contains("\"kind\":\"run_reproduces\""), "{journal}");
    assert!(journal.contains("\"identity\":\"reproduce:"), "{journal}");
    apollo.args(&["show", "latest", "sorted"]).run().code(0);
    let json = apollo
        .args(&["reproduce", "latest", "sorted", "--format", "json"])
        .run();
    json.code(0);
    let value: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(value["reproduced"], true);
    assert_eq!(value["inputs"][0]["source"], "captured");
    assert_eq!(value["kept"], false);
    assert!(!std::path::Path::new(value["scratch"].as_str().unwrap()).exists());
}

#[test]
fn reproduce_names_an_output_that_differs_and_shows_its_diff() {
    let mut apollo = reproducible("a\n");
    let recorded = std::fs::read_to_string(apollo.path("stamp.txt")).unwrap();
    let output = apollo.args(&["reproduce", "latest", "stamp"]).run();
    output.code(1);
    assert!(
        output
            .stdout
            .contains("outputs differ: stamp.txt (recorded "),
        "{output:?}"
    );
    assert!(
        output.stdout.contains("--- recorded/stamp.txt"),
        "{output:?}"
    );
    assert!(
        output.stdout.contains(&format!("-{recorded}")),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_to_string(apollo.path("stamp.txt")).unwrap(),
        recorded,
        "the original output is untouched"
    );
}

/// A reproduction is a run of kind `reproduction` (journal format 1.5): `runs` marks it (a
/// differing one is not an ordinary "succeeded"), `stats` leaves it out unless asked, and
/// `latest` never names it (issue 35).
#[test]
fn a_reproduction_is_marked_in_runs_and_left_out_of_stats() {
    let mut apollo = reproducible("a\n");
    apollo.args(&["reproduce", "latest", "stamp"]).run().code(1);
    assert!((apollo.journal_text()).contains(r#"run_kind":"reproduction""#));
    let runs = apollo.args(&["runs", "--format", "json"]).run();
    runs.code(0);
    let runs: serde_json::Value = serde_json::from_str(&runs.stdout).unwrap();
    // The verdict is recorded: a reproduction whose outputs differ says so, in JSON and text.
    let kinds: Vec<(&str, &serde_json::Value)> = (runs["runs"].as_array().unwrap().iter())
        .map(|run| (run["kind"].as_str().unwrap(), &run["reproduction"]))
        .collect();
    let verdict = serde_json::json!({"reproduced": false, "recorded_status": "succeeded",
        "status": "succeeded", "outputs_differ": ["stamp.txt"]});
    assert_eq!(
        kinds,
        [
            ("run", &serde_json::Value::Null),
            ("reproduction", &verdict)
        ]
    );
    let text = apollo.args(&["runs"]).run().stdout;
    assert!(
        text.contains("reproduction: not reproduced · outputs differ (stamp.txt); 1/1 ok"),
        "{text}"
    );
    let stats = apollo.args(&["stats", "stamp", "--format", "json"]).run();
    stats.code(0);
    let only_runs: serde_json::Value = serde_json::from_str(&stats.stdout).unwrap();
    let all = apollo
        .args(&["stats", "stamp", "--kind", "all", "--format", "json"])
        .run();
    all.code(0);
    let all: serde_json::Value = serde_json::from_str(&all.stdout).unwrap();
    assert_ne!(only_runs, all, "the reproduction counts only when asked");
    let replay = apollo.args(&["replay", "latest"]).run();
    replay.code(0);
    assert!(!replay.stdout.contains("reproduc"), "{}", replay.stdout);
}

#[test]
fn reproduce_names_an_input_that_was_not_captured() {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "a\n");
    apollo.config(
        "units:
  - name: copy
    inputs: [data/in.txt]
    outputs: [copy.txt]
    capture: outputs
    execute: cp data/in.txt copy.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    apollo.file("data/in.txt", "changed\n");
    let output = apollo.args(&["reproduce", "latest", "copy"]).run();
    output.code(1);
    assert!(
        output.stderr.contains(
            "input data/in.txt was not captured (capture: outputs): taken from the current disk"
        ),
        "{output:?}"
    );
    assert!(
        output.stdout.contains("outputs differ: copy.txt"),
        "{output:?}"
    );
}

#[test]
fn diff_and_show_name_the_files() {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "a\n");
    apollo.config(
        "env: { MODE: fast }
units:
  - name: stamp
    inputs: [data/in.txt]
    outputs: [out/]
    execute: mkdir -p out && cp data/in.txt out/copy.txt && date +%s%N > out/stamp.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    apollo.file("data/in.txt", "b\n");
    apollo.args(&["run", "--fresh"]).run().code(0);
    let diff = apollo.args(&["diff", "latest~1", "latest"]).run();
    diff.code(1);
    for reason in [
        "input file data/in.txt changed",
        "output file out/copy.txt changed",
        "output file out/stamp.txt changed",
    ] {
        assert!(diff.stdout.contains(reason), "{reason}: {}", diff.stdout);
    }
    let show = apollo.args(&["show", "latest", "stamp"]).run();
    show.code(0);
    for expected in [
        "execute  mkdir -p out && cp data/in.txt out/copy.txt",
        "env      MODE=fast",
        "input files:",
        "data/in.txt",
        "output files:",
        "out/copy.txt",
        "out/stamp.txt",
    ] {
        assert!(
            show.stdout.contains(expected),
            "{expected}: {}",
            show.stdout
        );
    }
    let definition = apollo.args(&["show", "latest", "--definition"]).run();
    definition.code(0);
    let value: serde_json::Value = serde_json::from_str(&definition.stdout).unwrap();
    assert_eq!(value["units"][0]["name"], "stamp");
    assert_eq!(value["units"][0]["env"]["MODE"], "fast");
}

#[test]
fn a_bit_flipped_input_blob_is_detected_and_never_restored() {
    use std::os::unix::fs::PermissionsExt;
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "recorded\n");
    apollo.config(
        "units:
  - name: copy
    inputs: [data/in.txt]
    outputs: [copy.txt]
    execute: cp data/in.txt copy.txt
",
    );
    apollo.args(&["run"]).run().code(0);
    let sha = apollo_core::hash::sha256_hex(b"recorded\n");
    let blob = apollo.path(&format!(".apollo/blobs/sha256/{}/{}", &sha[..2], &sha[2..]));
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[0] ^= 0x04;
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&blob, &bytes).unwrap();
    let scratch = apollo.path("scratch");
    let scratch_arg = scratch.to_string_lossy().into_owned();
    let output = apollo
        .args(&["reproduce", "latest", "copy", "--into", &scratch_arg])
        .run();
    // The damaged blob is reported; the input comes from the disk, as it is now (unchanged
    // here, so the output is reproduced).
    output.code(0);
    assert!(
        output.stderr.contains("its blob cannot be restored"),
        "{output:?}"
    );
    assert!(output.stderr.contains("hashes to"), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(scratch.join("data/in.txt")).unwrap(),
        "recorded\n",
        "never the damaged bytes"
    );
}

#[test]
fn reproduce_refuses_a_unit_that_would_write_outside_the_project() {
    let mut apollo = Apollo::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("x.txt");
    apollo.config(&format!(
        "units:
  - name: escape
    outputs: [{}]
    execute: echo x > {}
",
        target.display(),
        target.display()
    ));
    apollo.args(&["run"]).run().code(0);
    std::fs::remove_file(&target).unwrap();
    let output = apollo.args(&["reproduce", "latest", "escape"]).run();
    output.code(2);
    assert!(output.stderr.contains("outside the project"), "{output:?}");
    assert!(!target.exists(), "nothing was written outside");
}

#[test]
fn reproduce_refuses_a_recorded_output_the_unit_does_not_declare() {
    // The record of `sorted`'s outputs also lists a path climbing out of the scratch
    // directory and a file outside the project, both to be read and shown as a diff; or the
    // project's own output by its absolute path, which the scratch directory must not stand
    // in for.
    for absolute in [false, true] {
        let mut apollo = reproducible("a\nb\nc\n");
        let planted = if absolute {
            vec![apollo.path("out/sorted.txt").display().to_string()]
        } else {
            vec![
                "../made-by-reproduce/x.txt".to_owned(),
                "/etc/hostname".to_owned(),
            ]
        };
        let run = apollo.run_ids().pop().unwrap();
        let paths: Vec<&str> = planted.iter().map(String::as_str).collect();
        apollo.record_extra_outputs(&run, "sorted", &paths);
        let scratch = apollo.path("scratch");
        let scratch_arg = scratch.to_string_lossy().into_owned();
        let output = apollo
            .args(&["reproduce", &run, "sorted", "--into", &scratch_arg])
            .run();
        output.code(2);
        assert!(
            output.stderr.contains("not among its declared outputs"),
            "{planted:?}: {output:?}"
        );
        assert!(!apollo.path("made-by-reproduce").exists(), "{output:?}");
        assert!(!output.stdout.contains("hostname"), "{output:?}");
    }
}

#[test]
fn a_temporary_scratch_directory_is_private_and_its_own() {
    use std::os::unix::fs::PermissionsExt;
    let mut apollo = reproducible("a\nb\nc\n");
    let scratch = |apollo: &mut Apollo| {
        let output = apollo
            .args(&[
                "reproduce",
                "latest",
                "sorted",
                "--keep",
                "--format",
                "json",
            ])
            .run();
        output.code(0);
        let value: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
        PathBuf::from(value["scratch"].as_str().unwrap())
    };
    let (first, second) = (scratch(&mut apollo), scratch(&mut apollo));
    for folder in [&first, &second] {
        let mode = std::fs::metadata(folder).unwrap().permissions().mode();
        // Another user of a shared /tmp can neither look in nor plant anything.
        assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
    }
    assert_ne!(first, second, "each reproduction has a folder of its own");
    std::fs::remove_dir_all(&first).unwrap();
    std::fs::remove_dir_all(&second).unwrap();
}

#[test]
fn a_failed_unit_is_reproduced_with_the_input_that_made_it_fail() {
    let mut apollo = Apollo::new();
    apollo.file("data/in.txt", "bad row\n");
    apollo.config(
        "units:
  - name: validate
    inputs: [data/in.txt]
    execute: \"! grep -q bad data/in.txt\"
",
    );
    apollo.args(&["run"]).run().code(1);
    // Fixed on disk since: the reproduction still sees the input the attempt had.
    apollo.file("data/in.txt", "good row\n");
    let output = apollo.args(&["reproduce", "latest", "validate"]).run();
    output.code(0);
    assert!(
        output
            .stdout
            .contains("reproduced: failed again, as recorded"),
        "{output:?}"
    );
}

/// `apollo reproduce` never runs an `idempotent: false` unit again without being asked
/// (issue 36 item 13): it refuses before anything runs, and `--allow-side-effects` lets it.
#[test]
fn reproduce_refuses_a_non_idempotent_unit_unless_side_effects_are_allowed() {
    let mut apollo = Apollo::new();
    apollo.config(
        "units:\n  - name: charge\n    idempotent: false\n    outputs: [receipt.txt]\n    execute: bin/count charge; echo paid > receipt.txt\n",
    );
    apollo.args(&["run"]).run().code(0);
    let refused = apollo.args(&["reproduce", "latest", "charge"]).run();
    refused.code(2);
    assert!(
        refused.stderr.contains("idempotent: false")
            && refused.stderr.contains("--allow-side-effects"),
        "{}",
        refused.stderr
    );
    assert_eq!(apollo.count("charge"), 1, "nothing ran again");
    let into = apollo.path("repro");
    let allowed = apollo
        .args(&[
            "reproduce",
            "latest",
            "charge",
            "--allow-side-effects",
            "--into",
            into.to_str().unwrap(),
        ])
        .run();
    allowed.code(0);
    assert_eq!(
        std::fs::read_to_string(into.join("receipt.txt")).unwrap(),
        "paid\n",
        "{}",
        allowed.stdout
    );
}
