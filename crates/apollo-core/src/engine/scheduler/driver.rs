//! The scheduler's driver on the engine thread: performs the machine's commands with the
//! journal, the workers' and hashing threads' channels and the clock, and turns what happens
//! (an attempt ends, a unit is hashed, a cancellation, time passing) into the machine's calls.
//! Everything it decides is how to wait: the brief poll for hashing results, the nap that
//! lets outcomes gather, and the wait itself.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::{Command, Scheduler, Turned};
use crate::cancel::CancelLevel;
use crate::engine::admission::{self, Append};
use crate::engine::api::{EngineError, RunReport};
use crate::engine::hasher::{self, HashContext, HashJob};
use crate::engine::observer::Observer;
use crate::engine::workers::{Acks, FromWorker, Job};
use crate::journal::{Journal, JournalError};

/// The channels the driver works with.
pub(in crate::engine) struct Channels<'c> {
    pub(in crate::engine) job_tx: &'c Sender<Job>,
    /// Attempts' reports and ends.
    pub(in crate::engine) from_workers: &'c Receiver<FromWorker>,
    /// Woken when the run is cancelled.
    pub(in crate::engine) wake_rx: &'c Receiver<()>,
}

/// The hashing threads' job channels, and what the engine thread needs to do a job itself.
#[derive(Clone, Copy)]
pub(in crate::engine) struct HashChannels<'a> {
    /// Jobs for the hashing threads.
    pub(in crate::engine) jobs: &'a Sender<HashJob>,
    /// The same channel's receiving end: the engine thread takes a job back while it waits.
    pub(in crate::engine) take: &'a Receiver<HashJob>,
    /// Jobs the engine thread took on and found to need a file read: the hashing threads
    /// take these first.
    pub(in crate::engine) deferred: &'a Sender<HashJob>,
    pub(in crate::engine) context: HashContext<'a>,
}

/// What the driver holds around the machine.
struct Driver<'d, 'a> {
    channels: &'d Channels<'d>,
    hashing: Option<HashChannels<'a>>,
    acks: Acks,
    journal: &'d mut dyn Journal,
    /// The machine's commands being performed (kept to be used again).
    commands: Vec<Command>,
}

