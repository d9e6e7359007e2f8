//! The resolved pipeline model: what a loaded, validated config means.
//!
//! Everything here is already resolved: defaults inherited, durations parsed, relative paths
//! made absolute against the config file's folder, pipeline env merged under each unit's env.
//! The engine, the executor and the journal only ever see this model, never raw YAML.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod resources;
pub use resources::{Resources, SlurmResources};

/// A whole pipeline, ready to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pipeline {
    /// The pipeline's name (`name:` in the config, or the config file's stem).
    pub name: String,
    /// Absolute path of the config file this pipeline was loaded from.
    pub config_path: PathBuf,
    /// The folder relative paths in the config resolve against (the config file's folder).
    pub base_dir: PathBuf,
    /// How many units may run at once (at least 1).
    pub max_parallel: usize,
    /// The units, in config order. Config order is the tie-breaker for every ordering decision.
    pub units: Vec<Unit>,
    /// Commands run once when a run ends (`on_failure`, `on_success`, `on_finish`), in that
    /// order, and `on_late`, run once while the run goes on when it is late. Absent from definition snapshots older than hooks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    /// The local executor's capacity (`max_cpus`, `max_memory`); `None` fields mean the
    /// machine's own (see [`Resources`]).
    #[serde(default)]
    pub capacity: Capacity,
    /// How many Slurm jobs may be in flight at once (`max_jobs:`; default
    /// [`DEFAULT_MAX_JOBS`]), beside the `max_parallel` local units.
    #[serde(default)]
    pub max_jobs: Option<usize>,
    /// The blob store's size limit (`blob_store_max:`, default
    /// [`DEFAULT_BLOB_STORE_MAX`](crate::capture::DEFAULT_BLOB_STORE_MAX)); `None` is `none`, no
    /// limit. When a run of this pipeline ends over it, the captures of the oldest runs in the
    /// state directory are evicted. Left out of definition snapshots when it is the default.
    #[serde(
        default = "default_blob_store_max",
        skip_serializing_if = "is_default_blob_store_max"
    )]
    pub blob_store_max: Option<u64>,
    /// How the run's journal is made durable (`durability:`, DESIGN §18): `fsync` or
    /// `batched`; `None` when the config does not say (the CLI's `--durability` wins over it,
    /// and `fsync` is the default of both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<crate::journal::Durability>,
    /// Under `durability: batched`, how long a record may stay unsynced (`sync_interval:`,
    /// default 10 ms); `None` when the config does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_interval: Option<std::time::Duration>,
    /// The price table (`cost:`, issue 40): `None` when the config has none, and then no view
    /// shows a cost. Left out of definition snapshots when absent, so a run is priced by the
    /// table it ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::CostTable>,
    /// The size at which the run's journal starts a new segment (`journal_segment_size:`);
    /// `None`: the store's default (64 MiB). Left out of definition snapshots when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_segment_size: Option<u64>,
    /// When the run should be done (`deadline:`, issue 40): resolved when the run starts
    /// (journal `run_started.deadline`). Left out of definition snapshots when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<crate::deadline::Deadline>,
}

/// Where a secret's value comes from (`secrets: {NAME: {env: VAR}}`, `{file: PATH}` or
/// `{command: ...}`). This, and the secret's name, is all apollo ever writes down about it:
/// the definition snapshot, the parse cache and a unit's input hash take the source, never
/// the value (so rotating a value reruns nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// The value of apollo's environment variable of this name.
    Env(String),
    /// The content of this regular file (absolute), without one trailing newline.
    File(PathBuf),
    /// What this command prints on stdout (without one trailing newline), run in the config
    /// file's folder when the run starts; `apollo check` never runs it.
    Command(Command),
}

impl SecretSource {
    /// How messages name the source: `env LOGIN_TOKEN`, `file /run/keys/t`, `command vault …`.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::Env(variable) => format!("env {variable}"),
            SecretSource::File(path) => format!("file {}", path.display()),
            SecretSource::Command(command) => format!("command `{}`", command.display()),
        }
    }
}

fn default_blob_store_max() -> Option<u64> {
    Some(crate::capture::DEFAULT_BLOB_STORE_MAX)
}

fn is_default_blob_store_max(value: &Option<u64>) -> bool {
    *value == default_blob_store_max()
}

/// How long a unit's `cleanup` may run when the config does not say.
pub const DEFAULT_CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

fn default_cleanup_timeout() -> Duration {
    DEFAULT_CLEANUP_TIMEOUT
}

fn is_default_cleanup_timeout(value: &Duration) -> bool {
    *value == DEFAULT_CLEANUP_TIMEOUT
}

/// Slurm jobs in flight at once when the config sets no `max_jobs`.
pub const DEFAULT_MAX_JOBS: usize = 100;

/// When a pipeline hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookWhen {
    /// When the run failed (or stopped for a human's verdict).
    OnFailure,
    /// When the run succeeded.
    OnSuccess,
    /// Whenever the run ended: succeeded, failed, interrupted or stopped for a verdict.
    OnFinish,
    /// While the run goes on, once per run: when its predicted finish passes its `deadline:`,
    /// or the deadline comes with units not done.
    OnLate,
}

