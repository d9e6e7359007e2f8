//! [`ProcessExecutor`]: apollo-core's [`Executor`] with real, supervised process groups.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use apollo_core::event::{AttemptStatus, ExitStatus};
use apollo_core::{AttemptOutcome, AttemptRequest, CancelLevel, Executor, Phase};

use crate::cancel_event;
use crate::environment::Environment;
use crate::guard::Guard;
use crate::output::{LogFile, LogSpares};
use crate::phase::{AttemptContext, PhaseEnd, PhaseLimit, PhaseResult, run_phase};
use crate::program_search::ProgramCache;
use crate::secrets::SecretValues;

/// How [`ProcessExecutor`] runs attempts.
///
/// Start from [`ExecOptions::default`] and change what you need with the chainable setters;
/// new options may be added in any release, so the struct cannot be built with a literal
/// outside this crate:
///
/// ```
/// use std::time::Duration;
/// use apollo_exec::ExecOptions;
///
/// let options = ExecOptions::default()
///     .direct_exec(false);
/// assert!(!options.direct_exec);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecOptions {
    /// Exec a string command directly, without `/bin/sh -c`, when it has no shell syntax at
    /// all (see the crate docs). Default: `true`.
    pub direct_exec: bool,
    /// How long an attempt runs before its output files get their names even if they are
    /// still empty (see "What a phase is" in the crate docs). Output of an attempt younger
    /// than this is lost if apollo is killed. Default: 100 ms.
    pub name_output_after: Duration,
    /// The state directory whose runs this executor runs, if any: units get
    /// `APOLLO_RUN_KEY`, derived from it and the run id ([`run_key`](crate::run_key)), which
    /// the stray sweep matches ([`kill_stray_processes_in`](crate::kill_stray_processes_in)),
    /// so two projects whose runs have the same id never sweep each other's processes.
    /// Default: none (the key is then derived from the run id alone).
    pub state_dir: Option<std::path::PathBuf>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            direct_exec: true,
            name_output_after: Duration::from_millis(100),
            state_dir: None,
        }
    }
}

impl ExecOptions {
    /// Running the runs of the state directory `state_dir` (see [`ExecOptions::state_dir`]).
    pub fn state_dir(mut self, state_dir: impl Into<std::path::PathBuf>) -> Self {
        self.state_dir = Some(state_dir.into());
        self
    }

    /// With string commands without shell syntax exec'd directly (`true`) or always run
    /// through `/bin/sh -c` (`false`).
    pub fn direct_exec(mut self, direct_exec: bool) -> Self {
        self.direct_exec = direct_exec;
        self
    }

    /// With output files named once an attempt has run this long, even if still empty.
    pub fn name_output_after(mut self, name_output_after: Duration) -> Self {
        self.name_output_after = name_output_after;
        self
    }
}

/// Runs each attempt's phases as supervised process groups. Cheap to share between worker
/// threads (`Send + Sync`); clones share one guard process (see "When apollo dies" in
/// the crate docs), which the first phase starts and the last clone's drop kills and reaps.
#[derive(Debug, Clone)]
pub struct ProcessExecutor {
    options: ExecOptions,
    shared: Arc<Shared>,
    /// The values of the secrets units may receive, read when the run started.
    secrets: Arc<SecretValues>,
}

/// What the clones of an executor share.
#[derive(Debug, Default)]
struct Shared {
    guard: Guard,
    programs: ProgramCache,
    /// `/dev/null`, opened once, for every phase's stdin (a `dup` per spawn instead of an
    /// `open`); `None` if it could not be opened, and then each spawn opens it itself.
    dev_null: OnceLock<Option<std::fs::File>>,
    /// Unnamed log files of quick, silent attempts, for reuse.
    logs: LogSpares,
    /// Apollo's environment, captured at the first attempt.
    environment: OnceLock<Environment>,
}

impl Default for ProcessExecutor {
    /// [`ProcessExecutor::new`] with the default [`ExecOptions`].
    fn default() -> Self {
        ProcessExecutor::new(ExecOptions::default())
    }
}

impl ProcessExecutor {
    /// An executor with `options`. Starts no process yet. Any of the standard descriptors
    /// 0–2 that the host process has closed is opened on `/dev/null` (see "Requirements on
    /// the host process" in the crate docs).
    pub fn new(options: ExecOptions) -> Self {
        crate::stdio::reopen_closed_standard_descriptors();
        crate::escaped::become_subreaper();
        ProcessExecutor {
            options,
            shared: Arc::default(),
            secrets: Arc::default(),
        }
    }

