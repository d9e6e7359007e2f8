//! The power-loss attack on a journal written `durability: batched` (DESIGN §18), without a
//! power cut: a run reports every synced position (`WriterOptions::on_sync`), and its journal
//! is cut at every byte from the first of them to its end — what a power loss can leave is a
//! prefix of what was written no shorter than what was synced — and the run resumed from each
//! cut. No unit that must not run twice runs again once its start was recorded, and no success
//! that was synced is run again; the same with segments small enough to rotate.
//!
//! Whether a unit "ran before the power loss" is read from how far the journal was synced when
//! its attempt began: a loss that leaves the journal synced at least that far came after it.
//! (Checked to fail when the engine starts a non-idempotent unit by a plain append.)
//!
//! The sync thread is given an hour, so the only syncs are the strict ones (the run's first
//! record, each non-idempotent start, the rotations, the run's end): the loss window is as
//! wide as the mode allows, and the test does not depend on timing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a failed step fails the test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apollo_core::engine::NoObserver;
use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{AttemptOutcome, AttemptRequest, CancelToken, Executor, Loaded, config};
use apollo_store::{Durability, SyncedPosition, WriterOptions};

use crate::{NoSessionObserver, NoStraySweep, Opened, RunSession, RunTarget, RunnerError};

/// `n1` and `n2` must not run twice; the rest may.
const PIPELINE: &str = "units:
  - {name: a, execute: 'true'}
  - {name: n1, deps: [a], execute: 'true', idempotent: false}
  - {name: b, deps: [n1], execute: 'true'}
  - {name: n2, deps: [b], execute: 'true', idempotent: false}
  - {name: d, deps: [n2], execute: 'true'}
";

const NON_IDEMPOTENT: [&str; 2] = ["n1", "n2"];

/// Runs nothing; counts attempts by unit, and notes how far the journal was synced when each
/// attempt began (`syncs`: what the writer reported so far, when given).
#[derive(Default)]
struct CountingExecutor {
    attempts: Mutex<BTreeMap<String, u32>>,
    syncs: Option<Arc<Mutex<Vec<SyncedPosition>>>>,
    synced_at_start: Mutex<BTreeMap<String, SyncedPosition>>,
}

impl Executor for CountingExecutor {
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        _context: &apollo_core::AttemptContext<'_>,
    ) -> AttemptOutcome {
        *(self.attempts.lock().unwrap())
            .entry(request.unit.name.clone())
            .or_default() += 1;
        if let Some(syncs) = &self.syncs {
            let synced = *syncs.lock().unwrap().last().unwrap();
            (self.synced_at_start.lock().unwrap()).insert(request.unit.name.clone(), synced);
        }
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        outcome.exit = Some(ExitStatus::Code(0));
        outcome
    }
}

/// A folder for one cut's copy: in memory where the machine has a tmpfs at `/dev/shm` (some
/// thousands of copies, each synced as a state directory is), else the usual temporary folder.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}

fn load(dir: &Path) -> (PathBuf, Loaded) {
    let config_path = dir.join("pipe.yaml");
    std::fs::write(&config_path, PIPELINE).unwrap();
    let loaded = config::load(&config_path).unwrap();
    (config_path, loaded)
}

/// One record as the test sees it: where it ends in its segment, and what it says.
struct Line {
    segment: u64,
    end: u64,
    kind: String,
    unit: Option<String>,
    status: Option<String>,
}

fn segment_path(journal: &Path, segment: u64) -> PathBuf {
    journal.join(format!("{segment:06}.log"))
}

