//! Helpers of the crate's unit tests.

use std::path::PathBuf;
use std::time::Duration;

use apollo_core::model::{Command, Unit};

/// A Slurm unit `align` running `execute` in `/tmp`, with one env variable.
pub(crate) fn unit(execute: Command) -> Unit {
    Unit {
        skip_when: None,
        when_command: None,
        log_limit: None,
        queue_timeout: None,
        deadline: None,
        name: "align".into(),
        deps: vec![],
        timeout: Some(Duration::from_secs(90)),
        retries: 0,
        retry_delay: Duration::from_secs(1),
        retry_on_exit: Vec::new(),
        retry_max_delay: None,
        kill_grace: Duration::from_secs(5),
        prepare: None,
        execute,
        cleanup: None,
        cleanup_timeout: apollo_core::model::DEFAULT_CLEANUP_TIMEOUT,
        inputs: vec![],
        outputs: vec![],
        env: [("GREETING".to_owned(), "it's me".to_owned())].into(),
        workdir: PathBuf::from("/tmp"),
        idempotent: true,
        executor: apollo_core::model::ExecutorKind::Slurm,
        resources: Default::default(),
        capture: Default::default(),
        reuse: false,
        secrets: Default::default(),
    }
}
