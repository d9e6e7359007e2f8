//! Session notices (store warnings, lock waits, stray sweeps) as lines on stderr.

use std::io::Write;

use apollo_core::event::AttemptStatus;
use apollo_runner::{HookOutcome, SessionNotice, SessionObserver, SweepReason};

use crate::excerpt;
use crate::progress::{describe_exit, human_duration};

/// The line for `notice`, if it is worth one.
fn line(notice: &SessionNotice<'_>) -> Option<String> {
    match notice {
        SessionNotice::WaitingForLock => {
            Some("apollo: the state directory is in use; waiting for the lock (--wait)".to_owned())
        }
        SessionNotice::Warning(warning) => Some(format!("warning: {warning}")),
        SessionNotice::Swept { n_killed: 0, .. } => None,
        SessionNotice::Swept {
            run,
            reason,
            n_killed,
        } => Some(format!(
            "apollo: killed {n_killed} process{} {} run {run}",
            if *n_killed == 1 { "" } else { "es" },
            whose(*reason)
        )),
        SessionNotice::SweepFailed { run, reason, error } => Some(format!(
            "warning: sweeping the processes {} run {run}: {error}",
            whose(*reason)
        )),
        SessionNotice::RestoreTempsRemoved { paths } => Some(format!(
            "apollo: removed {} temporary file{} an interrupted restore left beside outputs: {}",
            paths.len(),
            if paths.len() == 1 { "" } else { "s" },
            (paths.iter())
                .map(|path| path.display().to_string().escape_debug().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        SessionNotice::Hook(outcome) => Some(hook_line(outcome)),
        // The first run with `reuse: true` has no index yet: nothing worth a line.
        SessionNotice::ReuseIndexRebuilt {
            why: "is missing", ..
        } => None,
        SessionNotice::ReuseIndexRebuilt { why, n_runs } => Some(format!(
            "apollo: the reuse index {why}; rebuilt it from the journals of {n_runs} run{}",
            if *n_runs == 1 { "" } else { "s" }
        )),
        SessionNotice::ReuseUnavailable { error } => Some(format!(
            "warning: nothing is reused from earlier runs in this run: the reuse index cannot be refreshed: {error}"
        )),
        SessionNotice::BlobsEvicted(eviction) => Some(eviction_line(eviction)),
        SessionNotice::EvictionFailed { error } => Some(format!(
            "warning: the blob store is over blob_store_max, and nothing was evicted: {error}"
        )),
        _ => None,
    }
}

/// `warning: blob store over blob_store_max (20.3 GiB > 20 GiB): evicted the captures of runs
/// A, B (1.2 GiB); their units can no longer be reproduced`.
fn eviction_line(eviction: &apollo_store::Eviction) -> String {
    use apollo_core::capture::human_size;
    let mut text = format!(
        "warning: blob store over blob_store_max ({} > {}):",
        human_size(eviction.before_bytes),
        human_size(eviction.limit)
    );
    if !eviction.evicted.is_empty() {
        let runs: Vec<&str> = (eviction.evicted.iter())
            .map(|evicted| evicted.run.as_str())
            .collect();
        text.push_str(&format!(
            " evicted the captures of run{} {} ({}); {} units can no longer be reproduced",
            if runs.len() == 1 { "" } else { "s" },
            runs.join(", "),
            human_size(eviction.freed_bytes),
            if runs.len() == 1 { "its" } else { "their" }
        ));
    } else if eviction.freed_bytes > 0 {
        text.push_str(&format!(
            " removed {} of blobs no run references",
            human_size(eviction.freed_bytes)
        ));
    }
    if eviction.still_over {
        text.push_str(&format!(
            "{} the latest run of each pipeline and unfinished runs need {}, more than that: kept",
            if eviction.freed_bytes > 0 { ";" } else { "" },
            human_size(eviction.after_bytes)
        ));
    }
    text
}

/// `apollo: hook on_failure ran (0.12s)`, or a warning with why it failed and the end of its
/// output. A failed hook never changes the run's status or exit code.
fn hook_line(outcome: &HookOutcome) -> String {
    let record = &outcome.record;
    let duration = human_duration(std::time::Duration::from_millis(record.duration_ms));
    if outcome.succeeded() {
        // A hook that ran but could not be given the run summary (a link planted as
        // `hooks/`, say) still says so: it may have found no summary to read.
        return match record.error.as_deref() {
            Some(error) => format!(
                "warning: hook {} ran ({duration}), but {}",
                record.hook,
                excerpt::clean_line(error.lines().next().unwrap_or_default())
            ),
            None => format!("apollo: hook {} ran ({duration})", record.hook),
        };
    }
    let mut text = format!(
        "warning: hook {} {} after {duration} (the run's status stays {})",
        record.hook,
        match record.status {
            AttemptStatus::TimedOut => "timed out".to_owned(),
            _ => format!("failed: {}", describe_exit(record.exit)),
        },
        record.run_status
    );
    if let Some(error) = record
        .error
        .as_deref()
        .and_then(|error| error.lines().next())
    {
        text.push_str(&format!(": {}", excerpt::clean_line(error)));
    }
    if let Some(excerpt) = excerpt::of_attempt(&outcome.log_dir, excerpt::EXCERPT_LINES) {
        for line in &excerpt.lines {
            text.push_str(&format!("\n  │ {line}"));
        }
    }
    text.push_str(&format!(
        "\n  its output: {}/{{stdout,stderr}}",
        outcome.log_dir.display()
    ));
    text
}

/// Whose processes a sweep looks for, as the words before "run RUN".
fn whose(reason: SweepReason) -> &'static str {
    match reason {
        SweepReason::PreviousRun => "left running by units of the previous",
        SweepReason::BeforeResume => "left running by the previous apollo of",
        _ => "that units left running outside their process groups in",
    }
}

/// Writes each notice to stderr at once.
pub(crate) struct StderrNotices<'w> {
    stderr: &'w mut dyn Write,
}

impl<'w> StderrNotices<'w> {
    pub(crate) fn new(stderr: &'w mut dyn Write) -> Self {
        Self { stderr }
    }
}

impl SessionObserver for StderrNotices<'_> {
    fn notice(&mut self, notice: &SessionNotice<'_>) {
        if let Some(line) = line(notice) {
            // If stderr itself is gone there is no one left to tell.
            let _ = writeln!(self.stderr, "{line}");
        }
    }
}

/// Keeps the notices of a running engine until its progress output is finished (so a live
/// progress line does not run over them).
#[derive(Default)]
pub(crate) struct HeldNotices {
    lines: Vec<String>,
}

impl HeldNotices {
    /// Writes the held lines.
    pub(crate) fn write_to(self, stderr: &mut dyn Write) {
        for line in self.lines {
            let _ = writeln!(stderr, "{line}");
        }
    }
}

impl SessionObserver for HeldNotices {
    fn notice(&mut self, notice: &SessionNotice<'_>) {
        self.lines.extend(line(notice));
    }
}
