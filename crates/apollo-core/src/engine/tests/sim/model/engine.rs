//! The simulated engine thread (its turn, taking messages in, the commit) and workers, with
//! the checks of the rules where they could be broken.

use std::time::Duration;

use super::outcomes::halted;
use super::{Admission, BatchState, Head, Limits, Message, Place, Record, Sim, Turn, Unit, ledger};
use crate::engine::admission;

impl Sim {
    fn kind_for_decision(&self, unit: usize) -> crate::engine::ledger::Kind {
        let mut kind = self.units[unit].kind;
        kind.idempotent |= self.decide_all_idempotent;
        kind
    }

    /// One turn of the engine loop: start ready units (`start_ready`), then commit when due.
    pub(super) fn engine_turn(&mut self) -> Result<(), String> {
        let limits = Limits {
            max_parallel: self.max_parallel,
            commit_limit: self.pacer.commit_limit(self.max_parallel),
            max_jobs: self.max_jobs,
        };
        let mut changed = self.release_due_retries();
        let mut passed_over = Vec::new();
        loop {
            let turn = Turn {
                stopped: self.stopped,
                reuses_full: self.only_reuses() && self.pacer.reuses_full(self.batch.len()),
                passed_over: passed_over.len(),
            };
            let head = self.queue.peek().map(|unit| Head {
                kind: self.kind_for_decision(unit),
                fresh_reuse_check: self.fresh_reuse_check(unit) && !self.stashed[unit],
            });
            let Some(unit) = self.queue.peek() else {
                break;
            };
            match admission::admit_next(&self.ledger.counts(), &limits, &turn, head) {
                Admission::Stop => break,
                Admission::PassOver => {
                    self.queue.pop();
                    passed_over.push(unit);
                    continue;
                }
                Admission::Take => {}
            }
            self.queue.pop();
            changed = true;
            let kind = self.kind_for_decision(unit);
            if self.stashed[unit] {
                self.stashed[unit] = false;
                self.admit(unit)?;
            } else if self.fresh_reuse_check(unit) {
                ledger(self.ledger.begin_reuse_check(unit, kind))?;
                self.hash(unit)?;
            } else if self.units[unit].hashes_first {
                ledger(self.ledger.begin_hashing(unit, kind))?;
                self.hash(unit)?;
            } else {
                self.admit(unit)?;
            }
        }
        for unit in passed_over {
            self.queue.requeue(unit);
        }
        if self.batch.is_empty() {
            self.pacer.release();
        } else {
            let now = self.now();
            self.pacer.hold(now);
            let batch = BatchState {
                records: self.batch.len(),
                only_reuses: self.only_reuses(),
                urgent: self.urgent,
            };
            let workers = self.max_parallel;
            if admission::commit_due(
                &batch,
                &self.ledger.counts(),
                self.stopped,
                &self.pacer,
                workers,
                now,
            ) {
                let unsynced = self.begin_commit()?;
                self.pacer.release();
                changed = true;
                // A full batch of reuses went out: the loop decides on at once.
                if unsynced {
                    return Ok(());
                }
            }
        }
        // Nothing is left unsynced while the engine waits (`sync_unsynced`).
        if !self.unsynced.is_empty() && self.committing.is_none() {
            self.committing = Some((std::mem::take(&mut self.unsynced), Vec::new()));
            self.unsynced_since = None;
            changed = true;
        }
        if !changed && self.nothing_will_happen() {
            return Err(format!(
                "the run hangs: nothing runs, nothing is due, and the turn starts nothing \
                 ({} ready, counts {:?})",
                self.queue.len(),
                self.ledger.counts()
            ));
        }
        Ok(())
    }

    /// No message can come and no deadline is held: only a turn could move the run on.
    fn nothing_will_happen(&self) -> bool {
        self.channel.is_empty()
            && self.committing.is_none()
            && self.workers.iter().all(Option::is_none)
            && self.jobs.is_empty()
            && self.at_hashers.is_empty()
            && self.batch.is_empty()
            && self.unsynced.is_empty()
            && self.retries.is_empty()
            && !self.finished()
    }

    fn fresh_reuse_check(&self, unit: usize) -> bool {
        self.units[unit].reuse.is_some() && self.attempts_here[unit] == 0 && !self.prior_done(unit)
    }

