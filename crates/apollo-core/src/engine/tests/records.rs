//! Bounded records: a unit whose input list does not fit in a record keeps it in an input
//! manifest stored before its `unit_started`; one whose manifest cannot be stored fails alone,
//! and the journal and the other units go on.

use super::*;
use crate::event::InputManifestRef;
use crate::input_manifest;
use crate::journal::MAX_RECORD_BYTES;

/// About 120 bytes of record each: 10,000 files make a `unit_started` of over 1 MiB.
const N_FILES: usize = 10_000;

/// A pipeline of `big` (an input glob matching `N_FILES` empty files) and its independent
/// sibling `small`, in a temporary folder.
fn big_and_small() -> (tempfile::TempDir, Pipeline) {
    // Creating 10,000 files on a busy disk takes seconds; in memory, a fraction of one.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for file_idx in 0..N_FILES {
        std::fs::File::create(data.join(format!("part-{file_idx:05}.csv"))).unwrap();
    }
    let mut big = unit("big", &[]);
    big.inputs = vec!["data/*.csv".into()];
    let mut pipeline = pipeline(vec![big, unit("small", &[])], 2);
    pipeline.base_dir = dir.path().to_path_buf();
    (dir, pipeline)
}

fn started_of<'e>(events: &'e [Event], unit: &str) -> &'e UnitStarted {
    events
        .iter()
        .find_map(|event| match event {
            Event::UnitStarted(started) if started.unit == unit => Some(started),
            _ => None,
        })
        .unwrap()
}

fn assert_every_record_bounded(events: &[Event]) {
    for event in events {
        let len = input_manifest::encoded_len(event).unwrap();
        assert!(
            len <= MAX_RECORD_BYTES,
            "a {} record of {len} bytes",
            event.kind()
        );
    }
}

#[test]
fn an_input_list_too_large_for_a_record_goes_to_a_manifest_stored_before_its_start() {
    let (_dir, pipeline) = big_and_small();
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(report.status, Some(RunStatus::Succeeded));
    let events = journal.events.lock().unwrap().clone();
    assert_every_record_bounded(&events);

    let big = started_of(&events, "big");
    assert!(big.inputs.is_empty());
    let reference = big.inputs_manifest.clone().unwrap();
    assert_eq!(
        reference.count,
        N_FILES as u64 + 1,
        "the files and the command"
    );
    let manifests = journal.manifests.lock().unwrap();
    let inputs = input_manifest::decode(&reference, &manifests[&reference.sha256]).unwrap();
    assert_eq!(hash::combine_components(&inputs), big.input_hash);

    let small = started_of(&events, "small");
    assert!(small.inputs_manifest.is_none() && !small.inputs.is_empty());
    // The big unit's input list, and its file manifest (`unit_files`, as large): a small
    // input list and file list stay in their records.
    assert_eq!(manifests.len(), 2, "a small input list stays in its record");
    let files = events.iter().find_map(|event| match event {
        Event::UnitFiles(files) if files.unit == "big" => Some(files.clone()),
        _ => None,
    });
    let reference = files.unwrap().manifest.unwrap();
    let files = input_manifest::decode_files(&reference, &manifests[&reference.sha256]).unwrap();
    assert_eq!(files.len(), N_FILES);
}

#[test]
fn a_manifest_that_cannot_be_stored_fails_its_unit_and_nothing_else() {
    let (_dir, pipeline) = big_and_small();
    let mut journal = SharedJournal {
        refuse_manifests: true,
        ..SharedJournal::default()
    };
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    let mut options = EngineOptions::new("r", &pipeline);
    options.keep_going = true;
    let report = run_with(
        &pipeline,
        &PriorState::empty(),
        &options,
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .expect("a unit failure, not a journal error");
    assert_eq!(report.status, Some(RunStatus::Failed));
    assert_eq!(executor.ran(), [("small".to_owned(), 1)], "big never ran");
    let events = journal.events.lock().unwrap().clone();
    assert_every_record_bounded(&events);
    // `big` declares inputs, so it is hashed off the engine thread and may be admitted after
    // `small` (which has none): the order between the two units is not fixed, only that each
    // unit's start comes before its end and the run's end comes last.
    let kinds = kinds(&journal);
    let position = |kind: &str| kinds.iter().position(|recorded| recorded == kind);
    for unit in ["big", "small"] {
        let started = position(&format!("unit_started {unit}")).expect("started");
        let finished = position(&format!("unit_finished {unit}")).expect("finished");
        assert!(started < finished, "{kinds:?}");
    }
    // With its file manifest (the journal refuses manifests: the record keeps what fits).
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("run_finished"));
    let big = started_of(&events, "big");
    assert!(big.inputs.is_empty() && big.inputs_manifest.is_none());
    let error = events
        .iter()
        .find_map(|event| match event {
            Event::UnitFinished(finished) if finished.unit == "big" => finished.error.clone(),
            _ => None,
        })
        .unwrap();
    assert!(
        error.contains(&format!("{} input components do not fit", N_FILES + 1))
            && error.contains("no space left on device (injected)")
            && !error.contains("append"),
        "{error}"
    );
}

#[test]
fn a_resume_reads_the_manifest_to_say_which_input_changed() {
    let (dir, pipeline) = big_and_small();
    let mut journal = SharedJournal::default();
    let executor = FakeExecutor::new(&journal, |_, _, _| ok());
    run_with(
        &pipeline,
        &PriorState::empty(),
        &EngineOptions::new("r", &pipeline),
        &mut journal,
        &executor,
        &CancelToken::new(),
    )
    .unwrap();
    let events = journal.events.lock().unwrap().clone();
    let manifests = journal.manifests.lock().unwrap().clone();
    std::fs::write(dir.path().join("data/part-00007.csv"), b"changed").unwrap();
    let big = &pipeline.units[0];
    let inputs = hash::input_components(big, &pipeline.base_dir, &[]).unwrap();
    let input_hash = hash::combine_components(&inputs);

    // Not read (or unreadable): the change is explained by that, not by 10,000 "added".
    let mut prior = PriorState::from_events(&events);
    let decision = policy::decide(&prior, big, &input_hash, &inputs, &[], OnInputChange::Auto);
    assert!(
        matches!(&decision, policy::Decision::InputsChanged(changes)
            if changes.len() == 1 && changes[0].contains("was not read")),
        "{decision:?}"
    );
    prior.load_input_manifests(|_: &InputManifestRef| Err("no file here".to_owned()));
    let decision = policy::decide(&prior, big, &input_hash, &inputs, &[], OnInputChange::Auto);
    assert_eq!(
        decision.to_string(),
        format!(
            "runs again: input hash changed (its recorded input list ({} components) cannot be read: no file here)",
            N_FILES + 1
        )
    );

    let mut prior = PriorState::from_events(&events);
    prior.load_input_manifests(|reference| {
        input_manifest::decode(reference, &manifests[&reference.sha256])
            .map_err(|error| error.to_string())
    });
    let decision = policy::decide(&prior, big, &input_hash, &inputs, &[], OnInputChange::Auto);
    assert_eq!(
        decision,
        policy::Decision::InputsChanged(vec!["input file data/part-00007.csv changed".to_owned()])
    );
}
