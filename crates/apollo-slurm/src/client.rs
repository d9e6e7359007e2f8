//! The Slurm client commands apollo runs — `sbatch`, `squeue`, `scancel` — through
//! apollo-exec's [`ClientCommand`], each with a timeout, counted, and with a bounded number
//! of `sbatch` calls in flight (a burst of ready units must not hammer slurmctld).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use apollo_exec::{ClientCommand, ClientError, ClientOutput};

use crate::squeue::{JobState, QueueEntry, SQUEUE_FORMAT, parse_squeue};

/// How many Slurm client commands apollo ran, by command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientCalls {
    /// `sbatch` calls (one per submitted attempt, plus retries of refused submissions).
    pub sbatch: u64,
    /// `squeue` calls (one per poll, for all the run's jobs at once).
    pub squeue: u64,
    /// `scancel` calls.
    pub scancel: u64,
}

impl ClientCalls {
    /// All calls.
    pub fn total(&self) -> u64 {
        self.sbatch + self.squeue + self.scancel
    }
}

impl std::fmt::Display for ClientCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} Slurm client calls: {} sbatch, {} squeue, {} scancel",
            self.total(),
            self.sbatch,
            self.squeue,
            self.scancel
        )
    }
}

/// Why a Slurm command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientFailure {
    /// It could not be run, or did not finish in time.
    #[error(transparent)]
    Run(#[from] ClientError),
    /// It ran and said no.
    #[error("`{program}` exited with {code}: {message}")]
    Refused {
        /// The command.
        program: String,
        /// Its exit code (-1: a signal).
        code: i32,
        /// What it printed on stderr (or stdout), trimmed.
        message: String,
    },
    /// `sbatch` printed no job id.
    #[error("`sbatch` printed no job id: {output:?}")]
    NoJobId {
        /// What it printed.
        output: String,
    },
}

/// The programs and limits of the client.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) sbatch: PathBuf,
    pub(crate) squeue: PathBuf,
    pub(crate) scancel: PathBuf,
    pub(crate) scontrol: PathBuf,
    pub(crate) timeout: Duration,
    pub(crate) max_submits: usize,
    /// Environment variables `sbatch` must not see (the sources of secrets: `sbatch` hands
    /// its environment to slurmctld, which keeps it with the job).
    pub(crate) hidden_env: Vec<String>,
}

/// Runs the client commands and counts them.
#[derive(Debug)]
pub(crate) struct SlurmClient {
    config: ClientConfig,
    sbatch_calls: AtomicU64,
    squeue_calls: AtomicU64,
    scancel_calls: AtomicU64,
    submits_in_flight: Mutex<usize>,
    submit_done: Condvar,
    /// The cluster's default partition (`scontrol show partition`), read once when a job that
    /// names none is first submitted.
    default_partition: std::sync::OnceLock<Option<String>>,
}