    /// With these secret values: a unit that lists a secret (`secrets: [NAME]`) gets its
    /// value as the environment variable `NAME`, and its stdout and stderr relayed through
    /// apollo, which masks every value it receives before writing to the log files. A unit
    /// listing a secret that is not among them fails its attempt without starting.
    pub fn with_secrets(mut self, secrets: SecretValues) -> Self {
        self.secrets = Arc::new(secrets);
        self
    }

    /// The options it runs with.
    pub fn options(&self) -> &ExecOptions {
        &self.options
    }
}

impl Executor for ProcessExecutor {
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn run_attempt(
        &self,
        request: &AttemptRequest<'_>,
        context: &apollo_core::AttemptContext<'_>,
    ) -> AttemptOutcome {
        let cancel = context.cancel();
        let attempt_start = Instant::now();
        let mut outcome = AttemptOutcome::nothing_ran(AttemptStatus::Succeeded);
        let unit = request.unit;
        if let Some(missing) = unit
            .secrets
            .keys()
            .find(|name| self.secrets.get(name).is_none())
        {
            return broken(
                outcome,
                format!(
                    "secret `{missing}` was not read when the run started, so the unit cannot be given it"
                ),
                attempt_start,
            );
        }
        let (stdout, stderr) = match open_logs(request, &self.shared.logs) {
            Ok(files) => files,
            Err(message) => return broken(outcome, message, attempt_start),
        };
        let (stdout_start, stderr_start) = (stdout.initial_len(), stderr.initial_len());
        let cancel_event = match thread_cancel_event() {
            Ok(event) => event,
            Err(error) => {
                return broken(
                    outcome,
                    format!("cannot create the cancel eventfd: {error}"),
                    attempt_start,
                );
            }
        };
        let _registration = cancel.on_cancel({
            let cancel_event = Arc::clone(&cancel_event);
            move || cancel_event::signal(&cancel_event)
        });
        let run_key = crate::run_key(self.options.state_dir.as_deref(), request.run_id);
        let context = AttemptContext {
            request,
            run_key: &run_key,
            cancel,
            cancel_event: &cancel_event,
            stdout: &stdout,
            stderr: &stderr,
            logs_named: std::cell::Cell::new(false),
            name_output_after: self.options.name_output_after,
            attempt_start,
            direct_exec: self.options.direct_exec,
            guard: &self.shared.guard,
            programs: &self.shared.programs,
            dev_null: self
                .shared
                .dev_null
                .get_or_init(|| std::fs::File::open("/dev/null").ok())
                .as_ref(),
            environment: self.shared.environment.get_or_init(Environment::capture),
            secrets: &self.secrets,
            relays: std::cell::RefCell::new(Vec::new()),
        };
        // A phase whose output is relayed (a unit with secrets) is over when its relays have
        // written everything to the log files: the lengths and hashes below read them.
        let run_phase = |context: &AttemptContext<'_>, phase, command, limit| {
            let result = run_phase(context, phase, command, limit);
            context.finish_relays();
            result
        };
        // The unit's timeout covers prepare + execute together, measured from the attempt's
        // start: the user thinks of "the unit took too long", not of per-phase budgets.
        let main_limit = PhaseLimit {
            deadline: unit
                .timeout
                .and_then(|timeout| attempt_start.checked_add(timeout)),
            length: unit.timeout,
            description: "the unit's limit for prepare + execute",
            cancel_baseline: CancelLevel::None,
        };

