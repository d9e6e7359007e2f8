//! [`RunDiff`]: two runs of a pipeline compared unit by unit.

use std::collections::{HashMap, HashSet};

use apollo_core::event::{InputComponent, InputKind, InputManifestRef};
use apollo_core::{Command, Record, UnitState};
use serde::Serialize;

use crate::display::skip_reason_text;
use crate::{Timeline, UnitStatus, UnitTimeline};

mod fold;
mod lines;
mod render;
use fold::Fold;
pub use render::{write_diff_json, write_diff_text};

/// Two runs compared unit by unit: status, input (and which of its components changed),
/// output and duration. Built from two [`Timeline`]s with [`RunDiff::new`].
///
/// Units are listed in run B's config order, then the units only run A has. Each unit is
/// compared on its final status and on its **last attempt**'s input and output hashes;
/// durations are reported but never make two runs differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunDiff {
    /// Run A (the "before").
    pub run_a: RunSide,
    /// Run B (the "after").
    pub run_b: RunSide,
    /// One entry per unit of either run.
    pub units: Vec<UnitDiff>,
}

/// Which run a side of the diff is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunSide {
    /// The run's id.
    pub run_id: Option<String>,
    /// The pipeline's name.
    pub pipeline: Option<String>,
    /// `succeeded`, `failed`, `interrupted` or `incomplete`.
    pub status: &'static str,
    /// The run's params (`run_started`), for naming the ones that differ.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub params: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Which runs a unit appears in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Presence {
    /// Both runs have the unit.
    Both,
    /// Only run A has it (removed from the pipeline since).
    OnlyA,
    /// Only run B has it (added to the pipeline since).
    OnlyB,
}

/// Whether a hash is the same in both runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// Both runs recorded it, and it is the same.
    Same,
    /// Both runs recorded it, and it differs.
    Changed,
    /// At least one run has none to compare (the unit did not run, or did not succeed).
    Unknown,
}

impl Change {
    fn of(a: Option<&str>, b: Option<&str>) -> Self {
        match (a, b) {
            (Some(a), Some(b)) if a == b => Change::Same,
            (Some(_), Some(_)) => Change::Changed,
            _ => Change::Unknown,
        }
    }

    /// `same`, `changed` or `-`.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Same => "same",
            Change::Changed => "changed",
            Change::Unknown => "-",
        }
    }
}

/// How one input component differs between the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ComponentChange {
    /// Both have it, with different hashes.
    Changed,
    /// Only run B has it.
    Added,
    /// Only run A has it.
    Removed,
}

/// One input component that differs between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InputChange {
    /// What kind of component.
    pub kind: InputKind,
    /// Which one (phase, variable, path or upstream unit).
    pub name: String,
    /// How it differs.
    pub change: ComponentChange,
    /// For a changed command: it differs from run A's only because values are now quoted
    /// (DESIGN §18; see [`RunDiff::mark_quoting_changes`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quoting_only: bool,
    /// For a command: the command as run A and run B recorded it, when their definitions
    /// were read (see [`RunDiff::describe_commands`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// See [`before`](Self::before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Run A's hash of a changed component.
    #[serde(skip)]
    hash_a: Option<String>,
}

impl InputChange {
    /// The change in words: `input file data/raw.csv changed`, `upstream fetch_data output
    /// changed`, `command execute changed`, `env FOO added`.
    pub fn describe(&self) -> String {
        let change = match self.change {
            ComponentChange::Changed => "changed",
            ComponentChange::Added => "added",
            ComponentChange::Removed => "removed",
        };
        match (self.kind, self.change) {
            (InputKind::File, _) => format!("input file {} {change}", self.name),
            (InputKind::Upstream, ComponentChange::Changed) => {
                format!("upstream {} output changed", self.name)
            }
            (InputKind::Upstream, _) => format!("dependency on {} {change}", self.name),
            (InputKind::Command, _) if self.quoting_only => format!(
                "command {} {change} (quoting changed: values are now quoted, see UPGRADING.md)",
                self.name
            ),
            // Several lines: `command_line_diff` shows them (under the unit, in text).
            (InputKind::Command, _) => match lines::one_line_change(self) {
                Some((before, after)) => {
                    format!("command {} {change}: `{before}` → `{after}`", self.name)
                }
                None => format!("command {} {change}", self.name),
            },
            (InputKind::Env, _) => format!("env {} {change}", self.name),
        }
    }
}

