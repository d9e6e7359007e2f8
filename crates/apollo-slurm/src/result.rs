//! Reading what the wrapper left ([`crate::script`]) back into an [`AttemptOutcome`]: the same
//! outcome apollo-exec would have given for the same phases, so the journal looks the same
//! whichever executor ran the unit.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use apollo_core::AttemptOutcome;
use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::executor::PhaseOutcome;
use apollo_core::model::Phase;
use sha2::{Digest, Sha256};

use crate::script::{PHASES, RESULT, STARTED};

/// The most a file of an attempt folder that apollo reads may hold: the wrapper's `result`,
/// `started` and `phases`, apollo's `job_id` and `reattached` are a few lines each.
pub(crate) const MAX_ATTEMPT_FILE: u64 = 64 * 1024;

/// The text of the attempt folder's file `path`: read without following a link, without
/// blocking on a FIFO, and bounded ([`MAX_ATTEMPT_FILE`]); `Ok(None)` when it is not there.
/// The error names the file and what is wrong with it.
pub(crate) fn read_small(path: &Path) -> Result<Option<String>, String> {
    match apollo_exec::read_attempt_file(path, MAX_ATTEMPT_FILE) {
        Ok(bytes) => Ok(bytes.map(|bytes| String::from_utf8_lossy(&bytes).into_owned())),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// The wrapper's `started` file: the job id and when the job began (epoch ms).
pub(crate) fn read_started(dir: &Path) -> Option<(String, u64)> {
    let text = read_small(&dir.join(STARTED)).ok()??;
    let mut words = text.split_whitespace();
    let (first, second) = (words.next()?, words.next());
    match second {
        Some(ms) => Some((first.to_owned(), ms.parse().ok()?)),
        // No SLURM_JOB_ID (run outside Slurm): only the time.
        None => Some((String::new(), first.parse().ok()?)),
    }
}

/// What the wrapper's `result` says, beyond the phases.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WrapperResult {
    pub(crate) end_ms: u64,
    /// The signal that stopped the wrapper (0: none).
    pub(crate) signal: i32,
    pub(crate) execute_stdout: Option<(u64, u64)>,
    pub(crate) error: Option<String>,
    pub(crate) user_cpu: Duration,
    pub(crate) sys_cpu: Duration,
}

/// Parses `result`; `None` when it is not there (the wrapper has not finished, or was
/// killed before it could write it).
pub(crate) fn read_result(dir: &Path) -> Option<WrapperResult> {
    try_read_result(dir).ok()?
}

/// [`read_result`], with the reason a `result` that is there cannot be read.
fn try_read_result(dir: &Path) -> Result<Option<WrapperResult>, String> {
    Ok(read_small(&dir.join(RESULT))?.map(|text| parse_result(&text)))
}

pub(crate) fn parse_result(text: &str) -> WrapperResult {
    let mut result = WrapperResult::default();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "end" => result.end_ms = rest.trim().parse().unwrap_or(0),
            "signal" => result.signal = rest.trim().parse().unwrap_or(0),
            "execute_stdout" => {
                let mut words = rest.split_whitespace().map(str::parse::<u64>);
                if let (Some(Ok(start)), Some(Ok(end))) = (words.next(), words.next()) {
                    result.execute_stdout = Some((start, end.max(start)));
                }
            }
            "error" => result.error = Some(rest.to_owned()),
            "cpu" => {
                // `times`: the shell's own user/system time, then its children's.
                let children = lines.nth(1).unwrap_or("");
                let mut words = children.split_whitespace().map(parse_times_duration);
                result.user_cpu = words.next().flatten().unwrap_or_default();
                result.sys_cpu = words.next().flatten().unwrap_or_default();
                break;
            }
            _ => {}
        }
    }
    result
}

/// `0m1.250s` (the form of the shell's `times`) → 1.25 s.
fn parse_times_duration(word: &str) -> Option<Duration> {
    let (minutes, seconds) = word.strip_suffix('s')?.split_once('m')?;
    let minutes: f64 = minutes.parse().ok()?;
    let seconds: f64 = seconds.parse().ok()?;
    Duration::try_from_secs_f64(minutes * 60.0 + seconds).ok()
}