        let mut results: Vec<PhaseResult> = Vec::new();
        let mut not_started: Option<NotStarted> = None;
        // Stdout's length after execute, while no later phase may have changed it.
        let mut stdout_after_execute: Option<u64> = None;
        if cancel.is_cancelled() {
            not_started = Some(NotStarted::interrupted("the attempt"));
        } else {
            // A `when: {command}` first, a phase of its own: false (or broken), nothing else
            // of the unit runs (`summarise` tells a skip from a failure).
            let condition_holds = unit.when_command.as_ref().is_none_or(|condition| {
                let result = run_phase(&context, Phase::When, condition, main_limit);
                let holds = result.is_ok();
                results.push(result);
                holds
            });
            let prepare_ok = condition_holds
                && match &unit.prepare {
                    Some(prepare) => {
                        let result = run_phase(&context, Phase::Prepare, prepare, main_limit);
                        let ok = result.is_ok();
                        results.push(result);
                        ok
                    }
                    None => true,
                };
            let deadline_passed = main_limit
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline);
            if prepare_ok && cancel.is_cancelled() {
                not_started = Some(NotStarted::interrupted("execute"));
            } else if prepare_ok && deadline_passed {
                // Starting execute only to kill it at once could leave half-done side effects.
                not_started = Some(NotStarted {
                    status: AttemptStatus::TimedOut,
                    phase: Some(Phase::Execute),
                    message: format!(
                        "execute was not started: the unit's timeout of {:?} for prepare + \
                         execute ran out during prepare",
                        unit.timeout.unwrap_or_default()
                    ),
                });
            } else if prepare_ok {
                let execute_start = if results.is_empty() {
                    Ok(stdout_start)
                } else {
                    stdout.len()
                };
                let result = run_phase(&context, Phase::Execute, &unit.execute, main_limit);
                let execute_end = stdout.len();
                stdout_after_execute = execute_end.as_ref().ok().copied();
                if result.end != PhaseEnd::Broken || result.usage.is_some() {
                    outcome.stdout_sha256 = match (execute_start, execute_end) {
                        (Ok(start), Ok(end)) => stdout.sha256_of_range(start, end).ok(),
                        _ => None,
                    };
                }
                results.push(result);
            }
            // A unit that ran out of time loses what escaped its groups now; otherwise cleanup
            // may still need it (a server that execute started and cleanup stops).
            if results
                .iter()
                .any(|result| result.end == PhaseEnd::TimedOut)
            {
                kill_escaped(request, &mut results);
            }
            // Cleanup runs whenever prepare or execute was started, whatever happened, with its
            // own limit, and is only cut short by a cancellation stronger than the one (if any)
            // already in force when it started.
            let started = results
                .iter()
                .any(|result| result.outcome.phase != Phase::When);
            if let Some(cleanup) = unit.cleanup.as_ref().filter(|_| started) {
                let cleanup_limit = PhaseLimit {
                    deadline: Instant::now().checked_add(unit.cleanup_timeout),
                    length: Some(unit.cleanup_timeout),
                    description: "the unit's `cleanup_timeout`",
                    cancel_baseline: cancel.level(),
                };
                stdout_after_execute = None;
                results.push(run_phase(&context, Phase::Cleanup, cleanup, cleanup_limit));
            }
        }

        kill_escaped(request, &mut results);
        summarise(&mut outcome, &results, not_started);
        let stdout_end = stdout_after_execute.map_or_else(|| stdout.len(), Ok);
        let stderr_end = if results.is_empty() {
            Ok(stderr_start)
        } else {
            stderr.len()
        };
        let (stdout_end, stderr_end) = match (stdout_end, stderr_end) {
            (Ok(out), Ok(err)) => (Some(out), Some(err)),
            (Err(error), _) | (_, Err(error)) => {
                append_error(
                    &mut outcome,
                    format!("cannot read the log files' length: {error}"),
                );
                (None, None)
            }
        };
        outcome.stdout_bytes = stdout_end.map_or(0, |end| end.saturating_sub(stdout_start));
        outcome.stderr_bytes = stderr_end.map_or(0, |end| end.saturating_sub(stderr_start));
        for (log, end) in [(stdout, stdout_end), (stderr, stderr_end)] {
            if let Err(message) = log.finish(&self.shared.logs, end) {
                append_error(&mut outcome, message);
            }
        }
        outcome.phases = results.into_iter().map(|result| result.outcome).collect();
        outcome.wall_time = attempt_start.elapsed();
        outcome
    }
}

/// Kill what escaped the groups of the phases in `results` (see `escaped`), unless none of them
/// created any process; the count joins the last phase's leftovers.
fn kill_escaped(request: &AttemptRequest<'_>, results: &mut [PhaseResult]) {
    if results.iter().all(|result| result.forked_nothing) {
        return;
    }
    // At most a few phases (and an ENOEXEC retry each): no allocation.
    let mut groups = [0_i32; 8];
    for (slot, group) in groups
        .iter_mut()
        .zip(results.iter().filter_map(|result| result.group))
    {
        *slot = group;
    }
    let killed = crate::escaped::kill_escaped(&crate::escaped::Attempt {
        run_id: request.run_id,
        unit: &request.unit.name,
        attempt: request.attempt,
        groups: &groups,
    });
    if let Some(last) = results.last_mut() {
        last.outcome.leftovers_killed = last.outcome.leftovers_killed.saturating_add(killed);
        // Swept: the next sweep need not look again unless a later phase forks.
        for result in results.iter_mut() {
            result.forked_nothing = true;
        }
    }
}

