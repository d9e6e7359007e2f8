//! Bounded records (issue 12): a unit whose input list is too large for a journal record keeps
//! it in an input manifest, and nothing wedges — its sibling's success is recorded, the next
//! run works, and `show`, `diff` and `--explain` read the manifest (or say clearly that they
//! cannot).

use std::path::PathBuf;
use std::time::Instant;

use crate::support::Apollo;

/// The glob of issue 12: it made a 17 MB `unit_started`, and apollo exit 6 on every run.
const N_FILES: usize = 100_000;
/// Enough files for a `unit_started` over the 1 MiB bound (about 120 bytes each), for the
/// test that needs a few runs more.
const N_FILES_OVER_BOUND: usize = 12_000;
/// `apollo_core::MAX_RECORD_BYTES`, plus room for a frame's checksum and length.
const MAX_LINE_BYTES: usize = 1024 * 1024 + 32;

const PIPELINE: &str = "max_parallel: 2
units:
  - name: big
    inputs: [data/*.csv]
    execute: bin/count big
  - name: small
    execute: bin/count small && test -e go
";

/// A project whose `data/` holds `n_files` empty files. They live in memory (`/dev/shm`)
/// when the machine has it, behind a symlink: on a busy disk, creating 100,000 files takes
/// minutes; in memory, about a second.
fn project(n_files: usize) -> (Apollo, Option<tempfile::TempDir>) {
    let apollo = Apollo::new();
    apollo.config(PIPELINE);
    let shm = PathBuf::from("/dev/shm");
    let (data, keep) = if shm.is_dir() {
        let dir = tempfile::tempdir_in(&shm).unwrap();
        std::os::unix::fs::symlink(dir.path(), apollo.path("data")).unwrap();
        (dir.path().to_path_buf(), Some(dir))
    } else {
        std::fs::create_dir(apollo.path("data")).unwrap();
        (apollo.path("data"), None)
    };
    let start = Instant::now();
    for file_idx in 0..n_files {
        std::fs::File::create(data.join(format!("part-{file_idx:06}.csv"))).unwrap();
    }
    eprintln!("created {n_files} files in {:?}", start.elapsed());
    (apollo, keep)
}

fn manifest_files(apollo: &Apollo, run: &str) -> Vec<PathBuf> {
    std::fs::read_dir(apollo.path(&format!(".apollo/runs/{run}/manifests")))
        .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_100000_file_glob_keeps_its_input_list_in_a_manifest_and_wedges_nothing() {
    let (mut apollo, _data) = project(N_FILES);
    apollo.file("go", "");
    let start = Instant::now();
    apollo.args(&["run"]).run().code(0);
    eprintln!("first run: {:?}", start.elapsed());
    assert_eq!((apollo.count("big"), apollo.count("small")), (1, 1));
    let journal = apollo.journal_text();
    for line in journal.lines() {
        assert!(
            line.len() <= MAX_LINE_BYTES,
            "a record of {} bytes",
            line.len()
        );
    }
    assert!(journal.contains(r#""unit":"small","attempt":1,"status":"succeeded""#));
    assert!(journal.contains(r#""inputs_manifest":{"sha256":"#));
    assert!(journal.contains(&format!(r#""count":{}}}"#, N_FILES + 1)));
    let first = apollo.run_ids()[0].clone();
    // The input list, and the attempt's file manifest (`unit_files`, as long).
    assert_eq!(manifest_files(&apollo, &first).len(), 2);

    // The next run works too (it wedged for good before).
    apollo.args(&["run"]).run().code(0);
    assert_eq!((apollo.count("big"), apollo.count("small")), (2, 2));

    let shown = apollo.args(&["show", &first, "big"]).run();
    shown.code(0);
    assert!(
        shown.stdout.contains("from input manifest"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("data/part-000007.csv"));

    // One file changes: the diff names it, reading both runs' manifests.
    std::fs::write(apollo.path("data/part-000007.csv"), "changed").unwrap();
    apollo.args(&["run"]).run().code(0);
    let runs = apollo.run_ids();
    let (second, third) = (runs[1].clone(), runs[2].clone());
    let diff = apollo.args(&["diff", &second, &third]).run();
    diff.code(1);
    assert!(
        diff.stdout
            .contains("input file data/part-000007.csv changed"),
        "{}",
        diff.stdout
    );

    // A manifest gone missing is reported, not a panic.
    for path in manifest_files(&apollo, &third) {
        std::fs::remove_file(path).unwrap();
    }
    let diff = apollo.args(&["diff", &second, &third]).run();
    diff.code(1);
    assert!(
        diff.stdout
            .contains("run B's input list of 100001 components cannot be read")
            && diff.stdout.contains("not found"),
        "{}",
        diff.stdout
    );
    let shown = apollo.args(&["show", &third, "big"]).run();
    shown.code(0);
    assert!(
        shown.stdout.contains("which cannot be read"),
        "{}",
        shown.stdout
    );
    apollo.assert_no_processes_left();
}

#[test]
fn a_resume_explains_a_changed_input_from_the_manifest_or_says_it_cannot_read_it() {
    let (mut apollo, _data) = project(N_FILES_OVER_BOUND);
    // `small` fails: the run stays incomplete, and the next `apollo run` resumes it.
    apollo.args(&["run", "--keep-going"]).run().code(1);
    std::fs::write(apollo.path("data/part-000042.csv"), "changed").unwrap();
    let explained = apollo.args(&["run", "--explain", "--keep-going"]).run();
    explained.code(1);
    assert!(
        explained
            .stdout
            .contains("input file data/part-000042.csv changed"),
        "{}",
        explained.stdout
    );
    assert_eq!(apollo.count("big"), 2);

    // The rerun recorded a new manifest; without it, the resume still decides (the input
    // hash says the input changed) and says why it cannot tell what changed.
    let run = apollo.run_ids()[0].clone();
    for path in manifest_files(&apollo, &run) {
        std::fs::remove_file(path).unwrap();
    }
    std::fs::write(apollo.path("data/part-000043.csv"), "changed").unwrap();
    let explained = apollo.args(&["run", "--explain", "--keep-going"]).run();
    explained.code(1);
    assert!(
        explained.stdout.contains("input hash changed")
            && explained.stdout.contains("cannot be read"),
        "{}",
        explained.stdout
    );
    assert_eq!(apollo.count("big"), 3);
    apollo.assert_no_processes_left();
}
