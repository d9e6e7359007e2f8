//! The simulated workers: attempts handed out, taken by a free worker (or reported halted,
//! as a real worker does once `halt` is raised), and ended with a random outcome — with the
//! checks of everything that must hold when a process starts.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{MachineSim, Process, Worker};
use crate::engine::workers::{Done, FromWorker, Job, failed_to_start};
use crate::event::{AttemptStatus, Event, ExitStatus};
use crate::executor::{AttemptOutcome, NeedsHuman, PhaseOutcome};
use crate::model::{ExecutorKind, Phase};

impl MachineSim {
    fn name(&self, unit: usize) -> &str {
        &self.pipeline.units[unit].name
    }

    /// Whether the durable journal holds `unit_started` of this attempt.
    fn start_durable(&self, unit: usize, attempt: u32) -> bool {
        let name = self.name(unit);
        self.durable.iter().any(|event| {
            matches!(event, Event::UnitStarted(started)
                if started.unit == name && started.attempt == attempt)
        })
    }

    /// The machine handed `job` out: its start must be durable; a non-idempotent one must find
    /// a worker at once.
    pub(super) fn dispatched(&mut self, job: Job) -> Result<(), String> {
        let (unit, attempt) = (job.unit_idx, job.attempt);
        if !self.start_durable(unit, attempt) {
            return Err(format!(
                "u{unit} attempt {attempt} handed out before its unit_started was durable"
            ));
        }
        let idle = (self.workers.iter())
            .filter(|worker| matches!(worker, Worker::Idle))
            .count();
        if !self.pipeline.units[unit].idempotent && self.jobs.len() >= idle {
            return Err(format!(
                "non-idempotent u{unit} attempt {attempt} waits behind {} attempt(s) for a \
                 worker ({idle} free)",
                self.jobs.len()
            ));
        }
        self.jobs.push_back(job);
        Ok(())
    }

    /// A free worker takes the next job: it reports it halted if `halt` is raised, else its
    /// process starts — checked here.
    pub(super) fn worker_takes(&mut self, worker: usize, process: &Process) -> Result<(), String> {
        let Some(job) = self.jobs.pop_front() else {
            return Ok(());
        };
        if process.halt.load(Ordering::SeqCst) {
            let mut outcome = failed_to_start("not started: halted".to_owned());
            outcome.status = AttemptStatus::Interrupted;
            self.send(worker, &job, outcome, true);
            return Ok(());
        }
        self.check_process_start(&job)?;
        self.workers[worker] = Worker::Running(job);
        Ok(())
    }

    fn check_process_start(&self, job: &Job) -> Result<(), String> {
        let (unit_idx, attempt) = (job.unit_idx, job.attempt);
        let unit = &self.pipeline.units[unit_idx];
        if !self.start_durable(unit_idx, attempt) {
            return Err(format!(
                "u{unit_idx} attempt {attempt} runs before its unit_started is durable"
            ));
        }
        let running: Vec<&Job> = (self.workers.iter())
            .filter_map(|worker| match worker {
                Worker::Running(job) => Some(job),
                _ => None,
            })
            .collect();
        if running.iter().any(|other| other.unit_idx == unit_idx) {
            return Err(format!("u{unit_idx} runs twice at once"));
        }
        let slurm = |job: &&Job| self.pipeline.units[job.unit_idx].executor == ExecutorKind::Slurm;
        let is_slurm = unit.executor == ExecutorKind::Slurm;
        let same_kind = running.iter().filter(|job| slurm(job) == is_slurm).count() + 1;
        let limit = if is_slurm {
            self.pipeline.max_jobs.unwrap_or(0)
        } else {
            self.pipeline.max_parallel.max(1)
        };
        if same_kind > limit {
            return Err(format!(
                "u{unit_idx} makes {same_kind} running (slurm: {is_slurm}), over the limit {limit}"
            ));
        }
        let name = unit.name.as_str();
        let done = self.durable.iter().any(|event| match event {
            Event::UnitFinished(finished) => {
                finished.unit == name && finished.status.satisfies_dependents()
            }
            Event::UnitReused(reused) => reused.unit == name,
            _ => false,
        });
        if done {
            return Err(format!(
                "u{unit_idx} attempt {attempt} runs though the journal holds its success"
            ));
        }
        if !unit.idempotent {
            let ended = |attempt: u32| {
                self.durable.iter().any(|event| {
                    matches!(event, Event::UnitFinished(finished)
                        if finished.unit == name && finished.attempt == attempt)
                })
            };
            let open = self.durable.iter().find_map(|event| match event {
                Event::UnitStarted(started)
                    if started.unit == name
                        && started.attempt < attempt
                        && !ended(started.attempt) =>
                {
                    Some(started.attempt)
                }
                _ => None,
            });
            if let Some(open) = open {
                return Err(format!(
                    "non-idempotent u{unit_idx} attempt {attempt} runs while attempt {open} has no \
                     durable end"
                ));
            }
        }
        Ok(())
    }