/// One unit compared across the two runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UnitDiff {
    /// The unit's name.
    pub unit: String,
    /// Which runs have it.
    pub presence: Presence,
    /// Its state in run A, in the one closed set every view prints.
    pub state_a: Option<UnitState>,
    /// Its state in run B.
    pub state_b: Option<UnitState>,
    /// Input hash of its last attempt in run A.
    pub input_hash_a: Option<String>,
    /// Input hash of its last attempt in run B.
    pub input_hash_b: Option<String>,
    /// Whether the input changed.
    pub input: Change,
    /// Which input components changed (empty when the input is the same or unknown).
    pub input_changes: Vec<InputChange>,
    /// Why the components could not be compared although the input changed: a run keeps
    /// them in an input manifest that was not or could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_unknown: Option<String>,
    /// Output hash of its last attempt in run A.
    pub output_hash_a: Option<String>,
    /// Output hash of its last attempt in run B.
    pub output_hash_b: Option<String>,
    /// Whether the output changed.
    pub output: Change,
    /// Which output files changed, from the attempts' recorded manifests (`unit_files`):
    /// `output file out/x.csv changed`, `… added`, `… removed`. Empty when the output is the
    /// same or a run recorded no manifest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_changes: Vec<String>,
    /// Wall time of its last attempt in run A, in milliseconds.
    pub duration_a_ms: Option<u64>,
    /// Wall time of its last attempt in run B, in milliseconds.
    pub duration_b_ms: Option<u64>,
    /// `duration_b_ms - duration_a_ms`, when both ran.
    pub duration_delta_ms: Option<i64>,
    /// Why it ended as it did in run B: why it was skipped, or the first error line of its
    /// last attempt, when there is one.
    pub detail_b: Option<String>,
}

impl UnitDiff {
    fn new(
        unit: &str,
        a: Option<&UnitSide>,
        b: Option<&UnitSide>,
        manifests: &dyn ManifestLoader,
    ) -> Self {
        let presence = match (a, b) {
            (Some(_), Some(_)) | (None, None) => Presence::Both,
            (Some(_), None) => Presence::OnlyA,
            (None, Some(_)) => Presence::OnlyB,
        };
        let last_a = a.and_then(|side| side.last.as_ref());
        let last_b = b.and_then(|side| side.last.as_ref());
        let input_hash_a = last_a.and_then(|attempt| attempt.input_hash.clone());
        let input_hash_b = last_b.and_then(|attempt| attempt.input_hash.clone());
        let output_hash_a = last_a.and_then(|attempt| attempt.output_hash.clone());
        let output_hash_b = last_b.and_then(|attempt| attempt.output_hash.clone());
        let input = Change::of(input_hash_a.as_deref(), input_hash_b.as_deref());
        let output = Change::of(output_hash_a.as_deref(), output_hash_b.as_deref());
        let output_changes = match (
            output,
            last_a.and_then(|last| last.output_files.as_ref()),
            last_b.and_then(|last| last.output_files.as_ref()),
        ) {
            (Change::Changed, Some(files_a), Some(files_b)) => compare_files(files_a, files_b),
            _ => Vec::new(),
        };
        let (input_changes, input_unknown) = match (input, last_a, last_b) {
            (Change::Changed, Some(last_a), Some(last_b)) => {
                match (
                    last_a.components(Side::A, manifests),
                    last_b.components(Side::B, manifests),
                ) {
                    (Ok(inputs_a), Ok(inputs_b)) => (compare_inputs(&inputs_a, &inputs_b), None),
                    (Err(why), _) | (_, Err(why)) => (Vec::new(), Some(why)),
                }
            }
            _ => (Vec::new(), None),
        };
        let duration_a_ms = last_a.map(|attempt| attempt.duration_ms);
        let duration_b_ms = last_b.map(|attempt| attempt.duration_ms);
        let duration_delta_ms = match (duration_a_ms, duration_b_ms) {
            (Some(a), Some(b)) => Some(signed(b) - signed(a)),
            _ => None,
        };
        UnitDiff {
            unit: unit.to_owned(),
            presence,
            state_a: a.map(|unit| unit.state),
            state_b: b.map(|unit| unit.state),
            input,
            input_changes,
            input_unknown,
            output,
            output_changes,
            input_hash_a,
            input_hash_b,
            output_hash_a,
            output_hash_b,
            duration_a_ms,
            duration_b_ms,
            duration_delta_ms,
            detail_b: b.and_then(|side| side.detail.clone()),
        }
    }

