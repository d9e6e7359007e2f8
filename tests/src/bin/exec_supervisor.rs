//! A stand-in for apollo in tests: runs one attempt through `apollo_exec::ProcessExecutor`
//! whose `execute` starts a background child in its group (pid in `<dir>/child.pid`) and one
//! that leaves the group with `setsid` (pid in `<dir>/escaped.pid`), records its own pid in
//! `<dir>/leader.pid` and then sleeps for ever. The exec tests SIGKILL this process (in one test
//! after killing its guard process, which it must replace) and check that the unit's whole
//! group dies with it (the executor's guard process) and that
//! `apollo_exec::kill_stray_processes` finds the escaped child.
//!
//! Usage: `exec_supervisor <dir> <run-id>` (the unit's workdir and log dir, and its run id).
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use apollo_core::{AttemptContext, AttemptRequest, CancelToken, Command, Executor, Unit};
use apollo_exec::{ExecOptions, ProcessExecutor};

fn main() -> ExitCode {
    let (Some(dir), Some(run_id)) = (
        std::env::args_os().nth(1).map(PathBuf::from),
        std::env::args().nth(2),
    ) else {
        eprintln!("usage: exec_supervisor <dir> <run-id>");
        return ExitCode::from(2);
    };
    let unit = Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: "orphan_candidate".to_owned(),
        deps: vec![],
        timeout: None,
        retries: 0,
        retry_delay: Duration::from_secs(1),
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: Duration::from_secs(5),
        prepare: None,
        // Start a child in the group and one out of it, write the markers (the leader's last,
        // atomically), then become `sleep` in the same process (the leader).
        execute: Command::Shell(
            "sleep 1000 & echo $! > child.pid; setsid sleep 1000 & echo $! > escaped.pid; \
             echo $$ > leader.pid.tmp && mv leader.pid.tmp leader.pid && exec sleep 1000"
                .to_owned(),
        ),
        cleanup: None,
        cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
        inputs: vec![],
        outputs: vec![],
        env: Default::default(),
        workdir: dir.clone(),
        idempotent: true,
        capture: Default::default(),
        reuse: false,
        executor: apollo_core::model::ExecutorKind::Local,
        resources: apollo_core::model::Resources::default(),
        secrets: Default::default(),
    };
    let request = AttemptRequest::new(&run_id, &unit, 1, &dir);
    let outcome = ProcessExecutor::new(ExecOptions::default())
        .run_attempt(&request, &AttemptContext::new(&CancelToken::new()));
    // Only reached if the unit ended on its own, which the test does not expect.
    println!("{outcome:?}");
    ExitCode::SUCCESS
}
