//! The events the engine records: the payloads of journal records.
//!
//! apollo-store frames each event into a record (adding `seq` and `ts`), makes it durable and
//! reads it back; apollo-replay turns a run's events into timelines and diffs. The serde
//! shape is part of the journal format (see apollo-store's docs): an internally tagged object
//! whose `kind` is the variant in snake_case. Adding an optional field or a new kind is a minor
//! format change (apollo-store's `FORMAT_MINOR`); renaming or removing one is a major change.
//!
//! Each payload is declared inside `journal_struct!` ([`codec`](crate::codec)): the one list of
//! its fields from which its serde form, the writer's fast encoder and the reader's verbatim
//! recogniser and fast decoder all follow. Adding a field is one line there; an optional one
//! takes `#[serde(default, skip_serializing_if = "IsDefault::is_default")]` (left out when it is
//! its type's default), the only `skip_serializing_if` the codec knows.

use serde::{Deserialize, Serialize};

use crate::codec::{IsDefault, journal_struct};
use crate::model::Phase;

/// One journal event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A new run began.
    RunStarted(RunStarted),
    /// An existing run was picked up again by a later apollo process.
    RunResumed(RunResumed),
    /// An attempt of a unit is about to spawn its first process (write-ahead).
    UnitStarted(UnitStarted),
    /// A running attempt was handed to an external scheduler, which gave it a job id.
    UnitSubmitted(UnitSubmitted),
    /// An attempt of a unit ended.
    UnitFinished(UnitFinished),
    /// A unit will not run in this run.
    UnitSkipped(UnitSkipped),
    /// A human recorded a verdict on a unit (`apollo mark`).
    UnitMarked(UnitMarked),
    /// The run ended.
    RunFinished(RunFinished),
    /// (Format 1.3.) The manifest of an attempt's declared input files (just after its
    /// `unit_started`, in the same commit) or outputs (just before its `unit_finished`).
    UnitFiles(UnitFiles),
    /// (Format 1.3.) This run is a reproduction of one recorded attempt (`apollo
    /// reproduce`): written just after its `run_started`.
    RunReproduces(RunReproduces),
    /// (Format 1.3.) A pipeline hook (`on_failure`, `on_success`, `on_finish`) ran after the
    /// run ended.
    HookFinished(HookFinished),
    /// (Format 1.3.) A unit was not run: an earlier run's successful attempt with the same
    /// input hash stands for it, its declared outputs on disk as that attempt left them.
    UnitReused(UnitReused),
    /// (Format 1.10.) The run's predicted finish passed its deadline, or the deadline came
    /// with units not done: written once per run, before the `on_late` hook.
    RunLate(RunLate),
    /// (Format 1.11.) How a reproduction compared with the attempt it reproduces: written
    /// after its `run_finished`, once the outputs were compared.
    ReproductionCompared(ReproductionCompared),
}

impl Event {
    /// The unit the event is about, for unit events.
    pub fn unit(&self) -> Option<&str> {
        match self {
            Event::UnitStarted(event) => Some(&event.unit),
            Event::UnitSubmitted(event) => Some(&event.unit),
            Event::UnitFinished(event) => Some(&event.unit),
            Event::UnitSkipped(event) => Some(&event.unit),
            Event::UnitMarked(event) => Some(&event.unit),
            Event::UnitFiles(event) => Some(&event.unit),
            Event::UnitReused(event) => Some(&event.unit),
            Event::RunStarted(_)
            | Event::RunResumed(_)
            | Event::RunFinished(_)
            | Event::RunReproduces(_)
            | Event::HookFinished(_)
            | Event::RunLate(_)
            | Event::ReproductionCompared(_) => None,
        }
    }
}

journal_struct! {
    /// Payload of `run_started`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunStarted {
        /// The run's id (`20261130T021507Z-3f9a`).
        pub run_id: String,
        /// The pipeline's name.
        pub pipeline: String,
        /// The config file the run was started from.
        pub config_path: String,
        /// SHA-256 of the config file's bytes.
        pub config_hash: String,
        /// SHA-256 of the resolved definition snapshot stored with the run.
        pub definition_hash: String,
        /// Version of the apollo that started the run.
        pub apollo_version: String,
        /// Host name of the machine.
        pub host: String,
        /// Process id of the apollo that started the run.
        pub pid: u32,
        /// The pipeline's units, in config order.
        pub units: Vec<String>,
        /// The pipeline's stable identity in its state directory (since journal format 1.2): `id:`
        /// and the config's `id`, or the name, `@`, and the config path relative to the state
        /// directory. `None` in older journals, whose runs are identified by their name alone.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub identity: Option<String>,
        /// The run's params (since journal format 1.3): name → value, a string (`string`,
        /// `date`), a number (`int`), a boolean or an array of strings (`list`). Absent when the
        /// pipeline declares none, and in older journals.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub params: std::collections::BTreeMap<String, serde_json::Value>,
        /// What kind of run this is (since journal format 1.5): absent for an ordinary run. Read
        /// it with [`RunStarted::run_kind`], which also knows the reproductions of older journals.
        #[serde(default, skip_serializing_if = "IsDefault::is_default", alias = "kind")]
        pub run_kind: RunKind,
        /// How the run's journal is made durable (since journal format 1.6): absent for
        /// `fsync`, the default, and in older journals, which were all written so.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub durability: crate::journal::Durability,
        /// The run's and its units' `deadline:` resolved when it started (since format 1.9;
        /// absent without any). A resume keeps them. Boxed: few runs have one.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub deadlines: Option<Box<RunDeadlines>>,
    }
}

