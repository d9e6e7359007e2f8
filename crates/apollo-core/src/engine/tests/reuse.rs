//! Reuse across runs (`reuse: true`): a unit whose input hash matches an earlier run's success
//! and whose outputs are as that success left them is recorded `unit_reused` and not run; its
//! dependents take it as a success; a changed output or input makes it (and what depends on
//! it) run.

use std::collections::HashMap;

use super::hashing::kinds_of;
use super::reuse_source::EventsSource;
use super::*;
use crate::engine::prefetch::{AHEAD, Ahead};
use crate::hash_cache::{CachedHash, FileHashCache, FileStamp};

/// `fetch` → `report`, both `reuse: true`, their outputs in `dir` (the fake executor writes
/// nothing: the files stand for what the units wrote).
fn reusable_chain(dir: &Path) -> Pipeline {
    std::fs::write(dir.join("fetched.csv"), "a,b\n").unwrap();
    std::fs::write(dir.join("report.txt"), "2 columns\n").unwrap();
    let fetch = Unit {
        outputs: vec!["fetched.csv".into()],
        reuse: true,
        ..unit("fetch", &[])
    };
    let report = Unit {
        outputs: vec!["report.txt".into()],
        reuse: true,
        ..unit("report", &["fetch"])
    };
    let mut pipeline = pipeline(vec![fetch, report], 2);
    pipeline.base_dir = dir.to_owned();
    pipeline
}

/// Run `pipeline` as a new run reusing from `source` (`None`: reuse off).
fn run_reusing(
    pipeline: &Pipeline,
    source: Option<EventsSource>,
) -> (RunReport, Vec<Event>, Vec<(String, u32)>) {
    run_reusing_with(pipeline, source, None)
}

/// [`run_reusing`] with a hash cache.
fn run_reusing_with(
    pipeline: &Pipeline,
    source: Option<EventsSource>,
    cache: Option<Arc<dyn FileHashCache>>,
) -> (RunReport, Vec<Event>, Vec<(String, u32)>) {
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let mut options = EngineOptions::new("r2", pipeline);
    if let Some(source) = source {
        options = options.reuse(Reuse::new(Arc::new(source)));
    }
    if let Some(cache) = cache {
        options = options.hash_cache(cache);
    }
    let report = run_with(
        pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    let events = journal.events.lock().unwrap().clone();
    (report, events, executor.ran())
}

fn run_finished(events: &[Event]) -> &crate::event::RunFinished {
    events
        .iter()
        .find_map(|event| match event {
            Event::RunFinished(finished) => Some(finished),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_second_run_with_identical_inputs_runs_nothing_and_records_unit_reused() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    let (report, events, ran) =
        run_reusing(&pipeline, Some(EventsSource::from_events("r1", &first)));
    assert_eq!(ran, vec![]);
    assert_eq!(
        kinds_of(&events),
        ["unit_reused fetch", "unit_reused report", "run_finished"]
    );
    let from_r1 = UnitResult::ReusedFromRun {
        run_id: "r1".into(),
        attempt: 1,
    };
    assert_eq!(
        report.units,
        [
            ("fetch".to_owned(), from_r1.clone()),
            ("report".to_owned(), from_r1)
        ]
    );
    let finished = run_finished(&events);
    assert_eq!((finished.succeeded, finished.reused), (0, 2));
    assert_eq!(report.status, Some(RunStatus::Succeeded));
}

#[test]
fn without_reuse_or_with_a_changed_output_the_unit_and_its_downstream_run() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    // Reuse off (`--no-reuse`): everything runs.
    let (_, _, ran) = run_reusing(&pipeline, None);
    assert_eq!(ran, vec![("fetch".into(), 1), ("report".into(), 1)]);
    // `fetch`'s output edited since: it runs, and `report`, whose input includes fetch's
    // output hash, runs after it.
    std::fs::write(dir.path().join("fetched.csv"), "a,b,c\n").unwrap();
    let (report, events, ran) =
        run_reusing(&pipeline, Some(EventsSource::from_events("r1", &first)));
    assert_eq!(ran, vec![("fetch".into(), 1), ("report".into(), 1)]);
    assert!(
        !kinds_of(&events)
            .iter()
            .any(|kind| kind.starts_with("unit_reused"))
    );
    assert_eq!(
        report.count(|result| matches!(result, UnitResult::Succeeded { .. })),
        2
    );
}

#[test]
fn a_changed_command_changes_the_input_hash_and_the_unit_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    pipeline.units[1].execute = Command::Shell("run report --wide".into());
    let (_, events, ran) = run_reusing(&pipeline, Some(EventsSource::from_events("r1", &first)));
    assert_eq!(ran, vec![("report".into(), 1)]);
    assert_eq!(kinds_of(&events)[0], "unit_reused fetch");
}

#[test]
fn the_plan_explains_reuse_and_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    pipeline.units[1].env.insert("WIDE".into(), "1".into());
    let options = EngineOptions::new("r2", &pipeline).reuse(Reuse::new(Arc::new(
        EventsSource::from_events("r1", &first),
    )));
    let plan = dry_run(
        &pipeline,
        &PriorState::empty(),
        &options,
        &CancelToken::new(),
    )
    .unwrap();
    let text: Vec<String> = plan
        .iter()
        .map(|(unit, planned)| format!("{unit}: {planned}"))
        .collect();
    assert_eq!(
        text,
        [
            "fetch: reused: inputs identical to run r1 attempt 1",
            "report: runs, not reused: env WIDE added since run r1 attempt 1",
        ]
    );
}