    /// A running attempt ends: a success (or a skip, exit 77) once its unit's failures are used
    /// up, else a failure of a random kind; cut off when the run was cancelled.
    pub(super) fn worker_ends(&mut self, worker: usize, process: &Process) {
        let Worker::Running(job) = std::mem::replace(&mut self.workers[worker], Worker::Idle)
        else {
            return;
        };
        let outcome = if process.cancel.is_cancelled() && self.rng.chance(50) {
            ended(AttemptStatus::Interrupted, ExitStatus::Signal(15))
        } else if job.attempt <= self.units[job.unit_idx].failures {
            match self.rng.below(20) {
                0 => {
                    let mut outcome = ended(AttemptStatus::Failed, ExitStatus::Code(1));
                    outcome.needs_human = Some(if self.rng.chance(50) {
                        NeedsHuman::in_doubt("the job cannot be found")
                    } else {
                        NeedsHuman::refused("an earlier job still runs")
                    });
                    outcome
                }
                1 | 2 => ended(AttemptStatus::Failed, ExitStatus::Signal(9)),
                3..=5 => {
                    let mut outcome = ended(AttemptStatus::TimedOut, ExitStatus::Signal(15));
                    outcome.timed_out = true;
                    outcome.phases[0].timed_out = true;
                    outcome
                }
                _ => ended(AttemptStatus::Failed, ExitStatus::Code(1)),
            }
        } else if self.rng.chance(10) {
            ended(AttemptStatus::Skipped, ExitStatus::Code(77))
        } else {
            ended(AttemptStatus::Succeeded, ExitStatus::Code(0))
        };
        let failed = matches!(
            outcome.status,
            AttemptStatus::Failed | AttemptStatus::TimedOut
        );
        if failed && job.halt_on_failure {
            process.halt.store(true, Ordering::SeqCst);
        }
        let awaits_ack = !outcome.status.satisfies_dependents();
        self.send(worker, &job, outcome, awaits_ack);
    }

    /// The worker's message for the machine; it waits for its acknowledgement if `awaits_ack`.
    fn send(&mut self, worker: usize, job: &Job, outcome: AttemptOutcome, awaits_ack: bool) {
        self.workers[worker] = if awaits_ack {
            Worker::AwaitsAck
        } else {
            Worker::Idle
        };
        self.channel.push_back(FromWorker::Done(Done {
            worker: Some(worker),
            unit_idx: job.unit_idx,
            attempt: job.attempt,
            queued: Duration::ZERO,
            log_dir: PathBuf::new(),
            outcome,
            outputs: None,
            output_files: Vec::new(),
            awaits_ack,
        }));
    }
}

/// An attempt whose `execute` ran and ended with `exit`.
fn ended(status: AttemptStatus, exit: ExitStatus) -> AttemptOutcome {
    let mut outcome = AttemptOutcome::nothing_ran(status);
    outcome.exit = Some(exit);
    outcome.wall_time = Duration::from_micros(100);
    outcome.phases = vec![PhaseOutcome {
        phase: Phase::Execute,
        offset: Duration::ZERO,
        wall_time: Duration::from_micros(100),
        exit: Some(exit),
        timed_out: false,
        leftovers_killed: 0,
        error: None,
    }];
    if !status.satisfies_dependents() {
        outcome.failed_phase = Some(Phase::Execute);
    }
    outcome
}
