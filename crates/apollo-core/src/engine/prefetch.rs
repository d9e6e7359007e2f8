//! The declared outputs of units that may be reused, hashed ahead of the engine on a thread
//! of their own, while nothing of this run has written anything.
//!
//! A reuse check ([`super::reuse::check`]) asks two things: which earlier success has this
//! unit's input hash (the input hash needs the upstream units decided first, so in a chain
//! the checks follow one another), and whether the unit's declared outputs are on disk as
//! that success left them (a `stat` of each and a look-up in the hash cache, then their
//! output hash). The second does not depend on the first: the outputs on disk are what they
//! are, whatever the inputs. So, while the engine decides unit after unit, one more thread
//! (the *prefetcher*) walks the same units in config order and hashes their outputs, with the
//! engine thread's stat-only limits (nothing read, only `stat`ed: a file the hash cache does
//! not vouch for is left to the check itself). The check then only compares; what that saves
//! a no-op run is measured in `docs/design/2026-12-02-noop-footprint.md`.
//!
//! **When an observation may be used.** Only while this run has not written anything in the
//! workspace: the prefetch is [closed](OutputPrefetch::close) before the first attempt goes to
//! a worker and before any output is restored from the blob store, and an observation is
//! used only if the prefetch is still open when the check asks for it. While it is open, no
//! process of this run exists and nothing of it wrote a file, so an output hashed a moment
//! before is the output now (a change made meanwhile by something outside the run is the
//! same race as one made just after the check's own `stat`). Whatever it finds, the check
//! compares it with the candidate's recorded output hash as before: an observation can
//! only save work, and one that does not match makes the check hash the outputs itself (to
//! say which one changed).
//!
//! Each unit's outputs are hashed once: the prefetcher and the check each claim a unit
//! before they hash it, and a check that finds its unit claimed but not yet hashed hashes it
//! itself rather than wait.
//!
//! The prefetcher stops at the next unit once the run is cancelled or halted, or the prefetch
//! closed; a panic in it is only a unit without an observation. A `stat` that never returns (a
//! hard-mounted network filesystem whose server is gone) holds it, and the end of the run
//! waits for it, as it waits for a hashing thread caught the same way. There is no prefetcher
//! without a hash cache (stat-only hashing could then observe nothing).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use super::hasher::HashContext;
use crate::hash::{self, Limits};

#[cfg(test)]
thread_local! {
    /// Test-only: when the prefetcher of an engine run on this thread does its work.
    pub(super) static AHEAD: std::cell::Cell<Ahead> = const { std::cell::Cell::new(Ahead::Racing) };
}

/// Test-only: when the prefetcher does its work ([`AHEAD`]).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ahead {
    /// Beside the engine, as in a real run.
    Racing,
    /// All of it before the engine decides anything.
    First,
    /// Not at all.
    Never,
}

/// The output hashes observed ahead of the reuse checks, by unit index (see the module docs).
pub(super) struct OutputPrefetch {
    slots: Vec<Slot>,
    /// Cleared, never set again, before this run may write in the workspace.
    open: AtomicBool,
}

#[derive(Default)]
struct Slot {
    /// Taken by whoever hashes the unit's outputs first: the prefetcher, or the check.
    claimed: AtomicBool,
    /// The output hash the prefetcher found.
    hash: OnceLock<String>,
}

impl OutputPrefetch {
    /// An open prefetch for a pipeline of `n_units`, nothing observed yet.
    pub(super) fn new(n_units: usize) -> Self {
        Self {
            slots: std::iter::repeat_with(Slot::default)
                .take(n_units)
                .collect(),
            open: AtomicBool::new(true),
        }
    }

    /// Ends the prefetch: no observation is used from now on, and the prefetcher stops. Called
    /// before anything of this run may write in the workspace (an attempt handed to a worker,
    /// outputs restored) and when the engine's loop ends.
    pub(super) fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
    }

    /// Whether observations may still be used (see [`close`](Self::close)).
    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// The output hash of unit `unit_idx` observed ahead, if there is one and the prefetch is
    /// still open; `None` means the check hashes the outputs itself (and the prefetcher,
    /// from now on, leaves them alone).
    pub(super) fn take(&self, unit_idx: usize) -> Option<&str> {
        let slot = self.slots.get(unit_idx)?;
        if !slot.claimed.swap(true, Ordering::AcqRel) {
            // Not reached by the prefetcher yet: it skips the unit from now on.
            return None;
        }
        let hash = slot.hash.get()?;
        // Checked after the observation was seen: open now means nothing of this run wrote
        // anything before now, so before the observation either.
        self.is_open().then_some(hash.as_str())
    }

    /// Whether unit `unit_idx`'s outputs were hashed ahead (and the prefetch is open): its
    /// reuse check then only compares, cheap enough for the engine thread.
    pub(super) fn has(&self, unit_idx: usize) -> bool {
        self.slots
            .get(unit_idx)
            .is_some_and(|slot| slot.hash.get().is_some())
            && self.is_open()
    }

    /// The prefetcher: hashes, in config order, the declared outputs of every unit `wanted`
    /// says will have a reuse check, with stat-only limits (the unit's timeout, the run's
    /// cancellation and halt), until every unit is done, the prefetch is closed, or the run
    /// is cancelled or halted. A unit whose outputs need a read (a file the cache does not
    /// vouch for, a folder, a glob) is left to its check.
    pub(super) fn run(&self, context: &HashContext<'_>, wanted: impl Fn(usize) -> bool) {
        let pipeline = context.pipeline;
        for (unit_idx, unit) in pipeline.units.iter().enumerate() {
            if !self.is_open()
                || context.cancel.is_cancelled()
                || context.halt.load(Ordering::SeqCst)
            {
                return;
            }
            if !wanted(unit_idx) || unit.outputs.iter().any(|output| hash::is_glob(output)) {
                continue;
            }
            let slot = &self.slots[unit_idx];
            if slot.claimed.swap(true, Ordering::AcqRel) {
                // The check got there first.
                continue;
            }
            let limits = Limits::new(context.cancel, unit.timeout, unit.timeout)
                .with_halt(context.halt)
                .with_cache(context.cache)
                .stat_only();
            // A panic is no observation (the check then hashes the outputs itself, on a thread
            // that reports it), not a lost run at the scope's end.
            let hashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                hash::output_hash_within(unit, &pipeline.base_dir, &limits)
            }));
            if let Ok(Ok(Some(output_hash))) = hashed {
                let _ = slot.hash.set(output_hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_is_used_once_claimed_and_only_while_the_prefetch_is_open() {
        let prefetch = OutputPrefetch::new(3);
        // The check came first: nothing observed, and the prefetcher will skip the unit.
        assert_eq!(prefetch.take(0), None);
        assert!(prefetch.slots[0].claimed.load(Ordering::SeqCst));
        // The prefetcher observed unit 1.
        prefetch.slots[1].claimed.store(true, Ordering::SeqCst);
        prefetch.slots[1].hash.set("h1".into()).unwrap();
        assert_eq!(prefetch.take(1), Some("h1"));
        // Claimed by the prefetcher, still being hashed: the check hashes it itself.
        prefetch.slots[2].claimed.store(true, Ordering::SeqCst);
        assert_eq!(prefetch.take(2), None);
        // Once this run may have written something, nothing observed is used.
        prefetch.close();
        assert_eq!(prefetch.take(1), None);
        assert_eq!(prefetch.take(7), None, "no such unit");
    }
}
