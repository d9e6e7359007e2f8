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

journal_struct! {
    /// Payload of `run_late` (format 1.10): the run's predicted finish passed its deadline, or
    /// the deadline came with units not done. Written once per run, durable before the
    /// `on_late` hook starts: a resume that finds it does not fire the hook again.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunLate {
        /// The run's deadline (RFC 3339, UTC).
        pub deadline: String,
        /// The predicted finish by each unit's p50 (RFC 3339, UTC).
        pub predicted_finish: String,
        /// The pessimistic figure, by each unit's p95.
        pub predicted_finish_p95: String,
        /// The units on the critical path, from the first to run to the last.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub critical_path: Vec<String>,
        /// Units not done that had no history (they weighed nothing).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub no_history: Vec<String>,
    }
}
