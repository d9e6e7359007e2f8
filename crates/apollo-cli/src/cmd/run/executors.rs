//! The executors `apollo run` offers a run: processes on this machine, and Slurm jobs made
//! only when the run asks for them (a unit with `executor: slurm`).

use std::sync::OnceLock;

use apollo_core::model::ExecutorKind;
use apollo_core::{Executor, ExecutorFactory};
use apollo_exec::{ProcessExecutor, SecretValues};
use apollo_slurm::{ClientCalls, SlurmExecutor, SlurmOptions};

use crate::error::CliError;

/// The run's [`ExecutorFactory`]: the process executor (also the hooks', made before the
/// session so that a resume refused for a human's verdict still runs `on_failure`), and a
/// Slurm executor (and its poller thread) made the first time the run asks for one.
pub(super) struct RunExecutors {
    /// Units' attempts on this machine, and the pipeline's hooks.
    pub(super) local: ProcessExecutor,
    slurm: OnceLock<SlurmExecutor>,
    slurm_options: SlurmOptions,
    secrets: SecretValues,
}

impl RunExecutors {
    /// Executors for `pipeline`'s units, handing each unit the `secrets` it lists.
    pub(super) fn new(
        local: ProcessExecutor,
        pipeline: &apollo_core::Pipeline,
        secrets: SecretValues,
    ) -> Result<Self, CliError> {
        Ok(Self {
            local: local.with_secrets(secrets.clone()),
            slurm: OnceLock::new(),
            slurm_options: slurm_options(pipeline)?,
            secrets,
        })
    }

    /// What the run cost the cluster's controller, if it used Slurm (issue 15).
    pub(super) fn slurm_calls(&self) -> Option<ClientCalls> {
        self.slurm.get().map(SlurmExecutor::client_calls)
    }
}

impl ExecutorFactory for RunExecutors {
    fn executor(&self, kind: ExecutorKind) -> Option<&dyn Executor> {
        match kind {
            ExecutorKind::Local => Some(&self.local),
            ExecutorKind::Slurm => Some(self.slurm.get_or_init(|| {
                SlurmExecutor::new(self.slurm_options.clone()).with_secrets(self.secrets.clone())
            })),
            _ => None,
        }
    }
}

/// The Slurm executor's options: the defaults, with job arrays off when `APOLLO_SLURM_ARRAYS`
/// is `off` (each attempt a job of its own: for comparisons, or a site that wants no arrays),
/// and the Slurm commands run without the variables the secrets come from (`sbatch` hands its
/// environment to slurmctld, which keeps it with the job).
fn slurm_options(pipeline: &apollo_core::Pipeline) -> Result<SlurmOptions, CliError> {
    let sources = pipeline.units.iter().flat_map(|unit| unit.secrets.values());
    let hidden = sources.filter_map(|source| match source {
        apollo_core::model::SecretSource::Env(name) => Some(name.clone()),
        _ => None,
    });
    let options = SlurmOptions::default().hide_env(hidden);
    match std::env::var("APOLLO_SLURM_ARRAYS") {
        Err(std::env::VarError::NotPresent) => Ok(options),
        Ok(value) if value == "on" => Ok(options),
        Ok(value) if value == "off" => Ok(options.job_arrays(false)),
        Ok(value) => Err(CliError::Usage {
            message: format!(
                "APOLLO_SLURM_ARRAYS is `{value}`: it takes `on` (the default: attempts ready \
                 together go to Slurm as job arrays) or `off` (each attempt a job of its own)"
            ),
        }),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError::Usage {
            message: "APOLLO_SLURM_ARRAYS is not valid UTF-8: it takes `on` or `off`".to_owned(),
        }),
    }
}
