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
//!   reuse: false               # true: a new run reuses a unit's outputs from an earlier run
//!                              # when its inputs are identical (only units with outputs)
//!   executor: local            # `local` (the default) or `slurm` (DESIGN §13)
//!   resources: {cpus: 1, memory: 512M}   # merged with a unit's `resources` key by key
//! max_parallel: 4              # optional; default: number of CPUs
//! max_cpus: 8                  # local capacity for `resources` (default: this machine's)
//! max_memory: 16G
//! max_jobs: 100                # Slurm jobs in flight at once (the default)
//! blob_store_max: 20GiB        # the default; `none`: no limit. Over it when a run ends, the
//!                              # captures of the oldest runs are evicted (never the latest's)
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
//!     reuse: true                        # needs `outputs`; default false
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
//!
//! Beyond that (DESIGN §14), still in one pass that reports every problem:
//!
//! ```yaml
//! include: [common/units.yaml]           # units, defaults, env, params of other files
//! x-quick: &quick {timeout: 30s}         # `x-` keys hold anchors; `<<: *quick` merges them
//! params:
//!   day: {type: date, default: today}    # string, int, bool, date, list; no default: required
//!   regions: [eu, us]
//! units:
//!   - name: load
//!     <<: *quick
//!     foreach: ${params.regions}         # instances load[eu], load[us]
//!     when: ${params.day} != "2026-12-25"
//!     execute: ./load.sh ${item} ${params.day} ${env.USER} ${unit.name} ${run.id}
//! ```
//!
//! [`load_with`] takes the run's param values and the environment ([`LoadOptions`]);
//! [`Loaded::params`] is what the run records. `${…}` is interpolated before validation (only
//! apollo's namespaces: `$VAR`, `${HOME}` and `$$` are left for the shell, `$${x.y}` is a
//! literal `${x.y}`), so each diagnostic points at the `${…}` in its file. [`json_schema`] is
//! the format's JSON Schema, generated from the same key tables the loader checks against.

mod describe;
pub(crate) mod duration;
mod expand;
mod fanout;
mod include;
mod interpolate;
mod loaded;
mod params;
mod raw;
mod read;
mod resolve;
pub(crate) mod schema;
mod secrets;
mod shell;
#[cfg(test)]
mod shell_sh_tests;
#[cfg(test)]
mod values_tests;
mod when;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use describe::json_schema;
pub use duration::{DurationError, format_duration, parse_duration};
pub use params::{ParamInput, ParamOverride, Params};
pub use read::{MAX_CONFIG_BYTES, PIPE_TIME_LIMIT};

use crate::diagnostic::{Diagnostic, Loc, Severity, SourceFile};

/// The file names [`find_default_config`] tries, in order.
pub const DEFAULT_CONFIG_NAMES: [&str; 3] =
    ["apollo.yaml", "pipeline.yaml", "config/pipeline.yaml"];

pub use loaded::{LoadReads, Loaded};

/// What a load needs besides the file: the run's param values and the environment
/// `${env.NAME}` reads.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LoadOptions {
    /// Values for declared params (later entries win over earlier ones for the same name).
    pub params: Vec<ParamOverride>,
    /// The environment for `${env.NAME}`; `None` reads apollo's own.
    pub env: Option<BTreeMap<String, String>>,
    /// The run's date for `today` (`YYYY-MM-DD`); `None` is the current UTC date.
    pub today: Option<String>,
    /// A required param given no value takes a placeholder of its type (with a warning)
    /// instead of being an error: `apollo check` checks a pipeline without a run's values.
    pub placeholders: bool,
    /// Also warn about what `apollo check` points out and a run does not repeat (DESIGN §18,
    /// "Values in commands"): each `${…:raw}` in a shell command, and each placeholder whose
    /// value is now quoted where, written as it was, it would have been split into words,
    /// globbed or run (what an upgrade from an apollo that did not quote changes).
    pub check_notes: bool,
}

impl LoadOptions {
    /// Sets the param values.
    pub fn params(mut self, params: Vec<ParamOverride>) -> Self {
        self.params = params;
        self
    }

