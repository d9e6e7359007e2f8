//! The records of a reproduction (`apollo reproduce`): [`RunReproduces`], which attempt it
//! re-runs (format 1.3), and [`ReproductionCompared`], how it compared (format 1.11).

use serde::{Deserialize, Serialize};

use super::AttemptStatus;
use crate::codec::{IsDefault, journal_struct};

journal_struct! {
    /// Payload of `run_reproduces` (format 1.3): the run re-runs one recorded attempt of another
    /// run in a scratch directory (its identity is `reproduce:` and the original's, so it is
    /// never resumed, never the latest run of the original pipeline).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunReproduces {
        /// The original run.
        pub run: String,
        /// The unit reproduced.
        pub unit: String,
        /// The attempt reproduced.
        pub attempt: u32,
        /// The scratch directory it ran in.
        pub scratch: String,
    }
}

journal_struct! {
    /// Payload of `reproduction_compared` (format 1.11): the verdict of a reproduction, written
    /// in its own journal after its `run_finished`, once its outputs were compared with the
    /// recorded ones. Like a hook's record, it never changes whether the run finished; without
    /// it (an older reproduction, or one cut off before comparing) the verdict is not known.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ReproductionCompared {
        /// Whether the attempt was reproduced: it ended as recorded, and every recorded output
        /// came out byte for byte the same.
        pub reproduced: bool,
        /// How the attempt ended when it was recorded (absent when the journal does not say).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub recorded_status: Option<AttemptStatus>,
        /// How it ended now.
        pub status: AttemptStatus,
        /// The declared outputs whose bytes differ from the recorded ones (or that are missing
        /// on one side), relative to the project, sorted; absent when none does.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub outputs_differ: Vec<String>,
    }
}
