//! The job wrapper run by a real `/bin/sh`, as a node runs it (test-only module, allowed to
//! create processes: see tidy's `PROCESS_ALLOWED`).

use apollo_core::Command;

use crate::script::{PHASES, SCRIPT, WrapperSpec, wrapper_script};
use crate::test_support::unit;

/// Runs the wrapper of a unit whose `when:` command exits `code`, in a scratch folder, as
/// a node would: the job's exit status Slurm records, and the `phases` file.
fn job_with_condition(code: i32) -> (Option<i32>, String) {
    let scratch = tempfile::tempdir().unwrap();
    let mut unit = unit(Command::Shell("echo ran > ran".into()));
    unit.workdir = scratch.path().to_path_buf();
    unit.when_command = Some(Command::Shell(format!("exit {code}")));
    let dir = scratch.path().join("attempt");
    std::fs::create_dir_all(&dir).unwrap();
    let script = wrapper_script(&WrapperSpec {
        run_id: "r1",
        unit: &unit,
        attempt: 1,
        dir: &dir,
    });
    std::fs::write(dir.join(SCRIPT), script).unwrap();
    #[allow(clippy::disallowed_methods)] // A test running the wrapper as a node does.
    let status = std::process::Command::new("/bin/sh")
        .arg(dir.join(SCRIPT))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        !scratch.path().join("ran").exists(),
        "execute ran after the condition"
    );
    let phases = std::fs::read_to_string(dir.join(PHASES)).unwrap();
    (status.code(), phases)
}

#[test]
fn a_false_condition_ends_the_job_as_a_success_to_slurm_and_one_that_cannot_run_as_a_failure() {
    let (code, phases) = job_with_condition(1);
    assert_eq!(code, Some(0), "a false condition: COMPLETED to sacct");
    assert!(phases.starts_with("when 1 "), "{phases}");
    for cannot_run in [126, 127] {
        let (code, phases) = job_with_condition(cannot_run);
        assert_eq!(
            code,
            Some(1),
            "{cannot_run}: the condition could not run: FAILED"
        );
        assert!(
            phases.starts_with(&format!("when {cannot_run} ")),
            "{phases}"
        );
    }
}
