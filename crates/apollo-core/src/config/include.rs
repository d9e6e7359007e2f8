//! `include:` (DESIGN §14): other YAML files whose `units`, `defaults`, `env` and `params`
//! join the pipeline's.
//!
//! `include: [common/units.yaml]` names files relative to the including file's folder; an
//! included file may include others. A file is read once however many files include it; a
//! file that includes itself, directly or not, is an error naming the cycle. Diagnostics in an
//! included file name that file and, in a note, the chain of includes that led to it.
//!
//! Merging: the included files' units come first (in the order the files were found), then the
//! including file's. `defaults` and `env` entries of the main file win over included ones, and
//! among included files the first found wins. A param may be declared in one file only.
//! Relative paths in included units (`inputs`, `outputs`, `workdir`) resolve against the main
//! config file's folder, like every other path of the pipeline.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::raw::{self, Node, Value};
use super::schema::{Sp, Spec};
use crate::diagnostic::{Diagnostic, Loc, SourceFile};

/// At most this many included files: a bound on work for a runaway generator of includes.
const MAX_INCLUDED_FILES: usize = 1_000;

/// An included file, read.
pub(crate) struct IncludedFile {
    /// Its path as diagnostics name it: the including file's folder joined with the entry.
    pub(crate) shown: PathBuf,
    pub(crate) text: String,
    /// Where it was included from, as a note.
    pub(crate) chain: String,
}

/// A problem found while following includes, rendered once every file is known.
pub(crate) struct Problem {
    pub(crate) loc: Loc,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

impl Problem {
    pub(crate) fn render(self, source: &SourceFile<'_>) -> Diagnostic {
        let diagnostic = source.error(self.code, self.loc, self.message);
        match self.hint {
            Some(hint) => diagnostic.with_hint(hint),
            None => diagnostic,
        }
    }
}

/// The `include:` entries of a parsed file (silently none when malformed: the walk reports
/// that).
fn entries(root: &Node<'_>) -> Vec<Sp<String>> {
    let Value::Map(map) = &root.value else {
        return Vec::new();
    };
    let Some((_, value)) = map
        .iter()
        .find(|(key, _)| matches!(&key.value, Value::Str(text) if text == "include"))
    else {
        return Vec::new();
    };
    let items: Vec<&Node<'_>> = match &value.value {
        Value::Seq(items) => items.iter().collect(),
        Value::Str(_) => vec![value],
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| match &item.value {
            Value::Str(text) if !text.trim().is_empty() => Some(Sp {
                value: text.to_string(),
                loc: item.loc,
            }),
            _ => None,
        })
        .collect()
}

struct Collector {
    files: Vec<IncludedFile>,
    /// Canonical paths of the main file and every file read.
    seen: HashSet<PathBuf>,
    problems: Vec<Problem>,
}

/// Follows the includes of the main file (`root`, read from `path`), depth first; returns
/// the files in file-number order (file `n` is at index `n - 1`) and the problems found.
pub(crate) fn collect(root: &Node<'_>, path: &Path) -> (Vec<IncludedFile>, Vec<Problem>) {
    let mut collector = Collector {
        files: Vec::new(),
        seen: HashSet::new(),
        problems: Vec::new(),
    };
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    collector.seen.insert(canonical.clone());
    let mut chain = vec![(canonical, path.to_owned(), 0)];
    collector.visit(root, path, &mut chain);
    (collector.files, collector.problems)
}

