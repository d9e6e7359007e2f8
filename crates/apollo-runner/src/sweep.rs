//! The stray sweep: killing what a run's units left running outside their process groups.
//!
//! apollo-runner creates no process and kills none; whoever supplies the executor supplies the
//! sweep that matches it (apollo-exec's `kill_stray_processes` for its `ProcessExecutor`).

use apollo_store::RunId;

/// Why the session sweeps, and whose processes it looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SweepReason {
    /// Before a new run starts: what units of the pipeline's previous run left running.
    PreviousRun,
    /// Before a run is resumed: what the apollo that ran it before left running.
    BeforeResume,
    /// After the engine returned: what units of this run left running outside their process
    /// groups (`setsid`, daemons). Nothing of a run outlives it.
    AfterRun,
}

/// The error a [`StraySweep`] may report. A failed sweep never stops a run; the session
/// reports it through its [`SessionObserver`](crate::SessionObserver).
pub type SweepError = Box<dyn std::error::Error + Send + Sync>;

/// Kills the processes that units of a run left running (those the executor's own process
/// group handling could not reach), and says how many it killed.
///
/// The session calls it at the moments named by [`SweepReason`], always while it holds the
/// state directory's lock. A closure `Fn(&RunId) -> Result<u32, SweepError>` is a sweep.
pub trait StraySweep {
    /// Kill every process left running by units of `run`; the number killed.
    fn sweep(&self, run: &RunId) -> Result<u32, SweepError>;
}

impl<F> StraySweep for F
where
    F: Fn(&RunId) -> Result<u32, SweepError>,
{
    fn sweep(&self, run: &RunId) -> Result<u32, SweepError> {
        self(run)
    }
}

/// A sweep that finds nothing: for executors whose attempts leave no local process behind
/// (in-process fakes, remote executors). Never pair it with an executor that spawns local
/// processes.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStraySweep;

impl StraySweep for NoStraySweep {
    fn sweep(&self, _run: &RunId) -> Result<u32, SweepError> {
        Ok(0)
    }
}
