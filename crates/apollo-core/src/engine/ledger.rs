//! The in-flight ledger: for each unit the scheduler has taken from the ready queue and not yet
//! taken back in, where it is — being hashed, being checked for reuse, committed (its
//! `unit_started` in a batch), or at a worker — and whether it is idempotent and runs on
//! Slurm. The scheduler's counts (running, at the workers, at the hashing threads, …) are read
//! from it, never kept by hand beside it.
//!
//! Every move is a method that checks it is legal from where the unit is: an illegal one
//! ([`IllegalMove`]) changes nothing and is returned, never a panic (the scheduler turns it
//! into a debug assertion, see `Scheduler::checked`). The counts are kept in the ledger, in one
//! place, and checked against its entries in debug builds after every move.
//!
//! ```text
//!   begin_hashing ─► Hashing ──sent_to_hashers──► Hashing (sent)
//!        │              └──────── hashed ─────────────┘──► (out)
//!   begin_reuse_check ─► CheckingReuse ── … same as Hashing … ──► (out)
//!   commit ─► Committed ──handed_to_worker──► AtWorker ──ended_at_worker──► (out)
//!                └── ended_without_worker / taken_back ──► (out)
//! ```

use std::fmt;

/// Where a unit in flight is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Its inputs (or a done unit's outputs) are being hashed before it is decided; it holds a
    /// place among the running.
    Hashing,
    /// An idempotent unit is checked for reuse from an earlier run; it holds no place among
    /// the running.
    CheckingReuse,
    /// An attempt whose `unit_started` is in a batch (or being committed): not at a worker.
    Committed,
    /// An attempt handed to a worker once its `unit_started` was durable.
    AtWorker,
}

/// What the ledger knows of a unit in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) place: Place,
    /// Hashing or checking reuse: the job went to the hashing threads (not done inline).
    pub(super) sent: bool,
    pub(super) idempotent: bool,
    /// Counted against `max_jobs`, not `max_parallel`.
    pub(super) slurm: bool,
}

/// What the ledger needs to know of a unit when it enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kind {
    pub(super) idempotent: bool,
    pub(super) slurm: bool,
}

/// A move the ledger refused: from where the unit is, it is not legal. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct IllegalMove {
    pub(super) unit_idx: usize,
    pub(super) mv: &'static str,
    /// Where the unit was (`None`: not in flight).
    pub(super) from: Option<Place>,
}

impl fmt::Display for IllegalMove {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "illegal scheduler move {} of unit #{} from {:?}",
            self.mv, self.unit_idx, self.from
        )
    }
}

/// The counts read from the ledger: each one a count of entries, kept in step with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    /// Units being hashed (not reuse checks), committed attempts and attempts at workers.
    pub(super) running: usize,
    /// The part of `running` that runs on Slurm.
    pub(super) running_slurm: usize,
    /// Hashing jobs and reuse checks sent to the hashing threads.
    pub(super) at_hashers: usize,
    /// Non-idempotent units being hashed (nothing is committed ahead then).
    pub(super) hashing_non_idempotent: usize,
    /// Reuse checks in flight.
    pub(super) checking_reuse: usize,
    /// Attempts at workers.
    pub(super) at_workers: usize,
    /// The non-idempotent part of `at_workers`.
    pub(super) non_idempotent_at_workers: usize,
}

impl Counts {
    /// `entry` added (`add`) or removed. Saturating: counts changed by legal moves only never
    /// go below zero, and an arithmetic slip must not panic the engine thread.
    fn apply(&mut self, entry: &Entry, add: bool) {
        let step = |count: &mut usize, applies: bool| {
            if applies {
                *count = if add {
                    count.saturating_add(1)
                } else {
                    count.saturating_sub(1)
                };
            }
        };
        let hashing = matches!(entry.place, Place::Hashing | Place::CheckingReuse);
        let running = entry.place != Place::CheckingReuse;
        step(&mut self.running, running);
        step(&mut self.running_slurm, running && entry.slurm);
        step(&mut self.at_hashers, hashing && entry.sent);
        step(
            &mut self.hashing_non_idempotent,
            hashing && !entry.idempotent,
        );
        step(
            &mut self.checking_reuse,
            entry.place == Place::CheckingReuse,
        );
        step(&mut self.at_workers, entry.place == Place::AtWorker);
        step(
            &mut self.non_idempotent_at_workers,
            entry.place == Place::AtWorker && !entry.idempotent,
        );
    }

    /// Local attempts (and hashing units) among the running.
    pub(super) fn running_local(&self) -> usize {
        self.running.saturating_sub(self.running_slurm)
    }
}

/// The in-flight ledger, by unit index.
#[derive(Debug)]
pub(super) struct Ledger {
    entries: Vec<Option<Entry>>,
    counts: Counts,
    /// The units in flight, so that the debug check recounts only them.
    #[cfg(debug_assertions)]
    in_flight: std::collections::BTreeSet<usize>,
}

impl Ledger {
    /// An empty ledger for a pipeline of `n_units`.
    pub(super) fn new(n_units: usize) -> Self {
        Self {
            entries: vec![None; n_units],
            counts: Counts::default(),
            #[cfg(debug_assertions)]
            in_flight: std::collections::BTreeSet::new(),
        }
    }

    /// The counts, read from the entries.
    pub(super) fn counts(&self) -> Counts {
        self.counts
    }

    /// Where `unit_idx` is, if in flight.
    pub(super) fn entry(&self, unit_idx: usize) -> Option<Entry> {
        self.entries.get(unit_idx).copied().flatten()
    }

