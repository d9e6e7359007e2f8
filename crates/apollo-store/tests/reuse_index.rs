//! The reuse index (`index/reuse`): derived from the journals, found again when deleted,
//! garbled or stale, and never the reason a lookup answers differently from the journals.

use std::fs;

use apollo_core::engine::ReuseSource;
use apollo_core::event::{
    AttemptStatus, Event, InputComponent, InputKind, RunStarted, UnitFinished, UnitReused,
    UnitStarted,
};
use apollo_store::{JournalWriter, ReuseIndex, RunId, StateDir};

use crate::support::fast;

const IDENTITY: &str = "etl@../pipeline.yaml";

fn started(unit: &str, attempt: u32, input_hash: &str) -> Event {
    Event::UnitStarted(UnitStarted {
        unit: unit.into(),
        attempt,
        input_hash: input_hash.into(),
        inputs: vec![InputComponent {
            kind: InputKind::File,
            name: "data/raw.csv".into(),
            hash: format!("file-of-{input_hash}"),
        }],
        inputs_manifest: None,
    })
}

fn finished(unit: &str, attempt: u32, status: AttemptStatus, output_hash: &str) -> Event {
    Event::UnitFinished(UnitFinished {
        unit: unit.into(),
        attempt,
        status,
        exit: None,
        failed_phase: None,
        timed_out: false,
        duration_ms: 1,
        queued_ms: 0,
        output_hash: (status == AttemptStatus::Succeeded).then(|| output_hash.to_owned()),
        stdout_bytes: 0,
        stderr_bytes: 0,
        user_cpu_ms: 0,
        sys_cpu_ms: 0,
        max_rss_kib: 0,
        leftovers_killed: 0,
        phases: Vec::new(),
        error: None,
    })
}

/// `fetch` reused from `run`'s `attempt`, which had `input_hash` and left `output_hash`.
fn fetch_reused(run: &RunId, attempt: u32, input_hash: &str, output_hash: &str) -> Event {
    Event::UnitReused(UnitReused {
        unit: "fetch".into(),
        from_run: run.to_string(),
        from_attempt: attempt,
        input_hash: input_hash.into(),
        output_hash: output_hash.into(),
        ..UnitReused::default()
    })
}

/// A run of `identity` whose journal holds `events` after its `run_started`.
fn make_run(state: &StateDir, identity: Option<&str>, events: &[Event]) -> RunId {
    let id = state.new_run_id();
    let run = state.create_run(&id).unwrap();
    let mut writer = JournalWriter::create(run.path(), id.as_str(), fast()).unwrap();
    let mut all = vec![Event::RunStarted(RunStarted {
        run_id: id.to_string(),
        pipeline: "etl".into(),
        config_path: "pipeline.yaml".into(),
        config_hash: "c".repeat(64),
        definition_hash: "d".repeat(64),
        apollo_version: "0.1.0".into(),
        host: "test".into(),
        pid: 1,
        units: vec!["fetch".into()],
        identity: identity.map(str::to_owned),
        params: Default::default(),
        ..Default::default()
    })];
    all.extend_from_slice(events);
    writer.append_batch(&all).unwrap();
    id
}

/// What the index answers for `fetch`: by input hash `h1`, `h2`, and its latest success.
fn answers(index: &ReuseIndex) -> Vec<Option<(String, u32, String)>> {
    let source = index.source(IDENTITY, None);
    let short = |candidate: Option<apollo_core::engine::ReuseCandidate>| {
        candidate.map(|candidate| (candidate.run_id, candidate.attempt, candidate.output_hash))
    };
    vec![
        short(source.find("fetch", "h1")),
        short(source.find("fetch", "h2")),
        short(source.latest("fetch")),
    ]
}

/// Three runs: r1 `fetch` succeeds with h1 → o1; r2 fails once then succeeds with h2 → o2;
/// r3 reuses r1's attempt for h1. Plus a run of another pipeline and one without identity.
fn three_runs(state: &StateDir) -> (RunId, RunId) {
    let r1 = make_run(
        state,
        Some(IDENTITY),
        &[
            started("fetch", 1, "h1"),
            finished("fetch", 1, AttemptStatus::Succeeded, "o1"),
        ],
    );
    let r2 = make_run(
        state,
        Some(IDENTITY),
        &[
            started("fetch", 1, "h2"),
            finished("fetch", 1, AttemptStatus::Failed, ""),
            started("fetch", 2, "h2"),
            finished("fetch", 2, AttemptStatus::Succeeded, "o2"),
        ],
    );
    make_run(
        state,
        Some("other@../other.yaml"),
        &[
            started("fetch", 1, "h1"),
            finished("fetch", 1, AttemptStatus::Succeeded, "other"),
        ],
    );
    make_run(
        state,
        None,
        &[
            started("fetch", 1, "h1"),
            finished("fetch", 1, AttemptStatus::Succeeded, "old"),
        ],
    );
    (r1, r2)
}

