//! The run's start sweep of restores' temporary files left beside declared outputs.
//!
//! A restore writes `.NAME.apollo-restore-XXXXXXXX` beside its output when the blob store's
//! `tmp` is on another filesystem (or a rename across mounts fails); a SIGKILL mid-restore
//! leaves it there (issue 36 item 7). Output hashing never counts it
//! ([`apollo_core::restore_temp`]); this removes it, once the run holds the state directory's
//! lock, so it does not pile up.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use apollo_core::Pipeline;
use apollo_core::restore_temp::{folders_of_outputs, is_temp_name};

/// Removes every restore temporary file beside `pipeline`'s declared outputs last written
/// before `started` (a restore under way in another process writes its file as it goes, so
/// it is newer); the paths removed, sorted. What cannot be read or removed is left alone: a
/// leftover is harmless to the run, only untidy.
pub(crate) fn remove_stale(pipeline: &Pipeline, started: SystemTime) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = (pipeline.units.iter())
        .flat_map(|unit| folders_of_outputs(unit, &pipeline.base_dir))
        .collect();
    folders.sort();
    folders.dedup();
    let mut removed = Vec::new();
    for folder in folders {
        remove_stale_in(&folder, started, &mut removed);
    }
    removed.sort();
    removed
}

fn remove_stale_in(folder: &Path, started: SystemTime, removed: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        if !is_temp_name(&entry.file_name()) {
            continue;
        }
        // A regular file only (never a link followed), written before the run started.
        let stale = (entry.metadata()).is_ok_and(|meta| {
            meta.is_file() && meta.modified().is_ok_and(|modified| modified < started)
        });
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo_core::restore_temp::temp_name;

    #[test]
    fn stale_restore_temps_beside_outputs_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = "units:\n  - name: u\n    execute: \"true\"\n    outputs: [out, single/one.bin, parts/*.part]\n";
        let config = dir.path().join("pipeline.yaml");
        std::fs::write(&config, yaml).unwrap();
        for folder in ["out/sub", "single", "parts"] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        std::fs::write(dir.path().join("parts/a.part"), b"a").unwrap();
        let stale = [
            dir.path()
                .join("out/sub")
                .join(temp_name("big.bin", "0123abcd")),
            dir.path()
                .join("single")
                .join(temp_name("one.bin", "89abcdef")),
            dir.path()
                .join("parts")
                .join(temp_name("b.part", "00000000")),
        ];
        let kept = [
            dir.path().join("out/sub/big.bin"),
            dir.path().join("out/.big.bin.apollo-restore-notahex!"),
            dir.path().join("parts/a.part"),
        ];
        for path in stale.iter().chain(&kept) {
            std::fs::write(path, b"x").unwrap();
        }
        let pipeline = apollo_core::config::load(&config).unwrap().pipeline;

        // A restore under way (written after the run started) is left to finish.
        let before_they_were_written = SystemTime::UNIX_EPOCH;
        assert!(remove_stale(&pipeline, before_they_were_written).is_empty());

        let later = SystemTime::now() + std::time::Duration::from_secs(1);
        let mut expected = stale.to_vec();
        expected.sort();
        assert_eq!(remove_stale(&pipeline, later), expected);
        for path in &stale {
            assert!(!path.exists(), "{}", path.display());
        }
        for path in &kept {
            assert!(path.exists(), "{}", path.display());
        }
    }
}
