//! `apollo logs RUN [UNIT]`: the captured output of a unit's attempt, of every unit of a run
//! (each line prefixed `unit | `), or, with `-f`, of an attempt still running, followed until
//! it ends.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use apollo_replay::{AttemptState, Timeline};
use apollo_store::{RunId, StateDir};

use apollo_runner::read::attempt_dir;

use super::show::{read_timeline, unit_of_run, unknown_unit};
use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Arguments of `apollo logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success` [default: latest]; a unit
    /// name alone is that unit of the latest run
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<String>,
    /// The unit [default: every unit of the run, each line prefixed `unit | `]
    #[arg(value_name = "UNIT")]
    pub(crate) unit: Option<String>,
    /// Which attempt [default: the last one]
    #[arg(long, value_name = "N")]
    pub(crate) attempt: Option<u32>,
    /// Print stderr instead of stdout
    #[arg(long)]
    pub(crate) stderr: bool,
    /// Follow the attempt while it runs, printing what it writes, until it ends
    #[arg(long, short = 'f', requires = "unit")]
    pub(crate) follow: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// How often `-f` looks for new output, and for the attempt's end.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

/// How often `-f` reads the journal again to see whether the attempt ended.
const JOURNAL_INTERVAL: Duration = Duration::from_secs(1);

impl LogsArgs {
    fn stream(&self) -> &'static str {
        if self.stderr { "stderr" } else { "stdout" }
    }
}

/// `apollo logs`.
pub(crate) fn logs(
    args: &LogsArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let (run_id, unit) = state::run_and_unit(&state, args.run.as_deref(), args.unit.as_deref())?;
    let Some(unit_name) = &unit else {
        return all_units(args, &state, &run_id, stdout, stderr);
    };
    let (state, run_id, timeline) =
        unit_of_run(&args.state, state_dir, run_id.as_str(), unit_name, stderr)?;
    let Some(unit) = timeline.unit(unit_name) else {
        return Err(unknown_unit(&run_id, unit_name, &timeline));
    };
    let last = unit.last_attempt().map(|attempt| attempt.number);
    let attempt = match (args.attempt, last) {
        (Some(number), _) => number,
        (None, Some(number)) => number,
        (None, None) => {
            return Err(CliError::Usage {
                message: format!(
                    "unit `{}` never started in run {run_id}: it has no logs",
                    unit.name
                ),
            });
        }
    };
    let Some(recorded) = unit
        .attempts
        .iter()
        .find(|recorded| recorded.number == attempt)
    else {
        return Err(CliError::Usage {
            message: format!(
                "unit `{}` has no attempt {attempt} in run {run_id} (it has {})",
                unit.name,
                unit.attempts.len()
            ),
        });
    };
    let path = attempt_dir(&state, &run_id, &unit.name, attempt)?.stream(args.stream());
    if args.follow && recorded.state == AttemptState::Unfinished {
        return follow(
            &state,
            &run_id,
            (&unit.name, attempt),
            &path,
            stdout,
            stderr,
        );
    }
    // Only a regular file: a FIFO or a link to /dev/zero there must not block or stream forever.
    let file = apollo_store::open_regular_file(&path)?
        .filter(|file| file.metadata().is_ok_and(|meta| meta.len() > 0));
    let Some(mut file) = file else {
        // The attempt wrote nothing (a quick, silent attempt leaves no file), or apollo died
        // before its first process started. What it wrote to the other stream, if anything,
        // is named with the command that prints it (issue 35).
        let other = if args.stderr { "stdout" } else { "stderr" };
        let other_len = (attempt_dir(&state, &run_id, &unit.name, attempt).ok())
            .and_then(|dir| {
                apollo_store::open_regular_file(&dir.stream(other))
                    .ok()
                    .flatten()
            })
            .and_then(|file| file.metadata().ok())
            .map_or(0, |meta| meta.len());
        let mut message = format!(
            "apollo: attempt {attempt} of `{}` wrote nothing to {}",
            unit.name,
            args.stream()
        );
        if other_len > 0 {
            message.push_str(&format!(
                "; its {other} holds {}: {}",
                apollo_core::capture::human_size(other_len),
                crate::excerpt::logs_command(run_id.as_str(), &unit.name, Some(attempt), other)
            ));
        }
        let _ = writeln!(stderr, "{message}");
        return Ok(Exit::Success);
    };
    std::io::copy(&mut file, stdout).map_err(output)?;
    stdout.flush().map_err(output)?;
    let dir = attempt_dir(&state, &run_id, &unit.name, attempt)?;
    if let Some((cut, limit)) = apollo_exec::log_cap::read_capped(dir.path(), args.stream()) {
        let _ = writeln!(
            stderr,
            "apollo: this log was capped (log_limit {}): {cut} bytes were cut where the \
             `[apollo: ... bytes cut ...]` line stands; raise `log_limit` to keep more",
            apollo_core::capture::human_size(limit)
        );
    }
    Ok(Exit::Success)
}