    /// Hash (or check) a unit: inline when the engine would only wait for it, else on the
    /// hashing threads (as `Scheduler::hash_first`).
    fn hash(&mut self, unit: usize) -> Result<(), String> {
        let counts = self.ledger.counts();
        if counts.at_workers == 0 && counts.at_hashers == 0 && self.queue.is_empty() {
            return self.take_hashed(unit);
        }
        ledger(self.ledger.sent_to_hashers(unit))?;
        self.at_hashers.push(unit);
        Ok(())
    }

    pub(super) fn take_hashed(&mut self, unit: usize) -> Result<(), String> {
        let entry = self
            .ledger
            .hashed(unit)
            .map_err(|illegal| illegal.to_string())?;
        if self.stopped {
            return Ok(());
        }
        if entry.place == Place::CheckingReuse {
            if self.units[unit].reuse == Some(true) {
                self.batch.push(Record::Reused { unit });
                self.state[unit] = Unit::Done;
                self.queue.complete(&self.dag, unit);
            } else {
                // It must run: it waits for a place among the running, what was found kept.
                self.stashed[unit] = true;
                self.queue.requeue(unit);
            }
            return Ok(());
        }
        self.admit(unit)
    }

    /// Queue an attempt's `unit_started` (as `Scheduler::admit`), unless the resume policy
    /// says a unit done before a crash is not run again.
    fn admit(&mut self, unit: usize) -> Result<(), String> {
        if self.attempts_here[unit] == 0 && self.decided_done(unit) {
            self.state[unit] = Unit::Done;
            self.queue.complete(&self.dag, unit);
            return Ok(());
        }
        self.attempts_here[unit] += 1;
        self.last_attempt[unit] += 1;
        let attempt = self.last_attempt[unit];
        ledger(self.ledger.commit(unit, self.kind_for_decision(unit)))?;
        self.batch.push(Record::Started { unit, attempt });
        self.batch_jobs.push((unit, attempt));
        Ok(())
    }

    fn only_reuses(&self) -> bool {
        self.batch
            .iter()
            .all(|record| matches!(record, Record::Reused { .. }))
    }

    /// Append the batch as `admission::append_mode` says: unsynced (returns `true`), or
    /// durable once the commit under way completes (with what was appended unsynced before
    /// it). With `break_write_ahead`, hand its jobs out before it is durable.
    fn begin_commit(&mut self) -> Result<bool, String> {
        self.urgent = false;
        let now = self.now();
        let strict_attempt = self
            .batch_jobs
            .iter()
            .any(|&(unit, _)| !self.units[unit].kind.idempotent || self.units[unit].kind.slurm);
        let mode = admission::append_mode(&admission::Committing {
            full_of_reuses: self.only_reuses() && self.pacer.reuses_full(self.batch.len()),
            stopped: self.stopped,
            unsynced_overdue: (self.unsynced_since)
                .is_some_and(|since| self.pacer.reuses_overdue(since, now)),
            strict_attempt,
        });
        let records = std::mem::take(&mut self.batch);
        let mut jobs = std::mem::take(&mut self.batch_jobs);
        for record in &records {
            if let Record::Started { unit, .. } = record {
                for &dep in self.dag.deps(*unit) {
                    let satisfied = (self.journal.iter().chain(&self.unsynced).chain(&records)).any(|earlier| {
                        matches!(earlier, Record::Finished { unit, ok: true, .. } | Record::Reused { unit } if *unit == dep)
                    });
                    if !satisfied {
                        return Err(format!(
                            "unit {unit} appended a start before its dependency {dep} succeeded"
                        ));
                    }
                }
            }
        }
        if self.break_write_ahead {
            self.hand_out(&jobs)?;
            jobs.clear();
        }
        if mode == admission::Append::Unsynced {
            if !jobs.is_empty() {
                return Err("a batch appended unsynced starts attempts".into());
            }
            self.unsynced.extend(records);
            self.unsynced_since.get_or_insert(now);
            return Ok(true);
        }
        let mut durable = std::mem::take(&mut self.unsynced);
        durable.extend(records);
        self.unsynced_since = None;
        self.committing = Some((durable, jobs));
        Ok(false)
    }

