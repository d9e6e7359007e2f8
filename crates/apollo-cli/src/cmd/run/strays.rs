//! The stray sweep that matches apollo-exec's process executor: processes that escaped their
//! unit's process group, found by their `APOLLO_RUN_ID`.

use apollo_runner::{StraySweep, SweepError};
use apollo_store::RunId;

/// [`StraySweep`] through `apollo_exec::kill_stray_processes`.
pub(crate) struct ProcessSweep;

impl StraySweep for ProcessSweep {
    fn sweep(&self, run: &RunId) -> Result<u32, SweepError> {
        Ok(apollo_exec::kill_stray_processes(run.as_str())?)
    }
}