    /// Sets the environment `${env.NAME}` reads.
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = Some(env);
        self
    }

    /// Sets the date `today` stands for.
    pub fn today(mut self, today: impl Into<String>) -> Self {
        self.today = Some(today.into());
        self
    }

    /// Lets required params without a value take a placeholder (see
    /// [`LoadOptions::placeholders`](struct@LoadOptions)).
    pub fn placeholders(mut self, placeholders: bool) -> Self {
        self.placeholders = placeholders;
        self
    }

    /// Adds the warnings only `apollo check` shows (see
    /// [`LoadOptions::check_notes`](struct@LoadOptions)).
    pub fn check_notes(mut self, check_notes: bool) -> Self {
        self.check_notes = check_notes;
        self
    }
}

/// Reads a params file: YAML (or JSON, which is YAML) holding a mapping of param names to
/// values, e.g. `{day: 2026-11-30, regions: [eu, us]}`. Each value is checked against the
/// param's type when the pipeline is loaded with it.
///
/// It may be a pipe (`--params-file <(vault …)`): read to its end within
/// [`PIPE_TIME_LIMIT`]; at most [`MAX_CONFIG_BYTES`] either way.
pub fn read_params_file(path: &Path) -> Result<Vec<ParamOverride>, LoadError> {
    let io_error = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = read::read_bounded(path, read::Accept::RegularOrPipe).map_err(io_error)?;
    let text = String::from_utf8(bytes)
        .map_err(|error| io_error(std::io::Error::new(std::io::ErrorKind::InvalidData, error)))?;
    let source = SourceFile::new(path, &text);
    params::overrides_from_file(&text, &source).map_err(|diagnostic| LoadError::Invalid {
        path: path.to_owned(),
        diagnostics: vec![*diagnostic],
    })
}

/// The bytes of a config file: a regular file of at most [`MAX_CONFIG_BYTES`] (a FIFO or a
/// device is refused before anything is read from it). What [`load_with`] reads the config
/// with; callers that read it too (a parse cache keyed by its content) use the same.
pub fn read_config_file(path: &Path) -> std::io::Result<Vec<u8>> {
    read::read_bounded(path, read::Accept::Regular)
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
    load_with(path, &LoadOptions::default())
}

