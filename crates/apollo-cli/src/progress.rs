//! What `apollo run` prints while it runs: one line per finished unit on stdout, and on a
//! terminal a live progress line on stderr (`12/40 units · 2 running · 1 failed · 00:42`).
//!
//! The live line is drawn only when stderr is a terminal and `CI` is not set; otherwise the
//! output is plain lines, safe for logs.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use apollo_core::engine::{Decision, Notice, Observer};
use apollo_core::event::{AttemptStatus, ExitStatus, UnitFinished};

#[derive(Default)]
struct Counts {
    done: usize,
    /// Attempts handed to workers (some may wait there: the engine commits attempts ahead).
    running: usize,
    /// At most this many actually run at once.
    max_parallel: usize,
    failed: usize,
    stop: bool,
}

struct Shared {
    counts: Mutex<Counts>,
    wake: Condvar,
}

/// Prints the run's progress; see the module docs.
pub(crate) struct Progress<'a> {
    out: &'a mut dyn Write,
    /// Lines not written yet (without a live line, they go out together at each `flush`:
    /// one write per batch of outcomes instead of one per unit).
    pending: String,
    /// Width of the unit-name column.
    name_width: usize,
    explain: bool,
    started: Instant,
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
}

impl<'a> Progress<'a> {
    /// `total` units take part, at most `max_parallel` at once; `explain` prints each unit's
    /// run-or-not decision; lines go to `out`.
    pub(crate) fn new(
        (total, max_parallel): (usize, usize),
        name_width: usize,
        explain: bool,
        out: &'a mut dyn Write,
    ) -> Self {
        let shared = Arc::new(Shared {
            counts: Mutex::new(Counts {
                max_parallel,
                ..Counts::default()
            }),
            wake: Condvar::new(),
        });
        let live = std::io::stderr().is_terminal() && std::env::var_os("CI").is_none();
        let started = Instant::now();
        let ticker = live.then(|| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || ticker(&shared, total, started))
        });
        Self {
            out,
            pending: String::new(),
            name_width,
            explain,
            started,
            shared,
            ticker,
        }
    }

    fn with_counts(&self, update: impl FnOnce(&mut Counts)) {
        let mut counts = self
            .shared
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        update(&mut counts);
        self.shared.wake.notify_all();
    }

    /// Print a line above the live progress line; without one, queue it for the next
    /// [`Observer::flush`].
    fn line(&mut self, text: &str) {
        if self.ticker.is_none() {
            self.pending.push_str(text);
            self.pending.push('\n');
            return;
        }
        let _guard = self
            .shared
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K");
        let _ = stderr.flush();
        // A closed stdout must not stop the run: the journal, not the terminal, is the record.
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
    }

    /// Write the queued lines.
    fn write_pending(&mut self) {
        if !self.pending.is_empty() {
            // A closed stdout must not stop the run: the journal is the record.
            let _ = self.out.write_all(self.pending.as_bytes());
            let _ = self.out.flush();
            self.pending.clear();
        }
    }

    /// Stop the live line (before the summary is printed).
    pub(crate) fn finish(mut self) {
        self.write_pending();
        self.stop_ticker();
    }

    fn stop_ticker(&mut self) {
        self.with_counts(|counts| counts.stop = true);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }

    /// Time since the run started in this process.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for Progress<'_> {
    fn drop(&mut self) {
        self.write_pending();
        self.stop_ticker();
    }
}

fn ticker(shared: &Shared, total: usize, started: Instant) {
    let mut counts = shared.counts.lock().unwrap_or_else(PoisonError::into_inner);
    while !counts.stop {
        let elapsed = started.elapsed().as_secs();
        let mut text = format!(
            "{}/{total} units · {} running · {} failed · {:02}:{:02}",
            counts.done,
            counts.running.min(counts.max_parallel),
            counts.failed,
            elapsed / 60,
            elapsed % 60
        );
        if elapsed >= 3600 {
            text = format!("{text} ({}h)", elapsed / 3600);
        }
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{text}");
        let _ = stderr.flush();
        drop(stderr);
        counts = shared
            .wake
            .wait_timeout(counts, Duration::from_millis(500))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "\r\x1b[2K");
    let _ = stderr.flush();
}

