//! What an attempt's end says beyond its status: whether a signal apollo did not send cut it
//! off, whether its `when: {command}` was false.

use super::{AttemptStatus, ExitStatus, UnitFinished};
use crate::model::Phase;

/// Whether an attempt that ended `status`, its deciding phase ending `exit`, was **cut off**
/// by a signal apollo did not send: killed from outside (`kill -9`, the OOM killer), or — on
/// Slurm — its job ended without the wrapper's result after it started (recorded as signal 9:
/// the wrapper was killed, or its node lost, before it could write it). apollo's own signals
/// (its timeout, a stop) end an attempt `timed_out` or `interrupted`, never `failed`.
///
/// Such an attempt is as half done as one apollo's death cut off: an `idempotent: false` unit
/// is not retried and stops the run for a human's verdict (DESIGN §18, "cut off").
pub fn cut_off_by_signal(status: AttemptStatus, exit: Option<ExitStatus>) -> bool {
    status == AttemptStatus::Failed && matches!(exit, Some(ExitStatus::Signal(_)))
}

impl UnitFinished {
    /// Whether the attempt ended because its `when: {command}` was false: skipped, its
    /// deciding phase the condition ([`Phase::When`]). apollo then records `unit_skipped`
    /// with reason `when` just after it (journal format 1.12); views say so, never "exit 77".
    pub fn when_false(&self) -> bool {
        self.status == AttemptStatus::Skipped
            && self.phases.last().map(|phase| phase.phase) == Some(Phase::When)
    }
}
