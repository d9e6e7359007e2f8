//! Units hashed before they are decided — those that declare input files, are done in the
//! prior state and declare outputs (checked before they are reused), or may be reused from an
//! earlier run: handing them to the hashing threads, or hashing them here when that reads no
//! file, and taking what was found back in.

use std::sync::atomic::Ordering;

use super::{HashChannels, Scheduler, checked};
use crate::engine::hasher::{self, HashJob, Hashed};
use crate::engine::observer::Observer;
use crate::engine::reuse::ReuseCheck;
use crate::engine::units::State;

use super::start::Found;

impl<'a> Scheduler<'a> {
    /// Hash `job`'s unit before it is decided: it holds its place among the running (or, a
    /// reuse check only, among the reuse checks in flight) until what was found comes back
    /// ([`take_hashed`](Self::take_hashed)).
    pub(super) fn hash_first(
        &mut self,
        mut job: HashJob,
        hashing: HashChannels<'a>,
        observer: &mut dyn Observer,
    ) {
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
        // engine would only wait for this job, so it does it here when that needs no file
        // read, without the round trip to a hashing thread. (Not while attempts run: a `stat`
        // on a hung mount would hold their commits.)
        //
        // So too when its outputs were hashed ahead (a reuse check that then only compares),
        // however many units are ready: a no-op run of a wide graph is otherwise a round trip
        // to a hashing thread per unit.
        let hashed_ahead = job.check_reuse
            && hashing
                .context
                .prefetch
                .is_some_and(|prefetch| prefetch.has(unit_idx));
        let counts = self.ledger.counts();
        if counts.at_workers == 0
            && ((counts.at_hashers == 0 && self.queue.is_empty()) || hashed_ahead)
        {
            match hasher::hash_job(&hashing.context, &job, true) {
                Some(hashed) => self.take_hashed(hashed, observer),
                None => {
                    checked(self.ledger.sent_to_hashers(unit_idx));
                    // The hashing threads outlive this loop (the scope joins them).
                    let _ = hashing.deferred.send(job);
                }
            }
            return;
        }
        checked(self.ledger.sent_to_hashers(unit_idx));
        let _ = hashing.jobs.send(job);
    }

    /// Take a unit's hashed inputs (and output check) in: admit it, unless the run stopped
    /// starting units meanwhile or the hashing was cancelled (then it stays unstarted, as if
    /// never taken from the queue).
    pub(super) fn take_hashed(&mut self, hashed: Hashed, observer: &mut dyn Observer) {
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
