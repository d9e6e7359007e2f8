//! The promises checked after an iteration (checks 1–5 of the module docs).

#[allow(clippy::wildcard_imports)]
use super::*;

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(super) fn check(
    args: &Options,
    dir: &Path,
    names: &[String],
    totals: &mut Summary,
) -> Result<Vec<String>, String> {
    let mut violations = Vec::new();
    let runs_dir = dir.join(".apollo/runs");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .map_err(|error| format!("{}: {error}", runs_dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .collect();
    runs.sort();
    // A kill while apollo created a run leaves a folder with no segment: it recorded
    // nothing, apollo ignores it (`apollo verify` below must still pass), and so does this
    // check.
    let (runs, journal_less): (Vec<PathBuf>, Vec<PathBuf>) =
        runs.into_iter().partition(|run| has_segment(run));
    totals.journal_less_runs += journal_less.len() as u64;
    let Some((run_dir, earlier)) = runs.split_last() else {
        violations.push("no run in the state directory".into());
        return Ok(violations);
    };
    // apollo killed after creating a run's first segment but before `run_started` was
    // written leaves a run with no records; the next `apollo run` cannot tell which pipeline
    // it was and starts a new one. That is harmless only if nothing ran in it.
    for run in earlier {
        let mut n_started = 0;
        let reader =
            JournalReader::open(run, ReadOptions::default()).map_err(|error| error.to_string())?;
        for record in reader {
            let record = record.map_err(|error| error.to_string())?;
            if matches!(record.event, Event::UnitStarted(_)) {
                n_started += 1;
            }
        }
        if n_started > 0 {
            violations.push(format!(
                "run {} was abandoned for a new run although {n_started} attempts started in it",
                run.display()
            ));
        }
    }

    let mut started: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut success: BTreeMap<String, u32> = BTreeMap::new();
    let mut last_finish = None;
    let reader =
        JournalReader::open(run_dir, ReadOptions::default()).map_err(|error| error.to_string())?;
    for record in reader {
        let record = record.map_err(|error| error.to_string())?;
        match record.event {
            Event::UnitStarted(event) => {
                started.entry(event.unit).or_default().insert(event.attempt);
            }
            Event::UnitFinished(event)
                if matches!(
                    event.status,
                    AttemptStatus::Succeeded | AttemptStatus::Skipped
                ) =>
            {
                success.insert(event.unit, event.attempt);
            }
            Event::UnitMarked(event) if event.verdict == Verdict::Succeeded => {
                success.insert(event.unit, event.attempt);
            }
            Event::RunFinished(event) => last_finish = Some(event.status),
            _ => {}
        }
    }
    match last_finish {
        Some(RunStatus::Succeeded) => {}
        other => violations.push(format!(
            "the journal does not end the run succeeded (last run_finished: {other:?})"
        )),
    }
    for name in names {
        let counts = dir.join("counts");
        let executed = lines_of(&counts.join(format!("{name}.start")));
        totals.unchecked_at_start +=
            lines_of(&counts.join(format!("{name}.unchecked"))).len() as u64;
        for attempt in lines_of(&counts.join(format!("{name}.unlogged"))) {
            violations.push(format!(
                "{name}: attempt {attempt} executed before its unit_started was in the journal"
            ));
        }
        let recorded = started.get(name).cloned().unwrap_or_default();
        let mut seen = BTreeSet::new();
        for attempt in &executed {
            if !recorded.contains(attempt) {
                violations.push(format!(
                    "{name}: attempt {attempt} executed without a durable unit_started"
                ));
            }
            if !seen.insert(*attempt) {
                violations.push(format!("{name}: attempt {attempt} executed twice"));
            }
        }
        match success.get(name) {
            None => violations.push(format!(
                "{name}: no success recorded although the run completed"
            )),
            Some(&success_attempt) => {
                if let Some(later) = executed.iter().find(|&&attempt| attempt > success_attempt) {
                    violations.push(format!(
                        "{name}: attempt {later} executed after attempt {success_attempt}'s success was recorded"
                    ));
                }
            }
        }
    }
    violations.extend(verify_and_survivors(args, dir)?);
    Ok(violations)
}

/// Checks 4 and 5: `apollo verify` passes, and no unit process outlived its apollo.
fn verify_and_survivors(args: &Options, dir: &Path) -> Result<Vec<String>, String> {
    let mut violations = Vec::new();
    let verify = apollo(args, dir)
        .arg("verify")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| error.to_string())?;
    if !verify.status.success() {
        violations.push(format!(
            "apollo verify exited {:?}: {}{}",
            verify.status.code(),
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        ));
    }
    // A SIGKILLed apollo's guard kills the unit groups it watched and exits once it sees its
    // lifeline break: asynchronously, and on a loaded machine it may still be runnable (not
    // yet scheduled) here, when the harness killed apollo just before this check. What is
    // still there after a generous wait outlived its apollo.
    let mut survivors = tagged_processes(dir);
    let settle = Instant::now() + SURVIVOR_GRACE;
    while !survivors.is_empty() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(10));
        survivors = tagged_processes(dir);
    }
    if !survivors.is_empty() {
        #[allow(unsafe_code)] // kill(2), to leave nothing behind.
        for (pid, _) in &survivors {
            // SAFETY: kill(2) on a pid that carries this iteration's tag; cleaning up after
            // recording the violation, so nothing outlives the harness.
            unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        }
        violations.push(format!("unit processes still alive: {survivors:?}"));
    }
    Ok(violations)
}