impl RunStarted {
    /// What kind of run this is: [`RunStarted::kind`], or, in a journal older than format 1.5,
    /// a reproduction when its identity is `reproduce:…` (how `apollo reproduce` marked its
    /// runs before the field). The one door to the fact: a reproduction is never a pipeline's
    /// latest run, never a source for reuse, and left out of `stats`.
    pub fn run_kind(&self) -> RunKind {
        match self.run_kind {
            RunKind::Run
                if self
                    .identity
                    .as_deref()
                    .is_some_and(|identity| identity.starts_with("reproduce:")) =>
            {
                RunKind::Reproduction
            }
            kind => kind,
        }
    }
}

journal_struct! {
    /// Payload of `run_resumed`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunResumed {
        /// SHA-256 of the config file's bytes at resume time.
        pub config_hash: String,
        /// SHA-256 of the resolved definition snapshot the resume used.
        pub definition_hash: String,
        /// Version of the apollo that resumed.
        pub apollo_version: String,
        /// Host name of the machine.
        pub host: String,
        /// Process id of the apollo that resumed.
        pub pid: u32,
        /// The pipeline's units at resume time, in config order.
        pub units: Vec<String>,
    }
}

/// What kind of thing an input component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A command (`prepare`, `execute` or `cleanup`); the name is the phase.
    Command,
    /// A declared environment variable; the name is the variable.
    Env,
    /// A declared input file; the name is its path relative to the config folder.
    File,
    /// A dependency's output hash; the name is the dependency.
    Upstream,
}

journal_struct! {
    /// One component of a unit's input hash, recorded so a diff can say *what* changed.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct InputComponent {
        /// What the component is.
        pub kind: InputKind,
        /// Which one (phase, variable, path or unit name).
        pub name: String,
        /// SHA-256 (hex) of the component's canonical encoding.
        pub hash: String,
    }
}

journal_struct! {
    /// Payload of `unit_started`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitStarted {
        /// The unit.
        pub unit: String,
        /// The attempt number, from 1, counted across resumes of the same run.
        pub attempt: u32,
        /// SHA-256 (hex) over the components below.
        pub input_hash: String,
        /// Every component of the input hash, sorted by kind then name — empty when they are in
        /// an input manifest instead (`inputs_manifest`).
        pub inputs: Vec<InputComponent>,
        /// Where the components are when they would not fit in a record (format 1.2): a unit
        /// whose input list (a glob of 100,000 files) would make the record larger than
        /// [`MAX_RECORD_BYTES`](crate::journal::MAX_RECORD_BYTES) keeps it in a manifest file of
        /// the run, written durably before this record. Absent otherwise.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub inputs_manifest: Option<InputManifestRef>,
    }
}

journal_struct! {
    /// A unit's input components kept outside the journal (see
    /// [`input_manifest`](crate::input_manifest)): the manifest's name and how many components it
    /// holds.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct InputManifestRef {
        /// SHA-256 (hex) of the manifest's bytes: its name in the run's `manifests/` folder.
        pub sha256: String,
        /// How many components it holds.
        pub count: u64,
    }
}

/// Which of an attempt's declared files a [`UnitFiles`] record lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileSide {
    /// The input files, as hashed before the attempt started.
    Inputs,
    /// The declared outputs, as hashed after the attempt succeeded.
    Outputs,
}

impl FileSide {
    /// `inputs` or `outputs`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileSide::Inputs => "inputs",
            FileSide::Outputs => "outputs",
        }
    }
}

