//! [`RunDeadlines`]: a run's and its units' deadlines as `run_started` records them (journal
//! format 1.9), each an instant in RFC 3339, UTC (read it with
//! [`crate::deadline::from_journal`]).

use serde::{Deserialize, Serialize};

use crate::codec::{IsDefault, journal_struct};

journal_struct! {
    /// `run_started`'s `deadlines`: `{"run":"…","units":[{"unit","at"}]}`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunDeadlines {
        /// The run's `deadline:` (absent without one).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub run: Option<String>,
        /// The units' own, in config order (absent when none has one).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub units: Vec<UnitDeadline>,
    }
}

journal_struct! {
    /// A unit's `deadline:` resolved when the run started.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitDeadline {
        /// The unit.
        pub unit: String,
        /// The instant.
        pub at: String,
    }
}
