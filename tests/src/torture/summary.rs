//! What a run of the harness found, and its one-line report.

use std::time::Duration;

/// What a run of the harness found.
#[derive(Debug, Default)]
pub struct Summary {
    /// How many iterations ran.
    pub iterations: u64,
    /// The seed they derived from.
    pub seed: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// SIGKILLs sent to apollo.
    pub kills: u64,
    /// Resumes after a kill.
    pub resumes: u64,
    /// `apollo mark` verdicts given for non-idempotent units cut off.
    pub verdicts: u64,
    /// `apollo run` refused with exit 4 right after a kill: the killed apollo's lock was
    /// still held for a moment (by a unit forked but not yet exec'd); retried.
    pub stale_lock_refusals: u64,
    /// Iterations with at least one violation (or that could not complete).
    pub failed_iterations: u64,
    /// Iterations whose pipeline was `reuse: true` and ran a second time (a new run, killed
    /// and resumed like the first), in which nothing may execute again (check 10).
    pub reuse_phases: u64,
    /// Units reused in those second runs.
    pub units_reused: u64,
    /// With `--slurm`: cluster jobs recorded (`unit_submitted`), and how many of those were
    /// reattached to after apollo died.
    pub slurm_jobs: (u64, u64),
    /// With `--slurm`: kills aimed at a running job (sent as soon as the journal held a
    /// `unit_submitted` of an idempotent unit whose attempt had not ended), each of which a
    /// resume must answer by reattaching to that job.
    pub aimed_kills: u64,
    /// Kills that came after the run's success was recorded (the iteration is complete).
    pub killed_after_success: u64,
    /// Run folders a kill left before their first segment existed: apollo ignores them
    /// (they recorded nothing), which `apollo verify` passing confirms.
    pub journal_less_runs: u64,
    /// Lock files replaced by a symbolic link to a victim file before an `apollo run`.
    pub lock_symlinks: u64,
    /// FIFOs or links to `/dev/zero` planted as a segment or as `journal/last_segment`, each
    /// met by `run`, `runs`, `verify` and `replay`.
    pub plants: u64,
    /// Commands run against a plant (each within its deadline).
    pub plant_commands: u64,
    /// Attempts that began while the run folder was moved away: their write-ahead check at
    /// start could not see the journal, so only the final journal checks them.
    pub unchecked_at_start: u64,
    /// Lock files deleted while apollo ran.
    pub lock_deletions: u64,
    /// Run folders moved away (then back) while apollo ran.
    pub run_folder_moves: u64,
    /// Run folders recreated (by an attempt's log folder) while the real one was moved away.
    pub recreated_run_folders: u64,
    /// Run folders moved away before apollo had opened them (exit 2 or 3, the run not found).
    pub tampered_before_open: u64,
    /// Mid-run tamperings that landed after the run's last commit (apollo rightly finished).
    pub tampered_after_finish: u64,
    /// Mid-run tamperings that landed after apollo had read the run it resumes and while it
    /// refused it for a human's verdict (exit 5: it starts nothing, and asks again next time).
    pub tampered_during_refusal: u64,
    /// Invocations whose journal clock was stepped back (hours, often across a UTC day) from
    /// the previous invocation's.
    pub clock_steps: u64,
    /// Invocations whose journal clock kept stepping back during the run (at every reading).
    pub stepping_clocks: u64,
    /// Every invariant violated, with the iteration that broke it.
    pub violations: Vec<String>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "iterations {}, kills {}, resumes {}, human verdicts {}, killed after success {}, \
             stale-lock refusals {}, lock symlinks {}, plants {} ({} commands), lock deletions mid-run {}, \
             run folder moves mid-run {} (recreated by a unit's logs {}, attempts begun meanwhile {}), tampered before the run was opened {}, tampered after finish {}, tampered during a refusal for a verdict {}, clock steps back {}, \
             stepping clocks {}, \
             run creations cut short (ignored) {}, reuse phases {} ({} units reused), cluster jobs {} ({} reattached; kills aimed at a running job {}), violations {} in {} iterations (seed {}, {:.1}s)",
            self.iterations,
            self.kills,
            self.resumes,
            self.verdicts,
            self.killed_after_success,
            self.stale_lock_refusals,
            self.lock_symlinks,
            self.plants,
            self.plant_commands,
            self.lock_deletions,
            self.run_folder_moves,
            self.recreated_run_folders,
            self.unchecked_at_start,
            self.tampered_before_open,
            self.tampered_after_finish,
            self.tampered_during_refusal,
            self.clock_steps,
            self.stepping_clocks,
            self.journal_less_runs,
            self.reuse_phases,
            self.units_reused,
            self.slurm_jobs.0,
            self.slurm_jobs.1,
            self.aimed_kills,
            self.violations.len(),
            self.failed_iterations,
            self.seed,
            self.elapsed.as_secs_f64()
        )
    }
}