    /// Whether the unit is in both runs with the same status, input hash and output hash.
    /// Durations never count.
    pub fn is_same(&self) -> bool {
        self.presence == Presence::Both
            && same_state(self.state_a, self.state_b)
            && self.input_hash_a == self.input_hash_b
            && self.output_hash_a == self.output_hash_b
    }

    /// Why the unit differs, as short phrases (empty when it is the same).
    pub fn reasons(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        match self.presence {
            Presence::OnlyA => reasons.push("only in run A".to_owned()),
            Presence::OnlyB => reasons.push("only in run B (new unit)".to_owned()),
            Presence::Both => {}
        }
        if self.presence == Presence::Both && !same_state(self.state_a, self.state_b) {
            let state = |state: Option<UnitState>| state.map_or("-", UnitState::as_str);
            let mut reason = format!("state {} → {}", state(self.state_a), state(self.state_b));
            if let Some(error) = &self.detail_b {
                reason.push_str(&format!(" ({error})"));
            }
            reasons.push(reason);
        }
        if self.input == Change::Changed {
            if let Some(why) = &self.input_unknown {
                reasons.push(format!("input hash changed ({why})"));
            } else if self.input_changes.is_empty() {
                reasons.push("input hash changed (no recorded component differs)".to_owned());
            }
            reasons.extend(self.input_changes.iter().map(InputChange::describe));
        }
        if self.output == Change::Changed {
            let same_input = if self.input == Change::Same {
                " with the same input"
            } else {
                ""
            };
            if self.output_changes.is_empty() {
                reasons.push(format!("output changed{same_input}"));
            } else {
                let n_changes = self.output_changes.len();
                for (change_idx, change) in self.output_changes.iter().enumerate() {
                    let suffix = if change_idx + 1 == n_changes {
                        same_input
                    } else {
                        ""
                    };
                    reasons.push(format!("{change}{suffix}"));
                }
            }
        }
        if reasons.is_empty() && !self.is_same() {
            // Only a hash present on one side differs (e.g. one run recorded no output).
            reasons.push("hashes recorded in only one run".to_owned());
        }
        reasons
    }
}

/// What the diff needs of one unit of one run: its final status, its last attempt, and why
/// it ended as it did. Everything else a [`UnitTimeline`] holds (earlier attempts, phases,
/// marks) is left behind, so a diff holds one of these per unit, whatever the journals' length.
#[derive(Debug, PartialEq, Eq)]
struct UnitSide {
    state: UnitState,
    last: Option<LastAttempt>,
    detail: Option<String>,
}

/// The parts of a unit's last attempt the diff compares.
#[derive(Debug, PartialEq, Eq)]
struct LastAttempt {
    input_hash: Option<String>,
    inputs: Vec<InputComponent>,
    inputs_manifest: Option<InputManifestRef>,
    output_hash: Option<String>,
    /// The recorded output manifest (path → SHA-256), when the attempt has one in the record.
    output_files: Option<Vec<(String, String)>>,
    duration_ms: u64,
}