/// One line of `phases`.
fn parse_phase_line(line: &str, started_ms: u64) -> Option<PhaseOutcome> {
    let mut words = line.split_whitespace();
    let phase = match words.next()? {
        "when" => Phase::When,
        "prepare" => Phase::Prepare,
        "execute" => Phase::Execute,
        "cleanup" => Phase::Cleanup,
        _ => return None,
    };
    let code: i32 = words.next()?.parse().ok()?;
    let start: u64 = words.next()?.parse().ok()?;
    let end: u64 = words.next()?.parse().ok()?;
    // The wrapper's watchdog stopped it (cleanup's `cleanup_timeout`).
    let timed_out = words.next() == Some("timeout");
    // The shell reports a child killed by signal n as 128 + n.
    let exit = if (129..=128 + 64).contains(&code) {
        ExitStatus::Signal(code - 128)
    } else {
        ExitStatus::Code(code)
    };
    Some(PhaseOutcome {
        phase,
        offset: Duration::from_millis(start.saturating_sub(started_ms)),
        wall_time: Duration::from_millis(end.saturating_sub(start)),
        exit: Some(exit),
        timed_out,
        leftovers_killed: 0,
        error: None,
    })
}

/// The outcome the files in `dir` describe. `stopped`: why apollo stopped the job, if it did
/// (a timeout, a cancellation); a wrapper that was signalled then ends with that status.
/// Without a `result` file, the phases that ended are still read and `missing` explains why
/// the attempt has no result.
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(crate) fn outcome_from_files(
    dir: &Path,
    stopped: Option<AttemptStatus>,
    missing: &str,
) -> AttemptOutcome {
    let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
    // Offsets count from the submission (the script is written just before `sbatch`), as a
    // local attempt's count from its start: the time the job waited in the queue shows before
    // its first phase. Without the script's time, from the job's start.
    let started_ms = read_started(dir).map(|(_, ms)| ms);
    let origin_ms = std::fs::metadata(dir.join(crate::script::SCRIPT))
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|since| u64::try_from(since.as_millis()).ok())
        .map_or(started_ms, |ms| {
            Some(started_ms.map_or(ms, |started| started.min(ms)))
        });
    let started_ms = origin_ms;
    // A file that is there but cannot be read (a FIFO, a link, far too large) fails the
    // attempt with its reason, as a missing `result` does.
    let mut unreadable = None;
    let phases: Vec<PhaseOutcome> = read_small(&dir.join(PHASES))
        .unwrap_or_else(|error| {
            unreadable = Some(error);
            None
        })
        .unwrap_or_default()
        .lines()
        .filter_map(|line| parse_phase_line(line, started_ms.unwrap_or(0)))
        .collect();
    let result = try_read_result(dir).unwrap_or_else(|error| {
        unreadable.get_or_insert(error);
        None
    });
    outcome.stdout_bytes = file_len(&dir.join("stdout"));
    outcome.stderr_bytes = file_len(&dir.join("stderr"));
    // The phase that decides: the first that failed, else a false `when: {command}` (apollo's
    // skip, told apart from execute's own exit 77 by its phase), else execute.
    let failed = phases.iter().find(|phase| {
        phase.exit != Some(ExitStatus::Code(0)) && !is_skip(phase) && !phase.condition_false()
    });
    let condition_false = phases.iter().find(|phase| phase.condition_false());
    let execute = phases.iter().find(|phase| phase.phase == Phase::Execute);
    outcome.exit = (failed.or(condition_false).or(execute)).and_then(|phase| phase.exit);
    outcome.failed_phase = failed.map(|phase| phase.phase);
    outcome.status = match (failed, execute) {
        (Some(_), _) => AttemptStatus::Failed,
        (None, _) if condition_false.is_some() => AttemptStatus::Skipped,
        (None, Some(execute)) if is_skip(execute) => AttemptStatus::Skipped,
        (None, Some(_)) => AttemptStatus::Succeeded,
        (None, None) => AttemptStatus::Failed,
    };
    match &result {
        Some(result) => {
            if let (Some(start), Some(end)) = (started_ms, Some(result.end_ms).filter(|ms| *ms > 0))
            {
                outcome.wall_time = Duration::from_millis(end.saturating_sub(start));
            }
            outcome.user_cpu = result.user_cpu;
            outcome.sys_cpu = result.sys_cpu;
            if let Some((start, end)) = result.execute_stdout {
                outcome.stdout_sha256 = sha256_of_range(&dir.join("stdout"), start, end);
            }
            if let Some(error) = &result.error {
                outcome.status = AttemptStatus::Failed;
                outcome.error = Some(error.clone());
            }
            if result.signal != 0 {
                if let Some(stopped) = stopped {
                    outcome.status = stopped;
                    outcome.timed_out = stopped == AttemptStatus::TimedOut;
                } else if outcome.status == AttemptStatus::Succeeded
                    && failed.is_none()
                    && execute.is_none()
                {
                    outcome.status = AttemptStatus::Failed;
                }
                if outcome.error.is_none() && outcome.status != AttemptStatus::Succeeded {
                    outcome.error = Some(format!(
                        "the job was sent signal {} while it ran{}",
                        result.signal,
                        match stopped {
                            Some(AttemptStatus::TimedOut) => " (apollo's timeout)",
                            Some(_) => " (apollo was stopped)",
                            None => "",
                        }
                    ));
                }
            }
        }
        None => {
            outcome.status = stopped.unwrap_or(AttemptStatus::Failed);
            outcome.timed_out = stopped == Some(AttemptStatus::TimedOut);
            if outcome.exit.is_none() && outcome.status == AttemptStatus::Failed {
                outcome.failed_phase = Some(Phase::Execute);
            }
            outcome.error = Some(missing.to_owned());
            if let Some(last) = phases.last() {
                outcome.wall_time = last.offset + last.wall_time;
            }
        }
    }
    if let Some(error) = unreadable {
        if matches!(
            outcome.status,
            AttemptStatus::Succeeded | AttemptStatus::Skipped
        ) {
            outcome.status = AttemptStatus::Failed;
        }
        outcome.error = Some(error);
    }
    outcome.phases = phases;
    if outcome.timed_out {
        // The phase that was running when the time ran out: the last before cleanup.
        if let Some(phase) = outcome
            .phases
            .iter_mut()
            .rev()
            .find(|phase| phase.phase != Phase::Cleanup)
        {
            phase.timed_out = true;
            outcome.failed_phase = Some(phase.phase);
        }
    }
    cleanup_timed_out(&mut outcome);
    outcome
}

