//! Loading a pipeline config: read → parse YAML → typed walk → whole-pipeline checks →
//! resolve into a [`Pipeline`].
//!
//! [`load`] and [`load_str`] return either a [`Loaded`] pipeline (with its warnings) or every
//! problem found at once as [`Diagnostic`]s, each with file, line, column, the offending line
//! and a hint. The file format is described in DESIGN §2; in brief:
//!
//! ```yaml
//! name: daily-etl              # optional; defaults to the file stem
//! defaults:                    # optional; inherited by every unit
//!   timeout: 30s               # whole seconds or `500ms`, `45s`, `2m`, `1h30m`, `1d`;
//!                              # `none` (the default) for no limit
//!   retries: 1                 # extra attempts after a failure (default 0)
//!   retry_delay: 1s            # backoff base (default 1s)
//!   kill_grace: 5s             # SIGTERM → wait → SIGKILL (default 5s)
//!   idempotent: true           # default true
//!   workdir: .                 # relative to the config file's folder (the default)
//!   executor: local            # `local` (the default) or `slurm` (DESIGN §13)
//!   resources: {cpus: 1, memory: 512M}   # merged with a unit's `resources` key by key
//! max_parallel: 4              # optional; default: number of CPUs
//! max_cpus: 8                  # local capacity for `resources` (default: this machine's)
//! max_memory: 16G
//! max_jobs: 100                # Slurm jobs in flight at once (the default)
//! env: { TZ: UTC }             # merged under each unit's env
//! units:
//!   - name: fetch_data         # unique; [A-Za-z0-9_.-]+, not `.` or `..`
//!     deps: []
//!     prepare: ./fetch.sh prepare        # optional
//!     execute: ./fetch.sh                # required; a string runs via /bin/sh -c
//!     cleanup: [./fetch.sh, cleanup]     # optional; a list is exec'd without a shell
//!     inputs: [data/raw/*.csv]
//!     outputs: [data/fetched.csv]
//!     env: { SOURCE: local }
//!   - name: align
//!     executor: slurm
//!     resources:
//!       cpus: 16               # --cpus-per-task (local: counted against max_cpus)
//!       memory: 64G            # --mem (local: counted against max_memory)
//!       gpus: 1                # --gpus
//!       slurm: {partition: long, account: lab, qos: normal, extra_args: [--exclusive],
//!               on_stop: detach}   # `cancel` (default): Ctrl-C cancels the job
//!     execute: ./align.sh
//! ```
//!
//! Relative paths (`workdir`, `inputs`, `outputs`) resolve against the config file's folder,
//! never the caller's current directory.

pub(crate) mod duration;
mod raw;
mod resolve;
pub(crate) mod schema;

use std::path::{Path, PathBuf};

pub use duration::{DurationError, format_duration, parse_duration};

use crate::diagnostic::{Diagnostic, Loc, Severity, SourceFile};
use crate::model::Pipeline;

/// The file names [`find_default_config`] tries, in order.
pub const DEFAULT_CONFIG_NAMES: [&str; 3] =
    ["apollo.yaml", "pipeline.yaml", "config/pipeline.yaml"];

/// A pipeline that loaded and validated.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved pipeline.
    pub pipeline: Pipeline,
    /// The pipeline's explicit identity (`id:` in the config), which names it in its state
    /// directory instead of its name and config path (see apollo-runner's run selection).
    pub id: Option<String>,
    /// Warnings found on the way (the pipeline is valid despite them), in file order.
    pub warnings: Vec<Diagnostic>,
    /// The config file's text, as read.
    pub source: String,
}

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read config file `{}`", path.display())]
    Io {
        /// The file, as given.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is not a valid pipeline.
    #[error(
        "config file `{}` is invalid ({} error{})",
        path.display(),
        n_errors(diagnostics),
        if n_errors(diagnostics) == 1 { "" } else { "s" }
    )]
    Invalid {
        /// The file, as given.
        path: PathBuf,
        /// Every problem found, errors and warnings, in file order.
        diagnostics: Vec<Diagnostic>,
    },
}

fn n_errors(diagnostics: &[Diagnostic]) -> usize {
    diagnostics
        .iter()
        .filter(|diagnostic| diagnostic.is_error())
        .count()
}

/// Reads, parses, resolves and validates the pipeline config at `path`.
///
/// Relative paths in the config resolve against `path`'s folder (made absolute from the
/// current directory if `path` is relative).
pub fn load(path: &Path) -> Result<Loaded, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => load_string(text, path),
        Err(error) => Err(LoadError::Invalid {
            path: path.to_owned(),
            diagnostics: vec![not_utf8(error.as_bytes(), error.utf8_error(), path)],
        }),
    }
}