#[test]
fn a_unit_reused_in_an_earlier_process_of_the_run_stays_reused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    let (_, second, _) = run_reusing(&pipeline, Some(EventsSource::from_events("r1", &first)));
    // The run is resumed from its journal up to the reuse of `fetch` (as if apollo died then).
    let prior = PriorState::from_events(&second[..1]);
    let mut journal = SharedJournal::default();
    journal
        .events
        .lock()
        .unwrap()
        .extend_from_slice(&second[..1]);
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = run_with(
        &pipeline,
        &prior,
        &EngineOptions::new("r2", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    // Reuse is off in this process: `report` runs, `fetch` stays reused from r1.
    assert_eq!(executor.ran(), vec![("report".into(), 1)]);
    assert_eq!(
        report.units[0].1,
        UnitResult::ReusedFromRun {
            run_id: "r1".into(),
            attempt: 1
        }
    );
}

#[test]
fn many_reuse_checks_in_flight_and_the_units_that_must_run_wait_their_turn() {
    let dir = tempfile::tempdir().unwrap();
    let units: Vec<Unit> = (0..300)
        .map(|i| {
            let output = format!("out{i}.txt");
            std::fs::write(dir.path().join(&output), format!("{i}")).unwrap();
            Unit {
                outputs: vec![output],
                reuse: true,
                ..unit(&format!("u{i:03}"), &[])
            }
        })
        .collect();
    let mut pipeline = pipeline(units, 1);
    pipeline.base_dir = dir.path().to_owned();
    let first = first_run(&pipeline, |_, _, _| ok());
    // Every 7th unit's output changed since: those run, one at a time, each once.
    for i in (0..300).step_by(7) {
        std::fs::write(dir.path().join(format!("out{i}.txt")), "changed").unwrap();
    }
    let (report, events, mut ran) =
        run_reusing(&pipeline, Some(EventsSource::from_events("r1", &first)));
    let expected: Vec<(String, u32)> = (0..300)
        .step_by(7)
        .map(|i| (format!("u{i:03}"), 1))
        .collect();
    // In whatever order their checks ended (a check handed to a hashing thread may end after
    // later units' checks on a loaded machine): each once.
    ran.sort();
    assert_eq!(ran, expected);
    let n_reused = report.count(|result| matches!(result, UnitResult::ReusedFromRun { .. }));
    assert_eq!(n_reused, 300 - expected.len());
    assert_eq!(run_finished(&events).reused as usize, n_reused);
    assert_eq!(report.status, Some(RunStatus::Succeeded));
}

/// Tells, at each notice of a reused unit, whether its `unit_reused` was durable then.
struct ReusedNotices {
    durable: Arc<Mutex<Vec<Event>>>,
    told: Vec<(String, bool)>,
}

impl Observer for ReusedNotices {
    fn notice(&mut self, notice: &Notice<'_>) {
        if let Notice::Reused { unit, .. } = notice {
            let durable =
                self.durable.lock().unwrap().iter().any(
                    |event| matches!(event, Event::UnitReused(reused) if reused.unit == *unit),
                );
            self.told.push(((*unit).to_owned(), durable));
        }
    }
}

/// A chain of `n` reused units in `dir` whose outputs' hashes are cached (by a first reuse), as
/// a later run finds them: the engine thread then decides the chain itself, in one turn,
/// however slow the machine. The pipeline, and the options of a run reusing from the first.
fn cached_reused_chain(dir: &Path, n: usize) -> (Pipeline, EngineOptions) {
    let units: Vec<Unit> = (0..n)
        .map(|i| {
            let output = format!("out{i}.txt");
            std::fs::write(dir.join(&output), format!("{i}")).unwrap();
            let deps: Vec<String> = (i > 0)
                .then(|| format!("u{:04}", i - 1))
                .into_iter()
                .collect();
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            Unit {
                outputs: vec![output],
                reuse: true,
                ..unit(&format!("u{i:04}"), &deps)
            }
        })
        .collect();
    let mut pipeline = pipeline(units, 2);
    pipeline.base_dir = dir.to_owned();
    let first = first_run(&pipeline, |_, _, _| ok());
    let cache = Arc::new(ThreadsCache::default());
    let _ = run_reusing_with(
        &pipeline,
        Some(EventsSource::from_events("r1", &first)),
        Some(cache.clone()),
    );
    for cached in cache.hashes.lock().unwrap().values_mut() {
        cached.hashed_at_ns = i64::MAX / 2;
    }
    let options = EngineOptions::new("r2", &pipeline)
        .reuse(Reuse::new(Arc::new(EventsSource::from_events(
            "r1", &first,
        ))))
        .hash_cache(cache);
    (pipeline, options)
}

#[test]
fn a_long_chain_of_reused_units_goes_out_in_bounded_unsynced_batches_that_the_last_append_makes_durable()
 {
    // A chain is decided whole in one turn of the engine: its records once piled up in one
    // batch (20 MB at 10,000 units). Now a full batch of reuses goes out unsynced.
    let dir = tempfile::tempdir().unwrap();
    let n = 2_500;
    let (pipeline, options) = cached_reused_chain(dir.path(), n);
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let mut observer = ReusedNotices {
        durable: journal.events.clone(),
        told: Vec::new(),
    };
    let report = run(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &TempLogs,
        &CancelToken::new(),
        &mut observer,
    )
    .unwrap();
    executor.assert_no_violations();
    assert_eq!(executor.ran(), vec![]);
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    // Every record durable in the end, in the chain's order, `run_finished` last.
    let events = journal.events.lock().unwrap().clone();
    let kinds = kinds_of(&events);
    assert_eq!(kinds.len(), n + 1);
    assert!(
        kinds[..n]
            .iter()
            .enumerate()
            .all(|(i, kind)| *kind == format!("unit_reused u{i:04}"))
    );
    assert_eq!(run_finished(&events).reused as usize, n);
    // Unsynced batches of at most 1,024 records (smaller when a loaded machine makes the
    // engine append what it has), the last durable, then `run_finished`.
    let (log, len) = (&journal.appended, journal.appended.len());
    let bounded = log[..len - 2].iter().all(|(s, k)| !s && *k <= 1024) && log[len - 2].0;
    let total: usize = log[..len - 1].iter().map(|(_, k)| k).sum();
    assert!(
        bounded && total == n && log[len - 1] == (true, 1),
        "{log:?}"
    );
    // Each unit told as reused once, and only once its record was durable.
    assert_eq!(observer.told.len(), n);
    assert!(
        observer.told.iter().all(|(_, durable)| *durable),
        "told before durable"
    );
}

#[test]
fn a_journal_that_fails_an_unsynced_append_stops_the_run_and_nothing_unsynced_counts_as_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, options) = cached_reused_chain(dir.path(), 2_500);
    // The first batch of reuses goes out unsynced; the second fails.
    let mut journal = SharedJournal {
        fail_from: Some(1),
        ..SharedJournal::default()
    };
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let error = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap_err();
    assert!(matches!(error, EngineError::Journal(_)), "{error}");
    assert_eq!(journal.appended, [(false, 1024)]);
    assert!(
        journal.events.lock().unwrap().is_empty(),
        "nothing was synced"
    );
    assert_eq!(executor.ran(), vec![]);
}

