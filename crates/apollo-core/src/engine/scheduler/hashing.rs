//! Units hashed before they are decided — those that declare input files, are done in the
//! prior state and declare outputs (checked before they are reused), or may be reused from an
//! earlier run: handing them to the hashing threads, or hashing them here when that reads no
//! file, and taking what was found back in.

use std::sync::atomic::Ordering;

use super::{Command, Scheduler, checked};
use crate::engine::hasher::{HashJob, Hashed};
use crate::engine::observer::Observer;
use crate::engine::reuse::ReuseCheck;
use crate::engine::units::State;

use super::start::Found;

impl Scheduler<'_> {
    /// Hash `job`'s unit before it is decided ([`Command::Hash`]): it holds its place among
    /// the running (or, a reuse check only, among the reuse checks in flight) until what was
    /// found comes back ([`take_hashed`](Self::take_hashed)).
    pub(super) fn hash_first(&mut self, mut job: HashJob) {
        let unit_idx = job.unit_idx;
        job.upstream = self
            .dag
            .deps(unit_idx)
            .iter()
            .map(|&dep_idx| {
                (
                    self.pipeline.units[dep_idx].name.clone(),
                    self.units[dep_idx].output_hash.clone().unwrap_or_default(),
                )
            })
            .collect();
        let kind = self.kind(unit_idx);
        checked(if job.reuse_only {
            self.ledger.begin_reuse_check(unit_idx, kind)
        } else {
            self.ledger.begin_hashing(unit_idx, kind)
        });
        self.units[unit_idx].state = State::Hashing;
        // Nothing else being hashed, no other unit ready and no attempt running (a chain): the
        // engine would only wait for this job, so the driver may do it on its own thread when
        // that needs no file read, without the round trip to a hashing thread. (Not while
        // attempts run: a `stat` on a hung mount would hold their commits.)
        //
        // So too when its outputs were hashed ahead (a reuse check that then only compares),
        // however many units are ready: a no-op run of a wide graph is otherwise a round trip
        // to a hashing thread per unit.
        let hashed_ahead =
            job.check_reuse && (self.prefetch).is_some_and(|prefetch| prefetch.has(unit_idx));
        let counts = self.ledger.counts();
        let here = counts.at_workers == 0
            && ((counts.at_hashers == 0 && self.queue.is_empty()) || hashed_ahead);
        if here {
            self.hash_here_pending = true;
        } else {
            checked(self.ledger.sent_to_hashers(unit_idx));
        }
        self.out.push(Command::Hash { job, here });
    }

    /// A job the machine let the driver do on its own thread ([`Command::Hash`] with `here`)
    /// went to the hashing threads instead (it needs a file read): its result comes later.
    pub(in crate::engine) fn sent_to_hashers(&mut self, unit_idx: usize) {
        debug_assert!(self.hash_here_pending);
        self.hash_here_pending = false;
        checked(self.ledger.sent_to_hashers(unit_idx));
    }

    /// Take a unit's hashed inputs (and output check) in: admit it, unless the run stopped
    /// starting units meanwhile or the hashing was cancelled (then it stays unstarted, as if
    /// never taken from the queue).
    pub(in crate::engine) fn take_hashed(&mut self, hashed: Hashed, observer: &mut dyn Observer) {
        let Hashed {
            unit_idx,
            inputs,
            input_hash,
            files,
            took,
            outputs,
            reuse,
            reuse_only,
        } = hashed;
        // The `here` job the driver owed, if this is it (the only job not at the hashing
        // threads).
        if self.hash_here_pending && self.ledger.entry(unit_idx).is_some_and(|entry| !entry.sent) {
            self.hash_here_pending = false;
        }
        checked(self.ledger.hashed(unit_idx));
        let stopped = self.stop_starting
            || self.halt.load(Ordering::SeqCst)
            || (reuse.is_some() && self.cancel.is_cancelled())
            || matches!(&inputs, Err(error) if error.cancelled())
            || matches!(&outputs, Some(Err(error)) if error.cancelled());
        if stopped {
            let slot = &mut self.units[unit_idx];
            slot.state = if slot.last_failure.is_some() {
                State::RetryWait
            } else {
                State::Waiting
            };
            // A retry cut off by fail-fast: the unit's last real attempt failed.
            if self.failed_any
                && !self.options.keep_going
                && !self.cancel.is_cancelled()
                && let Some(result) = slot.last_failure.take()
            {
                slot.state = State::Failed;
                slot.result = Some(*result);
                self.skip_downstream(unit_idx);
            }
            return;
        }
        // A unit that runs after all waits for a place among the running, with what was
        // found kept (nothing is hashed twice).
        if reuse_only
            && let (Ok(components), Some(check @ ReuseCheck::NotReused(_))) = (&inputs, &reuse)
        {
            let slot = &mut self.units[unit_idx];
            slot.stashed = Some(Box::new((components.clone(), files, check.clone(), took)));
            slot.state = State::Waiting;
            self.queue.requeue(unit_idx);
            return;
        }
        let found = Found {
            components: inputs,
            input_hash,
            files,
            outputs: outputs.and_then(Result::ok),
            reuse,
            spent: took,
        };
        self.admit(unit_idx, found, observer);
    }
}
