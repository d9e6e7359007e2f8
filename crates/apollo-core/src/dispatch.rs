//! Choosing the executor per unit (`executor: local | slurm`, DESIGN §13, §18): the
//! [`ExecutorFactory`] a program passes in, and the [`Dispatch`] made from it, one
//! [`Executor`] that hands each attempt to the executor its unit names.
//!
//! The factory is a seam of apollo-core (like [`Executor`] itself) so that whoever has
//! executors can offer them (apollo-exec's processes, apollo-slurm's jobs, a test's fake)
//! without depending on the crate that runs a session, and so that the rule "ask only for the
//! kinds the pipeline needs" is pure code over the model.

use crate::event::AttemptStatus;
use crate::executor::{AttemptContext, AttemptOutcome, AttemptRequest, Executor};
use crate::model::{ExecutorKind, Pipeline};

/// Gives the executor for each kind of unit (`executor: local | slurm`), making it when it is
/// first asked for.
///
/// A run asks [`ExecutorFactory::executor`] once per kind that some unit of its pipeline names
/// (and for [`ExecutorKind::Local`] when the pipeline has hooks: they run on this machine),
/// before any unit starts; a kind no unit names is never asked for, so an executor that costs
/// something to make (the Slurm executor's poller) is made only for a pipeline that needs it.
/// Its answer is borrowed for the whole run: a factory that makes executors lazily keeps them
/// (a `std::sync::OnceLock` per kind), and hands out the same one each time.
///
/// [`Dispatch`] is the simplest factory: executors made beforehand.
pub trait ExecutorFactory {
    /// The executor of units of `kind`; `None` when this program has none of that kind
    /// (a unit of that kind is then refused before anything runs: [`MissingExecutor`]).
    fn executor(&self, kind: ExecutorKind) -> Option<&dyn Executor>;
}

/// A pipeline needs an executor the [`ExecutorFactory`] does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingExecutor {
    /// The first unit that needs it; `None` for the pipeline's hooks.
    pub unit: Option<String>,
    /// The kind of executor.
    pub kind: ExecutorKind,
}

impl std::fmt::Display for MissingExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.kind;
        match &self.unit {
            Some(unit) => write!(
                f,
                "unit `{unit}` runs on {kind}, and no {kind} executor was given"
            ),
            None => write!(
                f,
                "the pipeline's hooks need a {kind} executor, and none was given"
            ),
        }
    }
}

impl std::error::Error for MissingExecutor {}

/// Routes each attempt by its unit's [`ExecutorKind`]: local units to the local executor,
/// Slurm units to the Slurm executor when one was given (an attempt of a unit whose executor
/// was not given fails, saying so). It is also an [`ExecutorFactory`] of the executors it
/// holds.
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
/// // As a factory for this pipeline, it lacks the Slurm executor `b` needs:
/// let missing = Dispatch::for_pipeline(&dispatch, &pipeline).unwrap_err();
/// assert_eq!(missing.to_string(), "unit `b` runs on slurm, and no slurm executor was given");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Dispatch<'e> {
    local: Option<&'e dyn Executor>,
    slurm: Option<&'e dyn Executor>,
}

impl<'e> Dispatch<'e> {
    /// Every attempt of a local unit goes to `local`.
    pub fn new(local: &'e dyn Executor) -> Self {
        Self {
            local: Some(local),
            slurm: None,
        }
    }

    /// Attempts of Slurm units go to `slurm`.
    pub fn with_slurm(self, slurm: &'e dyn Executor) -> Self {
        Self {
            slurm: Some(slurm),
            ..self
        }
    }

    /// The dispatch for `pipeline`'s units, with the executors `factory` gives for the kinds
    /// its units name (and the local one when it has hooks), each asked for once; no other
    /// kind is asked for. An error names the first unit (in the pipeline's order) whose kind
    /// `factory` has none of.
    pub fn for_pipeline(
        factory: &'e dyn ExecutorFactory,
        pipeline: &Pipeline,
    ) -> Result<Self, MissingExecutor> {
        let mut dispatch = Self {
            local: None,
            slurm: None,
        };
        if !pipeline.hooks.is_empty() {
            dispatch.local = Some(factory.executor(ExecutorKind::Local).ok_or(
                MissingExecutor {
                    unit: None,
                    kind: ExecutorKind::Local,
                },
            )?);
        }
        for unit in &pipeline.units {
            let slot = match unit.executor {
                ExecutorKind::Local => &mut dispatch.local,
                ExecutorKind::Slurm => &mut dispatch.slurm,
            };
            if slot.is_none() {
                *slot = Some(
                    factory
                        .executor(unit.executor)
                        .ok_or_else(|| MissingExecutor {
                            unit: Some(unit.name.clone()),
                            kind: unit.executor,
                        })?,
                );
            }
        }
        Ok(dispatch)
    }
}