/// Like [`load`], from text already in memory. `path` names the file in messages, gives the
/// default pipeline name (its stem) and the folder relative paths resolve against; it is not
/// read.
///
/// ```
/// use std::path::Path;
///
/// let yaml = "units:\n  - name: hello\n    execute: echo hello\n";
/// let loaded = apollo_core::config::load_str(yaml, Path::new("/srv/etl/daily.yaml")).unwrap();
/// assert_eq!(loaded.pipeline.name, "daily");
/// assert_eq!(loaded.pipeline.units[0].workdir, Path::new("/srv/etl"));
///
/// let error = apollo_core::config::load_str("units: [{name: a, execute: x, retires: 2}]", Path::new("p.yaml"))
///     .unwrap_err();
/// let apollo_core::config::LoadError::Invalid { diagnostics, .. } = error else { panic!() };
/// assert_eq!(diagnostics[0].message, "unknown key `retires` in unit `a`");
/// assert_eq!(diagnostics[0].hint.as_deref(), Some("did you mean `retries`?"));
/// ```
pub fn load_str(text: &str, path: &Path) -> Result<Loaded, LoadError> {
    load_string(text.to_owned(), path)
}

fn load_string(text: String, path: &Path) -> Result<Loaded, LoadError> {
    let config_path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let base_dir = config_path
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let source = SourceFile::new(path, &text);
    let invalid = |diagnostics: Vec<Diagnostic>| LoadError::Invalid {
        path: path.to_owned(),
        diagnostics,
    };
    if text.trim().is_empty() {
        return Err(invalid(vec![
            Diagnostic::new(Severity::Error, "empty-file", path, "the config file is empty")
                .with_hint("a pipeline needs at least `units:` with one unit that has a `name` and an `execute` command"),
        ]));
    }
    let root = match raw::parse(&text) {
        Ok(root) => root,
        Err(error) if error.message.contains("multiple YAML documents") => {
            return Err(invalid(vec![
                source
                    .error(
                        "yaml-syntax",
                        error.loc,
                        "the file holds more than one YAML document",
                    )
                    .with_hint(
                        "a config file is one pipeline: remove the `---` line or split the file",
                    ),
            ]));
        }
        Err(error) => {
            return Err(invalid(vec![
                source
                    .error(
                        "yaml-syntax",
                        error.loc,
                        format!("invalid YAML: {}", error.message),
                    )
                    .with_hint(
                        "check the indentation and the brackets and quotes around this place",
                    ),
            ]));
        }
    };
    if root.value == raw::Value::Null {
        return Err(invalid(vec![
            Diagnostic::new(
                Severity::Error,
                "empty-file",
                path,
                "the config file contains no pipeline (only comments or an empty document)",
            )
            .with_hint("a pipeline needs at least `units:` with one unit that has a `name` and an `execute` command"),
        ]));
    }
    let (spec, mut diagnostics) = schema::walk(&root, &source);
    drop(root);
    diagnostics.extend(crate::validate::check(&spec, &source, &base_dir));
    // File order reads best; diagnostics without a place (missing top-level keys) come first.
    diagnostics.sort_by_key(|diagnostic| (diagnostic.line, diagnostic.column));
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Err(invalid(diagnostics));
    }
    let id = spec.id.as_ref().map(|id| id.value.clone());
    let pipeline = resolve::resolve(spec, config_path, base_dir);
    Ok(Loaded {
        pipeline,
        id,
        warnings: diagnostics,
        source: text,
    })
}

/// The diagnostic for a file that is not UTF-8, pointing at the first bad byte.
fn not_utf8(bytes: &[u8], error: std::str::Utf8Error, path: &Path) -> Diagnostic {
    let valid = &bytes[..error.valid_up_to()];
    let line_start = valid
        .iter()
        .rposition(|&byte| byte == b'\n')
        .map_or(0, |i| i + 1);
    let line = valid.iter().filter(|&&byte| byte == b'\n').count() + 1;
    let prefix = String::from_utf8_lossy(&valid[line_start..]);
    let line_end = bytes[line_start..]
        .iter()
        .position(|&byte| byte == b'\n')
        .map_or(bytes.len(), |i| line_start + i);
    let line_text = String::from_utf8_lossy(&bytes[line_start..line_end]).into_owned();
    let mut diagnostic = Diagnostic::new(
        Severity::Error,
        "not-utf8",
        path,
        format!(
            "the config file is not valid UTF-8 (byte 0x{:02x} at offset {})",
            bytes[error.valid_up_to()],
            error.valid_up_to()
        ),
    )
    .with_hint("save the file as UTF-8");
    let loc = Loc {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(prefix.chars().count() + 1).unwrap_or(u32::MAX),
        width: 1,
    };
    diagnostic.line = Some(loc.line);
    diagnostic.column = Some(loc.column);
    diagnostic.width = 1;
    diagnostic.source_line = Some(line_text);
    diagnostic
}

