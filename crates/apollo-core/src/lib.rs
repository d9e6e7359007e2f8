//! apollo-core: Apollo-11's pipeline model, config loading and validation, the dependency
//! graph, and the scheduling engine.
//!
//! * [`model`] — the resolved [`Pipeline`] / [`Unit`] the rest of Apollo works with.
//! * [`dag`] — the dependency graph by unit index, topological order, layers, [`ReadyQueue`].
//! * [`event`] — the events the engine records (the journal's record payloads).
//! * [`Executor`] and [`Journal`] — the seams the engine runs through; apollo-exec and
//!   apollo-store implement them, tests plug in fakes.
//! * [`CancelToken`] — cooperative cancellation of running attempts.
//!
//! apollo-core spawns no process and writes no file.

#![warn(missing_docs)]

pub mod cancel;
pub mod dag;
pub mod engine;
pub mod event;
pub mod executor;
pub mod hash;
pub mod journal;
pub mod model;
pub mod resume;

pub use cancel::{CancelLevel, CancelRegistration, CancelToken};
pub use dag::{Dag, DagError, ReadyQueue};
pub use engine::{EngineError, EngineOptions, RunReport};
pub use event::Event;
pub use executor::{AttemptOutcome, AttemptRequest, Executor, PhaseOutcome};
pub use journal::{Journal, JournalError, MemoryJournal};
pub use model::{Command, Phase, Pipeline, Unit};
pub use resume::PriorState;
