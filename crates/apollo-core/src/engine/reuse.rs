//! Reuse across runs (DESIGN §12, `reuse: true`): a unit that has not run in this run is not
//! run at all when an earlier run of the same pipeline had a successful attempt with the same
//! input hash, and the unit's declared outputs are on disk with that attempt's output hash (or
//! can be restored so). It is then recorded `unit_reused` and hands its dependents the recorded
//! output hash, as a success would.
//!
//! The engine knows no state directory: where earlier successes are found is a
//! [`ReuseSource`] (apollo-store's reuse index, through apollo-runner), and how a missing or
//! changed output is put back is an [`OutputRestorer`] (the blob store; [`NoRestore`] until
//! one is given). Neither is trusted: whatever the source says, the outputs on disk are hashed
//! and compared with the candidate's output hash before anything is reused, so a stale or
//! wrong index can cost a rerun, never a wrong reuse.
//!
//! The check reads files (the declared outputs), so the engine runs it on its hashing threads,
//! right after the unit's inputs are hashed, within the unit's timeout and the run's
//! cancellation — or on the engine thread with stat-only limits, when the hash cache vouches
//! for every file (see `hasher::hash_job`), with the outputs often hashed ahead already (see
//! `prefetch.rs`); the dry-run planner runs it on the calling thread.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::prefetch::OutputPrefetch;
use crate::event::InputComponent;
use crate::hash;
use crate::model::Unit;
use crate::resume::{PriorState, PriorUnitState};

/// An earlier successful attempt of a unit, as a [`ReuseSource`] knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReuseCandidate {
    /// The run whose attempt did the work.
    pub run_id: String,
    /// The attempt's number in that run.
    pub attempt: u32,
    /// Its input hash.
    pub input_hash: String,
    /// Its input components (empty when not known: then a change is described only as "input
    /// hash changed").
    pub inputs: Vec<InputComponent>,
    /// Its declared outputs' hash.
    pub output_hash: String,
    /// The output files the reuse check put back from the blob store to reuse it (see
    /// [`OutputRestorer::restore`]); empty as a [`ReuseSource`] gives it.
    pub restored: Vec<String>,
}

/// Where the engine looks up earlier successes of the pipeline's units. Implementations must
/// only return successes of the same pipeline (identity) and of earlier runs; the engine
/// checks the outputs on disk against [`ReuseCandidate::output_hash`] whatever they return.
pub trait ReuseSource: Send + Sync {
    /// The latest successful attempt of `unit` whose input hash was `input_hash`.
    fn find(&self, unit: &str, input_hash: &str) -> Option<ReuseCandidate>;

    /// The latest successful attempt of `unit`, whatever its inputs: what a "not reused" is
    /// explained against ("input file data/raw.csv changed").
    fn latest(&self, unit: &str) -> Option<ReuseCandidate>;
}

/// Puts a reuse candidate's declared outputs back on disk when they are missing or differ
/// (from the blob store), so that the unit can be reused instead of run. The engine hashes
/// the outputs again afterwards: a restorer that writes the wrong bytes costs a rerun.
pub trait OutputRestorer: Send + Sync {
    /// Restore `unit`'s declared outputs (under `base_dir`) as `candidate` left them — the
    /// files it wrote (relative to `base_dir`, sorted): those that were missing or differed —
    /// or say why that is not possible.
    fn restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String>;

    /// Whether [`restore`](Self::restore) could put them back, writing nothing (a plan): the
    /// files it would write (relative to `base_dir`, sorted: those missing or differing,
    /// decided as `restore` decides), as far as can be told without copying (a damaged blob
    /// is found only as it is copied). Without an answer of its own, a plan takes them as not
    /// restorable.
    fn can_restore(
        &self,
        _unit: &Unit,
        _base_dir: &Path,
        _candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        Err("not restorable: cannot tell without restoring".to_owned())
    }
}

/// The restorer used until a blob store is wired in: nothing can be restored.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRestore;

impl OutputRestorer for NoRestore {
    fn restore(
        &self,
        _unit: &Unit,
        _base_dir: &Path,
        _candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        Err("not restorable: no blob store yet".to_owned())
    }

