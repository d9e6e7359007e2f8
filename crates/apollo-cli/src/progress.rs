//! What `apollo run` prints while it runs: one line per finished unit on stdout, and on a
//! terminal a live progress line on stderr (`12/40 units · 2 running · 1 failed · 00:42`).
//!
//! The live line is drawn only when stderr is a terminal and `CI` is not set; otherwise the
//! output is plain lines, safe for logs.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use apollo_core::engine::{Decision, Notice, Observer};
use apollo_core::event::{AttemptStatus, ExitStatus, UnitFinished};

use crate::excerpt;
use crate::stream::Streamer;

/// `-q` (0), normal (1), `-v` (2): set once from the command line.
static VERBOSITY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// Sets `-q`/`-v` for the run's progress output.
pub(crate) fn set_verbosity(quiet: bool, verbose: bool) {
    let level = match (quiet, verbose) {
        (true, _) => 0,
        (false, true) => 2,
        (false, false) => 1,
    };
    VERBOSITY.store(level, std::sync::atomic::Ordering::Relaxed);
}

fn verbosity() -> u8 {
    VERBOSITY.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Default)]
struct Counts {
    done: usize,
    /// Attempts handed to workers (some may wait there: the engine commits attempts ahead).
    running: usize,
    /// At most this many actually run at once.
    max_parallel: usize,
    failed: usize,
    stop: bool,
    /// Attempts handed to workers, oldest first: (unit, attempt, when).
    started: Vec<(String, u32, Instant)>,
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
    /// The run, for the `apollo logs` command under a failed attempt.
    run_id: String,
    started: Instant,
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
    /// `--stream`: the running units' output, prefixed.
    streamer: Option<Streamer>,
    /// What the run's report does not say, for the summary.
    notes: RunNotes,
    /// `run --format json`: one JSON object per event on stdout instead of text lines.
    json: bool,
}

/// What the progress printer saw that the engine's report does not say.
#[derive(Debug, Default, Clone)]
pub(crate) struct RunNotes {
    /// Units that failed an attempt and then succeeded on a retry.
    pub(crate) flaky: std::collections::BTreeSet<String>,
    /// Units whose running attempt was cut off by the stop (Ctrl-C, SIGTERM, `apollo stop`,
    /// fail-fast): they had started.
    pub(crate) interrupted: std::collections::BTreeSet<String>,
    /// Units that failed an attempt and will be retried (a later success makes them flaky).
    retried: std::collections::BTreeSet<String>,
}

