//! The hashing threads: a unit's declared input files are hashed (and captured) here before
//! the unit is decided, and so are a done unit's declared outputs on resume and its reuse
//! lookup, so that no file is read on the engine thread (see the module docs of `engine`).

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::policy::{self, OutputCheck};
use super::prefetch::OutputPrefetch;
use super::reuse::{self, Reuse, ReuseCheck};
use super::workers::{FromWorker, WorkerShared, capture_for};
use crate::capture::{Capture, FileEntry};
use crate::event::InputComponent;
use crate::hash::{self, HashError, HashedFiles, Limits};
use crate::hash_cache::FileHashCache;
use crate::model::Unit;
use crate::resume::PriorState;

/// A unit whose declared input files are to be hashed, or whose declared outputs are to be
/// checked before it is decided (it is done in the prior state), for a hashing thread.
pub(super) struct HashJob {
    pub(super) unit_idx: usize,
    /// Each dependency's name and output hash.
    pub(super) upstream: Vec<(String, String)>,
    /// Whether to check its declared outputs too ([`policy::check_outputs`]).
    pub(super) check_outputs: bool,
    /// Whether to look it up for reuse from an earlier run ([`reuse::check`]).
    pub(super) check_reuse: bool,
    /// Whether it is hashed only for that (it holds no place among the running).
    pub(super) reuse_only: bool,
}

/// A unit's input components, hashed off the engine thread, and what its output check found.
pub(super) struct Hashed {
    pub(super) unit_idx: usize,
    pub(super) inputs: Result<Vec<InputComponent>, HashError>,
    /// The input hash of `inputs` when they were hashed (computed here, off the engine thread).
    pub(super) input_hash: Option<String>,
    /// The manifest of the input files hashed (and captured), with their stamps.
    pub(super) files: HashedFiles,
    /// How long hashing its inputs took: it counts against the attempt's timeout.
    pub(super) took: Duration,
    /// The output check, when asked for and the inputs were hashed (`Err`: cancelled).
    pub(super) outputs: Option<Result<OutputCheck, HashError>>,
    /// The reuse check, when asked for and the inputs were hashed.
    pub(super) reuse: Option<ReuseCheck>,
    /// As in its [`HashJob`].
    pub(super) reuse_only: bool,
}

/// What hashing a job needs besides the job: shared by the hashing threads and the engine
/// thread (which takes jobs on itself when that needs no file read, see
/// [`Scheduler`](super::scheduler::Scheduler)).
#[derive(Clone, Copy)]
pub(super) struct HashContext<'a> {
    pub(super) pipeline: &'a crate::model::Pipeline,
    pub(super) cancel: &'a crate::cancel::CancelToken,
    pub(super) halt: &'a std::sync::atomic::AtomicBool,
    pub(super) capture: Option<&'a dyn crate::capture::BlobSink>,
    pub(super) prior: &'a PriorState,
    pub(super) reuse: Option<&'a Reuse>,
    pub(super) cache: Option<&'a dyn FileHashCache>,
    /// Declared outputs hashed ahead for the reuse checks (`None`: no unit has one).
    pub(super) prefetch: Option<&'a OutputPrefetch>,
}

impl<'a> HashContext<'a> {
    pub(super) fn new(
        shared: &WorkerShared<'a>,
        prior: &'a PriorState,
        (reuse, cache): (Option<&'a Reuse>, Option<&'a dyn FileHashCache>),
        prefetch: Option<&'a OutputPrefetch>,
    ) -> Self {
        Self {
            pipeline: shared.pipeline,
            cancel: shared.cancel,
            halt: shared.halt,
            capture: shared.capture,
            prior,
            reuse,
            cache,
            prefetch,
        }
    }
}

/// One hashing thread: hashes the declared input files of the units handed to it, and checks
/// the declared outputs of those done in `prior`, within each unit's timeout, until the run's
/// cancellation or `halt` (checked before every read), and reports each result to the
/// scheduler. It runs until both job channels close; a job the engine thread handed back
/// (`deferred`: it needs a file read) goes first.
///
/// The output check gets a timeout of its own (the unit's, from when the inputs were hashed):
/// it decides whether the unit runs at all, so it is not taken off the attempt that may follow
/// (a rerun after outputs that took the whole timeout to hash would otherwise time out
/// without a process).
pub(super) fn hasher(
    context: HashContext<'_>,
    (jobs, deferred): (&Receiver<HashJob>, &Receiver<HashJob>),
    to_scheduler: &Sender<FromWorker>,
) {
    while let Some(job) = next_job(jobs, deferred) {
        let Some(message) = hash_job(&context, &job, false) else {
            // Only the engine thread's stat-only limits leave a job undone.
            continue;
        };
        if to_scheduler.send(FromWorker::Hashed(message)).is_err() {
            return;
        }
    }
}

