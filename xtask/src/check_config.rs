//! `cargo xtask check-config`: every pipeline under `config/` and `examples/` must load.

use std::path::{Path, PathBuf};

use apollo_core::config::{self, LoadError};
use apollo_core::diagnostic::{Diagnostic, render_all};

/// The folders searched for pipelines, relative to the workspace root.
const FOLDERS: [&str; 2] = ["config", "examples"];

/// The outcome of checking every pipeline.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Pipelines that loaded.
    pub(crate) valid: Vec<PathBuf>,
    /// Rendered diagnostics: warnings of valid pipelines, errors and warnings of the others.
    pub(crate) diagnostics: String,
    /// Pipelines that did not load.
    pub(crate) invalid: Vec<PathBuf>,
}

/// Loads every `*.yaml` / `*.yml` under the folders; paths in messages are relative to `root`.
pub(crate) fn check_all(root: &Path) -> Result<Report, String> {
    let mut report = Report::default();
    for folder in FOLDERS {
        let is_yaml = |path: &Path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        };
        let paths = crate::files_under(&root.join(folder), &is_yaml)
            .map_err(|error| format!("cannot list `{folder}/`: {error}"))?;
        for path in paths {
            let shown = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            // Messages name the file relative to the root: `config/x.yaml:3:5`.
            match config::load(&path) {
                Ok(loaded) => {
                    report
                        .diagnostics
                        .push_str(&render_all(&relabel(loaded.warnings, &shown)));
                    report.valid.push(shown);
                }
                Err(LoadError::Invalid { diagnostics, .. }) => {
                    report
                        .diagnostics
                        .push_str(&render_all(&relabel(diagnostics, &shown)));
                    report.invalid.push(shown);
                }
                Err(error) => return Err(format!("{error}")),
            }
        }
    }
    Ok(report)
}

/// Names diagnostics by the workspace-relative path instead of the absolute one.
fn relabel(diagnostics: Vec<Diagnostic>, shown: &Path) -> Vec<Diagnostic> {
    diagnostics
        .into_iter()
        .map(|mut diagnostic| {
            diagnostic.file = shown.to_path_buf();
            diagnostic
        })
        .collect()
}

/// Prints the report; fails when any pipeline is invalid.
pub(crate) fn run(root: &Path) -> Result<(), String> {
    let report = check_all(root)?;
    eprint!("{}", report.diagnostics);
    for path in &report.valid {
        println!("ok       {}", path.display());
    }
    for path in &report.invalid {
        println!("INVALID  {}", path.display());
    }
    if report.invalid.is_empty() {
        println!("{} pipeline(s) valid", report.valid.len());
        Ok(())
    } else {
        Err(format!(
            "{} of {} pipeline(s) invalid",
            report.invalid.len(),
            report.invalid.len() + report.valid.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo test` enforces what `cargo xtask check-config` checks.
    #[test]
    fn every_bundled_pipeline_is_valid() {
        let report = check_all(&crate::workspace_root()).unwrap();
        assert!(report.invalid.is_empty(), "{}", report.diagnostics);
        assert!(
            report
                .valid
                .contains(&PathBuf::from("config/pipeline.yaml"))
        );
        assert!(report.diagnostics.is_empty(), "{}", report.diagnostics);
    }

    #[test]
    fn an_invalid_pipeline_is_reported_with_its_diagnostics() {
        let dir = tempfile_dir();
        std::fs::create_dir_all(dir.join("examples/nested")).unwrap();
        std::fs::write(
            dir.join("examples/nested/bad.yml"),
            "units:\n  - name: a\n    deps: [a]\n    execute: x\n",
        )
        .unwrap();
        std::fs::write(dir.join("examples/notes.txt"), "not a pipeline").unwrap();
        let report = check_all(&dir).unwrap();
        assert_eq!(report.invalid, [PathBuf::from("examples/nested/bad.yml")]);
        assert!(
            report
                .diagnostics
                .contains("--> examples/nested/bad.yml:3:12"),
            "{}",
            report.diagnostics
        );
        assert!(run(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh folder in the system temp dir (xtask avoids a tempfile dependency).
    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("apollo-xtask-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