impl HookWhen {
    /// The config key (`on_failure`, …), also the hook's name in the journal and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            HookWhen::OnFailure => "on_failure",
            HookWhen::OnSuccess => "on_success",
            HookWhen::OnFinish => "on_finish",
            HookWhen::OnLate => "on_late",
        }
    }
}

/// A pipeline hook: a command run once when a run ends, supervised and time-limited like a
/// unit (DESIGN §16).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// When it runs.
    pub when: HookWhen,
    /// The command.
    pub command: Command,
    /// Its time limit.
    #[serde(with = "duration_ms")]
    pub timeout: Duration,
}

/// How long a hook may run when the config does not say.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// One unit of work: up to three commands run as one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// Unique name; matches `[A-Za-z0-9_.-]+` and is never `.` or `..`, or for an instance of a
    /// `foreach` unit, such a name followed by `[key]` or `[key,key,…]` with keys of the same
    /// characters (see [`unit_folder_name`] for its form as a path component).
    pub name: String,
    /// Names of the units this one depends on, in config order, without duplicates.
    pub deps: Vec<String>,
    /// Time limit of one attempt's `prepare` + `execute` (see apollo-exec for cleanup's own limit).
    /// `None` means no limit.
    #[serde(with = "opt_duration_ms")]
    pub timeout: Option<Duration>,
    /// Extra attempts after the first failure.
    pub retries: u32,
    /// Base of the exponential backoff between attempts.
    #[serde(with = "duration_ms")]
    pub retry_delay: Duration,
    /// Exit codes that make a failed attempt retried (`retry_on_exit: [75, 137]`); empty: any
    /// failure is. A process killed by signal N counts as exit 128 + N (as the shell says); a
    /// timeout is not an exit code and follows `retries` alone. Left out of definition
    /// snapshots when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry_on_exit: Vec<i32>,
    /// The cap of the exponential backoff (`retry_max_delay:`); `None`: the engine's own cap
    /// (5 minutes). Left out of definition snapshots when unset.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_duration_ms"
    )]
    pub retry_max_delay: Option<Duration>,
    /// SIGTERM → wait this long → SIGKILL.
    #[serde(with = "duration_ms")]
    pub kill_grace: Duration,
    /// Runs before `execute`; optional.
    pub prepare: Option<Command>,
    /// The unit's main command.
    pub execute: Command,
    /// Runs after `execute` (or after a failed `prepare`), always, once `prepare` started.
    pub cleanup: Option<Command>,
    /// Time limit of `cleanup` (`cleanup_timeout:`, default [`DEFAULT_CLEANUP_TIMEOUT`]), apart
    /// from `timeout`; then its process group gets SIGTERM, `kill_grace`, SIGKILL. Left out of
    /// definition snapshots at its default.
    #[serde(
        default = "default_cleanup_timeout",
        skip_serializing_if = "is_default_cleanup_timeout",
        with = "duration_ms"
    )]
    pub cleanup_timeout: Duration,
    /// Input file patterns, relative to `base_dir` unless absolute; globs allowed.
    pub inputs: Vec<String>,
    /// Output files, relative to `base_dir` unless absolute.
    pub outputs: Vec<String>,
    /// The environment the unit's commands get on top of apollo's own: pipeline `env` merged
    /// under the unit's `env` (the unit wins).
    pub env: BTreeMap<String, String>,
    /// Absolute working directory of the unit's commands.
    pub workdir: PathBuf,
    /// Whether running the unit again after a half-done attempt is safe (DESIGN §7).
    pub idempotent: bool,
    /// Which declared files are kept in the blob store, and up to what size (`capture:`,
    /// `capture_max_file:`). Absent from definition snapshots written before it existed, and
    /// left out of them at its default (as `executor` and `resources` are): the default then.
    #[serde(default, skip_serializing_if = "is_default")]
    pub capture: crate::capture::CapturePolicy,
    /// Whether a new run may reuse this unit's result from an earlier run of the same
    /// pipeline instead of running it (`reuse: true`; DESIGN §12): when its input hash equals
    /// an earlier successful attempt's and its declared outputs are as that attempt left them.
    /// Off by default (a unit like "fetch today's data" must run every time); absent in
    /// definition snapshots written before it existed, and left out of them when `false` (so
    /// a pipeline that does not use it keeps the snapshot, and its hash, it had before).
    #[serde(default, skip_serializing_if = "is_false")]
    pub reuse: bool,
    /// Where its attempts run (`executor:`; local by default).
    #[serde(default, skip_serializing_if = "is_default")]
    pub executor: ExecutorKind,
    /// What one attempt asks for (`resources:`): the local executor schedules against the
    /// machine's capacity with it, a cluster executor turns it into its scheduler's options.
    #[serde(default, skip_serializing_if = "is_default")]
    pub resources: Resources,
    /// The pipeline's secrets this unit receives as environment variables (`secrets:
    /// [API_TOKEN]`; DESIGN §18), by name, each with where its value comes from — never the
    /// value, which is read when a run starts and handed to the executor alone. Its output is
    /// then relayed through apollo, which masks the values before they reach the log files.
    /// Left out of definition snapshots when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretSource>,
    /// The most bytes each of an attempt's `stdout` and `stderr` files keeps (`log_limit:`):
    /// past it apollo keeps the head and the last part, with a marker line where it cut.
    /// `None` (the default): no limit. Left out of definition snapshots when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_limit: Option<u64>,
    /// `resources: {slurm: {queue_timeout: ...}}`: a Slurm job still pending this long after
    /// its submission is cancelled and the attempt fails (it never ran, so `retries` apply).
    /// `None` (the default): no limit. Kept here rather than in [`SlurmResources`] (which the
    /// parse cache keeps field by field), and left out of definition snapshots when `None`.
    #[serde(
        default,
        with = "opt_duration_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub queue_timeout: Option<Duration>,
    /// The `when:` condition that was false when the pipeline was loaded (as written, with its
    /// values when they differ): apollo skips the unit — recorded `unit_skipped` with reason
    /// `when`, its commands never run — and its dependents go on. `None`: it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_when: Option<String>,
    /// A `when: {command}`, run first in each attempt ([`Phase::When`]): false, apollo skips
    /// the unit as for [`Unit::skip_when`]. Left out of definition snapshots when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_command: Option<Command>,
    /// When this unit should be done (`deadline:`), resolved from the run's start like the
    /// run's. Left out of definition snapshots when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<crate::deadline::Deadline>,
}