impl ExecutorFactory for Dispatch<'_> {
    fn executor(&self, kind: ExecutorKind) -> Option<&dyn Executor> {
        match kind {
            ExecutorKind::Local => self.local,
            ExecutorKind::Slurm => self.slurm,
        }
    }
}

impl std::fmt::Debug for Dispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("local", &self.local.is_some())
            .field("slurm", &self.slurm.is_some())
            .finish()
    }
}

impl Executor for Dispatch<'_> {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &AttemptContext<'_>,
    ) -> AttemptOutcome {
        match self.executor(request.unit.executor) {
            Some(executor) => executor.run_attempt(request, context),
            None => {
                let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Failed);
                outcome.error = Some(format!(
                    "the unit runs on {kind} and no {kind} executor was given",
                    kind = request.unit.executor
                ));
                outcome
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Test code: a failed step fails the test.

    use std::sync::Mutex;

    use super::*;

    struct Nothing;

    impl Executor for Nothing {
        fn run_attempt(&self, _: &AttemptRequest<'_>, _: &AttemptContext<'_>) -> AttemptOutcome {
            AttemptOutcome::nothing_ran(AttemptStatus::Succeeded)
        }
    }

    /// A factory that notes each kind it is asked for.
    #[derive(Default)]
    struct Noting {
        asked: Mutex<Vec<ExecutorKind>>,
        has_slurm: bool,
    }

    impl ExecutorFactory for Noting {
        fn executor(&self, kind: ExecutorKind) -> Option<&dyn Executor> {
            self.asked.lock().unwrap().push(kind);
            (kind == ExecutorKind::Local || self.has_slurm).then_some(&Nothing as &dyn Executor)
        }
    }

    fn pipeline(yaml: &str) -> Pipeline {
        crate::config::load_str(yaml, std::path::Path::new("/p.yaml"))
            .unwrap()
            .pipeline
    }

    #[test]
    fn a_pipeline_of_local_units_never_asks_for_a_slurm_executor() {
        let factory = Noting::default();
        let units = "units:\n  - {name: a, execute: 'true'}\n  - {name: b, execute: 'true'}\n";
        let dispatch = Dispatch::for_pipeline(&factory, &pipeline(units)).unwrap();
        assert!(dispatch.executor(ExecutorKind::Slurm).is_none());
        assert_eq!(*factory.asked.lock().unwrap(), [ExecutorKind::Local]);
    }

    #[test]
    fn each_kind_a_unit_names_is_asked_for_once() {
        let factory = Noting {
            has_slurm: true,
            ..Noting::default()
        };
        let units = "units:\n  - {name: a, executor: slurm, execute: 'true'}\n  - {name: b, execute: 'true'}\n  - {name: c, executor: slurm, execute: 'true'}\n";
        let dispatch = Dispatch::for_pipeline(&factory, &pipeline(units)).unwrap();
        assert!(dispatch.executor(ExecutorKind::Slurm).is_some());
        assert_eq!(
            *factory.asked.lock().unwrap(),
            [ExecutorKind::Slurm, ExecutorKind::Local]
        );
    }

    #[test]
    fn a_slurm_unit_without_a_slurm_executor_is_named() {
        let units = "units:\n  - {name: a, execute: 'true'}\n  - {name: align, executor: slurm, execute: 'true'}\n";
        let missing = Dispatch::for_pipeline(&Noting::default(), &pipeline(units)).unwrap_err();
        assert_eq!(
            missing,
            MissingExecutor {
                unit: Some("align".into()),
                kind: ExecutorKind::Slurm
            }
        );
        assert_eq!(
            missing.to_string(),
            "unit `align` runs on slurm, and no slurm executor was given"
        );
    }

    /// A factory with no executor at all.
    struct Empty;

    impl ExecutorFactory for Empty {
        fn executor(&self, _: ExecutorKind) -> Option<&dyn Executor> {
            None
        }
    }

    #[test]
    fn hooks_need_a_local_executor() {
        let yaml = "on_finish: 'true'\nunits:\n  - {name: a, executor: slurm, execute: 'true'}\n";
        let missing = Dispatch::for_pipeline(&Empty, &pipeline(yaml)).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "the pipeline's hooks need a local executor, and none was given"
        );
    }
}