/// Every unit's output, attempt by attempt in the order they started, each line prefixed with
/// its unit (`unit | `, `unit#2 | ` for a later attempt of a unit that ran more than once).
fn all_units(
    args: &LogsArgs,
    state: &StateDir,
    run_id: &RunId,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let (state, run_id) = (state, run_id.clone());
    let timeline = read_timeline(state, &run_id, stderr)?;
    let mut attempts: Vec<_> = timeline
        .attempts()
        .filter(|(_, attempt)| args.attempt.is_none_or(|number| attempt.number == number))
        .collect();
    attempts.sort_by_key(|(_, attempt)| (attempt.start, attempt.seq));
    let label = |unit: &apollo_replay::UnitTimeline, number: u32| {
        if unit.attempts.len() > 1 {
            format!("{}#{number}", unit.name)
        } else {
            unit.name.clone()
        }
    };
    let width = attempts
        .iter()
        .map(|(unit, attempt)| label(unit, attempt.number).len())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut out = std::io::BufWriter::new(stdout);
    for (unit, attempt) in attempts {
        let path = attempt_dir(state, &run_id, &unit.name, attempt.number)?.stream(args.stream());
        let Some(file) = apollo_store::open_regular_file(&path)? else {
            continue;
        };
        let prefix = format!("{:<width$} | ", label(unit, attempt.number));
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n_read =
                std::io::BufRead::read_until(&mut reader, b'\n', &mut line).map_err(|source| {
                    CliError::ReadFile {
                        path: path.clone(),
                        source,
                    }
                })?;
            if n_read == 0 {
                break;
            }
            out.write_all(prefix.as_bytes()).map_err(output)?;
            out.write_all(&line).map_err(output)?;
            if !line.ends_with(b"\n") {
                out.write_all(b"\n").map_err(output)?;
            }
        }
    }
    out.flush().map_err(output)?;
    Ok(Exit::Success)
}

/// Whether `run` is being written by a live apollo now (it holds the state directory's lock
/// for it).
pub(crate) fn run_is_live(state: &StateDir, run: &RunId) -> bool {
    live_holder_pid(state, run).is_some()
}

/// The pid of the apollo writing `run` now, if one is.
pub(crate) fn live_holder_pid(state: &StateDir, run: &RunId) -> Option<u32> {
    apollo_runner::read::live_holder_pid(state, run)
}

/// Copies what the attempt writes to `path` until its `unit_finished` is in the journal (or
/// the apollo running it is gone), polling every [`FOLLOW_INTERVAL`].
fn follow(
    state: &StateDir,
    run_id: &RunId,
    (unit, attempt): (&str, u32),
    path: &Path,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let mut file = None;
    let mut last_journal_check = Instant::now();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // The file is named a moment after the attempt starts (see apollo-exec): wait for it.
        if file.is_none() {
            file = apollo_store::open_regular_file(path)?;
        }
        if let Some(open) = file.as_mut() {
            loop {
                let n_read = open
                    .read(&mut buffer)
                    .map_err(|source| CliError::ReadFile {
                        path: path.to_path_buf(),
                        source,
                    })?;
                if n_read == 0 {
                    break;
                }
                stdout.write_all(&buffer[..n_read]).map_err(output)?;
            }
            stdout.flush().map_err(output)?;
        }
        if last_journal_check.elapsed() >= JOURNAL_INTERVAL || !run_is_live(state, run_id) {
            last_journal_check = Instant::now();
            let ended = attempt_ended(state, run_id, unit, attempt)?;
            if ended || !run_is_live(state, run_id) {
                // One last read: what it wrote between the previous read and its end.
                if file.is_none() {
                    file = apollo_store::open_regular_file(path)?;
                }
                if let Some(open) = file.as_mut() {
                    std::io::copy(open, stdout).map_err(output)?;
                    stdout.flush().map_err(output)?;
                }
                if !ended {
                    let _ = writeln!(
                        stderr,
                        "apollo: attempt {attempt} of `{unit}` did not finish: no apollo is running run {run_id} any more"
                    );
                }
                return Ok(Exit::Success);
            }
        }
        std::thread::sleep(FOLLOW_INTERVAL);
    }
}

/// Whether the journal holds the attempt's end.
fn attempt_ended(
    state: &StateDir,
    run_id: &RunId,
    unit: &str,
    attempt: u32,
) -> Result<bool, CliError> {
    let timeline: Timeline = read_timeline(state, run_id, &mut std::io::sink())?;
    Ok(timeline.unit(unit).is_some_and(|unit| {
        unit.attempts.iter().any(|recorded| {
            recorded.number == attempt && recorded.state != AttemptState::Unfinished
        })
    }))
}
