//! A bounded run of the crash-injection harness (`cargo xtask torture` is the long one).

use apollo_tests::torture::{self, Options};

use crate::support::apollo_bin;

#[test]
fn killed_at_random_moments_and_resumed() {
    let workdir = tempfile::Builder::new()
        .prefix("apollo-torture-")
        .tempdir()
        .expect("temp dir");
    let options = Options {
        apollo: apollo_bin().to_path_buf(),
        iterations: 24,
        seed: 7,
        first: 0,
        workdir: Some(workdir.path().to_path_buf()),
    };
    let summary = torture::run(&options).expect("the harness runs");
    println!("{summary}");
    assert!(
        summary.violations.is_empty(),
        "torture found violations:\n{}",
        summary.violations.join("\n")
    );
    assert_eq!(summary.iterations, 24, "{summary}");
    assert!(
        summary.kills > 0,
        "the harness never killed apollo: {summary}"
    );
}