    /// The commit under way is durable: its attempts go to the workers.
    pub(super) fn commit_durable(&mut self) -> Result<(), String> {
        let Some((records, jobs)) = self.committing.take() else {
            return Ok(());
        };
        self.journal.extend(records);
        self.resume_from_journal()?;
        self.pacer
            .commit_took(Duration::from_micros(self.rng.below(4000) as u64));
        self.hand_out(&jobs)
    }

    fn hand_out(&mut self, jobs: &[super::Attempt]) -> Result<(), String> {
        for &(unit, attempt) in jobs {
            ledger(self.ledger.handed_to_worker(unit))?;
            // A non-idempotent attempt's start means its process is about to exist: it must
            // not wait in the queue for a worker to finish another attempt.
            let busy = self
                .workers
                .iter()
                .filter(|worker| worker.is_some())
                .count();
            if !self.units[unit].kind.idempotent
                && !self.stopped
                && self.jobs.len() + busy >= self.workers.len()
            {
                return Err(format!(
                    "non-idempotent unit {unit} attempt {attempt} waits behind {} queued and {busy} running attempts for {} workers",
                    self.jobs.len(),
                    self.workers.len()
                ));
            }
            self.jobs.push_back((unit, attempt));
        }
        Ok(())
    }

    /// An idle worker takes the next job.
    pub(super) fn worker_takes(&mut self, worker: usize) -> Result<(), String> {
        let Some((unit, attempt)) = self.jobs.pop_front() else {
            return Ok(());
        };
        if self.stopped {
            // Halted: recorded as interrupted without running.
            self.channel.push_back(Message::Done {
                unit,
                attempt,
                ended: halted(),
            });
            return Ok(());
        }
        // Nothing done runs again, in this apollo or after a crash.
        let done = |record: &Record| matches!(record, Record::Finished { unit: u, ok: true, .. } | Record::Reused { unit: u } if *u == unit);
        if self.journal.iter().any(done) {
            return Err(format!(
                "unit {unit} attempt {attempt} runs though the journal holds its success"
            ));
        }
        let durable = |record: &Record| *record == Record::Started { unit, attempt };
        if !self.journal.iter().any(durable) {
            return Err(format!(
                "unit {unit} attempt {attempt} ran before its unit_started was durable"
            ));
        }
        if self
            .workers
            .iter()
            .flatten()
            .any(|(running, _)| *running == unit)
        {
            return Err(format!("unit {unit} runs twice at once"));
        }
        if !self.units[unit].kind.idempotent {
            for earlier in 1..attempt {
                let ended = |record: &Record| matches!(record, Record::Finished { unit: u, attempt: a, .. } if *u == unit && *a == earlier);
                if !self.journal.iter().any(ended) {
                    return Err(format!(
                        "non-idempotent unit {unit} attempt {attempt} runs before attempt {earlier}'s end is durable"
                    ));
                }
            }
        }
        self.workers[worker] = Some((unit, attempt));
        let slurm = |(running, _): &super::Attempt| self.units[*running].kind.slurm;
        let running_slurm = self
            .workers
            .iter()
            .flatten()
            .filter(|job| slurm(job))
            .count();
        let running_local = self.workers.iter().flatten().count() - running_slurm;
        if running_local > self.max_parallel || running_slurm > self.max_jobs {
            return Err(format!(
                "{running_local} local attempts (max_parallel {}) and {running_slurm} Slurm jobs (max_jobs {}) run at once",
                self.max_parallel, self.max_jobs
            ));
        }
        Ok(())
    }

    /// The run ended: nothing in flight, and (unless stopped) every unit whose dependencies
    /// succeeded is done or failed.
    pub(super) fn check_end(&self) -> Result<(), String> {
        if self.ledger.counts() != crate::engine::ledger::Counts::default()
            || !self.jobs.is_empty()
            || !self.channel.is_empty()
            || self.workers.iter().any(Option::is_some)
        {
            return Err(format!(
                "the run ended with work in flight: {:?}",
                self.ledger.counts()
            ));
        }
        if self.stopped {
            return Ok(());
        }
        for unit in 0..self.units.len() {
            let deps_done = self
                .dag
                .deps(unit)
                .iter()
                .all(|&dep| self.state[dep] == Unit::Done);
            if deps_done && self.state[unit] == Unit::Waiting {
                return Err(format!(
                    "unit {unit} was left waiting though its dependencies succeeded"
                ));
            }
        }
        Ok(())
    }
}
