//! The simulation of the real scheduler: the machine of `scheduler/` (the one the engine
//! runs) driven by a seeded, single-threaded driver instead of `scheduler/driver.rs` — no
//! threads, no clock, no I/O. The driver performs the machine's commands in random orders
//! the real one may produce: an append reported durable late (or lost in a crash), hashing
//! results and attempts' ends arriving in any order, workers taking jobs whenever they are
//! free, the clock moving, a cancellation, a crash.
//!
//! What it checks, and where:
//!
//! * at every hand-out ([`Command::Dispatch`]) and every process start: the attempt's
//!   `unit_started` is durable (the write-ahead rule); a non-idempotent attempt has a free
//!   worker (it never waits behind others: its start means its process is about to exist)
//!   and no earlier attempt of its unit lacks a durable end; no unit runs twice at once;
//!   `max_parallel` and `max_jobs` hold; nothing whose success is durable runs again, across
//!   crashes (`workers.rs`);
//! * at every append: a `unit_started` follows the success (or reuse, or skip) of each of its
//!   dependencies in the journal; after every durable append and at each crash, a resume from
//!   the durable journal (the real `PriorState` and `check_in_flight`) stops for a human
//!   exactly when a non-idempotent unit is left half done, naming it (`checks.rs`);
//! * at the end: nothing in flight, and — unless the run was cancelled, stopped for a human
//!   or failed fast — every unit whose dependencies are done is done or failed.

mod checks;
mod workers;

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::draw::{Rng, SimUnit, draw_units, sim_pipeline};
use crate::cancel::{CancelLevel, CancelToken};
use crate::dag::Dag;
use crate::engine::admission::Append;
use crate::engine::api::{EngineOptions, RunReport};
use crate::engine::hasher::{HashJob, Hashed};
use crate::engine::observer::NoObserver;
use crate::engine::pacer::{Pacer, TUNING, Tuning};
use crate::engine::policy::OutputCheck;
use crate::engine::reuse::{ReuseCandidate, ReuseCheck};
use crate::engine::scheduler::{Command, Inputs, Scheduler, Turned};
use crate::engine::workers::{FromWorker, Job};
use crate::event::Event;
use crate::journal::JournalError;
use crate::model::Pipeline;
use crate::resume::PriorState;

/// At most this many steps per run: more is a run that never ends.
const MAX_STEPS: usize = 100_000;

/// A reuse source never asked (see `MachineSim::hashed`).
struct NoSource;

impl crate::engine::ReuseSource for NoSource {
    fn find(&self, _: &str, _: &str) -> Option<ReuseCandidate> {
        None
    }

    fn latest(&self, _: &str) -> Option<ReuseCandidate> {
        None
    }
}

/// Manifests are never needed here (input lists are empty): storing one succeeds.
struct NoManifests;

impl crate::engine::batch::ManifestStore for NoManifests {
    fn store_input_manifest(&mut self, _: &str, _: &[u8]) -> Result<(), JournalError> {
        Ok(())
    }
}

/// A worker: idle, running an attempt, or waiting for the machine's acknowledgement.
enum Worker {
    Idle,
    Running(Job),
    AwaitsAck,
}

/// What lives as long as one apollo process (a crash loses it all).
struct Process {
    cancel: CancelToken,
    halt: AtomicBool,
    prior: PriorState,
    options: EngineOptions,
}

/// One simulated run of the real scheduler.
pub(super) struct MachineSim {
    rng: Rng,
    units: Vec<SimUnit>,
    pipeline: Pipeline,
    dag: Dag,
    tuning: Tuning,
    keep_going: bool,
    max_retry_delay: Duration,
    /// Every record durable, in order (across crashes).
    durable: Vec<Event>,
    /// Appended unsynced: durable with the next durable append, lost in a crash before it.
    unsynced: Vec<Event>,
    /// The append asked for and not yet reported.
    appending: Option<(Vec<Event>, Append)>,
    /// Handed out, waiting for a worker, first in first out.
    jobs: VecDeque<Job>,
    workers: Vec<Worker>,
    /// Hash jobs at the hashing threads.
    at_hashers: Vec<HashJob>,
    /// Messages for the machine, in the order sent.
    channel: VecDeque<FromWorker>,
    base: Instant,
    clock: Duration,
    crashes: u32,
    max_crashes: u32,
    /// The run was cancelled; a resume stopped for a human; an attempt needed one.
    cancelled: bool,
    asked_human: bool,
    /// Test of the checks: the driver hands attempts out as soon as they are asked for, before
    /// their append is durable.
    pub(super) break_write_ahead: bool,
    /// Test of the checks: after a crash the new apollo forgets the journal.
    pub(super) break_resume: bool,
}