impl LastAttempt {
    /// What a `unit_reused` recorded, as a last attempt that took no time.
    fn reused(input_hash: String, inputs: Vec<InputComponent>, output_hash: String) -> Self {
        LastAttempt {
            input_hash: Some(input_hash),
            inputs,
            inputs_manifest: None,
            output_hash: Some(output_hash),
            // The files are in the original attempt's manifest, in another run.
            output_files: None,
            duration_ms: 0,
        }
    }

    /// The input components: from the record, or read from its input manifest.
    fn components(
        &self,
        side: Side,
        manifests: &dyn ManifestLoader,
    ) -> Result<std::borrow::Cow<'_, [InputComponent]>, String> {
        let Some(reference) = &self.inputs_manifest else {
            return Ok(std::borrow::Cow::Borrowed(&self.inputs));
        };
        let run = match side {
            Side::A => "A",
            Side::B => "B",
        };
        manifests
            .load(side, reference)
            .map(std::borrow::Cow::Owned)
            .map_err(|why| {
                format!(
                    "run {run}'s input list of {} components cannot be read: {why}",
                    reference.count
                )
            })
    }
}

/// Which run of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Side {
    /// Run A (before).
    A,
    /// Run B (after).
    B,
}

/// Reads the input manifests a diff needs: a unit whose input list was too large for a
/// record keeps it in a manifest file of its run (see `apollo_core::input_manifest`), which
/// this crate, reading records only, cannot open. The caller that knows where runs live
/// (the CLI, through apollo-store) implements it; a diff reads a manifest only for a unit
/// whose input hash changed.
pub trait ManifestLoader {
    /// The components of `reference` in run `side`, or why they cannot be read.
    fn load(&self, side: Side, reference: &InputManifestRef)
    -> Result<Vec<InputComponent>, String>;

    /// Whether an apollo is writing run `side` now: then a unit whose attempt has no end is
    /// `running`, not `cut_off` ([`Timeline::live`]). `false` unless told.
    fn is_live(&self, _side: Side) -> bool {
        false
    }
}

impl<F> ManifestLoader for F
where
    F: Fn(Side, &InputManifestRef) -> Result<Vec<InputComponent>, String>,
{
    fn load(
        &self,
        side: Side,
        reference: &InputManifestRef,
    ) -> Result<Vec<InputComponent>, String> {
        self(side, reference)
    }
}

/// No manifest can be read (a diff built from timelines alone).
pub(crate) struct NoManifests;

impl ManifestLoader for NoManifests {
    fn load(
        &self,
        _side: Side,
        reference: &InputManifestRef,
    ) -> Result<Vec<InputComponent>, String> {
        Err(format!("input manifest {} was not read", reference.sha256))
    }
}

impl UnitSide {
    fn of(unit: &UnitTimeline, live: bool) -> Self {
        // A unit reused from an earlier run is compared on what its `unit_reused` recorded.
        if let (UnitStatus::Reused, Some(reused)) = (unit.status, &unit.reused) {
            return UnitSide {
                state: UnitState::Reused,
                last: Some(LastAttempt::reused(
                    reused.input_hash.clone(),
                    reused.inputs.clone(),
                    reused.output_hash.clone(),
                )),
                detail: None,
            };
        }
        UnitSide {
            state: unit.state(live),
            last: unit.last_attempt().map(|attempt| LastAttempt {
                input_hash: attempt.input_hash.clone(),
                inputs: attempt.inputs.clone(),
                inputs_manifest: attempt.inputs_manifest.clone(),
                output_hash: attempt.output_hash().map(str::to_owned),
                // A timeline keeps no manifests: only the streamed diff names output files.
                output_files: None,
                duration_ms: attempt.duration_ms(),
            }),
            detail: detail(unit),
        }
    }
}

/// One run reduced to what the diff compares, indexed by unit name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RunSummary {
    side: RunSide,
    /// In the run's unit order.
    units: Vec<(String, UnitSide)>,
    /// Unit name → index in `units`.
    index: HashMap<String, usize>,
}