#[test]
fn the_index_is_built_from_the_journals_and_found_again_when_deleted_or_garbled() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let (r1, r2) = three_runs(&state);
    let expected = vec![
        Some((r1.to_string(), 1, "o1".to_owned())),
        Some((r2.to_string(), 2, "o2".to_owned())),
        Some((r2.to_string(), 2, "o2".to_owned())),
    ];
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(answers(&index), expected);
    assert_eq!(refresh.rebuilt.as_deref(), Some("is missing"));
    assert_eq!((refresh.runs_read, refresh.written), (4, true));
    let file = dir.path().join("index/reuse");
    assert!(file.is_file());

    // Up to date: nothing is read, nothing written; the answers come from the file.
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(answers(&index), expected);
    assert_eq!(
        (refresh.rebuilt, refresh.runs_read, refresh.written),
        (None, 0, false)
    );
    // The latest success keeps its inputs, to explain a "not reused".
    let latest = index.source(IDENTITY, None).latest("fetch").unwrap();
    assert_eq!(latest.inputs[0].hash, "file-of-h2");

    // Written by an older apollo (its checksum line a SHA-256): read as it is, same answers,
    // and rewritten once (with `write`) so later runs check it the cheaper way.
    let current = fs::read(&file).unwrap();
    let newline = current.iter().position(|&byte| byte == b'\n').unwrap();
    let body = &current[newline + 1..];
    let older = [apollo_core::hash::sha256_hex(body).as_bytes(), b"\n", body].concat();
    fs::write(&file, &older).unwrap();
    let (index, refresh) = ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(answers(&index), expected);
    assert_eq!(
        (refresh.rebuilt, refresh.runs_read, refresh.written),
        (None, 0, false)
    );
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(answers(&index), expected);
    assert_eq!(
        (refresh.rebuilt, refresh.runs_read, refresh.written),
        (None, 0, true)
    );
    let rewritten = fs::read(&file).unwrap();
    let line_end = rewritten.iter().position(|&byte| byte == b'\n');
    assert_eq!(line_end, Some(8), "checked by CRC-32C now");
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert!(!refresh.written, "written once");

    // Garbled: one flipped bit fails the checksum; rebuilt, same answers.
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    fs::write(&file, &bytes).unwrap();
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(refresh.rebuilt.as_deref(), Some("fails its checksum"));
    assert_eq!(answers(&index), expected);

    // Truncated, as by a crash mid-write of a non-atomic writer: rebuilt.
    fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert!(refresh.rebuilt.is_some());
    assert_eq!(answers(&index), expected);

    // Deleted: rebuilt.
    fs::remove_file(&file).unwrap();
    let (index, refresh) = ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(answers(&index), expected);
    assert!(
        !refresh.written && !file.exists(),
        "a read-only refresh writes nothing"
    );
}

#[test]
fn a_stale_index_reads_only_new_runs_and_a_pruned_run_makes_it_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let (r1, _) = three_runs(&state);
    ReuseIndex::refresh(&state, true).unwrap();

    // A new run reusing r1's attempt for h1: only it is read; h1 still names r1 (the run
    // that did the work), and it is now the latest.
    make_run(&state, Some(IDENTITY), &[fetch_reused(&r1, 1, "h1", "o1")]);
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!((refresh.rebuilt.as_deref(), refresh.runs_read), (None, 1));
    let source = index.source(IDENTITY, None);
    assert_eq!(source.find("fetch", "h1").unwrap().run_id, r1.to_string());
    assert_eq!(source.latest("fetch").unwrap().input_hash, "h1");
    // The run being resumed is left out of its own lookups.
    assert!(
        index
            .source(IDENTITY, Some(&r1))
            .find("fetch", "h1")
            .is_none()
    );

    // r1 pruned: the index covers a run that is gone, so it is rebuilt from what is left.
    fs::remove_dir_all(dir.path().join("runs").join(r1.as_str())).unwrap();
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(
        refresh.rebuilt,
        Some(format!("covers run {r1}, which is gone"))
    );
}