/// Which executor runs a unit's attempts (DESIGN §13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutorKind {
    /// Processes on this machine (apollo-exec).
    #[default]
    Local,
    /// Jobs of a Slurm cluster (apollo-slurm).
    Slurm,
}

impl ExecutorKind {
    /// The name written in the config (`local`, `slurm`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Slurm => "slurm",
        }
    }
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much the local executor may run at once, beyond `max_parallel`: the sum of the running
/// units' `cpus` and `memory` stays within it. `None` means the machine's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Capacity {
    /// `max_cpus:` (default: the machine's CPUs).
    pub cpus: Option<u32>,
    /// `max_memory:` in bytes (default: the machine's memory).
    pub memory: Option<u64>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Whether `value` is its type's default: a field that is, is left out of a definition
/// snapshot (a third of a plain unit's snapshot was the defaults of the fields added for
/// capture, executors and resources), and read back as the default.
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// A command: a shell string or an argument vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Run by `/bin/sh -c` (apollo-exec may exec it directly when it has no shell syntax).
    Shell(String),
    /// Exec'd directly: program then arguments. Never empty.
    Argv(Vec<String>),
}

impl Command {
    /// A one-line human rendering of the command (argv elements joined by spaces).
    pub fn display(&self) -> String {
        match self {
            Command::Shell(script) => script.clone(),
            Command::Argv(argv) => argv.join(" "),
        }
    }
}

/// The phases of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// (Journal format 1.12.) A `when: {command}` ([`Unit::when_command`]), first of all.
    When,
    /// The optional preparation command.
    Prepare,
    /// The main command.
    Execute,
    /// The optional cleanup command.
    Cleanup,
}

impl Phase {
    /// The phase's name as it appears in `APOLLO_PHASE`, the journal and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::When => "when",
            Phase::Prepare => "prepare",
            Phase::Execute => "execute",
            Phase::Cleanup => "cleanup",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Pipeline {
    /// Every secret some unit receives, by name, with its source (each once).
    pub fn secrets(&self) -> BTreeMap<&str, &SecretSource> {
        self.units
            .iter()
            .flat_map(|unit| unit.secrets.iter())
            .map(|(name, source)| (name.as_str(), source))
            .collect()
    }

    /// The index of the unit called `name`, if there is one.
    pub fn unit_index(&self, name: &str) -> Option<usize> {
        self.units.iter().position(|unit| unit.name == name)
    }
}

/// The folder name of a unit's attempt logs (`runs/<run>/units/<folder>/<attempt>`): the unit
/// name itself, except for a fan-out instance `name[k1,k2]`, whose brackets and commas are
/// spelt `name__k1__k2` (DESIGN §17: on disk, no brackets or commas). The loader refuses a
/// pipeline in which two units would share a folder.
///
/// ```
/// use apollo_core::model::unit_folder_name;
/// assert_eq!(unit_folder_name("fetch"), "fetch");
/// assert_eq!(unit_folder_name("load[eu,a]"), "load__eu__a");
/// ```
pub fn unit_folder_name(unit: &str) -> std::borrow::Cow<'_, str> {
    match unit.strip_suffix(']').and_then(|rest| rest.split_once('[')) {
        Some((base, keys)) => {
            let mut folder = String::with_capacity(unit.len() + 4);
            folder.push_str(base);
            for key in keys.split(',') {
                folder.push_str("__");
                folder.push_str(key);
            }
            std::borrow::Cow::Owned(folder)
        }
        None => std::borrow::Cow::Borrowed(unit),
    }
}

/// Serde helpers: durations as integer milliseconds in JSON (definition snapshots).
mod duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(
        value: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(deserializer)?))
    }
}

mod opt_duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => {
                serializer.serialize_some(&u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
            }
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}