/// Why a phase that should have run was not started.
struct NotStarted {
    status: AttemptStatus,
    /// The phase that would have run (`None` when the whole attempt was not started).
    phase: Option<Phase>,
    message: String,
}

impl NotStarted {
    fn interrupted(what: &str) -> NotStarted {
        NotStarted {
            status: AttemptStatus::Interrupted,
            phase: None,
            message: format!("interrupted before {what} started: apollo is stopping"),
        }
    }
}

/// Fill status, exit, failed phase, resource usage and error from the phases' results.
fn summarise(
    outcome: &mut AttemptOutcome,
    results: &[PhaseResult],
    not_started: Option<NotStarted>,
) {
    for result in results {
        if let Some(usage) = result.usage {
            outcome.user_cpu += usage.user_cpu;
            outcome.sys_cpu += usage.sys_cpu;
            outcome.max_rss_kib = outcome.max_rss_kib.max(usage.max_rss_kib);
        }
    }
    let first_failure = results.iter().find(|result| !result.is_ok());
    if let Some(condition) = results.last().filter(|result| result.condition_false()) {
        // apollo's skip (the engine records `unit_skipped` with reason `when`), not a failure.
        outcome.exit = condition.outcome.exit;
        outcome.status = AttemptStatus::Skipped;
    } else if let Some(failure) = first_failure {
        outcome.failed_phase = Some(failure.outcome.phase);
        outcome.exit = failure.outcome.exit;
        outcome.status = match failure.end {
            PhaseEnd::TimedOut => AttemptStatus::TimedOut,
            PhaseEnd::Interrupted => AttemptStatus::Interrupted,
            PhaseEnd::Exited | PhaseEnd::Broken => AttemptStatus::Failed,
        };
        outcome.timed_out = failure.end == PhaseEnd::TimedOut;
    } else if let Some(not_started) = &not_started {
        outcome.status = not_started.status;
        outcome.failed_phase = not_started.phase;
        outcome.timed_out = not_started.status == AttemptStatus::TimedOut;
    } else {
        let execute = results
            .iter()
            .find(|result| result.outcome.phase == Phase::Execute);
        outcome.exit = execute.and_then(|result| result.outcome.exit);
        if outcome.exit == Some(ExitStatus::Code(77)) {
            outcome.status = AttemptStatus::Skipped;
        }
    }
    let mut messages: Vec<String> = not_started.map(|not| not.message).into_iter().collect();
    messages.extend(
        results
            .iter()
            .filter_map(|result| result.outcome.error.clone()),
    );
    if !messages.is_empty() {
        outcome.error = Some(messages.join("; "));
    }
}

fn append_error(outcome: &mut AttemptOutcome, message: String) {
    outcome.error = Some(match outcome.error.take() {
        Some(existing) => format!("{existing}; {message}"),
        None => message,
    });
}

/// The attempt's output files. A unit that is not idempotent gets them named at once: if apollo
/// dies mid-attempt, its output is what a human reads before `apollo mark`.
fn open_logs(
    request: &AttemptRequest<'_>,
    spares: &LogSpares,
) -> Result<(LogFile, LogFile), String> {
    let name_now = !request.unit.idempotent;
    let open = |name: &str| {
        LogFile::open(spares, request.log_dir, name, name_now).map_err(|error| {
            format!(
                "cannot open {}: {error}",
                request.log_dir.join(name).display()
            )
        })
    };
    Ok((open("stdout")?, open("stderr")?))
}

thread_local! {
    /// This thread's cancel eventfd, reused by its attempts (an attempt registers it with its
    /// cancel token for its duration). A wake left over from an earlier attempt is harmless:
    /// a phase checks the token's level whenever the event fires.
    static CANCEL_EVENT: std::cell::RefCell<Option<Arc<std::os::fd::OwnedFd>>> =
        const { std::cell::RefCell::new(None) };
}

/// This thread's cancel eventfd, created on first use.
fn thread_cancel_event() -> std::io::Result<Arc<std::os::fd::OwnedFd>> {
    CANCEL_EVENT.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some(event) = cell.as_ref() {
            return Ok(Arc::clone(event));
        }
        let event = Arc::new(cancel_event::create()?);
        *cell = Some(Arc::clone(&event));
        Ok(event)
    })
}

/// The outcome of an attempt that could not even begin (nothing was started, so no cleanup).
fn broken(mut outcome: AttemptOutcome, message: String, attempt_start: Instant) -> AttemptOutcome {
    outcome.status = AttemptStatus::Failed;
    outcome.error = Some(message);
    outcome.wall_time = attempt_start.elapsed();
    outcome
}