/// The first of [`DEFAULT_CONFIG_NAMES`] that exists as a file in `cwd`.
pub fn find_default_config(cwd: &Path) -> Option<PathBuf> {
    DEFAULT_CONFIG_NAMES
        .iter()
        .map(|name| cwd.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::model::Command;

    fn load_ok(yaml: &str) -> Loaded {
        match load_str(yaml, Path::new("/base/dir/daily.yaml")) {
            Ok(loaded) => loaded,
            Err(LoadError::Invalid { diagnostics, .. }) => {
                panic!("{}", crate::diagnostic::render_all(&diagnostics))
            }
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn an_explicit_id_is_kept_and_an_empty_one_refused() {
        let loaded = load_ok("id: nightly\nunits:\n  - name: a\n    execute: 'true'\n");
        assert_eq!(loaded.id.as_deref(), Some("nightly"));
        assert_eq!(loaded.pipeline.name, "daily");
        assert_eq!(
            load_ok("units:\n  - name: a\n    execute: 'true'\n").id,
            None
        );
        for bad in ["id: ''\n", "id: [x]\n"] {
            let text = format!("{bad}units:\n  - name: a\n    execute: 'true'\n");
            assert!(
                matches!(
                    load_str(&text, Path::new("/base/dir/daily.yaml")),
                    Err(LoadError::Invalid { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn defaults_are_inherited_and_builtins_fill_the_rest() {
        let loaded = load_ok(
            "defaults: { timeout: 1m, retries: 2, workdir: work }\nmax_parallel: 3\nenv: { TZ: UTC, A: pipeline }\nunits:\n  - name: a\n    execute: [echo, 1]\n    env: { A: unit }\n  - name: b\n    deps: [a, a]\n    timeout: 500ms\n    retries: 0\n    kill_grace: 100ms\n    workdir: /abs\n    idempotent: false\n    execute: echo b\n",
        );
        let pipeline = &loaded.pipeline;
        assert_eq!(pipeline.name, "daily");
        assert_eq!(pipeline.max_parallel, 3);
        assert_eq!(pipeline.base_dir, Path::new("/base/dir"));
        let [a, b] = &pipeline.units[..] else {
            panic!()
        };
        assert_eq!(a.timeout, Some(Duration::from_secs(60)));
        assert_eq!(a.retries, 2);
        assert_eq!(a.retry_delay, Duration::from_secs(1));
        assert_eq!(a.kill_grace, Duration::from_secs(5));
        assert_eq!(a.workdir, Path::new("/base/dir/work"));
        assert!(a.idempotent);
        assert_eq!(a.execute, Command::Argv(vec!["echo".into(), "1".into()]));
        assert_eq!(a.env["A"], "unit");
        assert_eq!(a.env["TZ"], "UTC");
        assert_eq!(b.deps, vec!["a".to_owned()]);
        assert_eq!(b.timeout, Some(Duration::from_millis(500)));
        assert_eq!(b.retries, 0);
        assert_eq!(b.workdir, Path::new("/abs"));
        assert!(!b.idempotent);
        assert_eq!(b.env["A"], "pipeline");
        // The duplicate dependency is a warning, not an error.
        assert_eq!(loaded.warnings.len(), 1);
        assert_eq!(loaded.warnings[0].code, "duplicate-dependency");
    }

    #[test]
    fn timeout_none_overrides_the_default_timeout() {
        let loaded = load_ok(
            "defaults: { timeout: 30s }\nunits:\n  - name: a\n    execute: x\n  - name: b\n    timeout: none\n    execute: y\n",
        );
        assert_eq!(
            loaded.pipeline.units[0].timeout,
            Some(Duration::from_secs(30))
        );
        assert_eq!(loaded.pipeline.units[1].timeout, None);
    }

    #[test]
    fn missing_max_parallel_means_one_per_cpu() {
        let loaded = load_ok("units: [{name: a, execute: 'true'}]");
        assert!(loaded.pipeline.max_parallel >= 1);
        assert_eq!(loaded.pipeline.units[0].timeout, None);
    }

    #[test]
    fn all_problems_are_reported_at_once() {
        let Err(LoadError::Invalid { diagnostics, .. }) = load_str(
            "units:\n  - name: a\n    deps: [b, nope]\n    execute: x\n  - name: b\n    deps: [a]\n    execute: y\n    timeout: soon\n",
            Path::new("p.yaml"),
        ) else {
            panic!("expected invalid");
        };
        let codes: Vec<&str> = diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(
            codes,
            ["unknown-dependency", "dependency-cycle", "bad-duration"]
        );
    }

    #[test]
    fn non_utf8_points_at_the_bad_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, b"name: ok\nunits: [\xff]\n").unwrap();
        let Err(LoadError::Invalid { diagnostics, .. }) = load(&path) else {
            panic!("expected invalid");
        };
        assert_eq!(diagnostics[0].line, Some(2));
        assert_eq!(diagnostics[0].column, Some(9));
    }

    #[test]
    fn find_default_config_tries_the_names_in_order() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_default_config(dir.path()), None);
        std::fs::create_dir(dir.path().join("config")).unwrap();
        std::fs::write(dir.path().join("config/pipeline.yaml"), "").unwrap();
        assert_eq!(
            find_default_config(dir.path()),
            Some(dir.path().join("config/pipeline.yaml"))
        );
        std::fs::write(dir.path().join("apollo.yaml"), "").unwrap();
        assert_eq!(
            find_default_config(dir.path()),
            Some(dir.path().join("apollo.yaml"))
        );
    }
}