impl RunSummary {
    pub(crate) fn of(timeline: &Timeline) -> Self {
        let units: Vec<(String, UnitSide)> = (timeline.units.iter())
            .map(|unit| (unit.name.clone(), UnitSide::of(unit, timeline.live)))
            .collect();
        let index = (units.iter().enumerate())
            .map(|(unit_idx, (name, _))| (name.clone(), unit_idx))
            .collect();
        RunSummary {
            side: RunSide::of(timeline),
            units,
            index,
        }
    }

    fn unit(&self, name: &str) -> Option<&UnitSide> {
        self.index
            .get(name)
            .map(|&unit_idx| &self.units[unit_idx].1)
    }

    /// The summary of a run read record by record, holding per unit only its status, its
    /// last attempt and its last skip: memory grows with the units, not with the records.
    /// It agrees with [`RunSummary::of`] the run's [`Timeline`] (a property test checks it).
    pub(crate) fn fold<I, E>(records: I, live: bool) -> Result<RunSummary, E>
    where
        I: IntoIterator<Item = Result<Record, E>>,
    {
        let mut fold = Fold::new(live);
        for record in records {
            fold.push(record?);
        }
        Ok(fold.finish())
    }
}

/// Why a unit ended as it did: its skip reason, or its last attempt's first error line.
fn detail(unit: &UnitTimeline) -> Option<String> {
    match unit.status {
        UnitStatus::UpstreamFailed | UnitStatus::NotStarted => {
            unit.skips.last().map(|skip| skip_reason_text(&skip.reason))
        }
        _ => unit.last_attempt()?.error_line().map(str::to_owned),
    }
}

/// The output files that differ between two recorded manifests, as phrases.
fn compare_files(a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    let index_a: HashMap<&str, &str> = a.iter().map(|(p, h)| (p.as_str(), h.as_str())).collect();
    let index_b: HashMap<&str, &str> = b.iter().map(|(p, h)| (p.as_str(), h.as_str())).collect();
    let mut changes = Vec::new();
    for (path, hash) in b {
        match index_a.get(path.as_str()) {
            Some(before) if *before != hash => changes.push(format!("output file {path} changed")),
            Some(_) => {}
            None => changes.push(format!("output file {path} added")),
        }
    }
    for (path, _) in a {
        if !index_b.contains_key(path.as_str()) {
            changes.push(format!("output file {path} removed"));
        }
    }
    changes
}

/// Whether two states mean the same outcome: equal, or one run succeeded where the other
/// reused that success (same inputs, same outputs: nothing to tell apart).
fn same_state(a: Option<UnitState>, b: Option<UnitState>) -> bool {
    let done = |state| {
        matches!(
            state,
            Some(UnitState::Succeeded | UnitState::Reused | UnitState::AlreadyDone)
        )
    };
    a == b || (done(a) && done(b))
}