    fn can_restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        candidate: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        self.restore(unit, base_dir, candidate)
    }
}

/// Reuse across runs, as the engine is given it ([`EngineOptions::reuse`]): a source of
/// earlier successes and a restorer for missing outputs. Without it nothing is reused
/// (`apollo run --no-reuse`).
///
/// [`EngineOptions::reuse`]: super::EngineOptions::reuse
#[derive(Clone)]
pub struct Reuse {
    source: Arc<dyn ReuseSource>,
    restorer: Arc<dyn OutputRestorer>,
    /// Whether outputs may be restored; `false` for a plan, which writes nothing.
    writes: bool,
}

impl Reuse {
    /// Reuse from `source`, restoring nothing ([`NoRestore`]).
    pub fn new(source: Arc<dyn ReuseSource>) -> Self {
        Self {
            source,
            restorer: Arc::new(NoRestore),
            writes: true,
        }
    }

    /// The same, restoring missing or changed outputs with `restorer`.
    pub fn with_restorer(self, restorer: Arc<dyn OutputRestorer>) -> Self {
        Self { restorer, ..self }
    }

    /// The same for a plan (`apollo run --dry-run`): nothing is restored, and a unit whose
    /// missing or changed outputs the restorer could put back counts as reused, as it would be
    /// ([`OutputRestorer::can_restore`]).
    pub fn without_writing(self) -> Self {
        Self {
            writes: false,
            ..self
        }
    }
}

impl fmt::Debug for Reuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reuse { .. }")
    }
}

/// What the reuse check of a unit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReuseCheck {
    /// Reuse this earlier attempt: its outputs are on disk as it left them.
    Reusable(ReuseCandidate),
    /// Run it; why it is not reused ("input file data/raw.csv changed since run … attempt 1",
    /// "no earlier success").
    NotReused(String),
}

/// Whether `unit` gets a reuse check before it is decided: it says `reuse: true`, reuse is on
/// for the run, and it has not run in this run (a unit with an attempt of its own follows the
/// resume rules). Cheap: no I/O.
pub(super) fn wants_check(reuse: Option<&Reuse>, prior: &PriorState, unit: &Unit) -> bool {
    reuse.is_some()
        && unit.reuse
        && !unit.outputs.is_empty()
        && match prior.unit(&unit.name) {
            None => true,
            Some(prior_unit) => {
                prior_unit.last_attempt == 0 && prior_unit.state == PriorUnitState::NotDone
            }
        }
}

/// Look `unit` up by its input hash and, when an earlier success matches, hash its declared
/// outputs now and compare; restore them when they differ and the restorer can. Reads files:
/// the engine calls it on a hashing thread, within `limits`.
///
/// `None` only under [`stat_only`](hash::Limits::stat_only) limits, when deciding needs a
/// file read, a restore from the blob store or (no earlier success matches) a journal read to
/// say why: the caller hands the check to a hashing thread.
///
/// `ahead`: the run's [`OutputPrefetch`] and the unit's index in it, when its outputs may have
/// been hashed ahead; closed before anything is restored.
pub(super) fn check(
    reuse: &Reuse,
    unit: &Unit,
    base_dir: &Path,
    (input_hash, inputs): (&str, &[InputComponent]),
    limits: &hash::Limits<'_>,
    ahead: Option<(&OutputPrefetch, usize)>,
) -> Option<ReuseCheck> {
    let Some(candidate) = reuse.source.find(&unit.name, input_hash) else {
        // Saying why may read the latest success's journal for its inputs.
        if limits.is_stat_only() {
            return None;
        }
        return Some(ReuseCheck::NotReused(why_no_match(
            reuse.source.as_ref(),
            unit,
            input_hash,
            inputs,
        )));
    };
    let observed = ahead.and_then(|(prefetch, unit_idx)| prefetch.take(unit_idx));
    if observed == Some(candidate.output_hash.as_str()) {
        return Some(ReuseCheck::Reusable(candidate));
    }
    let first = match outputs_differ(unit, base_dir, &candidate, limits)? {
        None => return Some(ReuseCheck::Reusable(candidate)),
        Some(why) => why,
    };
    if limits.is_stat_only() {
        return None;
    }
    if !reuse.writes {
        return Some(
            match reuse.restorer.can_restore(unit, base_dir, &candidate) {
                Ok(restored) => ReuseCheck::Reusable(ReuseCandidate {
                    restored,
                    ..candidate
                }),
                Err(cause) => ReuseCheck::NotReused(format!("{first} ({cause})")),
            },
        );
    }
    // Restoring writes in the workspace: nothing observed ahead may be used from now on.
    if let Some((prefetch, _)) = ahead {
        prefetch.close();
    }
    Some(match reuse.restorer.restore(unit, base_dir, &candidate) {
        Ok(restored) => match outputs_differ(unit, base_dir, &candidate, limits)? {
            None => ReuseCheck::Reusable(ReuseCandidate {
                restored,
                ..candidate
            }),
            Some(why) => ReuseCheck::NotReused(format!("{first}, and after restoring it {why}")),
        },
        Err(cause) => ReuseCheck::NotReused(format!("{first} ({cause})")),
    })
}

