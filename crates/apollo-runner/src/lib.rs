#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
// The parse cache decodes on threads into one vector's spare capacity (`parse_cache.rs`);
// everything else is safe code.
#![deny(unsafe_code)]

mod bisect;
mod deadlines;
mod error;
mod evict;
mod hooks;
mod identity;
mod journal_options;
mod late;
mod logs;
mod mark;
mod notice;
mod open_run;
mod parse_cache;
mod plan;
pub mod read;
mod reproduce;
mod restore_temps;
mod reuse;
mod select;
mod selector;
mod session;
mod snapshot;
mod state;
mod sweep;

#[cfg(test)]
mod executors_tests;
#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod power_loss_tests;
#[cfg(test)]
mod snapshot_keys_tests;
#[cfg(test)]
mod tests;

pub use apollo_core::dispatch::{Dispatch, ExecutorFactory, MissingExecutor};
pub use bisect::{
    BisectOutcome, BisectPlan, BisectRequest, BisectStep, Bisection, Change, ChangeKind, Check,
    CheckVerdict, bisect, plan_bisect,
};
pub use error::{ParamDifference, RunnerError};
pub use hooks::{HOOK_SUMMARY_SCHEMA, HookOutcome};
pub use identity::pipeline_identity;
pub use journal_options::pipeline_writer_options;
pub use mark::{MarkRequest, Marked, PreviousOutcome, mark};
pub use notice::{NoSessionObserver, SessionNotice, SessionObserver};
pub use open_run::{FinishedRun, OpenRun, Opening};
pub use parse_cache::{load_cached, load_cached_parsing_with};
pub use plan::Plan;
pub use reproduce::{
    InputNote, InputSource, Isolation, MAX_DIFF_BYTES, NoIsolation, OutputComparison,
    ReproduceRequest, Reproduction, describe_input, reproduce, reproduce_isolated, reproduced_unit,
};
pub use select::RunTarget;
pub use selector::{BadSelector, RunSelector, SelectError};
pub use session::{Opened, RunSession};
pub use sweep::{NoStraySweep, StraySweep, SweepError, SweepReason};
