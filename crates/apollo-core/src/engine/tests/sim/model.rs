//! The simulated run: a model of the engine thread's loop around the real ledger, admission
//! decision, pacer, outcome decision and resume code, of the workers' FIFO queue, the hashing
//! threads and the journal (cut at its durable prefix by a crash).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::dag::{Dag, ReadyQueue};
use crate::engine::admission::{self, Admission, BatchState, Head, Limits, Turn};
use crate::engine::ledger::{IllegalMove, Kind, Ledger, Place};
use crate::engine::outcome::Ended;
use crate::engine::pacer::{Pacer, TUNING, Tuning};
use crate::engine::retry::RetryQueue;
use crate::event::AttemptStatus;
use crate::model::{ExecutorKind, Pipeline};
use crate::resume::PriorState;

/// At most this many steps per run: more is a run that never ends.
const MAX_STEPS: usize = 100_000;

/// xorshift64*: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03 | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Debug, Clone, Copy)]
struct SimUnit {
    kind: Kind,
    /// Declares input files: hashed before each attempt is decided.
    hashes_first: bool,
    /// Checked for reuse from an earlier run on its first decision (idempotent units only):
    /// whether it is found reusable.
    reuse: Option<bool>,
    retries: u32,
    /// Its `retry_delay`: the backoff's base.
    retry_delay: Duration,
    /// Attempts that fail before one succeeds.
    failures: u32,
}