journal_struct! {
    /// Payload of `unit_files` (format 1.3): an attempt's manifest of declared input files or
    /// outputs — each file's path, SHA-256, size and mode, and whether its bytes are in the blob
    /// store (see [`capture`](crate::capture)). Written only for a unit that declares files.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitFiles {
        /// The unit.
        pub unit: String,
        /// The attempt number.
        pub attempt: u32,
        /// Inputs or outputs.
        pub side: FileSide,
        /// The files, sorted by path — empty when they are in a manifest file instead.
        pub files: Vec<crate::capture::FileEntry>,
        /// Where the files are when they would not fit in a record (a directory of 100,000
        /// files): a manifest file of the run, written durably before this record, whose `count`
        /// is the number of files.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub manifest: Option<InputManifestRef>,
    }
}

journal_struct! {
    /// Payload of `unit_submitted` (format 1.1): an attempt, already recorded as started, was
    /// handed to an external scheduler (Slurm). Recorded after `unit_started` and before the
    /// attempt's `unit_finished`; a later apollo uses it to find the job again.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitSubmitted {
        /// The unit.
        pub unit: String,
        /// The attempt number.
        pub attempt: u32,
        /// Which executor took it (`slurm`, …).
        pub executor: String,
        /// The scheduler's id for the job.
        pub job_id: String,
        /// Set when this attempt submitted nothing but reattached to the job an earlier attempt
        /// (this one) submitted before apollo died (format 1.3).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub reattached_from: Option<u32>,
        /// (Format 1.7.) The partition the job was submitted to: the unit's, or the cluster's
        /// default partition when the unit names none (absent when it could not be read).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub partition: Option<String>,
        /// (Format 1.7.) How many nodes the job asked for (`--nodes`; 1 when it did not say).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub nodes: Option<u32>,
        /// (Format 1.7.) The memory the job asked for, in MiB, when it asked (`--mem`).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub mem_mib: Option<u64>,
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    /// Every phase exited 0 and every declared output exists.
    Succeeded,
    /// A phase failed (non-zero exit, a signal, could not start, a missing output).
    Failed,
    /// apollo's timeout ended the attempt.
    TimedOut,
    /// apollo was stopped (SIGINT/SIGTERM) while the attempt ran.
    Interrupted,
    /// `execute` exited 77: the unit decided it had nothing to do. Satisfies dependents.
    Skipped,
}

impl AttemptStatus {
    /// The status as written in the journal and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::TimedOut => "timed_out",
            AttemptStatus::Interrupted => "interrupted",
            AttemptStatus::Skipped => "skipped",
        }
    }

    /// Whether dependents may run after this outcome.
    pub fn satisfies_dependents(self) -> bool {
        matches!(self, AttemptStatus::Succeeded | AttemptStatus::Skipped)
    }
}

/// How one phase's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal (number) ended it.
    Signal(i32),
}

journal_struct! {
    /// The record of one phase of an attempt.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PhaseRecord {
        /// Which phase.
        pub phase: Phase,
        /// Milliseconds from the attempt's start to the phase's start.
        pub offset_ms: u64,
        /// Wall time of the phase in milliseconds.
        pub duration_ms: u64,
        /// How its process ended; `None` when it could not start.
        pub exit: Option<ExitStatus>,
        /// Whether apollo's timeout ended it.
        pub timed_out: bool,
    }
}

journal_struct! {
    /// Payload of `unit_finished`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitFinished {
        /// The unit.
        pub unit: String,
        /// The attempt number.
        pub attempt: u32,
        /// How the attempt ended.
        pub status: AttemptStatus,
        /// How the deciding phase's process ended (execute's, or the phase that failed).
        pub exit: Option<ExitStatus>,
        /// The phase that failed or timed out, when one did.
        pub failed_phase: Option<Phase>,
        /// Whether apollo's timeout ended the attempt.
        pub timed_out: bool,
        /// Wall time of the whole attempt in milliseconds.
        pub duration_ms: u64,
        /// Milliseconds the attempt waited for a free worker between its durable `unit_started`
        /// and its first process (the engine commits attempts ahead of free workers, see the
        /// engine docs; counted from when its batch was appended). The attempt's processes started at `unit_started`'s time plus this.
        /// Absent (0) in journals written before it existed.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub queued_ms: u64,
        /// SHA-256 (hex) of the declared outputs, or of execute's stdout when none are declared.
        /// `None` when the attempt did not succeed.
        pub output_hash: Option<String>,
        /// Bytes the attempt wrote to stdout (all phases).
        pub stdout_bytes: u64,
        /// Bytes the attempt wrote to stderr (all phases).
        pub stderr_bytes: u64,
        /// User CPU time of the attempt's processes, in milliseconds.
        pub user_cpu_ms: u64,
        /// System CPU time of the attempt's processes, in milliseconds.
        pub sys_cpu_ms: u64,
        /// Largest resident set size among the attempt's processes, in KiB.
        pub max_rss_kib: u64,
        /// Processes left in a phase's group after its leader exited, killed by apollo.
        pub leftovers_killed: u32,
        /// Every phase that ran, in order.
        pub phases: Vec<PhaseRecord>,
        /// What went wrong, in one or a few lines, when something did.
        pub error: Option<String>,
    }
}

