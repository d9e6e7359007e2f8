//! [`RunKind`]: what kind of run a run is.

use serde::{Deserialize, Serialize};

/// What kind of run a run is (`run_started`'s `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunKind {
    /// A run of a pipeline (`apollo run`).
    #[default]
    Run,
    /// A reproduction of one recorded attempt (`apollo reproduce`).
    Reproduction,
    /// A search for the input change that flipped a unit's output (`apollo bisect`).
    Bisect,
}

impl RunKind {
    /// Whether this is an ordinary run.
    pub fn is_run(&self) -> bool {
        *self == RunKind::Run
    }

    /// The kind for users and JSON: `run`, `reproduction`, `bisect`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Run => "run",
            RunKind::Reproduction => "reproduction",
            RunKind::Bisect => "bisect",
        }
    }
}