/// An attempt: its unit and its number.
type Attempt = (usize, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Record {
    Started {
        unit: usize,
        attempt: u32,
    },
    Finished {
        unit: usize,
        attempt: u32,
        ok: bool,
        status: AttemptStatus,
        /// A process of it started.
        started: bool,
        /// Killed by a signal apollo did not send.
        signal: bool,
    },
    Reused {
        unit: usize,
    },
}

enum Message {
    Done {
        unit: usize,
        attempt: u32,
        ended: Ended,
    },
    Hashed {
        unit: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Waiting,
    RetryWait,
    Done,
    Failed,
    Skipped,
}

/// One simulated run.
pub(super) struct Sim {
    rng: Rng,
    units: Vec<SimUnit>,
    dag: Dag,
    queue: ReadyQueue,
    ledger: Ledger,
    pacer: Pacer,
    /// The pacer's tuning: batches of reuses are small here, so they fill up.
    tuning: Tuning,
    max_parallel: usize,
    max_jobs: usize,
    /// The next batch, and the attempts it releases.
    batch: Vec<Record>,
    batch_jobs: Vec<Attempt>,
    urgent: bool,
    /// A commit under way: appended, not yet durable.
    committing: Option<(Vec<Record>, Vec<Attempt>)>,
    /// What is durable, in order.
    journal: Vec<Record>,
    /// Appended without a sync (full batches of reuses): durable with the next durable
    /// append, lost in a crash before it; since when.
    unsynced: Vec<Record>,
    unsynced_since: Option<Instant>,
    /// Committed attempts waiting for a worker, first in first out.
    jobs: VecDeque<Attempt>,
    workers: Vec<Option<Attempt>>,
    at_hashers: Vec<usize>,
    channel: VecDeque<Message>,
    /// The highest attempt number in the journal, by unit (across crashes).
    last_attempt: Vec<u32>,
    /// Attempts in this apollo (since the last crash), by unit.
    attempts_here: Vec<u32>,
    /// The unit's last attempt failed and it waits for a retry.
    last_failure: Vec<bool>,
    stashed: Vec<bool>,
    state: Vec<Unit>,
    stopped: bool,
    /// Units waiting for their retry, due on the simulated clock.
    retries: RetryQueue,
    /// The run was cancelled (a stop for other reasons leaves it `false`).
    cancelled: bool,
    failed_any: bool,
    keep_going: bool,
    max_retry_delay: Duration,
    /// The run stopped for a human (an attempt needs one, a non-idempotent unit was killed
    /// from outside, or a resume found one cut off).
    asked_human: bool,
    /// The real pipeline the simulated units stand for (names `u0`, `u1`, …), and what the
    /// journal held when this apollo started (empty before the first crash).
    pipeline: Pipeline,
    prior: PriorState,
    /// Crashes so far, and at most this many.
    crashes: u32,
    max_crashes: u32,
    base: Instant,
    clock: Duration,
    /// Test of the checks: hand jobs to the workers before their batch is durable.
    pub(super) break_write_ahead: bool,
    /// Test of the checks: the decision is told every unit is idempotent.
    pub(super) decide_all_idempotent: bool,
    /// Test of the checks: the resume policy runs every unit again after a crash.
    pub(super) break_resume: bool,
}

impl Sim {
    pub(super) fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let n_units = 1 + rng.below(14);
        let slurm = rng.chance(25);
        let deps: Vec<Vec<usize>> = (0..n_units)
            .map(|unit| (0..unit).filter(|_| rng.chance(20)).collect())
            .collect();
        let units: Vec<SimUnit> = (0..n_units)
            .map(|_| {
                let idempotent = rng.chance(70);
                SimUnit {
                    kind: Kind {
                        idempotent,
                        slurm: slurm && rng.chance(40),
                    },
                    hashes_first: rng.chance(30),
                    reuse: (idempotent && rng.chance(25)).then(|| rng.chance(50)),
                    retries: u32::try_from(rng.below(3)).unwrap_or(0),
                    retry_delay: Duration::from_micros(rng.below(4000) as u64),
                    failures: u32::try_from(rng.below(4)).unwrap_or(0),
                }
            })
            .collect();
        let max_parallel = 1 + rng.below(3);
        let max_jobs = if units.iter().any(|unit| unit.kind.slurm) {
            1 + rng.below(2)
        } else {
            0
        };
        let n_workers = (max_parallel + max_jobs).min(n_units);
        let pipeline = sim_pipeline(&units, &deps, max_parallel);
        let dag = Dag::from_deps(deps);
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
            queue: ReadyQueue::new(&dag, |_| false),
            dag,
            ledger: Ledger::new(n_units),
            pacer: Pacer::with_tuning(tuning),
            tuning,
            max_parallel,
            max_jobs,
            batch: Vec::new(),
            batch_jobs: Vec::new(),
            urgent: false,
            committing: None,
            journal: Vec::new(),
            unsynced: Vec::new(),
            unsynced_since: None,
            jobs: VecDeque::new(),
            workers: vec![None; n_workers],
            at_hashers: Vec::new(),
            channel: VecDeque::new(),
            last_attempt: vec![0; n_units],
            attempts_here: vec![0; n_units],
            last_failure: vec![false; n_units],
            stashed: vec![false; n_units],
            state: vec![Unit::Waiting; n_units],
            stopped: false,
            retries: RetryQueue::default(),
            cancelled: false,
            failed_any: false,
            keep_going,
            max_retry_delay,
            asked_human: false,
            pipeline,
            prior: PriorState::empty(),
            crashes: 0,
            max_crashes,
            base: Instant::now(),
            clock: Duration::ZERO,
            units,
            break_write_ahead: false,
            decide_all_idempotent: false,
            break_resume: false,
        }
    }

    /// The durable journal, for comparing two runs of a seed.
    pub(super) fn journal_trace(&self) -> Vec<String> {
        self.journal
            .iter()
            .map(|record| format!("{record:?}"))
            .collect()
    }

    /// Run to the end: the steps taken, or the first violation.
    pub(super) fn run(&mut self) -> Result<usize, String> {
        for step in 0..MAX_STEPS {
            if self.finished() {
                self.check_end()?;
                return Ok(step);
            }
            self.step()?;
        }
        Err(format!("no end after {MAX_STEPS} steps"))
    }

    fn now(&self) -> Instant {
        self.base + self.clock
    }

    fn finished(&self) -> bool {
        self.committing.is_none()
            && self.unsynced.is_empty()
            && admission::finished(
                &self.ledger.counts(),
                self.batch.is_empty(),
                self.stopped,
                self.queue.is_empty() && self.retries.is_empty(),
            )
    }

    /// One event, chosen at random among those that may happen now.
    fn step(&mut self) -> Result<(), String> {
        let idle = self.workers.iter().position(Option::is_none);
        let busy: Vec<usize> = (0..self.workers.len())
            .filter(|&worker| self.workers[worker].is_some())
            .collect();
        // Weighted: (event, weight).
        let mut events: Vec<(u8, usize)> = vec![(b't', 2)];
        if self.committing.is_some() {
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
        if !self.stopped && self.committing.is_none() {
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
            b'c' => self.commit_durable(),
            b'T' => self.engine_turn(),
            b'i' => self.take_in(),
            b'p' => self.worker_takes(idle.unwrap_or(0)),
            b'e' => {
                let worker = busy[self.rng.below(busy.len())];
                self.worker_ends(worker);
                Ok(())
            }
            b'h' => {
                let unit = self
                    .at_hashers
                    .remove(self.rng.below(self.at_hashers.len()));
                self.channel.push_back(Message::Hashed { unit });
                Ok(())
            }
            // A cancellation: rare, so most runs go to their end.
            b'x' if self.rng.chance(3) => {
                self.cancelled = true;
                self.stop()
            }
            // A crash: rare, so most runs get far before it.
            b'X' if self.rng.chance(20) => self.crash(),
            _ => {
                self.clock += Duration::from_micros(self.rng.below(3000) as u64);
                Ok(())
            }
        }
    }
}

fn ledger(result: Result<impl Sized, IllegalMove>) -> Result<(), String> {
    result.map(drop).map_err(|illegal| illegal.to_string())
}

/// The real pipeline the simulated units stand for: unit `i` is named `u{i}`.
fn sim_pipeline(units: &[SimUnit], deps: &[Vec<usize>], max_parallel: usize) -> Pipeline {
    let names: Vec<String> = (0..units.len()).map(|unit| format!("u{unit}")).collect();
    let units = units
        .iter()
        .zip(deps)
        .enumerate()
        .map(|(idx, (sim, deps))| {
            let deps: Vec<&str> = deps.iter().map(|&dep| names[dep].as_str()).collect();
            let mut unit = crate::engine::tests::unit(&names[idx], &deps);
            unit.idempotent = sim.kind.idempotent;
            unit.retries = sim.retries;
            unit.retry_delay = sim.retry_delay;
            if sim.kind.slurm {
                unit.executor = ExecutorKind::Slurm;
            }
            unit
        })
        .collect();
    crate::engine::tests::pipeline(units, max_parallel)
}

mod crash;
mod engine;
mod outcomes;