impl MachineSim {
    pub(super) fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let (units, deps, max_parallel, max_jobs) = draw_units(&mut rng);
        let n_workers = (max_parallel + max_jobs).min(units.len());
        let pipeline = sim_pipeline(&units, &deps, (max_parallel, max_jobs));
        let keep_going = rng.chance(30);
        let max_retry_delay = Duration::from_micros(1 + rng.below(6000) as u64);
        let max_crashes = u32::try_from(rng.below(3)).unwrap_or(0);
        let tuning = Tuning {
            reuses_per_commit: 1 + rng.below(3),
            max_reuse_delay: Duration::from_micros(rng.below(5000) as u64),
            ..TUNING
        };
        Self {
            rng,
            dag: Dag::from_deps(deps),
            units,
            pipeline,
            tuning,
            keep_going,
            max_retry_delay,
            durable: Vec::new(),
            unsynced: Vec::new(),
            appending: None,
            jobs: VecDeque::new(),
            workers: (0..n_workers.max(1)).map(|_| Worker::Idle).collect(),
            at_hashers: Vec::new(),
            channel: VecDeque::new(),
            base: Instant::now(),
            clock: Duration::ZERO,
            crashes: 0,
            max_crashes,
            cancelled: false,
            asked_human: false,
            break_write_ahead: false,
            break_resume: false,
        }
    }

    fn now(&self) -> Instant {
        self.base + self.clock
    }

    fn process(&self, prior: PriorState) -> Process {
        let mut options = EngineOptions::new("sim", &self.pipeline).keep_going(self.keep_going);
        options.max_retry_delay = self.max_retry_delay;
        // Reuse checks are answered by the simulated hashing threads (`hashed`): the source is
        // never asked.
        options.reuse = Some(crate::engine::Reuse::new(std::sync::Arc::new(NoSource)));
        Process {
            cancel: CancelToken::new(),
            halt: AtomicBool::new(false),
            prior,
            options,
        }
    }

    /// The durable journal, for comparing two runs of a seed.
    pub(super) fn journal_trace(&self) -> Vec<String> {
        self.durable
            .iter()
            .map(|event| format!("{event:?}"))
            .collect()
    }

    /// Run to the end (through crashes): the steps taken, or the first violation.
    pub(super) fn run(&mut self) -> Result<usize, String> {
        let mut steps = 0;
        let mut prior = PriorState::empty();
        loop {
            let process = self.process(prior);
            match self.run_process(&process, &mut steps)? {
                // A resume that stops for a human runs nothing.
                Some(_) if self.asked_human => return Ok(steps),
                Some(_) if self.break_resume => prior = PriorState::empty(),
                Some(next) => prior = next,
                None => return Ok(steps),
            }
        }
    }

    /// One apollo process, from `process.prior`: `Some(prior)` when it crashed (a new one
    /// resumes from that), `None` when the run ended.
    fn run_process(
        &mut self,
        process: &Process,
        steps: &mut usize,
    ) -> Result<Option<PriorState>, String> {
        // The machine borrows what it reads for its whole life: a copy, so that the driver
        // (`self`) stays free to change.
        let pipeline = self.pipeline.clone();
        let dag = self.dag.clone();
        let inputs = Inputs {
            pipeline: &pipeline,
            dag: &dag,
            prior: &process.prior,
            options: &process.options,
            in_scope: vec![true; pipeline.units.len()],
            cancel: &process.cancel,
            halt: &process.halt,
            hashing: (self.units.iter()).any(|unit| unit.hashes_first || unit.reuse.is_some()),
            prefetch: None,
        };
        let mut machine =
            Scheduler::with_pacer(inputs, Pacer::with_tuning(self.tuning), self.now());
        while *steps < MAX_STEPS {
            *steps += 1;
            if self.appending.is_none() && machine.finished() {
                return self.end(&mut machine, process).map(|()| None);
            }
            if let Some(prior) = self.step(&mut machine, process)? {
                return Ok(Some(prior));
            }
        }
        Err(format!("no end after {MAX_STEPS} steps"))
    }

    /// One event, chosen at random among those that may happen now; `Some(prior)` after a
    /// crash.
    fn step(
        &mut self,
        machine: &mut Scheduler<'_>,
        process: &Process,
    ) -> Result<Option<PriorState>, String> {
        let idle = self
            .workers
            .iter()
            .position(|worker| matches!(worker, Worker::Idle));
        let busy: Vec<usize> = (0..self.workers.len())
            .filter(|&worker| matches!(self.workers[worker], Worker::Running(_)))
            .collect();
        // Weighted: (event, weight).
        let mut events: Vec<(u8, usize)> = vec![(b't', 2)];
        if self.appending.is_some() {
            events.push((b'c', 3));
        } else {
            events.push((b'T', 4));
            if !self.channel.is_empty() {
                events.push((b'i', 4));
            }
        }
        if idle.is_some() && !self.jobs.is_empty() {
            events.push((b'p', 4));
        }
        if !busy.is_empty() {
            events.push((b'e', 4));
        }
        if !self.at_hashers.is_empty() {
            events.push((b'h', 3));
        }
        if !process.cancel.is_cancelled() {
            events.push((b'x', 1));
        }
        if self.crashes < self.max_crashes {
            events.push((b'X', 1));
        }
        let total: usize = events.iter().map(|(_, weight)| weight).sum();
        let mut pick = self.rng.below(total);
        let event = events
            .iter()
            .find(|(_, weight)| {
                let hit = pick < *weight;
                pick = pick.saturating_sub(*weight);
                hit
            })
            .map_or(b't', |(event, _)| *event);
        match event {
            b'c' => self.append_returns(machine)?,
            b'T' => self.turn(machine)?,
            b'i' => self.take_in(machine)?,
            b'p' => self.worker_takes(idle.unwrap_or(0), process)?,
            b'e' => {
                let worker = busy[self.rng.below(busy.len())];
                self.worker_ends(worker, process);
            }
            b'h' => {
                let job = self
                    .at_hashers
                    .remove(self.rng.below(self.at_hashers.len()));
                let hashed = self.hashed(&job);
                self.channel.push_back(FromWorker::Hashed(hashed));
            }
            // A cancellation: rare, so most runs go to their end.
            b'x' if self.rng.chance(3) => {
                self.cancelled = true;
                process.cancel.cancel(CancelLevel::Graceful);
            }
            // A crash: rare, so most runs get far before it.
            b'X' if self.rng.chance(20) => return self.crash().map(Some),
            _ => self.clock += Duration::from_micros(self.rng.below(3000) as u64),
        }
        Ok(None)
    }

    /// A turn of the machine, and its commands taken.
    fn turn(&mut self, machine: &mut Scheduler<'_>) -> Result<(), String> {
        let mut turned = Turned::Again;
        while turned == Turned::Again {
            turned = machine.turn(self.now(), &mut NoManifests, &mut NoObserver);
            self.take_commands(machine)?;
            // A full batch of reuses goes out unreported first: the real driver turns again
            // only once its append returned.
            if self.appending.is_some() {
                break;
            }
        }
        if self.appending.is_none() {
            machine.sync_unsynced();
            self.take_commands(machine)?;
        }
        Ok(())
    }

    /// Take every message waiting in (as the driver does after its wait).
    fn take_in(&mut self, machine: &mut Scheduler<'_>) -> Result<(), String> {
        while let Some(message) = self.channel.pop_front() {
            machine.take_in(message, self.now(), &mut NoObserver);
        }
        self.take_commands(machine)
    }

    /// Perform what the machine asked for, as the driver may.
    fn take_commands(&mut self, machine: &mut Scheduler<'_>) -> Result<(), String> {
        let mut commands = Vec::new();
        loop {
            machine.take_commands(&mut commands);
            if commands.is_empty() {
                return Ok(());
            }
            for command in commands.drain(..) {
                match command {
                    Command::Append { events, mode } => {
                        if self.appending.is_some() {
                            return Err("two appends outstanding".into());
                        }
                        if self.break_write_ahead {
                            self.appending = Some((events.clone(), mode));
                            self.append_returns(machine)?;
                            continue;
                        }
                        self.appending = Some((events, mode));
                    }
                    Command::Dispatch(job) => self.dispatched(job)?,
                    Command::Hash { job, here } => self.hash(machine, job, here),
                    Command::Ack(worker) => {
                        if matches!(self.workers[worker], Worker::AwaitsAck) {
                            self.workers[worker] = Worker::Idle;
                        } else {
                            return Err(format!("worker {worker} acknowledged while not waiting"));
                        }
                    }
                }
            }
        }
    }

    /// The outstanding append returns: durable (or written unsynced), and the machine told.
    fn append_returns(&mut self, machine: &mut Scheduler<'_>) -> Result<(), String> {
        let Some((events, mode)) = self.appending.take() else {
            return Ok(());
        };
        if self.break_write_ahead {
            // The records are not durable yet when the machine hears of it: it hands out.
            let ahead = events.clone();
            machine.appended(events, Duration::from_micros(50), &mut NoObserver);
            self.take_commands(machine)?;
            self.append_durable(ahead, mode)?;
            return Ok(());
        }
        self.append_durable(events.clone(), mode)?;
        machine.appended(events, Duration::from_micros(50), &mut NoObserver);
        Ok(())
    }

    /// `events` reach the journal: durable with everything before, or written unsynced.
    fn append_durable(&mut self, events: Vec<Event>, mode: Append) -> Result<(), String> {
        self.check_append(&events)?;
        if mode == Append::Unsynced {
            self.unsynced.extend(events);
            return Ok(());
        }
        let unsynced = std::mem::take(&mut self.unsynced);
        self.durable.extend(unsynced);
        self.durable.extend(events);
        self.check_resume().map(drop)
    }

    /// A hash job: done here at once when allowed (or handed on, as when it needs a file
    /// read), else at the hashing threads.
    fn hash(&mut self, machine: &mut Scheduler<'_>, job: HashJob, here: bool) {
        if here && self.rng.chance(60) {
            let hashed = self.hashed(&job);
            machine.take_hashed(hashed, &mut NoObserver);
            return;
        }
        if here {
            machine.sent_to_hashers(job.unit_idx);
        }
        self.at_hashers.push(job);
    }

    /// What hashing `job`'s unit finds: its inputs, always the same; its outputs as it left
    /// them; whether an earlier run's success may be reused (as the unit was drawn).
    fn hashed(&self, job: &HashJob) -> Hashed {
        let unit = job.unit_idx;
        let reuse = job.check_reuse.then(|| match self.units[unit].reuse {
            Some(true) => ReuseCheck::Reusable(ReuseCandidate {
                run_id: "earlier".into(),
                attempt: 1,
                input_hash: String::new(),
                inputs: Vec::new(),
                output_hash: format!("o{unit}"),
                restored: Vec::new(),
            }),
            _ => ReuseCheck::NotReused("no earlier success".into()),
        });
        // What a hashing thread computes from the unit and its upstream outputs (the declared
        // input files, none here, left out): the same every time, as the engine's own hash of
        // a unit hashed inline.
        let mut declared = self.pipeline.units[unit].clone();
        declared.inputs.clear();
        let upstream: Vec<(&str, &str)> = (job.upstream.iter())
            .map(|(name, hash)| (name.as_str(), hash.as_str()))
            .collect();
        let inputs = crate::hash::input_components(&declared, &self.pipeline.base_dir, &upstream);
        let input_hash = inputs.as_deref().ok().map(crate::hash::combine_components);
        Hashed {
            unit_idx: unit,
            inputs,
            input_hash,
            files: crate::hash::HashedFiles::default(),
            took: Duration::ZERO,
            outputs: job.check_outputs.then(|| Ok(OutputCheck::default())),
            reuse,
            reuse_only: job.reuse_only,
        }
    }

    /// The run is over: its last append, its report, and the end's checks.
    fn end(&mut self, machine: &mut Scheduler<'_>, process: &Process) -> Result<(), String> {
        if machine.finish() {
            self.take_commands(machine)?;
            self.append_returns(machine)?;
        }
        let report = machine.report();
        self.check_end(report.as_ref().ok(), process)
    }

    /// The report's results, by unit.
    fn results(report: &RunReport) -> Vec<&crate::engine::api::UnitResult> {
        report.units.iter().map(|(_, result)| result).collect()
    }
}
