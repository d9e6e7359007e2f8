//! Input and output hashes (DESIGN §5): SHA-256 over canonical, length-prefixed encodings,
//! so a value never changes between versions or platforms.
//!
//! A unit's **input hash** covers its commands, its declared env, the content of each declared
//! input file (sorted by path) and the output hash of each dependency; each component's own
//! hash is recorded too, so a diff can name what changed. Its **output hash** covers the
//! declared output files (sorted by path), or `execute`'s stdout when none are declared.
//!
//! Files are hashed by streaming; nothing loads a whole file into memory.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::event::{InputComponent, InputKind};
use crate::model::{Command, Phase, Unit};

/// Lower-case hex of a digest.
/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

/// SHA-256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

/// SHA-256 of a file's content, streamed in 64 KiB blocks.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n_read = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n_read) => n_read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        hasher.update(&buffer[..n_read]);
    }
    Ok(to_hex(&hasher.finalize()))
}

/// A length-prefixed canonical encoder: every field is `u64 big-endian length || bytes`, so
/// no two different field sequences encode to the same bytes.
#[derive(Default)]
struct Canonical {
    hasher: Sha256,
}

impl Canonical {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.hasher.update((bytes.len() as u64).to_be_bytes());
        self.hasher.update(bytes);
        self
    }

    fn finish(self) -> String {
        to_hex(&self.hasher.finalize())
    }
}

/// The hash of a command: its form (shell or argv) and its text or arguments.
pub fn command_hash(command: &Command) -> String {
    let mut canonical = Canonical::default();
    match command {
        Command::Shell(script) => {
            canonical.field(b"shell").field(script.as_bytes());
        }
        Command::Argv(argv) => {
            canonical
                .field(b"argv")
                .field(&(argv.len() as u64).to_be_bytes());
            for argument in argv {
                canonical.field(argument.as_bytes());
            }
        }
    }
    canonical.finish()
}

/// The hash recorded for a declared input file that does not exist, so that its appearing
/// later counts as a change.
pub fn missing_file_hash() -> String {
    let mut canonical = Canonical::default();
    canonical.field(b"missing");
    canonical.finish()
}

/// The input hash over a unit's components: sorted by (kind, name), each encoded as
/// kind, name and component hash.
pub fn combine_components(components: &[InputComponent]) -> String {
    let mut sorted: Vec<&InputComponent> = components.iter().collect();
    sorted.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    let mut canonical = Canonical::default();
    canonical.field(b"apollo-input-v1");
    for component in sorted {
        let kind: &[u8] = match component.kind {
            InputKind::Command => b"command",
            InputKind::Env => b"env",
            InputKind::File => b"file",
            InputKind::Upstream => b"upstream",
        };
        canonical
            .field(kind)
            .field(component.name.as_bytes())
            .field(component.hash.as_bytes());
    }
    canonical.finish()
}

/// Reading a declared input or output file failed.
///
/// The operating system's error is part of the message (the engine records the message as the
/// attempt's error), so it is not also returned by `source()`.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {what} `{}`: {error}", path.display())]
pub struct HashError {
    /// "input file" or "output file".
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub error: io::Error,
}