/// Hashes `job`'s unit's input files, checks its outputs and looks it up for reuse, as the
/// job asks. With `stat_only` (the engine thread), nothing is read or copied and no folder
/// walked: `None` when that would be needed — a file the hash cache does not vouch for, a
/// glob, an output folder, outputs to restore, a journal to read to explain a miss.
pub(super) fn hash_job(
    context: &HashContext<'_>,
    job: &HashJob,
    stat_only: bool,
) -> Option<Hashed> {
    let pipeline = context.pipeline;
    let unit = &pipeline.units[job.unit_idx];
    // A glob is expanded by reading folders, as many as it spans.
    if stat_only
        && unit
            .inputs
            .iter()
            .chain(&unit.outputs)
            .any(|declared| hash::is_glob(declared))
    {
        return None;
    }
    let internal_error = |what| HashError {
        what,
        path: pipeline.base_dir.clone(),
        problem: hash::Problem::Io(std::io::Error::other("internal error while hashing")),
    };
    let started = Instant::now();
    let limits = || {
        let limits = Limits::new(context.cancel, unit.timeout, unit.timeout)
            .with_halt(context.halt)
            .with_cache(context.cache);
        if stat_only {
            limits.stat_only()
        } else {
            limits
        }
    };
    let upstream: Vec<(&str, &str)> = job
        .upstream
        .iter()
        .map(|(name, hash)| (name.as_str(), hash.as_str()))
        .collect();
    let capture = capture_for(context.capture, unit, unit.capture.mode.inputs());
    let hashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hash::input_files_within(
            unit,
            &pipeline.base_dir,
            &upstream,
            &limits(),
            capture.as_ref(),
        )
    }))
    .unwrap_or_else(|_| Err(internal_error("input file")));
    let (inputs, files) = match hashed {
        Err(error) if stat_only && error.not_read_here() => return None,
        Ok((inputs, mut files)) => {
            why_not_captured(&mut files.entries, capture.as_ref(), unit);
            (Ok(inputs), files)
        }
        Err(error) => (Err(error), HashedFiles::default()),
    };
    let took = started.elapsed();
    let outputs = (job.check_outputs && inputs.is_ok()).then(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            policy::check_outputs(context.prior, unit, &pipeline.base_dir, &limits())
        }))
        .unwrap_or_else(|_| {
            Ok(OutputCheck {
                changes: vec!["outputs cannot be read: internal error while hashing".into()],
                marked_hash: None,
            })
        })
    });
    if stat_only && matches!(&outputs, Some(Err(error)) if error.not_read_here()) {
        return None;
    }
    let input_hash = inputs
        .as_ref()
        .ok()
        .map(|inputs| hash::combine_components(inputs));
    let reuse = match (&inputs, &input_hash, context.reuse) {
        (Ok(components), Some(input_hash), Some(reuse)) if job.check_reuse => Some(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                reuse::check(
                    reuse,
                    unit,
                    &pipeline.base_dir,
                    (input_hash, components),
                    &limits(),
                    context.prefetch.map(|prefetch| (prefetch, job.unit_idx)),
                )
            }))
            .unwrap_or_else(|_| {
                Some(ReuseCheck::NotReused(
                    "internal error while checking for reuse".into(),
                ))
            })?,
        ),
        _ => None,
    };
    Some(Hashed {
        unit_idx: job.unit_idx,
        inputs,
        input_hash,
        files,
        took,
        outputs,
        reuse,
        reuse_only: job.reuse_only,
    })
}

/// Files hashed without capturing say why: the unit's capture mode excludes them
/// (`capture: outputs`), or the run keeps no blob store.
pub(super) fn why_not_captured(
    files: &mut [FileEntry],
    capture: Option<&Capture<'_>>,
    unit: &Unit,
) {
    if capture.is_some() || files.is_empty() {
        return;
    }
    let reason = match unit.capture.mode {
        crate::capture::CaptureMode::All => "no blob store".to_owned(),
        mode => format!("capture: {}", mode.as_str()),
    };
    for file in files {
        file.not_captured = Some(reason.clone());
    }
}

/// How long a hashing thread, or the engine thread with reuse checks in flight, polls its
/// channel before it sleeps in it. A reuse check of a unit without input files takes
/// microseconds, and in a chain each one waits for the one before: a thread woken through the
/// kernel for every one of them cost more than the checks (a no-op run of a 10,000-unit chain
/// spent most of its second in futex wake-ups).
pub(super) const POLL_BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// The next job, a deferred one first, polled for [`POLL_BEFORE_SLEEP`] before sleeping;
/// `None` once both channels are closed.
fn next_job(jobs: &Receiver<HashJob>, deferred: &Receiver<HashJob>) -> Option<HashJob> {
    use crossbeam_channel::TryRecvError;
    let polling_since = Instant::now();
    loop {
        let from_deferred = deferred.try_recv();
        if let Ok(job) = from_deferred {
            return Some(job);
        }
        let from_jobs = jobs.try_recv();
        if let Ok(job) = from_jobs {
            return Some(job);
        }
        let closed = |result: Result<HashJob, TryRecvError>| {
            matches!(result, Err(TryRecvError::Disconnected))
        };
        let sleep = polling_since.elapsed() >= POLL_BEFORE_SLEEP;
        match (closed(from_deferred), closed(from_jobs)) {
            (true, true) => return None,
            (true, false) if sleep => return jobs.recv().ok(),
            (false, true) if sleep => return deferred.recv().ok(),
            (false, false) if sleep => {
                crossbeam_channel::select! {
                    recv(deferred) -> job => if let Ok(job) = job { return Some(job) },
                    recv(jobs) -> job => if let Ok(job) = job { return Some(job) },
                }
                // A channel closed: the loop looks again.
            }
            _ => std::hint::spin_loop(),
        }
    }
}