/// A hash cache that remembers which threads looked a file up in it and which told it a
/// hash: only a thread that read the file does that.
#[derive(Debug, Default)]
struct ThreadsCache {
    hashes: Mutex<HashMap<FileStamp, CachedHash>>,
    looked_up_from: Mutex<Vec<std::thread::ThreadId>>,
    told_from: Mutex<Vec<std::thread::ThreadId>>,
}

impl FileHashCache for ThreadsCache {
    fn get(&self, stamp: &FileStamp) -> Option<CachedHash> {
        self.looked_up_from
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.hashes.lock().unwrap().get(stamp).cloned()
    }

    fn put(&self, stamp: FileStamp, hash: CachedHash) {
        self.told_from
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        self.hashes.lock().unwrap().insert(stamp, hash);
    }
}

#[test]
fn the_engine_thread_checks_reuse_from_the_hash_cache_alone_and_never_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    let cache = Arc::new(ThreadsCache::default());
    // `run_with` runs the engine on this thread; first without outputs hashed ahead.
    let engine_thread = std::thread::current().id();
    AHEAD.set(Ahead::Never);
    // Both units reused, nothing run.
    let run_reusing_both = || {
        let (_, events, ran) = run_reusing_with(
            &pipeline,
            Some(EventsSource::from_events("r1", &first)),
            Some(cache.clone()),
        );
        assert_eq!(ran, vec![]);
        assert_eq!(
            kinds_of(&events),
            ["unit_reused fetch", "unit_reused report", "run_finished"]
        );
    };

    // Nothing cached: each check in the chain is looked up here first, then handed to a
    // hashing thread, which reads the output.
    run_reusing_both();
    let told_from = std::mem::take(&mut *cache.told_from.lock().unwrap());
    assert_eq!(told_from.len(), 2, "both outputs were read");
    assert!(
        !told_from.contains(&engine_thread),
        "a file was read on the engine thread"
    );
    assert!(
        cache
            .looked_up_from
            .lock()
            .unwrap()
            .contains(&engine_thread)
    );

    // Cached, as a later run finds the hashes (taken well after the files last changed: not
    // racily clean): the engine thread checks the chain itself, reading nothing.
    for cached in cache.hashes.lock().unwrap().values_mut() {
        cached.hashed_at_ns = i64::MAX / 2;
    }
    cache.looked_up_from.lock().unwrap().clear();
    run_reusing_both();
    assert!(
        cache.told_from.lock().unwrap().is_empty(),
        "nothing was read"
    );
    let looked_up_from = std::mem::take(&mut *cache.looked_up_from.lock().unwrap());
    assert_eq!(
        looked_up_from,
        vec![engine_thread; 2],
        "both checks made here"
    );

    // With the outputs hashed ahead (here, all before the engine decides anything), the
    // checks only compare: each output looked up once, by the prefetcher, nothing read.
    AHEAD.set(Ahead::First);
    run_reusing_both();
    AHEAD.set(Ahead::Racing);
    assert!(cache.told_from.lock().unwrap().is_empty());
    assert_eq!(cache.looked_up_from.lock().unwrap().len(), 2);
}

