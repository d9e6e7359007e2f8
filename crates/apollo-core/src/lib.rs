//! apollo-core: Apollo-11's pipeline model, config loading and validation, the dependency
//! graph, and the scheduling engine.
//!
//! * [`config`] — loading a YAML pipeline: [`config::load`] / [`config::load_str`] give a
//!   [`Loaded`] pipeline or every problem at once as [`Diagnostic`]s (file, line, column, the
//!   offending line, a hint), rendered like a compiler's.
//! * [`validate`] — the whole-pipeline checks (names, dependencies, cycles, warnings).
//! * [`model`] — the resolved [`Pipeline`] / [`Unit`] the rest of Apollo works with.
//! * [`dag`] — the dependency graph by unit index, topological order, layers, [`ReadyQueue`].
//! * [`event`] — the events the engine records (the journal's record payloads).
//! * [`Executor`] and [`Journal`] — the seams the engine runs through; apollo-exec and
//!   apollo-store implement them, tests plug in fakes.
//! * [`engine`] — the scheduler: [`engine::run`] runs or resumes a pipeline through an
//!   [`Executor`], recording every step in a [`Journal`] before it matters.
//! * [`hash`] — input and output hashes (SHA-256 over canonical encodings).
//! * [`resume`] — [`PriorState`]: what a run's journal says was already done.
//! * [`CancelToken`] — cooperative cancellation of running attempts.
//!
//! apollo-core spawns no process and writes no file (it reads config files).
//!
//! # Example
//!
//! ```
//! use apollo_core::{Dag, config};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("etl.yaml");
//! std::fs::write(
//!     &path,
//!     "units:\n  - name: fetch\n    execute: ./fetch.sh\n  - name: clean\n    deps: [fetch]\n    execute: ./clean.sh\n",
//! )?;
//! let loaded = config::load(&path)?;
//! assert_eq!(loaded.pipeline.name, "etl");
//! let dag = Dag::new(&loaded.pipeline)?;
//! let order: Vec<&str> = dag
//!     .topo_order()
//!     .into_iter()
//!     .map(|unit_idx| loaded.pipeline.units[unit_idx].name.as_str())
//!     .collect();
//! assert_eq!(order, ["fetch", "clean"]);
//!
//! // A broken config reports every problem, each rendered like a compiler diagnostic.
//! let error = config::load_str("units:\n  - name: a\n    deps: [a]\n", &path).unwrap_err();
//! let config::LoadError::Invalid { diagnostics, .. } = error else { unreachable!() };
//! assert_eq!(diagnostics.len(), 2); // the self-dependency and the missing `execute`
//! assert!(diagnostics[1].render().contains("dependency cycle: a → a"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod cancel;
pub mod config;
pub mod dag;
pub mod diagnostic;
pub mod engine;
pub mod event;
pub mod executor;
pub mod hash;
pub mod journal;
pub mod model;
pub mod resume;
pub mod validate;

pub use cancel::{CancelLevel, CancelRegistration, CancelToken};
pub use config::{LoadError, Loaded};
pub use dag::{Dag, DagError, ReadyQueue};
pub use diagnostic::{Diagnostic, Severity};
pub use engine::{EngineError, EngineOptions, RunReport};
pub use event::Event;
pub use executor::{
    AttemptContext, AttemptEvent, AttemptOutcome, AttemptReporter, AttemptRequest, Executor,
    PhaseOutcome,
};
pub use journal::{Journal, JournalError, MemoryJournal};
pub use model::{Command, Phase, Pipeline, Unit};
pub use resume::PriorState;
