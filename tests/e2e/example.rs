//! The bundled example pipeline runs from a fresh copy, with no setup.

use std::path::Path;

use crate::support::Apollo;

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_bundled_example_runs_and_a_second_run_starts_afresh() {
    // This test target belongs to crates/apollo-cli (see its Cargo.toml).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.as_path();
    let mut apollo = Apollo::new();
    copy_dir(&repo.join("config"), &apollo.path("config"));
    let _ = std::fs::remove_dir_all(apollo.path("config/.apollo"));
    copy_dir(&repo.join("units"), &apollo.path("units"));
    copy_dir(&repo.join("data/raw"), &apollo.path("data/raw"));

    let first = apollo.args(&["run"]).run();
    first.code(0);
    assert!(first.stdout.contains("succeeded"), "{}", first.stdout);
    let summary = std::fs::read_to_string(apollo.path("data/out/summary.csv"))
        .expect("the example writes its summary");
    assert!(summary.lines().count() > 1, "summary has rows: {summary}");

    // The latest run succeeded, so the next `apollo run` is a new run.
    apollo.args(&["run"]).run().code(0);
    let runs = std::fs::read_dir(apollo.path("config/.apollo/runs"))
        .expect("state beside the config")
        .count();
    assert_eq!(runs, 2);
    apollo.args(&["check"]).run().code(0);
    apollo.assert_no_processes_left();
}