#[test]
fn the_hash_cache_survives_a_save_and_a_damaged_one_is_ignored() {
    use apollo_core::hash_cache::{CachedHash, FileHashCache, FileStamp};
    use apollo_store::HashCache;

    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let stamp = FileStamp {
        dev: 1,
        ino: 2,
        size: 3,
        mtime_ns: 4,
        ctime_ns: 5,
    };
    let hash = CachedHash {
        sha256: "a".repeat(64),
        hashed_at_ns: 6,
    };
    let cache = HashCache::load(&state);
    assert!(cache.is_empty());
    cache.put(stamp, hash.clone());
    cache.save(&state, true).unwrap();

    let loaded = HashCache::load(&state);
    assert_eq!(loaded.get(&stamp), Some(hash));
    // Another stamp of the same file (its ctime moved): not the cached hash.
    assert_eq!(
        loaded.get(&FileStamp {
            ctime_ns: 7,
            ..stamp
        }),
        None
    );

    // Only SHA-256s are kept (all apollo computes).
    let other = FileStamp { ino: 9, ..stamp };
    loaded.put(
        other,
        CachedHash {
            sha256: "not a sha-256".into(),
            hashed_at_ns: 6,
        },
    );
    assert_eq!(loaded.get(&other), None);

    // A body cut short, or of the older JSON format, under a checksum that matches it: ignored.
    let file = dir.path().join("index/hashes");
    let saved = fs::read(&file).unwrap();
    let body = &saved[saved.iter().position(|&byte| byte == b'\n').unwrap() + 1..];
    let older = br#"{"format":1,"entries":[[1,2,3,4,5,6,"aaaa"]]}"#;
    for body in [&body[..body.len() - 1], older] {
        let line = apollo_core::hash::sha256_hex(body);
        fs::write(&file, [line.as_bytes(), b"\n", body].concat()).unwrap();
        assert!(HashCache::load(&state).is_empty());
    }
    fs::write(&file, &saved).unwrap();
    assert_eq!(HashCache::load(&state).len(), 1);

    let mut bytes = fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    fs::write(&file, &bytes).unwrap();
    assert!(
        HashCache::load(&state).is_empty(),
        "a damaged cache is ignored"
    );
}

#[test]
fn a_new_run_covered_at_its_end_is_not_read_again_and_answers_as_a_rebuild_does() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let (r1, _) = three_runs(&state);
    let (mut index, _) = ReuseIndex::refresh(&state, true).unwrap();
    let source = index.take_source(IDENTITY, None);

    // The new run reuses r1's attempt for h1, runs `load` once (succeeds) and `check` once
    // (fails): what it appended after its `run_started`, in order.
    let appended = vec![
        fetch_reused(&r1, 1, "h1", "o1"),
        started("load", 1, "h9"),
        started("check", 1, "h8"),
        finished("load", 1, AttemptStatus::Succeeded, "o9"),
        finished("check", 1, AttemptStatus::Failed, ""),
    ];
    let r4 = make_run(&state, Some(IDENTITY), &appended);
    index
        .cover_new_run(&state, source, IDENTITY, &r4, appended)
        .unwrap();

    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(
        (refresh.rebuilt, refresh.runs_read, refresh.written),
        (None, 0, false),
        "the run is covered: its journal is not read again"
    );
    fs::remove_file(dir.path().join("index/reuse")).unwrap();
    let (rebuilt, refresh) = ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!(refresh.runs_read, 5);
    let all_answers = |index: &ReuseIndex| {
        let source = index.source(IDENTITY, None);
        let short = |candidate: Option<apollo_core::engine::ReuseCandidate>| {
            candidate.map(|candidate| {
                (
                    candidate.run_id,
                    candidate.attempt,
                    candidate.input_hash,
                    candidate.output_hash,
                )
            })
        };
        [
            short(source.find("fetch", "h1")),
            short(source.find("fetch", "h2")),
            short(source.latest("fetch")),
            short(source.find("load", "h9")),
            short(source.latest("load")),
            short(source.find("check", "h8")),
            short(source.latest("check")),
        ]
    };
    let answers = all_answers(&index);
    assert_eq!(answers, all_answers(&rebuilt));
    assert_eq!(index.len(), rebuilt.len());
    assert_eq!(
        answers[2],
        Some((r1.to_string(), 1, "h1".into(), "o1".into())),
        "the reused attempt is fetch's latest success"
    );
    assert_eq!(
        answers[4],
        Some((r4.to_string(), 1, "h9".into(), "o9".into()))
    );
    assert_eq!(answers[6], None, "a failure is no success");
}

