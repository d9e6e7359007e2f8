//! [`HookFinished`]: how a pipeline hook went (format 1.3; `on_late`'s since 1.10).

use serde::{Deserialize, Serialize};

use super::{AttemptStatus, ExitStatus};
use crate::codec::journal_struct;

journal_struct! {
    /// Payload of `hook_finished`: how a pipeline hook went. A hook never changes the run's
    /// status; this records that it ran, for `apollo show`/`replay` and for whoever wonders why no
    /// mail came.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct HookFinished {
        /// Which hook: `on_failure`, `on_success`, `on_finish` or `on_late`.
        pub hook: String,
        /// The run status the hook was told (`APOLLO_RUN_STATUS`).
        pub run_status: String,
        /// How the hook's command ended (`succeeded`, `failed`, `timed_out`, `interrupted`).
        pub status: AttemptStatus,
        /// How its process ended.
        pub exit: Option<ExitStatus>,
        /// Wall time in milliseconds.
        pub duration_ms: u64,
        /// What went wrong, when something did.
        pub error: Option<String>,
    }
}