/// Why a unit did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// A dependency (direct or not) failed for good.
    UpstreamFailed {
        /// The unit whose failure caused the skip.
        upstream: String,
    },
    /// The run was interrupted before the unit could start.
    Interrupted,
    /// (Format 1.5; 1.12 for a `when: {command}`, after [`UnitFinished::when_false`].) Its
    /// `when:` was false: apollo skipped it (never recorded as an exit 77 of its own).
    When {
        /// The condition as written, with its values when they differ
        /// (`${params.region} == "eu" (us == "eu")`).
        condition: String,
    },
}

journal_struct! {
    /// Payload of `unit_skipped`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitSkipped {
        /// The unit.
        pub unit: String,
        /// Why it did not run.
        #[serde(flatten)]
        pub reason: SkipReason,
    }
}

/// A human's verdict on a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Treat the unit as succeeded: do not run it again.
    Succeeded,
    /// Treat the unit as failed: run it again.
    Failed,
    /// (Format 1.2.) Allow the unit to run again on the next resume. On a unit that succeeded
    /// and whose inputs or outputs changed since, it lets exactly that unit rerun although it
    /// is not idempotent (its success stays recorded, and if nothing changed it is not run
    /// again); on an attempt that was cut off, it means "run it again", like `Failed` without
    /// claiming that the attempt failed. The allowance is used up by the unit's next attempt.
    Rerun,
}

impl Verdict {
    /// The verdict as written in the journal and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Succeeded => "succeeded",
            Verdict::Failed => "failed",
            Verdict::Rerun => "rerun",
        }
    }
}

journal_struct! {
    /// Payload of `unit_marked`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitMarked {
        /// The unit.
        pub unit: String,
        /// The attempt the verdict is about.
        pub attempt: u32,
        /// The verdict.
        pub verdict: Verdict,
        /// Who recorded it (the user name, when known).
        pub by: String,
        /// A free-form note.
        pub note: Option<String>,
    }
}

journal_struct! {
    /// Payload of `unit_reused` (format 1.3): the unit was not run in this run, because an
    /// earlier run of the same pipeline had a successful attempt with the same input hash, and its
    /// declared outputs were found on disk with that attempt's output hash (DESIGN §12,
    /// `reuse: true`). It satisfies its dependents as a success does, handing them `output_hash`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UnitReused {
        /// The unit.
        pub unit: String,
        /// The run whose attempt did the work (the original, not a run that itself reused it).
        pub from_run: String,
        /// That attempt's number in `from_run`.
        pub from_attempt: u32,
        /// The input hash now, equal to that attempt's.
        pub input_hash: String,
        /// The input components now (as `unit_started` records them), so a diff can compare them;
        /// empty when they would not fit in a record (a glob of 100,000 files).
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub inputs: Vec<InputComponent>,
        /// The declared outputs' hash, as recorded by that attempt and found on disk now.
        pub output_hash: String,
        /// (Format 1.11.) The declared output files that were missing or changed on disk and
        /// were put back from the blob store to reuse the attempt, relative to the unit's
        /// workdir, sorted; absent when none was.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub restored: Vec<String>,
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every unit succeeded or skipped itself.
    Succeeded,
    /// At least one unit failed for good.
    Failed,
    /// apollo was stopped by a signal.
    Interrupted,
}

impl RunStatus {
    /// The status as written in the journal and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

journal_struct! {
    /// Payload of `run_finished`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunFinished {
        /// How the run ended.
        pub status: RunStatus,
        /// Units that succeeded (in this or an earlier process of the run).
        pub succeeded: u32,
        /// Units that failed for good.
        pub failed: u32,
        /// Units skipped (by themselves, or because an upstream failed).
        pub skipped: u32,
        /// (Format 1.3.) Units reused from an earlier run (`unit_reused`), not counted in
        /// `succeeded`. Absent (0) in older journals.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub reused: u32,
    }
}

mod deadline;
mod finished;
mod hook;
mod reproduce;
mod run_kind;
pub use deadline::{RunDeadlines, RunLate, UnitDeadline};
pub use finished::cut_off_by_signal;
pub use hook::HookFinished;
pub use reproduce::{ReproductionCompared, RunReproduces};
pub use run_kind::RunKind;

#[cfg(test)]
mod tests;