/// The decision for a unit `candidate` stands for, with the files restored for it (or, in a
/// plan, that would be).
pub(super) fn reused(candidate: ReuseCandidate) -> super::policy::Decision {
    super::policy::Decision::Reused {
        run_id: candidate.run_id,
        attempt: candidate.attempt,
        restored: candidate.restored,
    }
}

/// [`check`] on a thread that may read files: it always decides.
pub(super) fn check_reading(
    reuse: &Reuse,
    unit: &Unit,
    base_dir: &Path,
    input_hash: &str,
    inputs: &[InputComponent],
    limits: &hash::Limits<'_>,
) -> ReuseCheck {
    check(reuse, unit, base_dir, (input_hash, inputs), limits, None).unwrap_or_else(|| {
        ReuseCheck::NotReused("the reuse check could not read the outputs".to_owned())
    })
}

/// `Some(None)` when `unit`'s declared outputs have `candidate`'s output hash now; else why
/// not, as a phrase ("output out/x.csv is missing", "output out/x.csv differs from the
/// recorded one"); `None` when that needs a read `limits` do not allow.
fn outputs_differ(
    unit: &Unit,
    base_dir: &Path,
    candidate: &ReuseCandidate,
    limits: &hash::Limits<'_>,
) -> Option<Option<String>> {
    let mut outputs: Vec<&str> = unit.outputs.iter().map(String::as_str).collect();
    outputs.sort_unstable();
    outputs.dedup();
    Some(match hash::output_hash_within(unit, base_dir, limits) {
        Err(error) if error.not_read_here() => return None,
        Ok(Some(now)) if now == candidate.output_hash => None,
        Ok(_) if outputs.len() == 1 => Some(format!(
            "output {} differs from the recorded one",
            outputs[0]
        )),
        Ok(_) => Some(format!(
            "outputs differ from the recorded ones (one of {})",
            outputs.join(", ")
        )),
        Err(error) => {
            // Named all at once when some are missing (the common case: deleted outputs); looked
            // for only then, so an unchanged output costs one `stat`.
            let missing: Vec<&str> = outputs
                .iter()
                .copied()
                .filter(|output| !hash::declared_output_exists(base_dir, output))
                .collect();
            if missing.is_empty() {
                Some(format!("outputs cannot be read: {error}"))
            } else {
                Some(format!("output {} is missing", missing.join(", ")))
            }
        }
    })
}

/// Why no earlier success matches `input_hash`: what changed since the latest one.
fn why_no_match(
    source: &dyn ReuseSource,
    unit: &Unit,
    input_hash: &str,
    inputs: &[InputComponent],
) -> String {
    let Some(latest) = source.latest(&unit.name) else {
        return "no earlier success".to_owned();
    };
    let mut changes = if latest.inputs.is_empty() {
        Vec::new()
    } else {
        let mut changes = hash::describe_input_changes(&latest.inputs, inputs);
        hash::explain_quoting_changes(&mut changes, unit, &latest.inputs);
        changes
    };
    if changes.is_empty() && latest.input_hash != input_hash {
        changes.push("input hash changed".to_owned());
    }
    format!(
        "{} since run {} attempt {}",
        changes.join(", "),
        latest.run_id,
        latest.attempt
    )
}