impl SlurmClient {
    pub(crate) fn new(config: ClientConfig) -> Self {
        Self {
            config,
            sbatch_calls: AtomicU64::new(0),
            squeue_calls: AtomicU64::new(0),
            scancel_calls: AtomicU64::new(0),
            submits_in_flight: Mutex::new(0),
            submit_done: Condvar::new(),
            default_partition: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn calls(&self) -> ClientCalls {
        ClientCalls {
            sbatch: self.sbatch_calls.load(Ordering::Relaxed),
            squeue: self.squeue_calls.load(Ordering::Relaxed),
            scancel: self.scancel_calls.load(Ordering::Relaxed),
        }
    }

    fn run(&self, program: &PathBuf, args: &[String]) -> Result<ClientOutput, ClientFailure> {
        let mut command = ClientCommand::program(program)
            .args(args.iter().cloned())
            .timeout(self.config.timeout);
        for name in &self.config.hidden_env {
            command = command.env_remove(name.clone());
        }
        let output = command.run()?;
        if output.success() {
            return Ok(output);
        }
        let message = if output.stderr.trim().is_empty() {
            output.stdout.trim()
        } else {
            output.stderr.trim()
        };
        Err(ClientFailure::Refused {
            program: program.display().to_string(),
            code: output.code.unwrap_or(-1),
            message: message.lines().collect::<Vec<_>>().join("; "),
        })
    }

    /// `sbatch --parsable ARGS`, once: the job id. At most `max_submits` run at once. What
    /// to do when it fails — try again, look for the job, give up — is the caller's to decide
    /// ([`SubmitDoubt::of`]): whether a job was queued may be unknown.
    pub(crate) fn submit(&self, args: &[String]) -> Result<String, ClientFailure> {
        let _slot = self.submit_slot();
        let mut full = vec!["--parsable".to_owned()];
        full.extend_from_slice(args);
        self.sbatch_calls.fetch_add(1, Ordering::Relaxed);
        let output = self.run(&self.config.sbatch, &full)?;
        // `--parsable`: `<id>` or `<id>;<cluster>`.
        let id = output
            .stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|line| line.bytes().next().is_some_and(|b| b.is_ascii_digit()))
            .map(|line| line.split(';').next().unwrap_or(line).to_owned());
        id.ok_or(ClientFailure::NoJobId {
            output: output.stdout,
        })
    }

    /// The cluster's `MessageTimeout` (`scontrol show config`); `None` when it cannot be
    /// read.
    pub(crate) fn message_timeout(&self) -> Option<Duration> {
        let output = self.show_config()?;
        parse_message_timeout(&output)
    }

    /// The cluster's `MaxArraySize` (`scontrol show config`): a job array's task indices must
    /// be below it. `None` when it cannot be read.
    pub(crate) fn max_array_size(&self) -> Option<usize> {
        let output = self.show_config()?;
        config_value(&output, "MaxArraySize")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// The cluster's default partition (the one `Default=YES` in `scontrol show partition`),
    /// read once; `None` when it cannot be read.
    pub(crate) fn default_partition(&self) -> Option<String> {
        self.default_partition
            .get_or_init(|| {
                let args = ["-o", "show", "partition"].map(str::to_owned);
                let output = self.run(&self.config.scontrol, &args).ok()?;
                crate::request::default_partition(&output.stdout)
            })
            .clone()
    }

    fn show_config(&self) -> Option<String> {
        self.run(
            &self.config.scontrol,
            &["show".to_owned(), "config".to_owned()],
        )
        .ok()
        .map(|output| output.stdout)
    }

    fn submit_slot(&self) -> SubmitSlot<'_> {
        let mut in_flight = self
            .submits_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *in_flight >= self.config.max_submits.max(1) {
            in_flight = self
                .submit_done
                .wait(in_flight)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *in_flight += 1;
        SubmitSlot { client: self }
    }

    /// One `squeue` for all of this user's jobs, including those ended recently.
    pub(crate) fn queue(&self) -> Result<Vec<QueueEntry>, ClientFailure> {
        self.squeue_calls.fetch_add(1, Ordering::Relaxed);
        let args = [
            "--me".to_owned(),
            "--noheader".to_owned(),
            // Each task of a job array on a line of its own (`<array id>_<task>`).
            "--array".to_owned(),
            "--states=all".to_owned(),
            format!("--format={SQUEUE_FORMAT}"),
        ];
        let output = self.run(&self.config.squeue, &args)?;
        Ok(parse_squeue(&output.stdout))
    }

    /// `squeue --job=ID` for the job's state and Slurm's reason for it (`%r`: why a pending
    /// job waits, `BeginTime`, `Priority`, `Resources`, `JobHeldUser`, …). `None` when Slurm
    /// no longer lists it.
    pub(crate) fn state_and_reason(
        &self,
        job_id: &str,
    ) -> Result<Option<(JobState, String)>, ClientFailure> {
        self.squeue_calls.fetch_add(1, Ordering::Relaxed);
        let args = [
            "--noheader".to_owned(),
            format!("--job={job_id}"),
            "--format=%T|%r".to_owned(),
        ];
        let output = self.run(&self.config.squeue, &args)?;
        Ok(output.stdout.lines().find_map(|line| {
            let (state, reason) = line.split_once('|')?;
            Some((JobState::parse(state), reason.trim().to_owned()))
        }))
    }

    /// `scancel [--signal=SIGNAL --full] JOB`: with a signal, the job's processes get it
    /// (the wrapper passes it on and runs cleanup); without, Slurm ends the job (SIGTERM,
    /// its `KillWait`, SIGKILL).
    pub(crate) fn cancel(&self, job_id: &str, signal: Option<&str>) -> Result<(), ClientFailure> {
        self.scancel_calls.fetch_add(1, Ordering::Relaxed);
        let mut args = Vec::new();
        if let Some(signal) = signal {
            args.push(format!("--signal={signal}"));
            args.push("--full".to_owned());
        }
        args.push(job_id.to_owned());
        self.run(&self.config.scancel, &args).map(drop)
    }

    /// Like [`cancel`](Self::cancel), for a job known by its name only.
    pub(crate) fn cancel_by_name(
        &self,
        name: &str,
        signal: Option<&str>,
    ) -> Result<(), ClientFailure> {
        self.scancel_calls.fetch_add(1, Ordering::Relaxed);
        let mut args = Vec::new();
        if let Some(signal) = signal {
            args.push(format!("--signal={signal}"));
            args.push("--full".to_owned());
        }
        args.push(format!("--name={name}"));
        self.run(&self.config.scancel, &args).map(drop)
    }
}

struct SubmitSlot<'c> {
    client: &'c SlurmClient,
}

impl Drop for SubmitSlot<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .client
            .submits_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *in_flight = in_flight.saturating_sub(1);
        drop(in_flight);
        self.client.submit_done.notify_one();
    }
}

