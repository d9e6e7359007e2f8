//! `apollo run --otlp-file PATH`: the run's OpenTelemetry trace (OTLP/JSON, as `apollo export
//! --format otlp-json` writes it) kept up to date while the run goes.
//!
//! [`TraceFile`] wraps the run's observer: when a unit's outcome is durable (an attempt ended,
//! a unit was reused or skipped), the next [`Observer::flush`] re-renders the trace from the
//! run model — the journal folded as every view folds it — and replaces the file atomically, so
//! a collector tailing it never reads half a document. Renders are spaced (at least a second
//! apart, and ten times as long as the last one took) so a run of many short units spends
//! little on them; the last one, when the run ends, is always written.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use apollo_core::engine::{Notice, Observer};
use apollo_store::{RunId, StateDir};

use super::args::ExecutionArgs;
use crate::error::CliError;

/// The least time between two renders while the run goes.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The run's observer, plus the trace file kept up to date.
pub(super) struct TraceFile<'o> {
    inner: &'o mut dyn Observer,
    target: Option<Target>,
}

struct Target {
    path: PathBuf,
    state_path: PathBuf,
    run_id: RunId,
    /// A unit's outcome became durable since the last render.
    dirty: bool,
    /// When the next render may be, and whether one was written yet.
    next: Option<Instant>,
    /// The first failure to write, said once.
    failed: Option<String>,
}

impl<'o> TraceFile<'o> {
    /// `inner`, and with `--otlp-file PATH` the trace of `run_id` kept there.
    pub(super) fn new(
        inner: &'o mut dyn Observer,
        execution: &ExecutionArgs,
        state_path: &Path,
        run_id: &RunId,
    ) -> Self {
        let target = execution.otlp_file.as_deref().map(|path| Target {
            path: path.to_path_buf(),
            state_path: state_path.to_path_buf(),
            run_id: run_id.clone(),
            dirty: false,
            next: None,
            failed: None,
        });
        Self { inner, target }
    }

    /// Lets go of the run's observer once the run has ended: what remains is the last render.
    pub(super) fn detach(self) -> FinalTrace {
        FinalTrace(self.target)
    }
}

/// The trace file's last render, written once the run has ended ([`TraceFile::detach`]).
pub(super) struct FinalTrace(Option<Target>);

impl FinalTrace {
    /// Writes the trace as the run ended; a failure to write (now or during the run) is a
    /// warning on `stderr`: the run is recorded, `apollo export` can write it again.
    pub(super) fn write(self, stderr: &mut dyn Write) {
        let Some(mut target) = self.0 else {
            return;
        };
        if let Err(error) = target.render() {
            target.failed.get_or_insert(error.to_string());
        }
        if let Some(error) = target.failed {
            let _ = writeln!(
                stderr,
                "warning: the trace file `{}` is not up to date: {error} (`apollo export --format otlp-json` writes it again)",
                target.path.display()
            );
        }
    }
}

impl Target {
    fn render(&mut self) -> Result<(), CliError> {
        let state = StateDir::open_existing(&self.state_path)?;
        // Warnings about the journal's tail (the writer is appending) are for `apollo
        // verify`, not for every render.
        let timeline = crate::state::run_model(&state, &self.run_id, &mut std::io::sink())?;
        crate::cmd::export::write_atomically(&self.path, |out| {
            apollo_replay::write_otlp_json(&timeline, out)
        })
    }
}

impl Observer for TraceFile<'_> {
    fn notice(&mut self, notice: &Notice<'_>) {
        self.inner.notice(notice);
        if let Some(target) = &mut self.target
            && matches!(
                notice,
                Notice::Finished { .. }
                    | Notice::Reused { .. }
                    | Notice::Skipped { .. }
                    | Notice::SkippedWhen { .. }
            )
        {
            target.dirty = true;
        }
    }

    fn flush(&mut self) {
        self.inner.flush();
        let Some(target) = &mut self.target else {
            return;
        };
        let now = Instant::now();
        if !target.dirty || target.next.is_some_and(|next| now < next) {
            return;
        }
        target.dirty = false;
        if let Err(error) = target.render() {
            target.failed.get_or_insert(error.to_string());
        }
        let took = now.elapsed();
        target.next = Some(Instant::now() + MIN_INTERVAL.max(took * 10));
    }
}