impl<'a> Progress<'a> {
    /// `total` units take part, at most `max_parallel` at once; `explain` prints each unit's
    /// run-or-not decision; lines go to `out`.
    pub(crate) fn new(
        (total, max_parallel): (usize, usize),
        name_width: usize,
        explain: bool,
        run_id: String,
        timeouts: HashMap<String, Duration>,
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
            std::thread::spawn(move || ticker(&shared, total, started, &timeouts))
        });
        Self {
            out,
            pending: String::new(),
            name_width,
            explain,
            run_id,
            started,
            shared,
            ticker,
            streamer: None,
            notes: RunNotes::default(),
            json: false,
        }
    }

    /// `run --format json`: a JSON-lines event stream on stdout (one object per started,
    /// finished, skipped or decided unit), no text lines and no live line.
    pub(crate) fn json_lines(&mut self) {
        self.json = true;
        self.stop_ticker();
        self.with_counts(|counts| counts.stop = false);
    }

    /// Queue one JSON object as a line (written at the next flush).
    fn emit(&mut self, event: &serde_json::Value) {
        self.pending.push_str(&event.to_string());
        self.pending.push('\n');
    }

    /// What the summary needs that the engine's report does not say.
    pub(crate) fn notes(&self) -> RunNotes {
        self.notes.clone()
    }

    /// `--stream`: print the output of the run's attempts (in `run_dir`) as they write it.
    pub(crate) fn stream_output(&mut self, run: &apollo_store::RunDir) {
        let shared = Arc::clone(&self.shared);
        let live = self.ticker.is_some();
        self.streamer = Some(Streamer::start(run, self.name_width, move |text| {
            // Above the live line, as `line` does it.
            let _guard = shared.counts.lock().unwrap_or_else(PoisonError::into_inner);
            if live {
                let mut stderr = std::io::stderr().lock();
                let _ = write!(stderr, "\r\x1b[2K");
                let _ = stderr.flush();
            }
            crate::stream::print_to_stdout(text);
        }));
    }

    fn with_counts(&self, update: impl FnOnce(&mut Counts)) {
        let mut counts = self
            .shared
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        update(&mut counts);
        // Only a live line redraws on a change (a futex call per unit otherwise, on the
        // engine thread).
        if self.ticker.is_some() {
            self.shared.wake.notify_all();
        }
    }

    /// Print a line above the live progress line; without one, queue it for the next
    /// [`Observer::flush`].
    fn line(&mut self, text: &str) {
        if self.json {
            return;
        }
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
        self.streamer = None;
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

fn ticker(shared: &Shared, total: usize, started: Instant, timeouts: &HashMap<String, Duration>) {
    let mut counts = shared.counts.lock().unwrap_or_else(PoisonError::into_inner);
    while !counts.stop {
        let now = Instant::now();
        // The oldest attempts handed over are the ones running; the rest wait in the queue of
        // attempts committed ahead.
        let running: Vec<RunningUnit<'_>> = counts
            .started
            .iter()
            .take(counts.max_parallel)
            .map(|(unit, _, since)| RunningUnit {
                name: unit,
                elapsed: now.duration_since(*since),
                timeout: timeouts.get(unit).copied(),
            })
            .collect();
        let width = terminal_size::terminal_size_of(std::io::stderr())
            .map_or(80, |(terminal_size::Width(width), _)| usize::from(width));
        let text = live_line(
            (counts.done, total),
            counts.running.min(counts.max_parallel),
            counts.failed,
            started.elapsed(),
            &running,
            width,
        );
        drop(running);
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

/// A running unit as the live line names it.
pub(crate) struct RunningUnit<'a> {
    pub(crate) name: &'a str,
    pub(crate) elapsed: Duration,
    pub(crate) timeout: Option<Duration>,
}

/// The live line: `12/40 units · 2 running · 1 failed · 00:42 │ fetch 12s/5m · load 3s`,
/// cut to `width - 1` characters (the last column stays free, so the terminal never wraps).
pub(crate) fn live_line(
    (done, total): (usize, usize),
    n_running: usize,
    n_failed: usize,
    elapsed: Duration,
    running: &[RunningUnit<'_>],
    width: usize,
) -> String {
    let seconds = elapsed.as_secs();
    let mut text = format!(
        "{done}/{total} units · {n_running} running · {n_failed} failed · {:02}:{:02}",
        seconds / 60,
        seconds % 60
    );
    if seconds >= 3600 {
        text.push_str(&format!(" ({}h)", seconds / 3600));
    }
    for (position, unit) in running.iter().enumerate() {
        text.push_str(if position == 0 { " │ " } else { " · " });
        text.push_str(&crate::excerpt::clean_line(unit.name));
        text.push(' ');
        text.push_str(&short_duration(unit.elapsed));
        if let Some(timeout) = unit.timeout {
            text.push('/');
            text.push_str(&short_duration(timeout));
        }
    }
    let limit = width.saturating_sub(1).max(1);
    if text.chars().count() > limit {
        text = text.chars().take(limit.saturating_sub(1)).collect();
        text.push('…');
    }
    text
}

/// `42s`, `5m`, `5m30s`, `2h`, `1h30m`: whole seconds, short.
fn short_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match (seconds / 3600, (seconds / 60) % 60, seconds % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
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
    let label = crate::color::paint(crate::color::stdout(), label, &format!("{label:<8}"));
    let mut text = format!(
        "  {label} {unit:<width$}  attempt {}, {duration}",
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
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn notice(&mut self, notice: &Notice<'_>) {
        if self.json
            && let Some(event) = crate::run_events::event(notice)
        {
            self.emit(&event);
        }
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
                restored,
            } => {
                self.with_counts(|counts| counts.done += 1);
                // Counted in the summary, said with `--explain` or `-v` (a run with nothing
                // to do prints two lines, as make and ninja print one), or when it wrote files.
                if self.explain || verbosity() > 1 || !restored.is_empty() {
                    let (width, restored) = (self.name_width, excerpt::restored_text(restored));
                    self.line(&format!(
                        "  {:<8} {unit:<width$}  inputs identical to run {from_run} attempt {from_attempt}{restored}", "reused"));
                }
            }
            Notice::Decided { unit, decision } => {
                if matches!(decision, Decision::Reuse { .. }) {
                    self.with_counts(|counts| counts.done += 1);
                }
                // A unit done earlier in the run is counted (the opening line, the summary)
                // and said with `--explain` or `-v`: a resume of 10,000 done units prints
                // its few lines, not 10,000.
                if self.explain || (matches!(decision, Decision::Reuse { .. }) && verbosity() > 1) {
                    let label = if matches!(decision, Decision::Reuse { .. }) {
                        "done"
                    } else {
                        "run"
                    };
                    let width = self.name_width;
                    self.line(&format!("  {label:<8} {unit:<width$}  {decision}"));
                }
            }
            Notice::Started { unit, attempt } => {
                self.with_counts(|counts| {
                    counts.running += 1;
                    counts
                        .started
                        .push(((*unit).to_owned(), *attempt, Instant::now()));
                });
                if let Some(streamer) = &self.streamer {
                    streamer.started(unit, *attempt);
                }
                if verbosity() > 1 {
                    let width = self.name_width;
                    self.line(&format!(
                        "  {:<8} {unit:<width$}  attempt {attempt}",
                        "start"
                    ));
                }
            }
            Notice::Finished {
                unit,
                record,
                retry_in,
                log_dir,
            } => {
                let will_retry = retry_in.is_some();
                let satisfied = record.status.satisfies_dependents();
                if will_retry {
                    self.notes.retried.insert((*unit).to_owned());
                } else if record.status == AttemptStatus::Succeeded
                    && self.notes.retried.contains(*unit)
                {
                    self.notes.flaky.insert((*unit).to_owned());
                }
                if record.status == AttemptStatus::Interrupted && !record.phases.is_empty() {
                    self.notes.interrupted.insert((*unit).to_owned());
                }
                self.with_counts(|counts| {
                    counts.running = counts.running.saturating_sub(1);
                    counts.started.retain(|(name, number, _)| {
                        (name.as_str(), *number) != (*unit, record.attempt)
                    });
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
                if let Some(streamer) = &self.streamer {
                    let rest = streamer.finished(unit, record.attempt);
                    if !rest.is_empty() {
                        self.line(rest.trim_end_matches('\n'));
                    }
                }
                let quiet_success = verbosity() == 0 && record.status.satisfies_dependents();
                if !never_started && !quiet_success && !record.when_false() {
                    let mut text = finished_line(unit, self.name_width, record, *retry_in);
                    if matches!(
                        record.status,
                        AttemptStatus::Failed | AttemptStatus::TimedOut
                    ) && let Some(excerpt) = excerpt::of_attempt(log_dir, excerpt::EXCERPT_LINES)
                    {
                        // A retried attempt is not the unit's last: name it.
                        let attempt = retry_in.map(|_| record.attempt);
                        text.push('\n');
                        text.push_str(&excerpt::render(
                            &excerpt,
                            "           ",
                            &self.run_id,
                            unit,
                            attempt,
                        ));
                    }
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
            Notice::SkippedWhen { unit, condition } => {
                let width = self.name_width;
                let condition = crate::excerpt::clean_line(condition);
                self.line(&format!(
                    "  {:<8} {unit:<width$}  when: {condition} is false",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_line_names_running_units_against_their_timeout_and_never_wraps() {
        let running = [
            RunningUnit {
                name: "fetch_orders",
                elapsed: Duration::from_secs(12),
                timeout: Some(Duration::from_secs(300)),
            },
            RunningUnit {
                name: "load",
                elapsed: Duration::from_secs(3),
                timeout: None,
            },
        ];
        let wide = live_line((12, 40), 2, 1, Duration::from_secs(42), &running, 200);
        let narrow = live_line((12, 40), 2, 1, Duration::from_secs(42), &running, 40);
        assert_eq!(narrow.chars().count(), 39);
        insta::assert_snapshot!(format!("{wide}\n{narrow}"));
    }
}