/// Drive `machine` until the run is over, then append its last record and return its report.
pub(in crate::engine) fn drive(
    machine: &mut Scheduler<'_>,
    observer: &mut dyn Observer,
    channels: &Channels<'_>,
    (hashing, acks): (Option<HashChannels<'_>>, Acks),
    journal: &mut dyn Journal,
) -> Result<RunReport, EngineError> {
    let mut driver = Driver {
        channels,
        hashing,
        acks,
        journal,
        commands: Vec::new(),
    };
    if let Err(error) = driver.run(machine, observer) {
        return Err(driver.abort(machine, error));
    }
    if machine.finish() {
        driver
            .perform(machine, observer)
            .map_err(EngineError::Journal)?;
    }
    machine.report()
}

impl Driver<'_, '_> {
    /// The loop: turn the machine, perform its commands, wait for what happens next.
    fn run(
        &mut self,
        machine: &mut Scheduler<'_>,
        observer: &mut dyn Observer,
    ) -> Result<(), JournalError> {
        loop {
            let turned = machine.turn(Instant::now(), &mut *self.journal, observer);
            self.perform(machine, observer)?;
            if turned == Turned::Again {
                continue;
            }
            if machine.finished() {
                return Ok(());
            }
            observer.flush();
            // Reuse checks come back within microseconds: poll briefly before sleeping (see
            // `hasher::POLL_BEFORE_SLEEP`), doing queued checks meanwhile. So is a
            // resume's output check when nothing runs.
            let counts = machine.counts();
            if (counts.checking_reuse > 0 || (counts.at_hashers > 0 && counts.at_workers == 0))
                && self.poll_for_hashed(machine, observer)
            {
                continue;
            }
            // Nothing is left unsynced while the engine waits.
            machine.sync_unsynced();
            self.perform(machine, observer)?;
            machine.check_late(Instant::now(), chrono::Utc::now());
            self.perform(machine, observer)?;
            // Wait for an attempt to end, a retry to come due, a held batch's deadline, or a
            // cancellation.
            let timeout = machine.wake_at().map_or(Duration::from_secs(3600), |due| {
                due.saturating_duration_since(Instant::now())
            });
            let timeout = self.nap(machine, timeout);
            crossbeam_channel::select! {
                recv(self.channels.from_workers) -> message => {
                    if let Ok(message) = message {
                        self.take_in(machine, message, observer);
                    }
                }
                recv(self.channels.wake_rx) -> _ => {}
                default(timeout) => {}
            }
        }
    }

    /// Take `message` in, and every other one that came meanwhile (one batch for all), then
    /// let the workers whose outcomes were taken in go on.
    fn take_in(
        &mut self,
        machine: &mut Scheduler<'_>,
        message: FromWorker,
        observer: &mut dyn Observer,
    ) {
        let now = Instant::now();
        machine.take_in(message, now, observer);
        while let Ok(message) = self.channels.from_workers.try_recv() {
            machine.take_in(message, now, observer);
        }
        // Taking an outcome in emits acknowledgements only (its records wait for the next
        // turn's batch), so performing them cannot fail.
        let performed = self.perform(machine, observer);
        debug_assert!(
            performed.is_ok(),
            "taking an outcome in asked for an append"
        );
        self.acks.send_due();
    }

    /// Perform every command the machine emitted, and those it emits as they are reported.
    fn perform(
        &mut self,
        machine: &mut Scheduler<'_>,
        observer: &mut dyn Observer,
    ) -> Result<(), JournalError> {
        loop {
            machine.take_commands(&mut self.commands);
            if self.commands.is_empty() {
                return Ok(());
            }
            let mut commands = std::mem::take(&mut self.commands);
            let mut result = Ok(());
            for command in commands.drain(..) {
                if result.is_err() {
                    continue;
                }
                result = self.perform_one(command, machine, observer);
            }
            self.commands = commands;
            result?;
        }
    }

    fn perform_one(
        &mut self,
        command: Command,
        machine: &mut Scheduler<'_>,
        observer: &mut dyn Observer,
    ) -> Result<(), JournalError> {
        match command {
            Command::Append { events, mode } => {
                let started = Instant::now();
                match mode {
                    Append::Unsynced => self.journal.append_unsynced(&events)?,
                    Append::Strict => self.journal.append_strict(&events)?,
                    Append::Durable => self.journal.append(&events)?,
                }
                machine.appended(events, started.elapsed(), observer);
            }
            Command::Dispatch(job) => {
                // Once an attempt may spawn, no output hashed ahead is used (see
                // `prefetch.rs`).
                if let Some(prefetch) = self.hashing.and_then(|hashing| hashing.context.prefetch) {
                    prefetch.close();
                }
                // The workers outlive this loop (the scope joins them), so a send cannot fail.
                let _ = self.channels.job_tx.send(job);
            }
            Command::Hash { job, here } => self.hash(job, here, machine, observer),
            Command::Ack(worker_idx) => self.acks.owe(worker_idx),
        }
        Ok(())
    }

    /// Perform [`Command::Hash`]: here when the machine allows it and it reads no file, else
    /// on the hashing threads (the hashing threads outlive this loop: a send cannot fail).
    fn hash(
        &mut self,
        job: HashJob,
        here: bool,
        machine: &mut Scheduler<'_>,
        observer: &mut dyn Observer,
    ) {
        let Some(hashing) = self.hashing else {
            debug_assert!(false, "a hash job without hashing threads");
            return;
        };
        if !here {
            let _ = hashing.jobs.send(job);
            return;
        }
        match hasher::hash_job(&hashing.context, &job, true) {
            Some(hashed) => machine.take_hashed(hashed, observer),
            None => {
                machine.sent_to_hashers(job.unit_idx);
                let _ = hashing.deferred.send(job);
            }
        }
    }

    /// Sleep, without waiting on the workers' channel, for as long as [`Pacer::nap`] allows
    /// (at most `timeout`), and return what is left of `timeout`: while the workers have
    /// committed attempts queued, their outcomes are then taken in a few at a time instead of
    /// waking this thread for each. Only when [`admission::may_nap`] says so.
    ///
    /// [`Pacer::nap`]: crate::engine::pacer::Pacer::nap
    fn nap(&self, machine: &Scheduler<'_>, timeout: Duration) -> Duration {
        let waiting = machine.waiting(!self.channels.from_workers.is_empty());
        if !admission::may_nap(&machine.counts(), &waiting) {
            return timeout;
        }
        let workers = machine.max_parallel();
        let Some(nap) = machine.pacer().nap(workers, self.channels.job_tx.len()) else {
            return timeout;
        };
        #[cfg(test)]
        super::NAPS.set(super::NAPS.get() + 1);
        let started = Instant::now();
        std::thread::sleep(nap.min(timeout));
        timeout.saturating_sub(started.elapsed())
    }

    /// Poll the workers' channel for up to `hasher::POLL_BEFORE_SLEEP`, meanwhile doing
    /// jobs still queued for the hashing threads that need no file read (see
    /// [`hasher::hash_job`]): whether something was taken in (then the loop goes round again
    /// without sleeping). On a small machine the hashing threads and this one share the
    /// cores: checking a unit here costs less than spinning while a hashing thread does.
    fn poll_for_hashed(
        &mut self,
        machine: &mut Scheduler<'_>,
        observer: &mut dyn Observer,
    ) -> bool {
        let polling_since = Instant::now();
        while polling_since.elapsed() < hasher::POLL_BEFORE_SLEEP {
            if let Ok(message) = self.channels.from_workers.try_recv() {
                self.take_in(machine, message, observer);
                return true;
            }
            // Not while attempts run: a `stat` on a hung mount would hold their commits.
            if machine.counts().at_workers == 0
                && let Some(hashing) = self.hashing
                && let Ok(job) = hashing.take.try_recv()
            {
                match hasher::hash_job(&hashing.context, &job, true) {
                    Some(hashed) => {
                        machine.take_hashed(hashed, observer);
                        return true;
                    }
                    None => {
                        let _ = hashing.deferred.send(job);
                    }
                }
                continue;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// The journal failed: stop every running attempt, wait for them, report the error.
    fn abort(&mut self, machine: &mut Scheduler<'_>, error: JournalError) -> EngineError {
        machine.abort();
        // Without acknowledgements the workers stop after their current attempt.
        self.acks.abandon();
        machine.cancel().cancel(CancelLevel::Graceful);
        // Counted here, not read from the ledger: each end is one fewer whatever the ledger
        // says of it, so this wait always ends.
        let mut at_workers = machine.counts().at_workers;
        while at_workers > 0 {
            match self.channels.from_workers.recv() {
                Ok(FromWorker::Done(done)) => {
                    at_workers -= 1;
                    machine.ended_after_abort(done.unit_idx);
                }
                Ok(FromWorker::Report { .. } | FromWorker::Hashed(_)) => {}
                Err(_) => break,
            }
        }
        EngineError::Journal(error)
    }
}