/// Like [`load`], with param values and an environment for `${…}`: unknown param names,
/// values of the wrong type and required params without a value are diagnostics like any
/// other (nothing has run yet).
pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Loaded, LoadError> {
    let bytes = read_config_file(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => load_string(text, path, options),
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
    load_string(text.to_owned(), path, &LoadOptions::default())
}

/// Like [`load_with`], from text already in memory (see [`load_str`]).
pub fn load_str_with(text: &str, path: &Path, options: &LoadOptions) -> Result<Loaded, LoadError> {
    load_string(text.to_owned(), path, options)
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn load_string(text: String, path: &Path, options: &LoadOptions) -> Result<Loaded, LoadError> {
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
    let (parsed, walked) = parse_and_walk_units(&text, &source);
    let mut root = match parsed {
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
    // The included files, read and numbered; then the source set that renders places in any
    // of them.
    let (included, include_problems) = include::collect(&root, path);
    let mut source = source;
    for file in &included {
        source.include(&file.shown, &file.text, file.chain.clone());
    }
    let source = source;
    let (mut spec, mut diagnostics) = match walked {
        Some(walked) => schema::walk_streamed(&mut root, &source, walked),
        None => schema::walk(&mut root, &source),
    };
    drop(root);
    diagnostics.extend(
        include_problems
            .into_iter()
            .map(|problem| problem.render(&source)),
    );
    if !included.is_empty() {
        let mut included_units = Vec::new();
        for (index, file) in included.iter().enumerate() {
            let file_number = u16::try_from(index + 1).unwrap_or(u16::MAX);
            // A syntax error was reported when the file was read.
            let Ok(mut tree) = raw::parse_file(&file.text, file_number) else {
                continue;
            };
            let (included_spec, included_diagnostics) = schema::walk_included(&mut tree, &source);
            diagnostics.extend(included_diagnostics);
            include::merge(
                &mut spec,
                included_spec,
                &mut included_units,
                &source,
                &mut diagnostics,
            );
        }
        included_units.append(&mut spec.units);
        spec.units = included_units;
    }
    if spec.units.is_empty() && !diagnostics.iter().any(Diagnostic::is_error) {
        diagnostics.push(
            Diagnostic::new(
                Severity::Error,
                "missing-key",
                path,
                "the pipeline has no units (neither its file nor the files it includes has any)",
            )
            .with_hint(
                "add `units:` with at least one unit that has a `name` and an `execute` command",
            ),
        );
    }
    let today = options
        .today
        .clone()
        .unwrap_or_else(|| chrono::Utc::now().format("%Y-%m-%d").to_string());
    let (params, param_diagnostics) = params::resolve(
        &spec.params,
        &options.params,
        &today,
        options.placeholders,
        &source,
    );
    diagnostics.extend(param_diagnostics);
    let process_env;
    let env = match &options.env {
        Some(env) => env,
        None => {
            process_env = std::env::vars_os()
                .filter_map(|(name, value)| {
                    Some((name.into_string().ok()?, value.into_string().ok()?))
                })
                .collect();
            &process_env
        }
    };
    diagnostics.extend(params::variable_collisions(&spec.params, &source));
    let (expand_diagnostics, expand_reads) = expand::expand(
        &mut spec,
        &params,
        env,
        &source,
        &base_dir,
        options.check_notes,
    );
    diagnostics.extend(expand_diagnostics);
    let reads = LoadReads {
        included: included
            .iter()
            .map(|file| {
                // Absolute: a later load may run from another folder.
                let path = std::path::absolute(&file.shown).unwrap_or_else(|_| file.shown.clone());
                (path, crate::hash::sha256_hex(file.text.as_bytes()))
            })
            .collect(),
        env: expand_reads
            .env
            .into_inner()
            .into_iter()
            .map(|name| {
                let value = env.get(&name).cloned();
                (name, value)
            })
            .collect(),
        globs: expand_reads.globs.into_inner(),
        base_dir: base_dir.clone(),
        today: today.clone(),
        machine: crate::engine::resources::machine_capacity(),
    };
    diagnostics.extend(crate::validate::check(&spec, &source, &base_dir));
    diagnostics.extend(secrets::check(&spec, &source));
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
        source_sha256: None,
        params,
        reads,
        definition_hash: None,
    })
}

/// Texts at least this long are parsed and their units walked on two threads.
const WALK_ALONGSIDE_FROM_BYTES: usize = 256 * 1024;

#[cfg(test)]
thread_local! {
    /// Tests force either way of [`parse_and_walk_units`] to compare them.
    static WALK_ALONGSIDE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

fn walks_alongside(text: &str) -> bool {
    #[cfg(test)]
    if let Some(forced) = WALK_ALONGSIDE.get() {
        return forced;
    }
    text.len() >= WALK_ALONGSIDE_FROM_BYTES
}

/// How many units the parser hands the walking thread at a time.
const UNITS_PER_HANDOVER: usize = 256;

/// Parses `text`; for a long text, also walks the items of its `units` list on a second thread
/// as the parser completes them (about a sixth of loading 100,000 units, done alongside the
/// parse instead of after it). The walk of the rest of the tree is left to the caller, with
/// the units walked if they were (`None`: the tree has them). `source` renders places in
/// `text` (the units' places are all in it).
fn parse_and_walk_units<'a>(
    text: &'a str,
    source: &SourceFile<'_>,
) -> (
    Result<raw::Node<'a>, raw::SyntaxError>,
    Option<schema::WalkedUnits>,
) {
    if !walks_alongside(text) {
        return (raw::parse(text), None);
    }
    std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<raw::Node<'a>>>(64);
        let walker = std::thread::Builder::new()
            .name("apollo-walk".to_owned())
            .spawn_scoped(scope, move || {
                let mut walked = schema::WalkedUnits::default();
                for batch in receiver {
                    for node in batch {
                        walked.walk(&node, source);
                    }
                }
                walked
            });
        let Ok(walker) = walker else {
            // No thread to be had: the walk after the parse, as for a short text.
            return (raw::parse(text), None);
        };
        let mut batch = Vec::with_capacity(UNITS_PER_HANDOVER);
        let mut hand_over = |node: raw::Node<'a>| {
            batch.push(node);
            if batch.len() == UNITS_PER_HANDOVER {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(UNITS_PER_HANDOVER));
                // The walker only stops early if it panicked: `join` reports that below.
                let _ = sender.send(full);
            }
        };
        let parsed = raw::parse_streaming_units(text, &mut hand_over);
        if !batch.is_empty() {
            let _ = sender.send(batch);
        }
        drop(sender);
        match walker.join() {
            Ok(walked) => (parsed, Some(walked)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
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
        ..Loc::default()
    };
    diagnostic.line = Some(loc.line);
    diagnostic.column = Some(loc.column);
    diagnostic.width = 1;
    diagnostic.source_line = Some(line_text);
    diagnostic
}