/// Whether a pattern has glob syntax.
fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Display name of a path: relative to `base_dir` when inside it.
fn display_name(path: &Path, base_dir: &Path) -> String {
    path.strip_prefix(base_dir)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Expand a unit's `inputs` patterns against `base_dir`: sorted, without duplicates.
/// A literal path that does not exist is kept (and hashed as missing); a glob that matches
/// nothing contributes nothing.
pub fn expand_inputs(unit: &Unit, base_dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for pattern in &unit.inputs {
        let absolute = base_dir.join(pattern);
        if is_glob(pattern) {
            let Some(pattern_text) = absolute.to_str() else {
                continue;
            };
            if let Ok(matches) = glob::glob(pattern_text) {
                paths.extend(matches.filter_map(Result::ok).filter(|path| path.is_file()));
            }
        } else {
            paths.push(absolute);
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Every input component of `unit`: commands, declared env, input files, upstream outputs.
///
/// `upstream_outputs` gives each dependency's name and output hash.
pub fn input_components(
    unit: &Unit,
    base_dir: &Path,
    upstream_outputs: &[(&str, &str)],
) -> Result<Vec<InputComponent>, HashError> {
    let mut components = Vec::new();
    let phases = [
        (Phase::Prepare, unit.prepare.as_ref()),
        (Phase::Execute, Some(&unit.execute)),
        (Phase::Cleanup, unit.cleanup.as_ref()),
    ];
    for (phase, command) in phases {
        if let Some(command) = command {
            components.push(InputComponent {
                kind: InputKind::Command,
                name: phase.as_str().to_owned(),
                hash: command_hash(command),
            });
        }
    }
    for (name, value) in &unit.env {
        components.push(InputComponent {
            kind: InputKind::Env,
            name: name.clone(),
            hash: sha256_hex(value.as_bytes()),
        });
    }
    for path in expand_inputs(unit, base_dir) {
        let hash = match sha256_file(&path) {
            Ok(hash) => hash,
            Err(error) if error.kind() == io::ErrorKind::NotFound => missing_file_hash(),
            Err(source) => {
                return Err(HashError {
                    what: "input file",
                    path,
                    error: source,
                });
            }
        };
        components.push(InputComponent {
            kind: InputKind::File,
            name: display_name(&path, base_dir),
            hash,
        });
    }
    for (dependency, output_hash) in upstream_outputs {
        components.push(InputComponent {
            kind: InputKind::Upstream,
            name: (*dependency).to_owned(),
            hash: (*output_hash).to_owned(),
        });
    }
    components.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    Ok(components)
}

/// The output hash over a unit's declared outputs (sorted by path). `Ok(None)` when the
/// unit declares no outputs (the caller then uses the stdout hash). A declared output that
/// does not exist is an error: exit 0 alone is not proof of work.
pub fn output_hash(unit: &Unit, base_dir: &Path) -> Result<Option<String>, HashError> {
    if unit.outputs.is_empty() {
        return Ok(None);
    }
    let mut paths: Vec<PathBuf> = unit
        .outputs
        .iter()
        .map(|output| base_dir.join(output))
        .collect();
    paths.sort();
    paths.dedup();
    let mut canonical = Canonical::default();
    canonical.field(b"apollo-output-v1");
    for path in paths {
        let hash = sha256_file(&path).map_err(|source| HashError {
            what: "output file",
            path: path.clone(),
            error: source,
        })?;
        canonical
            .field(display_name(&path, base_dir).as_bytes())
            .field(hash.as_bytes());
    }
    Ok(Some(canonical.finish()))
}

/// The components that differ between two recorded input lists, as human phrases:
/// "input file data/raw.csv changed", "upstream fetch_data output changed", "command execute
/// changed", "env FOO added".
pub fn describe_input_changes(before: &[InputComponent], after: &[InputComponent]) -> Vec<String> {
    fn label(component: &InputComponent) -> String {
        match component.kind {
            InputKind::Command => format!("command {}", component.name),
            InputKind::Env => format!("env {}", component.name),
            InputKind::File => format!("input file {}", component.name),
            InputKind::Upstream => format!("upstream {} output", component.name),
        }
    }
    // Indexed by (kind, name): an input list can hold 100,000 files.
    fn index(components: &[InputComponent]) -> HashMap<(InputKind, &str), &str> {
        (components.iter())
            .map(|component| {
                (
                    (component.kind, component.name.as_str()),
                    component.hash.as_str(),
                )
            })
            .collect()
    }
    let (before_index, after_index) = (index(before), index(after));
    let mut changes = Vec::new();
    for component in after {
        match before_index.get(&(component.kind, component.name.as_str())) {
            Some(old_hash) if *old_hash != component.hash => {
                changes.push(format!("{} changed", label(component)))
            }
            Some(_) => {}
            None => changes.push(format!("{} added", label(component))),
        }
    }
    for component in before {
        if !after_index.contains_key(&(component.kind, component.name.as_str())) {
            changes.push(format!("{} removed", label(component)));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_the_standard_one() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn command_forms_hash_differently() {
        let shell = Command::Shell("echo hi".into());
        let argv = Command::Argv(vec!["echo".into(), "hi".into()]);
        assert_ne!(command_hash(&shell), command_hash(&argv));
        // Length prefixes keep argument boundaries.
        let split_a = Command::Argv(vec!["ab".into(), "c".into()]);
        let split_b = Command::Argv(vec!["a".into(), "bc".into()]);
        assert_ne!(command_hash(&split_a), command_hash(&split_b));
    }

    #[test]
    fn changes_are_named() {
        let component = |kind, name: &str, hash: &str| InputComponent {
            kind,
            name: name.into(),
            hash: hash.into(),
        };
        let before = vec![
            component(InputKind::File, "a.csv", "1"),
            component(InputKind::Upstream, "fetch", "2"),
        ];
        let after = vec![
            component(InputKind::File, "a.csv", "9"),
            component(InputKind::Env, "TZ", "3"),
        ];
        assert_eq!(
            describe_input_changes(&before, &after),
            vec![
                "input file a.csv changed",
                "env TZ added",
                "upstream fetch output removed"
            ]
        );
    }
}
