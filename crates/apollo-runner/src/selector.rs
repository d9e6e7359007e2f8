//! [`RunSelector`]: naming a run of a state directory the way a user does — `latest`,
//! `latest~N`, `last-success`, a full id, or a unique prefix or suffix of one (`6e8f`).
//!
//! The one rule every reader uses (the CLI's RUN arguments, an embedding program): a
//! reproduction (`apollo reproduce`) is never `latest` nor `last-success`, and runs are
//! ordered as they were created in the state directory, whatever the clock said.
//!
//! ```
//! use apollo_runner::RunSelector;
//!
//! assert_eq!("latest~2".parse::<RunSelector>(), Ok(RunSelector::Latest { back: 2 }));
//! assert_eq!("last-success".parse::<RunSelector>(), Ok(RunSelector::LastSuccess));
//! assert_eq!(
//!     "6e8f".parse::<RunSelector>(),
//!     Ok(RunSelector::Id("6e8f".to_owned()))
//! );
//! assert!("latest~x".parse::<RunSelector>().is_err());
//! ```

use apollo_core::Event;
use apollo_store::{JournalReader, ReadOptions, RunId, RunState, StateDir, StoreError};

/// Which run a user means.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunSelector {
    /// The newest run that is not a reproduction (`latest`), or the `back`-th before it
    /// (`latest~N`).
    Latest {
        /// How many runs back from the newest.
        back: usize,
    },
    /// The newest run that finished succeeded (`last-success`), reproductions left out.
    LastSuccess,
    /// A full run id, or a prefix or suffix of exactly one.
    Id(String),
}

/// A RUN argument that is not a selector (`latest~x`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a run: write a run id (or a unique prefix or suffix of one), `latest`, `latest~N` or `last-success`"
)]
pub struct BadSelector(pub String);

impl std::str::FromStr for RunSelector {
    type Err = BadSelector;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "" => Err(BadSelector(text.to_owned())),
            "latest" => Ok(RunSelector::Latest { back: 0 }),
            "last-success" => Ok(RunSelector::LastSuccess),
            _ => match text.strip_prefix("latest~") {
                Some(back) => back
                    .parse()
                    .map(|back| RunSelector::Latest { back })
                    .map_err(|_| BadSelector(text.to_owned())),
                None => Ok(RunSelector::Id(text.to_owned())),
            },
        }
    }
}

/// Why a selector names no run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// The state directory holds no run.
    #[error("there are no runs yet")]
    NoRuns,
    /// `latest~N` past the oldest run.
    #[error("there are only {have} runs")]
    TooFewRuns {
        /// Runs that are not reproductions.
        have: usize,
    },
    /// `last-success` and no run finished succeeded.
    #[error("no run has finished succeeded")]
    NoSuccess,
    /// No run id has this prefix or suffix.
    #[error("no run id starts or ends with `{spec}`")]
    NotFound {
        /// What was asked.
        spec: String,
    },
    /// Several run ids have it.
    #[error("`{spec}` matches {} runs", matches.len())]
    Ambiguous {
        /// What was asked.
        spec: String,
        /// The runs it matches, oldest first.
        matches: Vec<RunId>,
    },
    /// Reading the state directory failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RunSelector {
    /// The run this selector names in `state`.
    pub fn resolve(&self, state: &StateDir) -> Result<RunId, SelectError> {
        let ids = state.run_ids()?;
        if ids.is_empty() {
            return Err(SelectError::NoRuns);
        }
        match self {
            RunSelector::Latest { back } => {
                let runs: Vec<&RunId> = (ids.iter().rev())
                    .filter(|id| !is_reproduction(state, id))
                    .collect();
                runs.get(*back)
                    .map(|id| (*id).clone())
                    .ok_or(SelectError::TooFewRuns { have: runs.len() })
            }
            RunSelector::LastSuccess => (ids.iter().rev())
                .filter(|id| !is_reproduction(state, id))
                .find(|id| {
                    state
                        .run_state(id)
                        .is_ok_and(|(run_state, _)| run_state == RunState::Succeeded)
                })
                .cloned()
                .ok_or(SelectError::NoSuccess),
            RunSelector::Id(spec) => {
                let matches: Vec<&RunId> = (ids.iter())
                    .filter(|id| id.as_str() == spec)
                    .chain((ids.iter()).filter(|id| {
                        id.as_str() != spec
                            && (id.as_str().starts_with(spec.as_str())
                                || id.as_str().ends_with(spec.as_str()))
                    }))
                    .collect();
                match matches.as_slice() {
                    [] => Err(SelectError::NotFound { spec: spec.clone() }),
                    // A full id wins over ids it is a prefix of.
                    [exact, ..] if exact.as_str() == spec => Ok((*exact).clone()),
                    [one] => Ok((*one).clone()),
                    several => Err(SelectError::Ambiguous {
                        spec: spec.clone(),
                        matches: several.iter().map(|id| (*id).clone()).collect(),
                    }),
                }
            }
        }
    }
}

/// Whether run `id` is not an ordinary run (a reproduction): read from its `run_started`.
fn is_reproduction(state: &StateDir, id: &RunId) -> bool {
    let Ok(run_dir) = state.run_dir(id) else {
        return false;
    };
    let Ok(mut records) = JournalReader::open(run_dir.path(), ReadOptions::default()) else {
        return false;
    };
    matches!(
        records.next(),
        Some(Ok(record)) if matches!(&record.event, Event::RunStarted(started)
            if !started.run_kind().is_run())
    )
}
