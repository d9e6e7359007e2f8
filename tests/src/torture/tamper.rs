//! State-dir tampering between invocations (checks 6 and 7 of the module docs).

#[allow(clippy::wildcard_imports)]
use super::*;

#[allow(unsafe_code)] // mkfifo(3) has no std form.
fn mkfifo(path: &Path) -> Result<(), String> {
    let text = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|error| error.to_string())?;
    // SAFETY: mkfifo with a NUL-terminated path the harness owns.
    if unsafe { libc::mkfifo(text.as_ptr(), 0o600) } != 0 {
        return Err(format!(
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Between two invocations of an incomplete run, maybe tamper with the state directory and
/// check what apollo does about it; then undo the tampering (the run goes on from there).
#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
pub(super) fn tamper_between(
    args: &Options,
    trng: &mut Rng,
    dir: &Path,
    clock: &str,
    totals: &mut Summary,
    violations: &mut Vec<String>,
) -> Result<(), String> {
    let action = trng.below(100);
    if !dir.join(".apollo").is_dir() {
        // The first apollo was killed before it created its state directory: nothing to
        // tamper with yet.
        return Ok(());
    }
    let lock = dir.join(".apollo/lock");
    if action < 10 {
        // The lock file is a symbolic link to a file that is not apollo's.
        let _ = std::fs::remove_file(&lock);
        std::os::unix::fs::symlink(dir.join("victim.txt"), &lock).map_err(io!())?;
        totals.lock_symlinks += 1;
        let mut command = apollo(args, dir);
        command.env(CLOCK_VAR, clock).arg("run");
        match run_bounded(command, PLANT_DEADLINE)? {
            None => violations.push(format!(
                "apollo run did not end within {PLANT_DEADLINE:?} with .apollo/lock a symlink"
            )),
            Some((status, _)) if status.code() == Some(2) => {}
            Some((status, stderr)) => violations.push(format!(
                "apollo run exited {:?} with .apollo/lock a symlink, not 2:
{stderr}",
                status.code()
            )),
        }
        std::fs::remove_file(&lock)
            .map_err(|error| format!("removing the lock symlink {}: {error}", lock.display()))?;
        return Ok(());
    }
    if action >= 30 {
        return Ok(());
    }
    let Some(run) = latest_run_dir(dir)? else {
        return Ok(());
    };
    let journal = run.join("journal");
    let in_journal = |error: std::io::Error| format!("{}: {error}", journal.display());
    // Where: the segment after the last one, or `journal/last_segment`.
    let (plant, place) = if trng.chance(50) {
        let last = std::fs::read_dir(&journal)
            .map_err(in_journal)?
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".log")?.parse::<u64>().ok()
            })
            .max()
            .unwrap_or(0);
        (
            journal.join(format!("{:06}.log", last + 1)),
            "the next segment",
        )
    } else {
        (journal.join("last_segment"), "journal/last_segment")
    };
    let aside = journal.join("last_segment.torture-aside");
    let had_original = plant.exists();
    if had_original {
        std::fs::rename(&plant, &aside)
            .map_err(|error| format!("moving {} aside: {error}", plant.display()))?;
    }
    let fifo = trng.chance(50);
    if fifo {
        mkfifo(&plant)?;
    } else {
        std::os::unix::fs::symlink("/dev/zero", &plant).map_err(in_journal)?;
    }
    let what = if fifo {
        "a FIFO"
    } else {
        "a symlink to /dev/zero"
    };
    totals.plants += 1;
    let run_id = run
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    for command_args in [
        vec!["run"],
        vec!["runs"],
        vec!["verify"],
        vec!["replay", run_id.as_str()],
    ] {
        let mut command = apollo(args, dir);
        command.env(CLOCK_VAR, clock).args(&command_args);
        let shown = command_args.join(" ");
        let result = run_bounded(command, PLANT_DEADLINE)?;
        totals.plant_commands += 1;
        let record = dir.join(format!(
            "plant-{:03}-{}.out",
            totals.plants, command_args[0]
        ));
        let _ = std::fs::write(
            &record,
            match &result {
                Some((status, output)) => {
                    format!("{place} {what} in {}\n{status}\n{output}", run.display())
                }
                None => format!("{place} {what} in {}\nhung\n", run.display()),
            },
        );
        match result {
            None => violations.push(format!(
                "apollo {shown} did not end within {PLANT_DEADLINE:?} with {place} {what}"
            )),
            // A listing: it exits 0 and shows the run as corrupt (DESIGN: `runs` lists every
            // run, damaged ones included).
            Some((status, output)) if command_args == ["runs"] => {
                if status.code() != Some(0) || !output.contains("corrupt") {
                    violations.push(format!(
                        "apollo runs exited {:?} with {place} {what} without listing the run as \
                         corrupt:\n{output}",
                        status.code()
                    ));
                }
            }
            Some((status, stderr)) => {
                if status.code().is_none_or(|code| code == 0) {
                    violations.push(format!(
                        "apollo {shown} exited {:?} with {place} {what}, expected a non-zero exit:
{stderr}",
                        status.code()
                    ));
                } else if stderr.trim().is_empty() {
                    violations.push(format!(
                        "apollo {shown} exited {:?} with {place} {what} and said nothing",
                        status.code()
                    ));
                }
            }
        }
    }
    std::fs::remove_file(&plant)
        .map_err(|error| format!("removing the plant {} ({what}): {error}", plant.display()))?;
    if had_original {
        std::fs::rename(&aside, &plant)
            .map_err(|error| format!("putting {} back: {error}", plant.display()))?;
    }
    Ok(())
}

/// How long a command run against a planted FIFO or `/dev/zero` may take before it counts as
/// hung (a safety net on a loaded machine: apollo refuses such a file at once).
const PLANT_DEADLINE: Duration = Duration::from_secs(60);

/// Runs `command` to its end or until `deadline` (then kills it): its status and output
/// (stdout and stderr together), `None` when it hung.
fn run_bounded(
    mut command: Command,
    deadline: Duration,
) -> Result<Option<(ExitStatus, String)>, String> {
    let stderr = tempfile_in_memory()?;
    let mut child = command
        .stdout(stderr.try_clone().map_err(io!())?)
        .stderr(stderr.try_clone().map_err(io!())?)
        .spawn()
        .map_err(io!())?;
    let until = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io!())? {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    use std::io::{Read, Seek};
    let mut stderr = stderr;
    let mut text = String::new();
    stderr.rewind().map_err(io!())?;
    let _ = stderr.read_to_string(&mut text);
    Ok(Some((status, text)))
}

/// An anonymous file for a child's stderr (no pipe to drain while polling).
#[allow(unsafe_code)] // memfd_create(2) has no std form.
fn tempfile_in_memory() -> Result<std::fs::File, String> {
    let name = c"torture-stderr";
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned by the File.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    use std::os::fd::FromRawFd;
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}
