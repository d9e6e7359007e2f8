//! [`RunFacts`] and [`AttemptFiles`]: what a run's records say about where it came from and
//! which files its attempts read and wrote — what provenance exports (`apollo export`) need
//! beyond the timeline's times and outcomes.

use apollo_core::capture::FileEntry;
use apollo_core::event::{
    Event, FileSide, InputManifestRef, ReproductionCompared, RunKind, RunReproduces,
};

use super::TimelineBuilder;

mod deadline;
pub use deadline::{DeadlineStatus, Deadlines};

/// Where a run came from, from its `run_started` (and `run_resumed`, `run_reproduces`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFacts {
    /// The config file the run was started from, as `run_started` names it.
    pub config_path: Option<String>,
    /// SHA-256 of the config file's bytes when the run started.
    pub config_hash: Option<String>,
    /// SHA-256 of the resolved definition snapshot in the blob store: the one the run was
    /// started with, or the one its latest resume used.
    pub definition_hash: Option<String>,
    /// The version of the apollo that started the run.
    pub apollo_version: Option<String>,
    /// The process id of the apollo that started the run.
    pub pid: Option<u32>,
    /// The pipeline's stable identity in its state directory, when recorded.
    pub identity: Option<String>,
    /// What kind of run it is (a run, a reproduction).
    pub run_kind: RunKind,
    /// The attempt a reproduction re-ran (`run_reproduces`).
    pub reproduces: Option<RunReproduces>,
    /// A reproduction's verdict (its `reproduction_compared`, journal format 1.11); `None` for
    /// other runs, older reproductions and one cut off before comparing.
    pub compared: Option<ReproductionCompared>,
    /// The definition snapshot of each apollo process of the run, in order: `run_started`'s,
    /// then each `run_resumed`'s. An attempt ran under the one of the process that started it
    /// (the resumes before its `unit_started`): its cost is priced by that snapshot's table.
    pub definitions: Vec<String>,
    /// The run's and its units' deadlines, from its `run_started` (journal format 1.9).
    pub deadlines: Deadlines,
}

/// An attempt's declared files, from its `unit_files` records: inputs as hashed before it
/// started, outputs as hashed after it succeeded (empty when the unit declares none, or when
/// the attempt never got that far).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptFiles {
    /// The input files, sorted by path.
    pub inputs: Vec<FileEntry>,
    /// The output files, sorted by path.
    pub outputs: Vec<FileEntry>,
    /// The manifest holding the inputs when they were too many for a record (read it with
    /// the store; this crate reads records only).
    pub inputs_manifest: Option<InputManifestRef>,
    /// The manifest holding the outputs when they were too many for a record.
    pub outputs_manifest: Option<InputManifestRef>,
}

impl TimelineBuilder {
    /// Keeps what `event` says about the run's origin and its attempts' files.
    pub(super) fn note_facts(&mut self, event: &Event) {
        let facts = &mut self.timeline.facts;
        match event {
            Event::RunStarted(started) if facts.config_path.is_none() => {
                facts.definitions.push(started.definition_hash.clone());
                facts.config_path = Some(started.config_path.clone());
                facts.config_hash = Some(started.config_hash.clone());
                facts.definition_hash = Some(started.definition_hash.clone());
                facts.apollo_version = Some(started.apollo_version.clone());
                facts.pid = Some(started.pid);
                facts.identity.clone_from(&started.identity);
                facts.run_kind = started.run_kind();
                self.note_deadlines(started);
            }
            Event::RunResumed(resumed) => {
                facts.definitions.push(resumed.definition_hash.clone());
                facts.definition_hash = Some(resumed.definition_hash.clone());
            }
            Event::RunReproduces(reproduces) => {
                // A bisect step reproduces an attempt too, and keeps its own kind.
                if facts.run_kind.is_run() {
                    facts.run_kind = RunKind::Reproduction;
                }
                facts.reproduces = Some(reproduces.clone());
            }
            Event::ReproductionCompared(compared) => facts.compared = Some(compared.clone()),
            Event::UnitFiles(listed) => {
                let Some(&unit_idx) = self.unit_index.get(&listed.unit) else {
                    return;
                };
                let Some(&attempt_idx) = self.open.get(&(unit_idx, listed.attempt)) else {
                    return;
                };
                let files = &mut self.timeline.units[unit_idx].attempts[attempt_idx].files;
                let (list, manifest) = match listed.side {
                    FileSide::Inputs => (&mut files.inputs, &mut files.inputs_manifest),
                    FileSide::Outputs => (&mut files.outputs, &mut files.outputs_manifest),
                };
                list.clone_from(&listed.files);
                manifest.clone_from(&listed.manifest);
            }
            _ => {}
        }
    }
}
