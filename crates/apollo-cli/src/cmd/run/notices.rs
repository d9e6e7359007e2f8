//! Session notices (store warnings, lock waits, stray sweeps) as lines on stderr.

use std::io::Write;

use apollo_runner::{SessionNotice, SessionObserver, SweepReason};

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
            "warning: could not look for processes {} run {run}: {error}",
            whose(*reason)
        )),
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
        _ => None,
    }
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