/// A pipeline file's text as JSON, the way the loader reads it (YAML 1.2 core schema, merge
/// keys applied, aliases expanded): what to validate with [`json_schema`]. `None` when it is
/// not YAML.
pub fn yaml_to_json(text: &str) -> Option<serde_json::Value> {
    raw::parse(text).ok().map(|root| raw::to_json(&root))
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

    /// A long config (walked alongside its parse) with something wrong in units here and
    /// there, anchors, aliases and merge keys among its units, and keys after `units`.
    fn long_config(broken: bool) -> String {
        let mut text = String::from("name: long\nunits:\n");
        for n in 0..4000 {
            match n {
                7 => text.push_str("  - &base {name: u7, execute: \"true\", retries: 1}\n"),
                8 => text.push_str("  - <<: *base\n    name: u8\n    deps: [u7]\n"),
                1500 if broken => text.push_str("  - name: u1500\n    exeucte: \"true\"\n"),
                2000 if broken => text.push_str("  - just a string\n"),
                2500 if broken => text.push_str("  - {name: u7, execute: \"true\"}\n"),
                3000 if broken => {
                    text.push_str("  - {name: u3000, execute: \"true\", timeout: soon}\n")
                }
                3500 if broken => text.push_str("  - *base\n"),
                0 => text.push_str("  - name: u0\n    execute: \"echo 0\"\n"),
                _ => text.push_str(&format!(
                    "  - name: u{n}\n    deps: [u{}]\n    execute: \"echo {n}\"  # a comment\n",
                    n - 1
                )),
            }
        }
        text.push_str("defaults:\n  timeout: 1m\nmax_parallel: 3\n");
        if broken {
            text.push_str("units: []\n");
        }
        text
    }

    #[test]
    fn the_parser_hands_over_the_items_of_the_first_top_level_units_list_and_no_other() {
        let text = "x-base: &b {name: b, execute: \"true\"}\nunits:\n  - {name: a, execute: \"true\"}\n  - *b\n  - just text\nunits: [{name: c, execute: \"true\"}]\ndefaults:\n  units: [1]\n";
        let mut handed = Vec::new();
        let root = raw::parse_streaming_units(text, &mut |node| handed.push(node)).unwrap();
        let name_of = |node: &raw::Node<'_>| match &node.value {
            raw::Value::Map(entries) => {
                entries
                    .iter()
                    .find_map(|(key, value)| match (&key.value, &value.value) {
                        (raw::Value::Str(key), raw::Value::Str(name)) if key == "name" => {
                            Some(name.to_string())
                        }
                        _ => None,
                    })
            }
            _ => None,
        };
        let names: Vec<Option<String>> = handed.iter().map(name_of).collect();
        assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned()), None]);
        assert_eq!(handed[2].value, raw::Value::Str("just text".into()));
        // In the tree: the first list emptied; the repeated key and `defaults.units` kept.
        let raw::Value::Map(entries) = &root.value else {
            panic!("{root:?}");
        };
        let lengths: Vec<(String, usize)> = entries
            .iter()
            .filter_map(|(key, value)| match (&key.value, &value.value) {
                (raw::Value::Str(key), raw::Value::Seq(items)) => {
                    Some((key.to_string(), items.len()))
                }
                (raw::Value::Str(key), raw::Value::Map(inner)) => {
                    Some((key.to_string(), inner.len()))
                }
                _ => None,
            })
            .collect();
        let expected = [("x-base", 2), ("units", 0), ("units", 1), ("defaults", 1)];
        assert_eq!(lengths, expected.map(|(key, len)| (key.to_owned(), len)));
    }

    #[test]
    fn a_long_deps_list_is_checked_for_repeats_and_kept_once_each() {
        let mut text = String::from("units:\n");
        for n in 0..20 {
            text.push_str(&format!("  - {{name: d{n}, execute: \"true\"}}\n"));
        }
        let deps: Vec<String> = (0..20).map(|n| format!("d{n}")).collect();
        text.push_str(&format!(
            "  - name: last\n    execute: \"true\"\n    deps: [{}, d3]\n",
            deps.join(", ")
        ));
        let loaded = load_str(&text, Path::new("/p/deps.yaml")).unwrap();
        let codes: Vec<&str> = loaded.warnings.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["duplicate-dependency"]);
        assert_eq!(loaded.pipeline.units[20].deps, deps);
    }

    fn load_walking_alongside(text: &str, alongside: bool) -> Result<Loaded, LoadError> {
        WALK_ALONGSIDE.set(Some(alongside));
        let loaded = load_str(text, Path::new("/p/long.yaml"));
        WALK_ALONGSIDE.set(None);
        loaded
    }

    #[test]
    fn a_config_walked_alongside_its_parse_loads_as_one_walked_after_it() {
        let valid = long_config(false);
        assert!(valid.len() >= WALK_ALONGSIDE_FROM_BYTES, "{}", valid.len());
        let (alongside, after) = match (
            load_walking_alongside(&valid, true),
            load_walking_alongside(&valid, false),
        ) {
            (Ok(alongside), Ok(after)) => (alongside, after),
            other => panic!("the valid config loads: {other:?}"),
        };
        assert_eq!(alongside.pipeline, after.pipeline);
        assert_eq!(alongside.warnings, after.warnings);
        assert_eq!(alongside.pipeline.units.len(), 4000);
        assert_eq!(alongside.pipeline.units[8].deps, ["u7"]);
        assert_eq!(alongside.pipeline.units[8].retries, 1);

        let broken = long_config(true);
        let diagnostics = |alongside| match load_walking_alongside(&broken, alongside) {
            Err(LoadError::Invalid { diagnostics, .. }) => diagnostics,
            other => panic!("{other:?}"),
        };
        let (alongside, after) = (diagnostics(true), diagnostics(false));
        assert_eq!(alongside, after);
        let codes: Vec<&str> = alongside.iter().map(|d| d.code).collect();
        for code in [
            "unknown-key",
            "wrong-type",
            "duplicate-name",
            "bad-duration",
        ] {
            assert!(codes.contains(&code), "{code} in {codes:?}");
        }

        // A syntax error after units were handed over: that error alone.
        let torn = format!(
            "{}  - [unclosed\n",
            &valid[..valid.find("defaults:").unwrap_or(0)]
        );
        let errors = |alongside| match load_walking_alongside(&torn, alongside) {
            Err(LoadError::Invalid { diagnostics, .. }) => diagnostics,
            other => panic!("{other:?}"),
        };
        assert_eq!(errors(true), errors(false));
        assert_eq!(errors(true).len(), 1);
        assert_eq!(errors(true)[0].code, "yaml-syntax");
    }
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
    fn durability_and_sync_interval_are_read_from_the_top_level() {
        let loaded = load_ok("units: [{name: a, execute: 'true'}]");
        assert_eq!(loaded.pipeline.durability, None);
        assert_eq!(loaded.pipeline.sync_interval, None);
        let loaded = load_ok(
            "durability: batched\nsync_interval: 25ms\nunits: [{name: a, execute: 'true'}]",
        );
        assert_eq!(
            loaded.pipeline.durability,
            Some(crate::journal::Durability::Batched)
        );
        assert_eq!(
            loaded.pipeline.sync_interval,
            Some(std::time::Duration::from_millis(25))
        );
        assert_eq!(
            load_ok("durability: fsync\nunits: [{name: a, execute: 'true'}]")
                .pipeline
                .durability,
            Some(crate::journal::Durability::Fsync)
        );
    }

    #[test]
    fn durability_none_or_unknown_in_a_config_is_refused_with_a_hint() {
        for (value, hint) in [("none", "--durability none"), ("lazy", "fsync")] {
            let Err(LoadError::Invalid { diagnostics, .. }) = load_str(
                &format!("durability: {value}\nunits: [{{name: a, execute: 'true'}}]"),
                Path::new("p.yaml"),
            ) else {
                panic!("expected invalid: {value}");
            };
            assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
            assert_eq!(diagnostics[0].code, "bad-value");
            let help = format!("{:?}", diagnostics[0]);
            assert!(help.contains(hint), "{value}: {help}");
        }
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
    fn merge_keys_and_x_keys_load() {
        let loaded = load_ok(
            "x-unit: &unit {timeout: 30s, retries: 2}\nunits:\n  - name: a\n    <<: *unit\n    retries: 0\n    execute: 'true'\n",
        );
        let unit = &loaded.pipeline.units[0];
        assert_eq!(unit.timeout, Some(Duration::from_secs(30)));
        assert_eq!(unit.retries, 0);
    }

    #[test]
    fn params_interpolate_with_defaults_and_given_values() {
        let yaml = "params:\n  day: {type: date, default: today}\n  n: 3\n  regions: [eu, us]\nunits:\n  - name: a\n    execute: echo ${params.day} ${params.n} ${params.regions} $${params.day} $$ $HOME\n    outputs: [\"out/${params.day}.csv\"]\n    env: {N: \"${params.n}\", H: \"${env.HOME}\"}\n";
        let path = Path::new("/base/dir/daily.yaml");
        let env = std::collections::BTreeMap::from([("HOME".to_owned(), "/home/x".to_owned())]);
        let options = LoadOptions::default().env(env.clone()).today("2026-12-01");
        let loaded = load_str_with(yaml, path, &options).unwrap();
        let unit = &loaded.pipeline.units[0];
        assert_eq!(
            unit.execute,
            Command::Shell("echo 2026-12-01 3 eu us ${params.day} $$ $HOME".into())
        );
        assert_eq!(unit.outputs, ["out/2026-12-01.csv"]);
        assert_eq!(unit.env["N"], "3");
        assert_eq!(unit.env["H"], "/home/x");
        assert_eq!(loaded.params["regions"], serde_json::json!(["eu", "us"]));

        let options = LoadOptions::default()
            .env(env)
            .today("2026-12-01")
            .params(vec![
                ParamOverride::text("day", "2026-11-29", "test"),
                ParamOverride::text("regions", "fr", "test"),
            ]);
        let loaded = load_str_with(yaml, path, &options).unwrap();
        assert_eq!(
            loaded.pipeline.units[0].execute,
            Command::Shell("echo 2026-11-29 3 fr ${params.day} $$ $HOME".into())
        );
        assert_eq!(loaded.params["day"], serde_json::json!("2026-11-29"));
    }

    #[test]
    fn foreach_expands_to_instances_and_deps_to_all_or_one() {
        let loaded = load_ok(
            "params:\n  regions: {type: list, default: [eu, us]}\nunits:\n  - name: extract\n    foreach: ${params.regions}\n    execute: ./x.sh ${item} ${unit.name}\n  - name: transform\n    foreach: {region: \"${params.regions}\", tier: [a, b]}\n    deps: [\"extract[${item.region}]\"]\n    execute: ./t.sh ${item.region} ${item.tier}\n  - name: report\n    deps: [transform, \"extract[eu]\"]\n    execute: ./r.sh\n",
        );
        let names: Vec<&str> = loaded
            .pipeline
            .units
            .iter()
            .map(|unit| unit.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "extract[eu]",
                "extract[us]",
                "transform[eu,a]",
                "transform[eu,b]",
                "transform[us,a]",
                "transform[us,b]",
                "report"
            ]
        );
        let units = &loaded.pipeline.units;
        assert_eq!(
            units[0].execute,
            // `[` would glob: the instance name is quoted (DESIGN §18).
            Command::Shell("./x.sh eu 'extract[eu]'".into())
        );
        assert_eq!(units[4].deps, ["extract[us]"]);
        assert_eq!(units[4].execute, Command::Shell("./t.sh us a".into()));
        assert_eq!(
            units[6].deps,
            [
                "transform[eu,a]",
                "transform[eu,b]",
                "transform[us,a]",
                "transform[us,b]",
                "extract[eu]"
            ]
        );
    }

    #[test]
    fn foreach_over_a_glob_has_one_instance_per_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("in")).unwrap();
        for name in ["b.csv", "a.csv", "c d.csv"] {
            std::fs::write(dir.path().join("in").join(name), "").unwrap();
        }
        let path = dir.path().join("p.yaml");
        std::fs::write(
            &path,
            "units:\n  - name: t\n    foreach: in/*.csv\n    execute: ./t.sh ${item}\n",
        )
        .unwrap();
        let loaded = load(&path).unwrap();
        let names: Vec<&str> = loaded
            .pipeline
            .units
            .iter()
            .map(|unit| unit.name.as_str())
            .collect();
        assert_eq!(names.len(), 3);
        assert_eq!(names[0], "t[a.csv]");
        assert_eq!(names[1], "t[b.csv]");
        assert!(names[2].starts_with("t[c_d.csv-"), "{names:?}");
        assert_eq!(
            loaded.pipeline.units[0].execute,
            Command::Shell("./t.sh in/a.csv".into())
        );
    }

    #[test]
    fn included_units_defaults_and_params_join_the_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("common")).unwrap();
        std::fs::write(
            dir.path().join("common/units.yaml"),
            "include: [more.yaml]\ndefaults: {timeout: 30s, retries: 3}\nenv: {A: included, B: included}\nunits:\n  - name: extract\n    execute: ./x.sh ${params.day}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("common/more.yaml"),
            "params:\n  day: {type: date, default: \"2026-11-30\"}\n",
        )
        .unwrap();
        // Included twice (directly and through nothing else): read once.
        let path = dir.path().join("p.yaml");
        std::fs::write(
            &path,
            "include: [common/units.yaml, common/units.yaml]\ndefaults: {retries: 1}\nenv: {A: main}\nunits:\n  - name: load\n    deps: [extract]\n    execute: ./load.sh\n",
        )
        .unwrap();
        let loaded = load(&path).unwrap();
        let units = &loaded.pipeline.units;
        assert_eq!(units[0].name, "extract");
        assert_eq!(units[0].execute, Command::Shell("./x.sh 2026-11-30".into()));
        assert_eq!(units[0].timeout, Some(Duration::from_secs(30)));
        assert_eq!(units[0].retries, 1, "the main file's defaults win");
        assert_eq!(
            units[0].workdir,
            dir.path(),
            "paths resolve against the main file"
        );
        assert_eq!(units[1].env["A"], "main");
        assert_eq!(units[1].env["B"], "included");
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

    #[test]
    fn hooks_are_commands_or_mappings_with_a_timeout() {
        use crate::model::{DEFAULT_HOOK_TIMEOUT, HookWhen};
        let loaded = load_ok(
            "on_failure: mail -s failed ops@example.com < \"$APOLLO_SUMMARY_JSON\"\non_finish:\n  execute: [curl, -fsS, https://hooks.example/apollo]\n  timeout: 30s\nunits:\n  - name: a\n    execute: 'true'\n",
        );
        let hooks = &loaded.pipeline.hooks;
        assert_eq!(hooks.len(), 2);
        assert_eq!(hooks[0].when, HookWhen::OnFailure);
        assert_eq!(hooks[0].timeout, DEFAULT_HOOK_TIMEOUT);
        assert_eq!(hooks[1].when, HookWhen::OnFinish);
        assert_eq!(hooks[1].timeout, Duration::from_secs(30));
        assert!(matches!(&hooks[1].command, Command::Argv(argv) if argv[0] == "curl"));
        let error = load_str(
            "on_success: {timeout: 5s}\nunits:\n  - name: a\n    execute: 'true'\n",
            Path::new("/base/dir/daily.yaml"),
        )
        .unwrap_err();
        assert!(error.to_string().contains("error") || matches!(error, LoadError::Invalid { .. }));
    }
}
