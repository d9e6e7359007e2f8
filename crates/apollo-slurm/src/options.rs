//! [`SlurmOptions`]: the programs, limits and polling intervals of a [`crate::SlurmExecutor`].

use std::path::PathBuf;
use std::time::Duration;

/// How a [`crate::SlurmExecutor`] talks to Slurm. The defaults suit a production cluster:
/// one `squeue` per second at most, backing off to one per 30 s while nothing changes, and
/// 4 `sbatch` calls in flight at most.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SlurmOptions {
    /// The `sbatch` program (searched on `PATH` when it has no `/`).
    pub sbatch: PathBuf,
    /// The `squeue` program.
    pub squeue: PathBuf,
    /// The `scancel` program.
    pub scancel: PathBuf,
    /// The `scontrol` program (`scontrol show config` tells the cluster's `MessageTimeout`).
    pub scontrol: PathBuf,
    /// How long to look for a job under its submission's token after `sbatch` left it in
    /// doubt (timed out, "Socket timed out on send/recv operation") before concluding that
    /// Slurm never queued it. `None` (the default): twice the cluster's `MessageTimeout`
    /// (DESIGN §18), read once with `scontrol show config`, or 20 s when it cannot be read.
    pub token_lookup_window: Option<Duration>,
    /// The first and the longest pause between two `sbatch` calls when the controller could
    /// not be reached ("Unable to contact slurm controller (connect failure)") or said to
    /// try again; the pause doubles.
    pub submit_backoff: (Duration, Duration),
    /// For how long an attempt keeps trying to reach the controller before it fails.
    pub submit_give_up_after: Duration,
    /// How long one client command may take before it is killed.
    pub client_timeout: Duration,
    /// At most this many `sbatch` calls run at once.
    pub max_submits_in_flight: usize,
    /// The shortest and longest interval between two `squeue` calls.
    pub queue_interval: (Duration, Duration),
    /// The shortest and longest interval between two looks at the wrapper's files (a `stat`
    /// per job, no Slurm call).
    pub files_interval: (Duration, Duration),
    /// `squeue` polls a job may be missing (or listed as ended) without leaving a result
    /// before it counts as lost.
    pub lost_after_polls: u32,
    /// Attempts that become ready together with the same `sbatch` options go to Slurm as one
    /// job array (`sbatch --array`, at most the cluster's `MaxArraySize` tasks each): the
    /// quiet time after which a gathering closes when no attempt joined it, and the longest a
    /// gathering stays open. `None`: each attempt is a job of its own.
    pub job_arrays: Option<(Duration, Duration)>,
    /// Environment variables the Slurm commands are run without: the sources of secrets
    /// (`{env: VAR}`), which `sbatch` would otherwise hand to slurmctld with the job's
    /// environment.
    pub hidden_env: Vec<String>,
    /// Whether a graceful stop of apollo (Ctrl-C, SIGTERM) cancels the running jobs (the
    /// default: a person asked to stop). `false` leaves them running for a later resume to
    /// reattach to (`on_stop: detach`).
    pub cancel_on_stop: bool,
}

impl Default for SlurmOptions {
    fn default() -> Self {
        Self {
            sbatch: PathBuf::from("sbatch"),
            squeue: PathBuf::from("squeue"),
            scancel: PathBuf::from("scancel"),
            scontrol: PathBuf::from("scontrol"),
            token_lookup_window: None,
            submit_backoff: (Duration::from_secs(1), Duration::from_secs(30)),
            submit_give_up_after: Duration::from_secs(600),
            client_timeout: Duration::from_secs(60),
            max_submits_in_flight: 4,
            queue_interval: (Duration::from_secs(1), Duration::from_secs(30)),
            files_interval: (Duration::from_millis(100), Duration::from_secs(1)),
            lost_after_polls: 3,
            cancel_on_stop: true,
            job_arrays: Some(crate::array::DEFAULT_GATHER),
            hidden_env: Vec::new(),
        }
    }
}

impl SlurmOptions {
    /// Use these programs instead of `sbatch`, `squeue`, `scancel` from `PATH`.
    pub fn programs(
        mut self,
        sbatch: impl Into<PathBuf>,
        squeue: impl Into<PathBuf>,
        scancel: impl Into<PathBuf>,
    ) -> Self {
        self.sbatch = sbatch.into();
        self.squeue = squeue.into();
        self.scancel = scancel.into();
        self
    }

    /// Poll `squeue` between every `min` and every `max`.
    pub fn queue_interval(mut self, min: Duration, max: Duration) -> Self {
        self.queue_interval = (min, max.max(min));
        self
    }

    /// Look at the wrapper's files between every `min` and every `max`.
    pub fn files_interval(mut self, min: Duration, max: Duration) -> Self {
        self.files_interval = (min, max.max(min));
        self
    }

    /// At most `count` `sbatch` calls at once (at least 1).
    pub fn max_submits_in_flight(mut self, count: usize) -> Self {
        self.max_submits_in_flight = count.max(1);
        self
    }

    /// Count a job as lost after `polls` polls without it (or ended) and without a result.
    pub fn lost_after_polls(mut self, polls: u32) -> Self {
        self.lost_after_polls = polls;
        self
    }

    /// Whether a graceful stop cancels the jobs (see [`SlurmOptions::cancel_on_stop`]).
    pub fn cancel_on_stop(mut self, cancel: bool) -> Self {
        self.cancel_on_stop = cancel;
        self
    }

    /// Whether attempts that become ready together are submitted as job arrays (the default)
    /// or each as a job of its own (see [`SlurmOptions::job_arrays`]).
    pub fn job_arrays(mut self, on: bool) -> Self {
        self.job_arrays = on.then(|| self.job_arrays.unwrap_or(crate::array::DEFAULT_GATHER));
        self
    }

    /// Gather attempts into a job array until none joined for `quiet`, for at most `longest`
    /// (250 ms and 2 s by default); turns arrays on.
    pub fn gather_window(mut self, quiet: Duration, longest: Duration) -> Self {
        self.job_arrays = Some((quiet, longest.max(quiet)));
        self
    }

    /// Run the Slurm commands without these environment variables (see
    /// [`SlurmOptions::hidden_env`]).
    pub fn hide_env(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.hidden_env.extend(names);
        self
    }

    /// Use this `scontrol` instead of the one on `PATH`.
    pub fn scontrol(mut self, scontrol: impl Into<PathBuf>) -> Self {
        self.scontrol = scontrol.into();
        self
    }

    /// Look for a job under its token for `window` after `sbatch` left it in doubt (see
    /// [`SlurmOptions::token_lookup_window`]).
    pub fn token_lookup_window(mut self, window: Duration) -> Self {
        self.token_lookup_window = Some(window);
        self
    }

    /// Pause `first`, doubling up to `longest`, between `sbatch` calls that could not reach
    /// the controller, for at most `give_up_after` in all.
    pub fn submit_retry(
        mut self,
        first: Duration,
        longest: Duration,
        give_up_after: Duration,
    ) -> Self {
        self.submit_backoff = (first, longest.max(first));
        self.submit_give_up_after = give_up_after;
        self
    }

    /// Kill a client command after `timeout`.
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.client_timeout = timeout;
        self
    }
}