/// `1.23s`, `2m05s`, `1h02m`.
pub(crate) fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 60_000 {
        format!("{:.2}s", duration.as_secs_f64())
    } else if millis < 3_600_000 {
        format!("{}m{:02}s", millis / 60_000, (millis / 1000) % 60)
    } else {
        format!("{}h{:02}m", millis / 3_600_000, (millis / 60_000) % 60)
    }
}

/// `exit 3`, `killed by signal 9`.
pub(crate) fn describe_exit(exit: Option<ExitStatus>) -> String {
    match exit {
        Some(ExitStatus::Code(code)) => format!("exit {code}"),
        Some(ExitStatus::Signal(signal)) => format!("killed by signal {signal}"),
        None => "did not start".to_owned(),
    }
}

fn finished_line(
    unit: &str,
    width: usize,
    record: &UnitFinished,
    retry_in: Option<Duration>,
) -> String {
    let duration = human_duration(Duration::from_millis(record.duration_ms));
    let label = match record.status {
        AttemptStatus::Succeeded => "ok",
        AttemptStatus::Skipped => "skipped",
        AttemptStatus::Failed => "FAILED",
        AttemptStatus::TimedOut => "TIMEOUT",
        AttemptStatus::Interrupted => "stopped",
    };
    let mut text = format!(
        "  {label:<8} {unit:<width$}  attempt {}, {duration}",
        record.attempt
    );
    match record.status {
        AttemptStatus::Succeeded => {}
        AttemptStatus::Skipped => text.push_str(" — skipped itself (exit 77)"),
        AttemptStatus::TimedOut => {
            let phase = record
                .failed_phase
                .map_or("execute", |phase| phase.as_str());
            text.push_str(&format!(" — timed out in {phase}"));
        }
        AttemptStatus::Failed | AttemptStatus::Interrupted => {
            text.push_str(&format!(" — {}", describe_exit(record.exit)));
            if let Some(error) = record
                .error
                .as_deref()
                .and_then(|error| error.lines().next())
            {
                text.push_str(&format!(": {error}"));
            }
        }
    }
    if let Some(delay) = retry_in {
        text.push_str(&format!(" — retrying in {}", human_duration(delay)));
    }
    text
}

impl Observer for Progress<'_> {
    fn notice(&mut self, notice: &Notice<'_>) {
        match notice {
            // A unit reused from an earlier run is said when its `unit_reused` is durable
            // (below).
            Notice::Decided {
                decision: Decision::Reused { .. },
                ..
            } => {}
            Notice::Reused {
                unit,
                from_run,
                from_attempt,
            } => {
                self.with_counts(|counts| counts.done += 1);
                let width = self.name_width;
                self.line(&format!(
                    "  {:<8} {unit:<width$}  inputs identical to run {from_run} attempt {from_attempt}",
                    "reused"
                ));
            }
            Notice::Decided { unit, decision } => {
                if matches!(decision, Decision::Reuse { .. }) {
                    self.with_counts(|counts| counts.done += 1);
                }
                if self.explain || matches!(decision, Decision::Reuse { .. }) {
                    let label = if matches!(decision, Decision::Reuse { .. }) {
                        "done"
                    } else {
                        "run"
                    };
                    let width = self.name_width;
                    self.line(&format!("  {label:<8} {unit:<width$}  {decision}"));
                }
            }
            Notice::Started { .. } => self.with_counts(|counts| counts.running += 1),
            Notice::Finished {
                unit,
                record,
                retry_in,
                ..
            } => {
                let will_retry = retry_in.is_some();
                let satisfied = record.status.satisfies_dependents();
                self.with_counts(|counts| {
                    counts.running = counts.running.saturating_sub(1);
                    if satisfied {
                        counts.done += 1;
                    } else if !will_retry && record.status != AttemptStatus::Interrupted {
                        counts.failed += 1;
                    }
                });
                // An attempt committed ahead that a failure or a stop halted before its turn
                // never had a process: nothing happened to report.
                let never_started =
                    record.status == AttemptStatus::Interrupted && record.phases.is_empty();
                if !never_started {
                    let text = finished_line(unit, self.name_width, record, *retry_in);
                    self.line(&text);
                }
            }
            Notice::Skipped { unit, upstream } => {
                let width = self.name_width;
                self.line(&format!(
                    "  {:<8} {unit:<width$}  upstream {upstream} failed",
                    "skipped"
                ));
            }
            _ => {}
        }
    }

    fn flush(&mut self) {
        self.write_pending();
    }
}
