//! `cargo xtask synth-run --records N --from STATE_DIR --into STATE_DIR`: a large journal for
//! the read benchmarks of issue 17 (`apollo replay --format json`, `apollo verify` over
//! 1,000,000 records).
//!
//! It takes the latest run of `--from` (a real run: make one with `apollo run` over a
//! generated pipeline) and writes a new run into `--into` whose records are that run's
//! `unit_started`/`unit_finished` pairs repeated, each repetition as the next attempt of its
//! unit (attempts 1, 2, … of every unit), until the run holds N records, then the source's
//! `run_finished`. Real records, so every field a reader meets is one apollo writes; written
//! without fsyncs (`Durability::None`), through the store's own writer.

use std::path::{Path, PathBuf};

use apollo_core::Event;
use apollo_store::{
    Durability, JournalReader, JournalWriter, ReadOptions, StateDir, WriterOptions,
};

struct Options {
    records: u64,
    from: PathBuf,
    into: PathBuf,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let (mut records, mut from, mut into) = (1_000_000, None, None);
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match *flag {
            "--records" => records = value.parse().map_err(|_| "--records takes a number")?,
            "--from" => from = Some(PathBuf::from(value)),
            "--into" => into = Some(PathBuf::from(value)),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(Options {
        records,
        from: from.ok_or("--from STATE_DIR (holding a real run) is needed")?,
        into: into.ok_or("--into STATE_DIR is needed")?,
    })
}

/// Writes the run; see the module docs.
pub(crate) fn run(args: &[&str]) -> Result<(), String> {
    let options = parse(args)?;
    let source = StateDir::open_existing(&options.from).map_err(|error| error.to_string())?;
    let latest = source
        .run_ids()
        .map_err(|error| error.to_string())?
        .pop()
        .ok_or_else(|| format!("{} has no run", options.from.display()))?;
    let run_dir = source.run_dir(&latest).map_err(|error| error.to_string())?;
    let events: Vec<Event> = JournalReader::open(run_dir.path(), ReadOptions::default())
        .map_err(|error| error.to_string())?
        .map(|record| record.map(|record| record.event))
        .collect::<Result<_, _>>()
        .map_err(|error| error.to_string())?;
    let (Some(Event::RunStarted(started)), Some(finished @ Event::RunFinished(_))) =
        (events.first(), events.last())
    else {
        return Err(format!("run {latest} is not a finished run"));
    };
    let attempts: Vec<&Event> = events
        .iter()
        .filter(|event| matches!(event, Event::UnitStarted(_) | Event::UnitFinished(_)))
        .collect();
    if attempts.is_empty() {
        return Err(format!("run {latest} ran no unit"));
    }
    let target = StateDir::open_or_create(&options.into).map_err(|error| error.to_string())?;
    let id = target.new_run_id();
    let new_dir = target.create_run(&id).map_err(|error| error.to_string())?;
    let mut writer = JournalWriter::create(
        new_dir.path(),
        id.as_str(),
        WriterOptions::default().durability(Durability::None),
    )
    .map_err(|error| error.to_string())?;
    let mut started = started.clone();
    started.run_id = id.to_string();
    let mut batch = vec![Event::RunStarted(started)];
    let mut written = 0_u64;
    let body = options.records.saturating_sub(2);
    'repeat: for repetition in 0_u32.. {
        for event in &attempts {
            if written >= body {
                break 'repeat;
            }
            let mut event = (*event).clone();
            match &mut event {
                Event::UnitStarted(started) => started.attempt += repetition * 1_000,
                Event::UnitFinished(finished) => finished.attempt += repetition * 1_000,
                _ => {}
            }
            batch.push(event);
            written += 1;
            if batch.len() == 1_000 {
                writer
                    .append_batch(&batch)
                    .map_err(|error| error.to_string())?;
                batch.clear();
            }
        }
    }
    batch.push(finished.clone());
    writer
        .append_batch(&batch)
        .map_err(|error| error.to_string())?;
    println!(
        "run {id} in {}: {} records",
        display(&options.into),
        written + 2
    );
    Ok(())
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