/// The records of the journal (headers included, as kind `header`), in order.
fn lines(journal: &Path, n_segments: u64) -> Vec<Line> {
    let mut lines = Vec::new();
    for segment in 1..=n_segments {
        let bytes = std::fs::read(segment_path(journal, segment)).unwrap();
        let mut at = 0;
        for line in bytes.split_inclusive(|&byte| byte == b'\n') {
            at += line.len() as u64;
            let text = std::str::from_utf8(line).unwrap();
            let json: serde_json::Value =
                serde_json::from_str(text.splitn(3, ' ').nth(2).unwrap()).unwrap();
            let field = |name: &str| json.get(name).and_then(|v| v.as_str()).map(str::to_owned);
            lines.push(Line {
                segment,
                end: at,
                kind: field("kind").unwrap_or_else(|| "header".to_owned()),
                unit: field("unit"),
                status: field("status"),
            });
        }
    }
    lines
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs the pipeline in batched mode with segments of `segment_max_bytes`, then resumes it
/// from every cut of its journal after the first sync; returns how many cuts were tried.
fn attack(segment_max_bytes: u64) -> usize {
    let project = tempfile::tempdir().unwrap();
    let (config_path, loaded) = load(project.path());
    let state_dir = project.path().join(".apollo");
    let syncs = Arc::new(Mutex::new(Vec::<SyncedPosition>::new()));
    let options = WriterOptions::default()
        .durability(Durability::Batched)
        .sync_interval(Duration::from_secs(3600))
        .segment_max_bytes(segment_max_bytes)
        .on_sync({
            let syncs = Arc::clone(&syncs);
            Arc::new(move |position| syncs.lock().unwrap().push(position))
        });
    let executor = CountingExecutor {
        syncs: Some(Arc::clone(&syncs)),
        ..CountingExecutor::default()
    };
    let session =
        RunSession::new(&state_dir, &config_path, &loaded, &NoStraySweep).writer_options(options);
    let Opened::Ready(run) = session.open(&mut NoSessionObserver).unwrap() else {
        panic!("a new run");
    };
    let run_id = run.run_id().clone();
    run.run(
        &apollo_core::Dispatch::new(&executor),
        &mut NoObserver,
        &CancelToken::new(),
        &mut NoSessionObserver,
    )
    .unwrap();
    let syncs = syncs.lock().unwrap().clone();
    assert!(syncs.windows(2).all(|pair| pair[0] <= pair[1]), "{syncs:?}");
    let journal = state_dir.join("runs").join(run_id.as_str()).join("journal");
    let n_segments = (1..)
        .take_while(|&segment| segment_path(&journal, segment).exists())
        .count() as u64;
    let lines = lines(&journal, n_segments);
    let last = lines.last().unwrap();
    assert_eq!(last.kind, "run_finished");
    assert_eq!(
        syncs.last(),
        Some(&SyncedPosition {
            segment: last.segment,
            offset: last.end
        }),
        "the run's end is synced"
    );
    if segment_max_bytes < 4096 {
        assert!(n_segments > 2, "rotated: {n_segments} segments");
    }
    let synced_at_start = executor.synced_at_start.lock().unwrap().clone();

    let first = syncs[0];
    let mut n_cuts = 0;
    for segment in first.segment..=n_segments {
        let len = std::fs::metadata(segment_path(&journal, segment))
            .unwrap()
            .len();
        let header_end = lines
            .iter()
            .find(|line| line.segment == segment)
            .unwrap()
            .end;
        let from = if segment == first.segment {
            first.offset
        } else {
            header_end
        };
        for cut in from..=len {
            let at = SyncedPosition {
                segment,
                offset: cut,
            };
            // What the power loss could not take: everything up to the last sync before `at`.
            let synced = *syncs.iter().rev().find(|sync| **sync <= at).unwrap();
            resume_after_cut(&state_dir, &run_id, at, synced, &lines, &synced_at_start);
            n_cuts += 1;
        }
    }
    n_cuts
}

/// Copies the project, cuts its journal at `at` (segments after it gone, `last_segment` as it
/// was before they were made), resumes the run, and checks what ran.
fn resume_after_cut(
    state_dir: &Path,
    run_id: &apollo_store::RunId,
    at: SyncedPosition,
    synced: SyncedPosition,
    lines: &[Line],
    synced_at_start: &BTreeMap<String, SyncedPosition>,
) {
    let copy = scratch_dir();
    let (config_path, loaded) = load(copy.path());
    let copy_state = copy.path().join(".apollo");
    copy_dir(state_dir, &copy_state);
    let journal = copy_state
        .join("runs")
        .join(run_id.as_str())
        .join("journal");
    for later in at.segment + 1.. {
        let path = segment_path(&journal, later);
        if !path.exists() {
            break;
        }
        std::fs::remove_file(path).unwrap();
    }
    let last_segment = journal.join("last_segment");
    if at.segment == 1 {
        let _ = std::fs::remove_file(&last_segment);
    } else {
        std::fs::write(&last_segment, format!("{}\n", at.segment)).unwrap();
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(segment_path(&journal, at.segment))
        .unwrap()
        .set_len(at.offset)
        .unwrap();

    let position = |line: &Line| SyncedPosition {
        segment: line.segment,
        offset: line.end,
    };
    let kept: Vec<&Line> = lines.iter().filter(|line| position(line) <= at).collect();
    let executor = CountingExecutor::default();
    let session = RunSession::new(&copy_state, &config_path, &loaded, &NoStraySweep)
        .durability(Durability::None)
        .target(RunTarget::Named(run_id.clone()));
    match session.open(&mut NoSessionObserver) {
        Ok(Opened::Ready(run)) => {
            match run.run(
                &apollo_core::Dispatch::new(&executor),
                &mut NoObserver,
                &CancelToken::new(),
                &mut NoSessionObserver,
            ) {
                Ok(_) => {}
                Err(RunnerError::Engine { .. }) => {}
                Err(other) => panic!("cut at {at:?}: the resumed run failed: {other}"),
            }
        }
        Ok(Opened::NothingToResume(_)) => {}
        // A non-idempotent unit left in flight: the resume stops for a human, runs nothing.
        Err(RunnerError::Engine { .. }) => {}
        Err(other) => panic!("cut at {at:?} (synced {synced:?}): cannot resume: {other}"),
    }
    let attempts = executor.attempts.lock().unwrap().clone();
    for unit in NON_IDEMPOTENT {
        // The power loss came after the unit began if the journal was synced this far when it
        // began: then it ran, and must not run again.
        let ran = synced_at_start
            .get(unit)
            .is_some_and(|at_start| *at_start <= synced);
        assert!(
            !(ran && attempts.contains_key(unit)),
            "cut at {at:?} (synced {synced:?}): {unit} ran a second time"
        );
        let started = kept
            .iter()
            .any(|line| line.kind == "unit_started" && line.unit.as_deref() == Some(unit));
        assert!(
            !(started && attempts.contains_key(unit)),
            "cut at {at:?}: {unit} ran again after its start was recorded"
        );
    }
    for line in lines {
        if line.kind == "unit_finished"
            && line.status.as_deref() == Some("succeeded")
            && position(line) <= synced
        {
            let unit = line.unit.as_deref().unwrap();
            assert!(
                !attempts.contains_key(unit),
                "cut at {at:?} (synced {synced:?}): {unit}'s synced success was lost"
            );
        }
    }
}

#[test]
fn a_batched_journal_cut_anywhere_after_its_last_sync_resumes_without_a_second_run_of_what_must_not_run_twice()
 {
    let n_cuts = attack(64 * 1024 * 1024);
    assert!(n_cuts > 500, "{n_cuts} cuts");
}

#[test]
fn the_same_across_segment_rotations() {
    let n_cuts = attack(1200);
    assert!(n_cuts > 500, "{n_cuts} cuts");
}
