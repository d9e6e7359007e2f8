//! `apollo stop [RUN]`: stop the apollo running a pipeline, from another shell, as Ctrl-C
//! would: SIGTERM to the pid written in the state directory's lock, once it is certain that
//! process is an apollo holding this very lock; then wait until it has let go.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::cmd::StateArgs;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Arguments of `apollo stop`.
#[derive(Debug, clap::Args)]
pub(crate) struct StopArgs {
    /// Only if it is running this run (an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`)
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<String>,
    /// Send the signal and return, without waiting for apollo to finish stopping
    #[arg(long)]
    pub(crate) no_wait: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// How often `stop` looks whether the apollo it signalled has let go of the lock.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `apollo stop`.
pub(crate) fn stop(
    args: &StopArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    let wanted = args
        .run
        .as_deref()
        .map(|spec| state::resolve_run(&state, spec))
        .transpose()?;
    let not_running = |what: String| CliError::Usage { message: what };
    let Some(holder) = state.lock_holder()? else {
        return Err(not_running(format!(
            "no apollo is running in `{}`",
            state::absolute(state.path()).display()
        )));
    };
    let Some(pid) = holder.pid else {
        return Err(not_running(
            "the state directory is locked, but its lock file names no pid".to_owned(),
        ));
    };
    if let Some(host) = &holder.host
        && *host != apollo_store::process::host_name()
    {
        return Err(not_running(format!(
            "the apollo running here is pid {pid} on host `{host}`, not this one: stop it there"
        )));
    }
    if let Some(run) = &wanted
        && holder.run.as_deref() != Some(run.as_str())
    {
        return Err(not_running(format!(
            "run {run} is not running (apollo pid {pid} is running {})",
            holder.run.as_deref().unwrap_or("no run yet")
        )));
    }
    // Another user's process: /proc hides what it holds, and the signal would be refused.
    // Say so, rather than blame the pid (issue 36 item 18).
    if let Some(owner) = owned_by_another_user(pid) {
        return Err(not_running(format!(
            "apollo pid {pid} (run {}) belongs to another user ({owner}): only that user or root \
             may stop it; ask them, or run `apollo stop` as that user; nothing was signalled",
            holder.run.as_deref().unwrap_or("not started yet")
        )));
    }
    if !holds_lock_as_apollo(pid, &state.lock_path()) {
        return Err(not_running(format!(
            "pid {pid}, named in the lock file, is not an apollo holding this state directory's lock: nothing was signalled"
        )));
    }
    let pid_value = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0))
        .ok_or_else(|| not_running(format!("pid {pid} is not a process id")))?;
    rustix::process::kill_process(pid_value, rustix::process::Signal::TERM).map_err(|errno| {
        not_running(format!(
            "cannot signal apollo pid {pid}: {}",
            std::io::Error::from(errno)
        ))
    })?;
    let run = holder.run.as_deref().unwrap_or("its run");
    writeln!(
        stdout,
        "apollo: asked apollo pid {pid} to stop run {run} (SIGTERM): its running units are terminated, cleanups run, and the run is recorded as interrupted"
    )
    .map_err(output)?;
    stdout.flush().map_err(output)?;
    if args.no_wait {
        return Ok(Exit::Success);
    }
    while state
        .lock_holder()
        .ok()
        .flatten()
        .is_some_and(|now| now.pid == Some(pid))
    {
        std::thread::sleep(POLL_INTERVAL);
    }
    // What the run's journal says now: a stop that came while its hooks ran (after the run
    // had ended) stopped the hooks, not the run.
    let ended_succeeded = (holder.run.as_deref())
        .and_then(|id| id.parse::<apollo_store::RunId>().ok())
        .and_then(|id| state.run_state(&id).ok())
        .is_some_and(|(run_state, _)| run_state == apollo_store::RunState::Succeeded);
    if ended_succeeded {
        writeln!(
            stdout,
            "apollo: stopped; run {run} had already succeeded when it was asked to stop: its hooks were stopped, and there is nothing to resume"
        )
        .map_err(output)?;
    } else {
        writeln!(
            stdout,
            "apollo: stopped; `apollo run` resumes run {run} where it stopped"
        )
        .map_err(output)?;
    }
    Ok(Exit::Success)
}

/// Whether `pid` is an apollo (its executable is this one, or its command name is `apollo`)
/// with `lock` open: then it is the apollo writing this state directory, not a process that
/// reused the pid.
fn holds_lock_as_apollo(pid: u32, lock: &Path) -> bool {
    let proc_dir = Path::new("/proc").join(pid.to_string());
    let same_executable = match (
        std::fs::metadata(proc_dir.join("exe")),
        std::fs::metadata("/proc/self/exe"),
    ) {
        (Ok(theirs), Ok(ours)) => theirs.dev() == ours.dev() && theirs.ino() == ours.ino(),
        _ => false,
    };
    let is_apollo = same_executable
        || std::fs::read_to_string(proc_dir.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == "apollo");
    let Ok(lock) = std::fs::metadata(lock) else {
        return false;
    };
    let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
        return false;
    };
    is_apollo
        && fds.filter_map(Result::ok).any(|fd| {
            std::fs::metadata(fd.path())
                .is_ok_and(|file| file.dev() == lock.dev() && file.ino() == lock.ino())
        })
}

/// The owner of process `pid` (a user name when `/etc/passwd` has it, else `uid N`), when it
/// is not the caller and the caller is not root; `None` when it is the caller's, or gone.
fn owned_by_another_user(pid: u32) -> Option<String> {
    let ours = rustix::process::geteuid();
    if ours.is_root() {
        return None;
    }
    let theirs = std::fs::metadata(Path::new("/proc").join(pid.to_string()))
        .ok()?
        .uid();
    if theirs == ours.as_raw() {
        return None;
    }
    let name = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                (fields.nth(1)? == theirs.to_string()).then(|| name.to_owned())
            })
        });
    Some(name.map_or_else(
        || format!("uid {theirs}"),
        |name| format!("`{name}`, uid {theirs}"),
    ))
}