#[test]
fn a_run_that_changed_nothing_is_covered_beside_the_index_file_not_by_rewriting_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let (_, r2) = three_runs(&state);
    let (mut index, _) = ReuseIndex::refresh(&state, true).unwrap();
    let file = dir.path().join("index/reuse");
    let beside = dir.path().join("index/reuse-covered-since");
    let written = fs::read(&file).unwrap();
    // Reusing fetch's latest success (r2 attempt 2, h2) changes nothing in the index: a
    // session need not even hand the record over. Any other would.
    let no_op = || vec![fetch_reused(&r2, 2, "h2", "o2")];
    let Event::UnitReused(latest) = &no_op()[0] else {
        unreachable!()
    };
    let source = index.source(IDENTITY, None);
    assert!(source.is_latest(latest));
    for (attempt, input, output) in [(1, "h2", "o2"), (2, "h1", "o2"), (2, "h2", "o1")] {
        let Event::UnitReused(other) = fetch_reused(&r2, attempt, input, output) else {
            unreachable!()
        };
        assert!(!source.is_latest(&other), "{attempt} {input} {output}");
    }
    let Event::UnitReused(other_run) = fetch_reused(&state.new_run_id(), 2, "h2", "o2") else {
        unreachable!()
    };
    assert!(!source.is_latest(&other_run));
    let mut no_op_runs = Vec::new();
    for _ in 0..2 {
        let source = index.take_source(IDENTITY, None);
        let run = make_run(&state, Some(IDENTITY), &no_op());
        index
            .cover_new_run(&state, source, IDENTITY, &run, no_op())
            .unwrap();
        no_op_runs.push(run);
        assert_eq!(
            fs::read(&file).unwrap(),
            written,
            "the index file is not rewritten"
        );
        assert!(beside.is_file());
        let (again, refresh) = ReuseIndex::refresh(&state, true).unwrap();
        assert_eq!(
            (refresh.rebuilt, refresh.runs_read, refresh.written),
            (None, 0, false),
            "every run is covered"
        );
        index = again;
    }

    // Without the file beside it (or with one naming another index file), those runs are
    // read again: slower, the same answers.
    let expected = answers(&index);
    let kept = fs::read(&beside).unwrap();
    fs::remove_file(&beside).unwrap();
    let (index, refresh) = ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!((refresh.rebuilt, refresh.runs_read), (None, 2));
    assert_eq!(answers(&index), expected);
    let (mut index, _) = ReuseIndex::refresh(&state, true).unwrap();
    fs::write(&beside, kept).unwrap();
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(
        (refresh.runs_read, refresh.written),
        (0, false),
        "the rewritten index file covers them itself; the stale file beside it is ignored"
    );

    // A run that changes something rewrites the index file, covering every run.
    let source = index.take_source(IDENTITY, None);
    let changing = vec![
        started("fetch", 1, "h3"),
        finished("fetch", 1, AttemptStatus::Succeeded, "o3"),
    ];
    let run = make_run(&state, Some(IDENTITY), &changing);
    index
        .cover_new_run(&state, source, IDENTITY, &run, changing)
        .unwrap();
    assert_ne!(fs::read(&file).unwrap(), written);
    let (index, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!((refresh.runs_read, refresh.written), (0, false));
    assert_eq!(
        index.source(IDENTITY, None).latest("fetch").unwrap().run_id,
        run.to_string()
    );
    // The rewritten file names the no-op runs: one pruned, it is rebuilt, as for any run.
    fs::remove_dir_all(dir.path().join("runs").join(no_op_runs[0].as_str())).unwrap();
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!(
        refresh.rebuilt,
        Some(format!("covers run {}, which is gone", no_op_runs[0]))
    );
}

#[test]
fn the_file_beside_the_index_names_a_bounded_number_of_runs_and_never_extends_an_unwritten_refresh()
{
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::open_or_create(dir.path()).unwrap();
    let (_, r2) = three_runs(&state);
    let no_op = || vec![fetch_reused(&r2, 2, "h2", "o2")];
    let file = dir.path().join("index/reuse");
    let (mut index, _) = ReuseIndex::refresh(&state, true).unwrap();
    let written = fs::read(&file).unwrap();
    for n in 1..=65 {
        let source = index.take_source(IDENTITY, None);
        let run = make_run(&state, Some(IDENTITY), &no_op());
        index
            .cover_new_run(&state, source, IDENTITY, &run, no_op())
            .unwrap();
        assert_eq!(
            fs::read(&file).unwrap() == written,
            n <= 64,
            "run {n}: the index file is rewritten once 64 runs are named beside it"
        );
    }
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!((refresh.runs_read, refresh.written), (0, false));

    // A read-only refresh that read a run the file does not cover: what it read is in
    // memory only, so a run covered after it rewrites the index file (which then covers
    // that run too) rather than naming runs beside a file that lacks one.
    make_run(&state, Some(IDENTITY), &no_op());
    let (mut index, refresh) = ReuseIndex::refresh(&state, false).unwrap();
    assert_eq!((refresh.runs_read, refresh.written), (1, false));
    let before = fs::read(&file).unwrap();
    let source = index.take_source(IDENTITY, None);
    let run = make_run(&state, Some(IDENTITY), &no_op());
    index
        .cover_new_run(&state, source, IDENTITY, &run, no_op())
        .unwrap();
    assert_ne!(fs::read(&file).unwrap(), before);
    let (_, refresh) = ReuseIndex::refresh(&state, true).unwrap();
    assert_eq!((refresh.runs_read, refresh.written), (0, false));
}