/// (pid, command line) of live, non-zombie processes whose environment carries this
/// iteration's tag: every unit and whatever it forked, in its process group or not.
pub(super) fn tagged_processes(dir: &Path) -> Vec<(u32, String)> {
    let mut needle = format!("{TAG_VAR}=").into_bytes();
    needle.extend_from_slice(dir.as_os_str().as_encoded_bytes());
    needle.push(0);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own_pid = std::process::id();
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own_pid)
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit(')').next()?.split_whitespace().next()?;
            if state == "Z" {
                return None;
            }
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let tagged = environ
                .split_inclusive(|&byte| byte == 0)
                .any(|entry| entry == needle.as_slice());
            if !tagged {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            // The name (`comm`) and parent tell a forked, not yet exec'd child or a guard
            // from apollo itself, whose command line they share.
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)
                .unwrap_or("?");
            Some((
                pid,
                format!(
                    "{} (comm {}, ppid {ppid}, state {state})",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ").trim(),
                    comm.trim()
                ),
            ))
        })
        .collect()
}

/// What was true when the reuse phase of an iteration began (see [`check_reuse`]).
pub(super) struct ReusePhase {
    /// The run that completed the first phase: every run after it belongs to this phase.
    pub(super) floor: PathBuf,
    /// Per unit, how many executions, unrecorded starts and ends its count files held then.
    pub(super) before: BTreeMap<String, (usize, usize, usize)>,
    /// The one unit that may not be reused (`idempotent: false`, `reuse: false`), if any.
    pub(super) not_reused: Option<String>,
}

/// Check 10, after a second `apollo run` (a new run, killed and resumed like the first) of a
/// pipeline whose units are `reuse: true` and nothing changed: it ends succeeded; every unit
/// but the non-idempotent one was reused (`unit_reused` in the new run) and **executed not
/// once more**, whatever the kills; nothing executed before its `unit_started` was durable;
/// `apollo verify` passes and no unit process is left.
pub(super) fn check_reuse(
    args: &Options,
    dir: &Path,
    names: &[String],
    phase: &ReusePhase,
    totals: &mut Summary,
) -> Result<Vec<String>, String> {
    let mut violations = Vec::new();
    let runs_dir = dir.join(".apollo/runs");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .map_err(|error| format!("{}: {error}", runs_dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|run| *run > phase.floor && has_segment(run) && has_record(run))
        .collect();
    runs.sort();
    let Some(run) = runs.last() else {
        violations.push("the reuse phase left no run after the first one".into());
        return Ok(violations);
    };
    let mut reused = BTreeSet::new();
    let mut last_finish = None;
    let reader = JournalReader::open(run, ReadOptions::default()).map_err(|e| e.to_string())?;
    for record in reader {
        match record.map_err(|error| error.to_string())?.event {
            Event::UnitReused(event) => {
                reused.insert(event.unit);
            }
            Event::RunFinished(event) => last_finish = Some(event.status),
            Event::RunResumed(_) => last_finish = None,
            _ => {}
        }
    }
    if last_finish != Some(RunStatus::Succeeded) {
        violations.push(format!(
            "the reuse phase's run does not end succeeded (last run_finished: {last_finish:?})"
        ));
    }
    for name in names {
        let counts = dir.join("counts");
        let (executed_before, unlogged_before, _) =
            phase.before.get(name).copied().unwrap_or_default();
        let executed = lines_of(&counts.join(format!("{name}.start")));
        let unlogged = lines_of(&counts.join(format!("{name}.unlogged")));
        for attempt in unlogged.iter().skip(unlogged_before) {
            violations.push(format!(
                "{name}: attempt {attempt} of the reuse phase executed before its unit_started was in the journal"
            ));
        }
        if phase.not_reused.as_deref() == Some(name.as_str()) {
            continue;
        }
        let again = executed.len().saturating_sub(executed_before);
        if again > 0 {
            violations.push(format!(
                "{name}: executed {again} more time(s) in a run where nothing changed (reuse: true)"
            ));
        }
        if reused.contains(name) {
            totals.units_reused += 1;
        } else {
            violations.push(format!("{name}: not reused by the reuse phase's run"));
        }
    }
    violations.extend(verify_and_survivors(args, dir)?);
    Ok(violations)
}
