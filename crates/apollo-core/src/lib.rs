#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cancel;
pub mod capture;
pub mod codec;
pub mod config;
pub mod cost;
pub mod dag;
pub mod deadline;
pub mod diagnostic;
pub mod dispatch;
pub mod engine;
pub mod event;
pub mod executor;
pub mod hash;
pub mod hash_cache;
pub mod input_manifest;
pub mod journal;
pub mod model;
pub mod record;
pub mod restore_temp;
pub mod resume;
mod reuse_check;
pub mod safe_file;
pub mod sharing;
pub mod testing;
pub mod unit_state;
pub mod validate;

pub use cancel::{CancelLevel, CancelRegistration, CancelToken};
pub use config::{LoadError, Loaded};
pub use dag::{Dag, DagError, ReadyQueue};
pub use diagnostic::{Diagnostic, Severity};
pub use dispatch::{Dispatch, ExecutorFactory, MissingExecutor};
pub use engine::{EngineError, EngineOptions, RunReport};
pub use event::Event;
pub use executor::{
    AttemptContext, AttemptEvent, AttemptOutcome, AttemptReporter, AttemptRequest, Executor,
    JobRequest, NeedsHuman, PhaseOutcome,
};
pub use journal::{Durability, Journal, JournalError, MAX_RECORD_BYTES, MemoryJournal};
pub use model::{Command, Phase, Pipeline, Unit};
pub use record::Record;
pub use resume::PriorState;
pub use unit_state::{UnitCounts, UnitState};