    /// A unit taken from the ready queue is hashed before it is decided (inline, until
    /// [`sent_to_hashers`](Self::sent_to_hashers)).
    pub(super) fn begin_hashing(&mut self, unit_idx: usize, kind: Kind) -> Result<(), IllegalMove> {
        self.enter(unit_idx, Place::Hashing, kind, "begin_hashing")
    }

    /// An idempotent unit taken from the ready queue is checked for reuse.
    pub(super) fn begin_reuse_check(
        &mut self,
        unit_idx: usize,
        kind: Kind,
    ) -> Result<(), IllegalMove> {
        if !kind.idempotent {
            return Err(self.illegal(unit_idx, "begin_reuse_check (not idempotent)"));
        }
        self.enter(unit_idx, Place::CheckingReuse, kind, "begin_reuse_check")
    }

    /// A hashing job or reuse check went to the hashing threads.
    pub(super) fn sent_to_hashers(&mut self, unit_idx: usize) -> Result<(), IllegalMove> {
        self.change(
            unit_idx,
            "sent_to_hashers",
            |entry| matches!(entry.place, Place::Hashing | Place::CheckingReuse) && !entry.sent,
            |entry| entry.sent = true,
        )
    }

    /// What hashing (or a reuse check) found came back: the unit leaves the ledger (it is
    /// then committed, reused, requeued or left).
    pub(super) fn hashed(&mut self, unit_idx: usize) -> Result<Entry, IllegalMove> {
        self.leave(unit_idx, "hashed", |entry| {
            matches!(entry.place, Place::Hashing | Place::CheckingReuse)
        })
    }

    /// An attempt of a decided unit goes into the batch (its `unit_started` queued).
    pub(super) fn commit(&mut self, unit_idx: usize, kind: Kind) -> Result<(), IllegalMove> {
        self.enter(unit_idx, Place::Committed, kind, "commit")
    }

    /// The batch holding the attempt's `unit_started` is durable: it goes to a worker.
    pub(super) fn handed_to_worker(&mut self, unit_idx: usize) -> Result<(), IllegalMove> {
        self.change(
            unit_idx,
            "handed_to_worker",
            |entry| entry.place == Place::Committed,
            |entry| entry.place = Place::AtWorker,
        )
    }

    /// A worker reported the attempt's end.
    pub(super) fn ended_at_worker(&mut self, unit_idx: usize) -> Result<Entry, IllegalMove> {
        self.leave(unit_idx, "ended_at_worker", |entry| {
            entry.place == Place::AtWorker
        })
    }

    /// A committed attempt ended without a worker (the engine failed it itself).
    pub(super) fn ended_without_worker(&mut self, unit_idx: usize) -> Result<Entry, IllegalMove> {
        self.leave(unit_idx, "ended_without_worker", |entry| {
            entry.place == Place::Committed
        })
    }

    /// A committed attempt taken back before its `unit_started` was written.
    pub(super) fn taken_back(&mut self, unit_idx: usize) -> Result<Entry, IllegalMove> {
        self.leave(unit_idx, "taken_back", |entry| {
            entry.place == Place::Committed
        })
    }

    fn illegal(&self, unit_idx: usize, mv: &'static str) -> IllegalMove {
        IllegalMove {
            unit_idx,
            mv,
            from: self.entry(unit_idx).map(|entry| entry.place),
        }
    }

    fn enter(
        &mut self,
        unit_idx: usize,
        place: Place,
        kind: Kind,
        mv: &'static str,
    ) -> Result<(), IllegalMove> {
        let illegal = self.illegal(unit_idx, mv);
        let Some(slot @ None) = self.entries.get_mut(unit_idx) else {
            return Err(illegal);
        };
        let entry = Entry {
            place,
            sent: false,
            idempotent: kind.idempotent,
            slurm: kind.slurm,
        };
        *slot = Some(entry);
        self.counts.apply(&entry, true);
        #[cfg(debug_assertions)]
        self.in_flight.insert(unit_idx);
        self.debug_check();
        Ok(())
    }

    /// Change `unit_idx`'s entry in place with `apply`, if `legal` from where it is.
    fn change(
        &mut self,
        unit_idx: usize,
        mv: &'static str,
        legal: impl Fn(&Entry) -> bool,
        apply: impl FnOnce(&mut Entry),
    ) -> Result<(), IllegalMove> {
        let illegal = self.illegal(unit_idx, mv);
        match self.entries.get_mut(unit_idx) {
            Some(Some(entry)) if legal(entry) => {
                self.counts.apply(entry, false);
                apply(entry);
                self.counts.apply(entry, true);
                self.debug_check();
                Ok(())
            }
            _ => Err(illegal),
        }
    }

    fn leave(
        &mut self,
        unit_idx: usize,
        mv: &'static str,
        legal: impl Fn(&Entry) -> bool,
    ) -> Result<Entry, IllegalMove> {
        let illegal = self.illegal(unit_idx, mv);
        match self.entries.get_mut(unit_idx) {
            Some(slot) if slot.as_ref().is_some_and(&legal) => {
                let entry = slot.take().ok_or(illegal)?;
                self.counts.apply(&entry, false);
                #[cfg(debug_assertions)]
                self.in_flight.remove(&unit_idx);
                self.debug_check();
                Ok(entry)
            }
            _ => Err(illegal),
        }
    }

    /// Debug builds: the counts are those of the entries.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            let mut recount = Counts::default();
            for &unit_idx in &self.in_flight {
                if let Some(entry) = self.entry(unit_idx) {
                    recount.apply(&entry, true);
                }
            }
            debug_assert_eq!(recount, self.counts, "the ledger's counts left its entries");
        }
    }
}

#[cfg(test)]
mod tests;
