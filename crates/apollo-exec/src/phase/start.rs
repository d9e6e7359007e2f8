//! Starting a phase's command: find the program, take a guard slot, spawn it as a new group
//! (a script without `#!` through `/bin/sh`, as `execvp` does), and explain a failure to
//! start in words a user can act on.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use apollo_core::Phase;

use super::AttemptContext;
use crate::command_line::ExecPlan;
use crate::group_leader::GroupLeader;
use crate::guard::Slot;
use crate::program_search;
use crate::relay::{Relay, borrowed};
use crate::spawn::Spawn;

/// Reserve a guard slot and spawn `plan` as a new group; the error is the reason in words.
pub(super) fn spawn_leader<'g>(
    context: &AttemptContext<'g>,
    phase: Phase,
    plan: &ExecPlan,
) -> Result<GroupLeader<'g>, String> {
    let unit = context.request.unit;
    let reserve = || {
        context.guard.reserve().map_err(|error| {
            format!(
                "cannot start apollo's guard process, which kills the units if apollo dies: \
                 {error}"
            )
        })
    };
    let child_path = match unit.env.get("PATH") {
        Some(path) => Some(OsStr::new(path.as_str())),
        None => context.environment.get("PATH"),
    };
    let found = context
        .programs
        .find(&plan.program, child_path, &unit.workdir);
    if found.is_none() && !plan.program.as_bytes().contains(&b'/') {
        // A bare name the `PATH` search did not find.
        let errno =
            if program_search::in_path_but_not_executable(&plan.program, child_path, &unit.workdir)
            {
                libc::EACCES
            } else {
                libc::ENOENT
            };
        return Err(describe_start_error(
            &io::Error::from_raw_os_error(errno),
            plan,
            &unit.workdir,
        ));
    }
    let program: &OsStr = found.as_deref().map_or(&plan.program, Path::as_os_str);
    let slot = reserve()?;
    let error = match start(context, phase, program, &plan.args, slot) {
        Ok(leader) => return Ok(leader),
        Err(error) => error,
    };
    if error.raw_os_error() != Some(libc::ENOEXEC) {
        return Err(describe_start_error(&error, plan, &unit.workdir));
    }
    // A file the kernel cannot exec (a script without `#!`): run it with the shell, as
    // `execvp` does (`execve` does not).
    let mut args = Vec::with_capacity(plan.args.len() + 1);
    args.push(program.to_owned());
    args.extend(plan.args.iter().cloned());
    let slot = reserve()?;
    start(context, phase, OsStr::new("/bin/sh"), &args, slot)
        .map_err(|error| describe_start_error(&error, plan, &unit.workdir))
}

/// Spawn `program` with `args` as the phase's group leader, with the unit's environment and
/// working directory and the attempt's output files.
fn start<'g>(
    context: &AttemptContext<'g>,
    phase: Phase,
    program: &OsStr,
    args: &[OsString],
    slot: Slot<'g>,
) -> io::Result<GroupLeader<'g>> {
    let request = context.request;
    let opened_null;
    let stdin = match context.dev_null {
        Some(dev_null) => dev_null.as_fd(),
        None => {
            opened_null = std::fs::File::open("/dev/null")?;
            opened_null.as_fd()
        }
    };
    let attempt = request.attempt.to_string();
    let mut overrides: Vec<(&str, &OsStr)> = request
        .unit
        .env
        .iter()
        .map(|(key, value)| (key.as_str(), OsStr::new(value.as_str())))
        .collect();
    // Secrets go into the environment only, never on a command line (`ps` shows argv to
    // every user). The executor checked that each was read.
    for name in request.unit.secrets.keys() {
        if let Some(value) = context.secrets.get(name) {
            overrides.push((name.as_str(), OsStr::new(value)));
        }
    }
    overrides.extend([
        ("APOLLO_RUN_ID", OsStr::new(request.run_id)),
        ("APOLLO_RUN_KEY", OsStr::new(context.run_key)),
        ("APOLLO_UNIT", OsStr::new(request.unit.name.as_str())),
        ("APOLLO_ATTEMPT", OsStr::new(attempt.as_str())),
        ("APOLLO_PHASE", OsStr::new(phase.as_str())),
    ]);
    // A unit that receives secrets, or whose logs have a limit, writes into pipes whose
    // relays mask the values and cap the logs on their way to the files; the others write
    // into the files directly.
    let mut pipes = None;
    let limit = request.unit.log_limit;
    if !request.unit.secrets.is_empty() || limit.is_some() {
        let values: Vec<&str> = request
            .unit
            .secrets
            .keys()
            .filter_map(|name| context.secrets.get(name))
            .collect();
        let (out_relay, out_pipe) = Relay::start(context.stdout.fd(), &values, limit)?;
        let (err_relay, err_pipe) = Relay::start(context.stderr.fd(), &values, limit)?;
        let mut relays = context.relays.borrow_mut();
        relays.extend([("stdout", out_relay), ("stderr", err_relay)]);
        pipes = Some((out_pipe, err_pipe));
    }
    let (child_stdout, child_stderr) = match &pipes {
        Some((out_pipe, err_pipe)) => (borrowed(out_pipe), borrowed(err_pipe)),
        None => (context.stdout.fd(), context.stderr.fd()),
    };
    let spawn = Spawn {
        program,
        args,
        workdir: &request.unit.workdir,
        stdin,
        stdout: child_stdout,
        stderr: child_stderr,
        base: context.environment,
        overrides: &overrides,
    };
    GroupLeader::spawn(&spawn, slot)
}

/// Why a command could not start, in words a user can act on.
fn describe_start_error(error: &io::Error, plan: &ExecPlan, workdir: &Path) -> String {
    match std::fs::metadata(workdir) {
        Err(workdir_error) => {
            return format!(
                "working directory {} is not usable: {workdir_error}",
                workdir.display()
            );
        }
        Ok(metadata) if !metadata.is_dir() => {
            return format!("working directory {} is not a directory", workdir.display());
        }
        Ok(_) => {}
    }
    let program = plan.program.to_string_lossy();
    match error.raw_os_error() {
        Some(libc::ENOENT) => format!("command not found: {program}"),
        Some(libc::EACCES) => format!("permission denied: {program} (is it executable?)"),
        Some(libc::ENOEXEC) => format!("{program} is not a program this system can run"),
        _ => format!("cannot start {program}: {error}"),
    }
}