/// A command on one line for a reason: its first line, shortened, `…` for what is left out.
fn signed(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Components that differ, in B's order, then those only A has.
fn compare_inputs(a: &[InputComponent], b: &[InputComponent]) -> Vec<InputChange> {
    let by_key: HashMap<(InputKind, &str), &str> = a
        .iter()
        .map(|component| {
            (
                (component.kind, component.name.as_str()),
                component.hash.as_str(),
            )
        })
        .collect();
    let mut changes = Vec::new();
    for component in b {
        let hash_a = by_key.get(&(component.kind, component.name.as_str()));
        let change = match hash_a {
            Some(hash_a) if *hash_a == component.hash => continue,
            Some(_) => ComponentChange::Changed,
            None => ComponentChange::Added,
        };
        changes.push(InputChange {
            kind: component.kind,
            name: component.name.clone(),
            change,
            quoting_only: false,
            before: None,
            after: None,
            hash_a: hash_a.map(|hash| (*hash).to_owned()),
        });
    }
    let in_b: HashSet<(InputKind, &str)> = (b.iter())
        .map(|component| (component.kind, component.name.as_str()))
        .collect();
    for component in a {
        if !in_b.contains(&(component.kind, component.name.as_str())) {
            changes.push(InputChange {
                kind: component.kind,
                name: component.name.clone(),
                change: ComponentChange::Removed,
                quoting_only: false,
                before: None,
                after: None,
                hash_a: None,
            });
        }
    }
    changes
}

impl RunDiff {
    /// Names, for each command that changed (not only by quoting), the command as each run's
    /// definition has it: `command(side, unit, phase)` (`prepare`, `execute`, `cleanup`). A
    /// reason then reads `command execute changed: `echo 60` → `echo 70``.
    pub fn describe_commands(&mut self, command: &dyn Fn(Side, &str, &str) -> Option<Command>) {
        for unit in &mut self.units {
            for change in &mut unit.input_changes {
                if change.kind == InputKind::Command && !change.quoting_only {
                    let text = |side| command(side, &unit.unit, &change.name).map(|c| c.display());
                    (change.before, change.after) = (text(Side::A), text(Side::B));
                }
            }
        }
    }

    /// Marks each command of run B that differs from run A's only because values are now
    /// quoted in shell commands (an upgrade: DESIGN §18), given run B's commands: `command`
    /// returns unit `name`'s command of phase `phase` (`prepare`, `execute`, `cleanup`) as run
    /// B's definition has it.
    pub fn mark_quoting_changes(&mut self, command: &dyn Fn(&str, &str) -> Option<Command>) {
        for unit in &mut self.units {
            for change in &mut unit.input_changes {
                if change.kind != InputKind::Command || change.change != ComponentChange::Changed {
                    continue;
                }
                if let (Some(hash_a), Some(command_b)) =
                    (&change.hash_a, command(&unit.unit, &change.name))
                {
                    change.quoting_only =
                        apollo_core::hash::only_quoting_changed(&command_b, hash_a);
                }
            }
        }
    }

    /// Compares run A (before) with run B (after).
    ///
    /// A unit whose input list is in an input manifest is compared by its hashes only (see
    /// [`RunDiff::with_manifests`]).
    pub fn new(a: &Timeline, b: &Timeline) -> RunDiff {
        RunDiff::compare(&RunSummary::of(a), &RunSummary::of(b), &NoManifests)
    }

    /// Compares run A with run B, reading with `manifests` the input lists kept in input
    /// manifests, for the units whose input changed.
    pub fn with_manifests(a: &Timeline, b: &Timeline, manifests: &dyn ManifestLoader) -> RunDiff {
        RunDiff::compare(&RunSummary::of(a), &RunSummary::of(b), manifests)
    }

    /// Reads both runs and compares them, holding per unit only what the diff compares (no
    /// timeline): memory grows with the units, not with the records. A read error from
    /// either run stops the diff.
    pub(crate) fn from_records<A, B, E>(
        run_a: A,
        run_b: B,
        manifests: &dyn ManifestLoader,
    ) -> Result<RunDiff, E>
    where
        A: IntoIterator<Item = Result<Record, E>>,
        B: IntoIterator<Item = Result<Record, E>>,
    {
        let a = RunSummary::fold(run_a, manifests.is_live(Side::A))?;
        let b = RunSummary::fold(run_b, manifests.is_live(Side::B))?;
        Ok(RunDiff::compare(&a, &b, manifests))
    }

    /// Units in B's order, then those only A has: one hash lookup per unit, so the diff is
    /// linear in the number of units.
    fn compare(a: &RunSummary, b: &RunSummary, manifests: &dyn ManifestLoader) -> RunDiff {
        let only_a = (a.units.iter())
            .map(|(name, _)| name.as_str())
            .filter(|name| b.unit(name).is_none());
        let names: Vec<&str> = (b.units.iter())
            .map(|(name, _)| name.as_str())
            .chain(only_a)
            .collect();
        let units = names
            .into_iter()
            .map(|name| UnitDiff::new(name, a.unit(name), b.unit(name), manifests))
            .collect();
        RunDiff {
            run_a: a.side.clone(),
            run_b: b.side.clone(),
            units,
        }
    }

    /// Whether every unit is in both runs with the same status, input hash and output hash.
    /// Durations never count. `apollo diff` exits 0 when this holds, 1 otherwise.
    pub fn is_same(&self) -> bool {
        self.units.iter().all(UnitDiff::is_same)
    }

    /// The units that differ.
    pub fn changed_units(&self) -> impl Iterator<Item = &UnitDiff> {
        self.units.iter().filter(|unit| !unit.is_same())
    }
}

impl RunDiff {
    /// The params whose value differs between the runs, by name: (name, in A, in B), a side
    /// without the param `None` (issue 35: `param threshold: 60 → 70`).
    pub fn changed_params(
        &self,
    ) -> Vec<(&str, Option<&serde_json::Value>, Option<&serde_json::Value>)> {
        let names: std::collections::BTreeSet<&String> = self
            .run_a
            .params
            .keys()
            .chain(self.run_b.params.keys())
            .collect();
        names
            .into_iter()
            .map(|name| {
                (
                    name.as_str(),
                    self.run_a.params.get(name),
                    self.run_b.params.get(name),
                )
            })
            .filter(|(_, a, b)| a != b)
            .collect()
    }
}

impl RunSide {
    fn of(timeline: &Timeline) -> Self {
        RunSide {
            run_id: timeline.run_id.clone(),
            pipeline: timeline.pipeline.clone(),
            status: timeline.status_str(),
            params: timeline.params.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use apollo_core::event::Event;
    use apollo_core::input_manifest;

    use super::*;
    use crate::testkit::RunBuilder;

    /// A run of `big` and `small` where `big`'s input list is moved into a manifest kept in
    /// `manifests`, as the engine does for a list too large for a record.
    fn run(run_id: &str, big_file: &str, manifests: &mut HashMap<String, Vec<u8>>) -> Timeline {
        let mut run = RunBuilder::new(run_id, &["big", "small"]);
        run.file("big", "data/a.csv", "a")
            .file("big", "data/b.csv", big_file)
            .start(10, "big", 1)
            .start(10, "small", 1)
            .succeed(20, "big", 1)
            .succeed(20, "small", 1);
        let mut records = run.records();
        for record in &mut records {
            if let Event::UnitStarted(started) = &mut record.event
                && started.unit == "big"
            {
                let manifest = input_manifest::encode(&started.inputs).unwrap();
                manifests.insert(manifest.reference.sha256.clone(), manifest.bytes);
                started.inputs.clear();
                started.inputs_manifest = Some(manifest.reference);
            }
        }
        Timeline::from_records(records.into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap()
    }

    #[test]
    fn a_diff_reads_input_manifests_only_where_the_input_changed_and_says_when_it_cannot() {
        let mut manifests = HashMap::new();
        let a = run("20261130T021507Z-aaaa", "b1", &mut manifests);
        let b = run("20261130T031507Z-bbbb", "b2", &mut manifests);
        let reads = std::cell::Cell::new(0);
        let loader = |_side: Side, reference: &InputManifestRef| {
            reads.set(reads.get() + 1);
            let bytes = manifests.get(&reference.sha256).ok_or("no such file")?;
            input_manifest::decode(reference, bytes).map_err(|error| error.to_string())
        };
        let diff = RunDiff::with_manifests(&a, &b, &loader);
        let big = &diff.units[0];
        assert_eq!(big.reasons(), ["input file data/b.csv changed"]);
        assert_eq!(
            reads.get(),
            2,
            "one manifest per run, for the changed unit only"
        );
        assert!(diff.units[1].is_same());

        let diff = RunDiff::new(&a, &b);
        let reasons = diff.units[0].reasons();
        assert!(reasons[0].contains("was not read"), "{reasons:?}");

        let missing = |side: Side, _: &InputManifestRef| match side {
            Side::A => Err("no file runs/a/manifests/x.json".to_owned()),
            Side::B => Ok(Vec::new()),
        };
        let diff = RunDiff::with_manifests(&a, &b, &missing);
        assert_eq!(
            diff.units[0].reasons()[0],
            "input hash changed (run A's input list of 3 components cannot be read: no file runs/a/manifests/x.json)"
        );
    }
}
