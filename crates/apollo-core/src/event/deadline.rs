//! [`UnitDeadline`]: a unit's deadline as `run_started` records it (journal format 1.9).

use serde::{Deserialize, Serialize};

use crate::codec::journal_struct;

journal_struct! {
    /// A unit's `deadline:` resolved when the run started.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitDeadline {
        /// The unit.
        pub unit: String,
        /// The instant, RFC 3339 in UTC (read it with [`crate::deadline::from_journal`]).
        pub at: String,
    }
}