#[test]
fn an_output_hashed_ahead_is_not_trusted_once_an_attempt_of_the_run_has_started() {
    let dir = tempfile::tempdir().unwrap();
    let mut pipeline = reusable_chain(dir.path());
    let first = first_run(&pipeline, |_, _, _| ok());
    // Outputs are hashed ahead from the hash cache alone: a run that reads them fills it
    // (hashes taken well after the files last changed: not racily clean).
    let cache = Arc::new(ThreadsCache::default());
    AHEAD.set(Ahead::Never);
    let (_, _, ran) = run_reusing_with(
        &pipeline,
        Some(EventsSource::from_events("r1", &first)),
        Some(cache.clone()),
    );
    assert_eq!(ran, vec![]);
    for cached in cache.hashes.lock().unwrap().values_mut() {
        cached.hashed_at_ns = i64::MAX / 2;
    }
    // `fetch` must run (its command changed); its attempt also rewrites `report`'s output,
    // which was hashed ahead, as recorded, before `fetch` started.
    pipeline.units[0].execute = Command::Shell("fetch --again".into());
    let report_txt = dir.path().join("report.txt");
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, move |unit, _, _| {
        if unit == "fetch" {
            std::fs::write(&report_txt, "rewritten by fetch\n").unwrap();
        }
        ok()
    });
    let options = EngineOptions::new("r2", &pipeline)
        .reuse(Reuse::new(Arc::new(EventsSource::from_events(
            "r1", &first,
        ))))
        .hash_cache(cache);
    AHEAD.set(Ahead::First);
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    );
    AHEAD.set(Ahead::Racing);
    report.unwrap();
    assert_eq!(
        executor.ran(),
        vec![("fetch".into(), 1), ("report".into(), 1)],
        "report's output changed after it was hashed ahead"
    );
}