/// What a failed `sbatch` says about the job it was asked to queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubmitDoubt {
    /// Refused for good (a bad partition, a limit): nothing was queued, trying again is no
    /// use.
    Refused,
    /// The controller was not reached, or said to try again: nothing was queued, and the
    /// same submission may be tried again after a pause.
    NotSent,
    /// The request may have reached the controller and the answer was lost (a timeout, a
    /// dropped connection, `sbatch` killed, no job id printed): the job may be queued. Look
    /// for it under its token before anything else.
    MayBeQueued,
}

impl SubmitDoubt {
    /// What `error` of an `sbatch` call says.
    pub(crate) fn of(error: &ClientFailure) -> SubmitDoubt {
        match error {
            ClientFailure::Run(ClientError::Spawn { .. }) => SubmitDoubt::Refused,
            ClientFailure::Run(_) | ClientFailure::NoJobId { .. } => SubmitDoubt::MayBeQueued,
            // Killed by a signal: it may have sent the request.
            ClientFailure::Refused { code: -1, .. } => SubmitDoubt::MayBeQueued,
            ClientFailure::Refused { message, .. } => classify_message(message),
        }
    }
}

/// An `sbatch` refusal by its words. The lost answers are looked for first: "Socket timed
/// out on send/recv operation" comes after the request was sent.
fn classify_message(message: &str) -> SubmitDoubt {
    let lower = message.to_ascii_lowercase();
    let lost_answer = [
        "socket timed out",
        "timed out",
        "zero bytes were transmitted or received",
        "communication connection failure",
        "connection reset",
        "protocol authentication error",
    ];
    let not_sent = [
        "unable to contact slurm controller",
        "connect failure",
        "connection refused",
        "temporarily",
        "try again",
    ];
    if lost_answer.iter().any(|needle| lower.contains(needle)) {
        SubmitDoubt::MayBeQueued
    } else if not_sent.iter().any(|needle| lower.contains(needle)) {
        SubmitDoubt::NotSent
    } else {
        SubmitDoubt::Refused
    }
}

/// `MessageTimeout = 10 sec` in `scontrol show config`'s output.
fn parse_message_timeout(config: &str) -> Option<Duration> {
    let seconds: u64 = config_value(config, "MessageTimeout")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// The value of `key` in `scontrol show config`'s `Key = value` lines.
fn config_value<'c>(config: &'c str, key: &str) -> Option<&'c str> {
    config.lines().find_map(|line| {
        let (name, value) = line.split_once('=')?;
        (name.trim() == key).then_some(value.trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(message: &str) -> ClientFailure {
        ClientFailure::Refused {
            program: "sbatch".into(),
            code: 1,
            message: message.into(),
        }
    }

    #[test]
    fn sbatch_failures_are_told_apart_by_what_they_say_about_the_job() {
        for (message, doubt) in [
            (
                "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
                SubmitDoubt::MayBeQueued,
            ),
            (
                "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
                SubmitDoubt::NotSent,
            ),
            (
                "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
                SubmitDoubt::NotSent,
            ),
            (
                "sbatch: error: invalid partition specified: bogus",
                SubmitDoubt::Refused,
            ),
        ] {
            assert_eq!(SubmitDoubt::of(&refused(message)), doubt, "{message}");
        }
        let timed_out = ClientFailure::Run(ClientError::TimedOut {
            program: "sbatch".into(),
            timeout: Duration::from_secs(60),
        });
        assert_eq!(SubmitDoubt::of(&timed_out), SubmitDoubt::MayBeQueued);
        let no_id = ClientFailure::NoJobId {
            output: String::new(),
        };
        assert_eq!(SubmitDoubt::of(&no_id), SubmitDoubt::MayBeQueued);
    }

    #[test]
    fn the_message_timeout_is_read_from_scontrol_show_config() {
        let config = "Configuration data as of 2026-12-03T16:00:00\nMaxJobCount             = 10000\nMessageTimeout          = 10 sec\nMinJobAge               = 300 sec\n";
        assert_eq!(parse_message_timeout(config), Some(Duration::from_secs(10)));
        assert_eq!(parse_message_timeout("nothing here"), None);
        let config = "MaxArraySize            = 1001\nMaxJobCount = 10000\n";
        assert_eq!(config_value(config, "MaxArraySize"), Some("1001"));
    }
}