/// A cleanup the wrapper's watchdog stopped at the unit's `cleanup_timeout` times the attempt
/// out in its cleanup phase, as apollo-exec records it (unless apollo itself stopped it first).
fn cleanup_timed_out(outcome: &mut AttemptOutcome) {
    let Some(cleanup) =
        (outcome.phases.iter()).find(|phase| phase.phase == Phase::Cleanup && phase.timed_out)
    else {
        return;
    };
    if outcome.timed_out || outcome.status == AttemptStatus::Interrupted {
        return;
    }
    outcome.status = AttemptStatus::TimedOut;
    outcome.timed_out = true;
    outcome.failed_phase = Some(Phase::Cleanup);
    outcome.exit = cleanup.exit;
    outcome.error = Some(format!(
        "cleanup timed out after {:?} (the unit's `cleanup_timeout`); its process got SIGTERM, then SIGKILL after the unit's `kill_grace`",
        cleanup.wall_time
    ));
}

fn is_skip(phase: &PhaseOutcome) -> bool {
    phase.phase == Phase::Execute && phase.exit == Some(ExitStatus::Code(77))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |metadata| metadata.len())
}

/// SHA-256 (hex) of bytes `start..end` of `path`, streamed.
fn sha256_of_range(path: &Path, start: u64, end: u64) -> Option<String> {
    use std::io::{Seek, SeekFrom};
    // Not blocking on a FIFO planted as `stdout`, never through a link.
    let mut file = apollo_exec::open_attempt_file(path).ok()??;
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut reader = file.take(end.saturating_sub(start));
    let mut hasher = Sha256::new();
    let mut buffer = [0_u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buffer).ok()?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Some(
        hasher
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_file_parses_with_the_shells_times() {
        let result = parse_result(
            "end 1700000005000\nsignal 15\nexecute_stdout 3 10\ncpu\n0m0.01s 0m0.00s\n1m2.500s 0m0.250s\n",
        );
        assert_eq!(result.end_ms, 1_700_000_005_000);
        assert_eq!(result.signal, 15);
        assert_eq!(result.execute_stdout, Some((3, 10)));
        assert_eq!(result.user_cpu, Duration::from_millis(62_500));
        assert_eq!(result.sys_cpu, Duration::from_millis(250));
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn phases_become_the_outcome_local_would_give() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        write(dir, "started", "42 1000\n");
        write(dir, "stdout", "prep\nhello\n");
        write(
            dir,
            "phases",
            "prepare 0 1000 1100\nexecute 0 1100 1500\ncleanup 0 1500 1600\n",
        );
        write(
            dir,
            "result",
            "end 1600\nsignal 0\nexecute_stdout 5 11\ncpu\n0m0.00s 0m0.00s\n0m0.10s 0m0.02s\n",
        );
        let outcome = outcome_from_files(dir, None, "");
        assert_eq!(outcome.status, AttemptStatus::Succeeded);
        assert_eq!(outcome.exit, Some(ExitStatus::Code(0)));
        assert_eq!(outcome.phases.len(), 3);
        assert_eq!(outcome.phases[1].offset, Duration::from_millis(100));
        assert_eq!(outcome.phases[1].wall_time, Duration::from_millis(400));
        assert_eq!(outcome.wall_time, Duration::from_millis(600));
        assert_eq!(outcome.stdout_bytes, 11);
        // The hash of "hello\n" only.
        assert_eq!(
            outcome.stdout_sha256.as_deref(),
            Some("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03")
        );
    }

    #[test]
    fn a_failing_execute_a_skip_a_false_condition_and_a_signal_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        write(dir, "started", "42 1000\n");
        write(dir, "phases", "execute 3 1000 1100\n");
        write(dir, "result", "end 1100\nsignal 0\ncpu\n");
        let failed = outcome_from_files(dir, None, "");
        assert_eq!(failed.status, AttemptStatus::Failed);
        assert_eq!(failed.exit, Some(ExitStatus::Code(3)));
        assert_eq!(failed.failed_phase, Some(Phase::Execute));

        write(dir, "phases", "execute 77 1000 1100\n");
        let skipped = outcome_from_files(dir, None, "");
        assert_eq!(skipped.status, AttemptStatus::Skipped);
        assert!(!skipped.when_false());
        // A false `when: {command}` is apollo's skip, told by its phase; 127: it could not start.
        write(dir, "phases", "when 1 1000 1010\n");
        assert!(outcome_from_files(dir, None, "").when_false());
        write(dir, "phases", "when 127 1000 1010\n");
        let failed = outcome_from_files(dir, None, "");
        assert_eq!(
            (failed.status, failed.failed_phase),
            (AttemptStatus::Failed, Some(Phase::When))
        );

        write(dir, "phases", "execute 143 1000 1100\n");
        write(dir, "result", "end 1100\nsignal 15\ncpu\n");
        let timed_out = outcome_from_files(dir, Some(AttemptStatus::TimedOut), "");
        assert_eq!(timed_out.status, AttemptStatus::TimedOut);
        assert!(timed_out.timed_out);
        assert_eq!(timed_out.exit, Some(ExitStatus::Signal(15)));
        assert!(timed_out.phases[0].timed_out);
    }

    #[test]
    fn no_result_file_is_a_failure_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = outcome_from_files(dir.path(), None, "the job ended without a result");
        assert_eq!(outcome.status, AttemptStatus::Failed);
        assert_eq!(
            outcome.error.as_deref(),
            Some("the job ended without a result")
        );
        let interrupted =
            outcome_from_files(dir.path(), Some(AttemptStatus::Interrupted), "cancelled");
        assert_eq!(interrupted.status, AttemptStatus::Interrupted);
    }

    /// Runs `read` on another thread and waits for it for at most 30 s: a safety net for a
    /// read that blocks (the test fails instead of hanging).
    fn within_30_s<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(read());
        });
        receiver
            .recv_timeout(Duration::from_secs(30))
            .expect("the read blocked")
    }

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn wrapper_files_that_are_fifos_links_or_huge_are_refused_not_read() {
        let root = tempfile::tempdir().unwrap();
        // A FIFO as `result`, `started` and `phases`: not waited on.
        let fifos = root.path().join("fifos");
        std::fs::create_dir(&fifos).unwrap();
        for name in [RESULT, STARTED, PHASES] {
            mkfifo(&fifos.join(name));
        }
        let dir = fifos.clone();
        let outcome = within_30_s(move || outcome_from_files(&dir, None, "no result"));
        assert_eq!(outcome.status, AttemptStatus::Failed);
        assert!(
            outcome
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("FIFO"),
            "{:?}",
            outcome.error
        );
        // A `result` far over any wrapper's: an error naming the file, not read whole.
        let huge = root.path().join("huge");
        std::fs::create_dir(&huge).unwrap();
        let mut text = String::from("end 1\n");
        text.push_str(&"x".repeat(1 << 20));
        write(&huge, RESULT, &text);
        let outcome = outcome_from_files(&huge, None, "no result");
        assert_eq!(outcome.status, AttemptStatus::Failed);
        let error = outcome.error.unwrap_or_default();
        assert!(
            error.contains("result") && error.contains("larger"),
            "{error}"
        );
        // A link to a file (`/dev/zero`, a user's file): never followed.
        let links = root.path().join("links");
        std::fs::create_dir(&links).unwrap();
        std::os::unix::fs::symlink("/dev/zero", links.join(STARTED)).unwrap();
        write(&huge, "real-result", "end 5\n");
        std::os::unix::fs::symlink(huge.join("real-result"), links.join(RESULT)).unwrap();
        let dir = links.clone();
        assert!(within_30_s(move || read_started(&dir)).is_none());
        assert!(read_result(&links).is_none());
    }
}