impl Collector {
    /// `chain`: the files being included, from the main one: canonical path, shown path, and
    /// the line of the include entry that led to the next one.
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn visit(&mut self, root: &Node<'_>, path: &Path, chain: &mut Vec<(PathBuf, PathBuf, u32)>) {
        let folder = path.parent().unwrap_or(Path::new(""));
        for entry in entries(root) {
            let shown = folder.join(&entry.value);
            let canonical = match std::fs::canonicalize(&shown) {
                Ok(canonical) => canonical,
                Err(error) => {
                    self.problems.push(Problem {
                        loc: entry.loc,
                        code: "bad-include",
                        message: format!(
                            "cannot read the included file `{}`: {error}",
                            shown.display()
                        ),
                        hint: Some(
                            "an included file is named relative to the folder of the file that includes it"
                                .to_owned(),
                        ),
                    });
                    continue;
                }
            };
            if let Some(start) = chain.iter().position(|(seen, _, _)| *seen == canonical) {
                let mut cycle: Vec<String> = chain[start..]
                    .iter()
                    .map(|(_, shown, _)| format!("`{}`", shown.display()))
                    .collect();
                cycle.push(format!("`{}`", shown.display()));
                self.problems.push(Problem {
                    loc: entry.loc,
                    code: "include-cycle",
                    message: format!("include cycle: {}", cycle.join(" → ")),
                    hint: Some("remove one of these includes".to_owned()),
                });
                continue;
            }
            if !self.seen.insert(canonical.clone()) {
                // Already included through another file: read once.
                continue;
            }
            if self.files.len() >= MAX_INCLUDED_FILES {
                self.problems.push(Problem {
                    loc: entry.loc,
                    code: "bad-include",
                    message: format!("more than {MAX_INCLUDED_FILES} included files"),
                    hint: None,
                });
                return;
            }
            // A regular file within the bound: a FIFO, `/dev/zero` or a huge file is refused
            // before it can hang or exhaust the load.
            let text = match super::read::read_bounded(&shown, super::read::Accept::Regular)
                .map(String::from_utf8)
            {
                Ok(Ok(text)) => text,
                Ok(Err(_)) => {
                    self.problems.push(Problem {
                        loc: entry.loc,
                        code: "bad-include",
                        message: format!("the included file `{}` is not UTF-8", shown.display()),
                        hint: Some("save the file as UTF-8".to_owned()),
                    });
                    continue;
                }
                Err(error) => {
                    self.problems.push(Problem {
                        loc: entry.loc,
                        code: "bad-include",
                        message: format!(
                            "cannot read the included file `{}`: {error}",
                            shown.display()
                        ),
                        hint: None,
                    });
                    continue;
                }
            };
            // The chain note: the nearest including file first.
            let mut note = Vec::with_capacity(chain.len());
            let mut line = entry.loc.line;
            for (_, including, entry_line) in chain.iter().rev() {
                note.push(format!(
                    "included from `{}` line {line}",
                    including.display()
                ));
                line = *entry_line;
            }
            self.files.push(IncludedFile {
                shown: shown.clone(),
                text: text.clone(),
                chain: note.join(", "),
            });
            let file_number = u16::try_from(self.files.len()).unwrap_or(u16::MAX);
            match raw::parse_file(&text, file_number) {
                Ok(tree) => {
                    chain.push((canonical, shown.clone(), entry.loc.line));
                    self.visit(&tree, &shown, chain);
                    chain.pop();
                }
                Err(error) => self.problems.push(Problem {
                    loc: error.loc,
                    code: "yaml-syntax",
                    message: format!("invalid YAML: {}", error.message),
                    hint: Some(
                        "check the indentation and the brackets and quotes around this place"
                            .to_owned(),
                    ),
                }),
            }
        }
    }
}

/// Merges an included file's spec into the main one (see the module docs for the rules).
pub(crate) fn merge(
    main: &mut Spec,
    included: Spec,
    included_units: &mut Vec<super::schema::UnitSpec>,
    source: &SourceFile<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let defaults = &mut main.defaults;
    let from = included.defaults;
    defaults.timeout = defaults.timeout.take().or(from.timeout);
    defaults.retries = defaults.retries.take().or(from.retries);
    defaults.retry_delay = defaults.retry_delay.take().or(from.retry_delay);
    defaults.kill_grace = defaults.kill_grace.take().or(from.kill_grace);
    defaults.idempotent = defaults.idempotent.take().or(from.idempotent);
    defaults.workdir = defaults.workdir.take().or(from.workdir);
    defaults.capture = defaults.capture.take().or(from.capture);
    defaults.capture_max_file = defaults.capture_max_file.take().or(from.capture_max_file);
    defaults.reuse = defaults.reuse.take().or(from.reuse);
    defaults.log_limit = defaults.log_limit.take().or(from.log_limit);
    defaults.retry_on_exit = defaults.retry_on_exit.take().or(from.retry_on_exit);
    defaults.retry_max_delay = defaults.retry_max_delay.take().or(from.retry_max_delay);
    defaults.cleanup_timeout = defaults.cleanup_timeout.take().or(from.cleanup_timeout);
    main.blob_store_max = main.blob_store_max.take().or(included.blob_store_max);
    main.cost = main.cost.take().or(included.cost);
    // A hook of the including file wins over an included file's hook of the same kind.
    for hook in included.hooks {
        if !main.hooks.iter().any(|(when, _, _)| *when == hook.0) {
            main.hooks.push(hook);
        }
    }
    for (name, value) in included.env {
        main.env.entry(name).or_insert(value);
    }
    // A secret of the including file wins over an included file's of the same name, as env.
    for (name, source) in included.secrets {
        if !main
            .secrets
            .iter()
            .any(|(first, _)| first.value == name.value)
        {
            main.secrets.push((name, source));
        }
    }
    for param in included.params {
        if let Some(first) = main
            .params
            .iter()
            .find(|declared| declared.name.value == param.name.value)
        {
            diagnostics.push(
                source
                    .error(
                        "duplicate-key",
                        param.name.loc,
                        format!("param `{}` is declared in two files", param.name.value),
                    )
                    .with_note(format!(
                        "it is also declared in `{}` line {}",
                        source.file_path(first.name.loc).display(),
                        first.name.loc.line
                    )),
            );
            continue;
        }
        main.params.push(param);
    }
    included_units.extend(included.units);
}
