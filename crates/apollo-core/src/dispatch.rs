//! [`Dispatch`]: one [`Executor`] that hands each attempt to the executor its unit names
//! (`executor: local | slurm`, DESIGN §13).

use crate::event::AttemptStatus;
use crate::executor::{AttemptContext, AttemptOutcome, AttemptRequest, Executor};
use crate::model::ExecutorKind;

/// Routes each attempt by its unit's [`ExecutorKind`]: local units to `local`, Slurm units
/// to the Slurm executor when one was given (an attempt of a Slurm unit without one fails,
/// saying so).
///
/// ```
/// use apollo_core::{AttemptContext, AttemptOutcome, AttemptRequest, CancelToken, Executor};
/// use apollo_core::dispatch::Dispatch;
/// use apollo_core::event::AttemptStatus;
///
/// struct Nothing;
/// impl Executor for Nothing {
///     fn run_attempt(&self, _: &AttemptRequest<'_>, _: &AttemptContext<'_>) -> AttemptOutcome {
///         AttemptOutcome::nothing_ran(AttemptStatus::Succeeded)
///     }
/// }
///
/// let yaml = "units:\n  - {name: a, execute: 'true'}\n  - {name: b, executor: slurm, execute: 'true'}\n";
/// let pipeline = apollo_core::config::load_str(yaml, std::path::Path::new("/p.yaml"))?.pipeline;
/// let dispatch = Dispatch::new(&Nothing);
/// let cancel = CancelToken::new();
/// let run = |unit| dispatch.run_attempt(
///     &AttemptRequest::new("r", unit, 1, std::path::Path::new("/tmp")),
///     &AttemptContext::new(&cancel),
/// );
/// assert_eq!(run(&pipeline.units[0]).status, AttemptStatus::Succeeded);
/// assert_eq!(run(&pipeline.units[1]).status, AttemptStatus::Failed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Dispatch<'e> {
    local: &'e dyn Executor,
    slurm: Option<&'e dyn Executor>,
}

impl<'e> Dispatch<'e> {
    /// Every attempt of a local unit goes to `local`.
    pub fn new(local: &'e dyn Executor) -> Self {
        Self { local, slurm: None }
    }

    /// Attempts of Slurm units go to `slurm`.
    pub fn with_slurm(self, slurm: &'e dyn Executor) -> Self {
        Self {
            slurm: Some(slurm),
            ..self
        }
    }
}

impl std::fmt::Debug for Dispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("slurm", &self.slurm.is_some())
            .finish_non_exhaustive()
    }
}

impl Executor for Dispatch<'_> {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        match (request.unit.executor, self.slurm) {
            (ExecutorKind::Slurm, Some(slurm)) => slurm.run_attempt(request, context),
            (ExecutorKind::Slurm, None) => {
                let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
                outcome.error =
                    Some("the unit runs on Slurm and no Slurm executor was given".into());
                outcome
            }
            (ExecutorKind::Local, _) => self.local.run_attempt(request, context),
        }
    }
}
