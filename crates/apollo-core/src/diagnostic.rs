//! Diagnostics: what is wrong with a config, where, and what to do about it.
//!
//! A [`Diagnostic`] carries everything needed to print it like a compiler does — severity,
//! message, file, line, column, the offending source line and a hint — so it can be rendered
//! for humans ([`Diagnostic::render`]) or serialized for tools (`serde::Serialize`, used by
//! `apollo check --format json`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The config is invalid; nothing may run.
    Error,
    /// Suspicious but allowed; the config is still valid.
    Warning,
}

impl Severity {
    /// `error` or `warning`, as printed before the message.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable kebab-case identifier of the kind of problem (`unknown-key`, `dependency-cycle`),
    /// for tools that filter diagnostics.
    pub code: &'static str,
    /// What is wrong, in one lowercase sentence without a final period.
    pub message: String,
    /// The file the problem is in, as the user named it.
    pub file: PathBuf,
    /// 1-based line, when the problem has a place.
    pub line: Option<u32>,
    /// 1-based column in characters, when the problem has a place.
    pub column: Option<u32>,
    /// How many characters from `column` the problem spans (at least 1 when located).
    pub width: u32,
    /// The text of line `line` (without its newline), when located.
    pub source_line: Option<String>,
    /// What to do about it (`did you mean `retries`?`).
    pub hint: Option<String>,
    /// Further context (`` `fetch` is first defined at line 3 ``).
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// A diagnostic with no location in `file`.
    pub fn new(
        severity: Severity,
        code: &'static str,
        file: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            code,
            message: message.into(),
            file: file.into(),
            line: None,
            column: None,
            width: 0,
            source_line: None,
            hint: None,
            notes: Vec::new(),
        }
    }

    /// Whether this is an error (as opposed to a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub(crate) fn hint(&mut self, hint: impl Into<String>) -> &mut Self {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.notes.push(note.into());
        self
    }

    /// Renders the diagnostic the way rustc does:
    ///
    /// ```text
    /// error: unknown key `retires` in unit `fetch`
    ///   --> config/pipeline.yaml:7:5
    ///    |
    ///  7 |     retires: 2
    ///    |     ^^^^^^^
    ///    = help: did you mean `retries`?
    /// ```
    ///
    /// The result ends with a newline.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}: {}", self.severity, self.message);
        let line_number = self.line.map(|line| line.to_string()).unwrap_or_default();
        // As in the rustc-style example: `  --> file`, then `   |` one column further right, so
        // the bars line up with the ` N |` of the source line.
        let gutter = " ".repeat(line_number.len() + 1);
        let bar_gutter = " ".repeat(line_number.len() + 2);
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                let _ = writeln!(out, "{gutter}--> {}:{line}:{column}", self.file.display());
            }
            (Some(line), None) => {
                let _ = writeln!(out, "{gutter}--> {}:{line}", self.file.display());
            }
            _ => {
                let _ = writeln!(out, "{gutter}--> {}", self.file.display());
            }
        }
        if let (Some(source_line), Some(column)) = (&self.source_line, self.column) {
            let _ = writeln!(out, "{bar_gutter}|");
            let _ = writeln!(out, " {line_number} | {source_line}");
            // Keep tabs in the prefix so the carets line up whatever the tab width.
            let prefix: String = source_line
                .chars()
                .take(column.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let remaining = source_line
                .chars()
                .count()
                .saturating_sub(prefix.chars().count());
            let width = (self.width as usize).clamp(1, remaining.max(1));
            let _ = writeln!(out, "{bar_gutter}| {prefix}{}", "^".repeat(width));
        }
        for note in &self.notes {
            let _ = writeln!(out, "{bar_gutter}= note: {note}");
        }
        if let Some(hint) = &self.hint {
            let _ = writeln!(out, "{bar_gutter}= help: {hint}");
        }
        out
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// Renders a list of diagnostics, each followed by a blank line.
pub fn render_all(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&diagnostic.render());
        out.push('\n');
    }
    out
}

/// A place in a source file: 1-based line and character column, and a width in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Loc {
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) width: u32,
    /// Which file: 0 is the config file itself, `n` its `n`th included file (see
    /// [`SourceFile::include`]).
    pub(crate) file: u16,
}

/// The text of a config file and its name, for building located diagnostics; with the files
/// it includes, so that a place in an included file renders with that file's name and line
/// and the chain of includes that led to it.
pub(crate) struct SourceFile<'a> {
    path: &'a Path,
    text: &'a str,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
    /// The included files, in the order of their file numbers (from 1), each with the note
    /// that says where it was included from.
    included: Vec<(SourceFile<'a>, String)>,
}

impl<'a> SourceFile<'a> {
    pub(crate) fn new(path: &'a Path, text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, byte)| byte == b'\n')
                .map(|(offset, _)| offset + 1),
        );
        Self {
            path,
            text,
            line_starts,
            included: Vec::new(),
        }
    }

    /// Adds an included file; places with [`Loc::file`] equal to the returned number are in
    /// it. `chain` says where it was included from (a note on its diagnostics).
    pub(crate) fn include(&mut self, path: &'a Path, text: &'a str, chain: String) -> u16 {
        self.included.push((SourceFile::new(path, text), chain));
        u16::try_from(self.included.len()).unwrap_or(u16::MAX)
    }

    /// The name of the file `loc` is in.
    pub(crate) fn file_path(&self, loc: Loc) -> &'a Path {
        self.file_of(loc).0.path
    }

    /// How many lines the config file itself has (its included files not counted).
    pub(crate) fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The file `loc` is in (the config file itself for an unknown number).
    fn file_of(&self, loc: Loc) -> (&SourceFile<'a>, Option<&str>) {
        match (loc.file as usize)
            .checked_sub(1)
            .and_then(|index| self.included.get(index))
        {
            Some((file, chain)) => (file, Some(chain.as_str())),
            None => (self, None),
        }
    }

    /// The file's name, as the user gave it.
    pub(crate) fn path(&self) -> &'a Path {
        self.path
    }

    /// Where the `nth` (from 0) occurrence of `needle` is, searching from `from` (the place of
    /// the YAML node that holds it): how a diagnostic points into a string, e.g. at one
    /// `${params.x}` in a command. `None` when it is not found there (an alias or merge key
    /// copied the node from elsewhere).
    pub(crate) fn find_after(&self, from: Loc, needle: &str, nth: usize) -> Option<Loc> {
        let (file, _) = self.file_of(from);
        let mut found = file.find_in_this_file(from, needle, nth)?;
        found.file = from.file;
        Some(found)
    }

    fn find_in_this_file(&self, from: Loc, needle: &str, nth: usize) -> Option<Loc> {
        let line_index = (from.line as usize).checked_sub(1)?;
        let line_start = *self.line_starts.get(line_index)?;
        let line_text = self.text.get(line_start..)?;
        let column_offset: usize = line_text
            .chars()
            .take(from.column.saturating_sub(1) as usize)
            .map(char::len_utf8)
            .sum();
        let start = line_start + column_offset;
        let mut offset = start;
        for _ in 0..=nth {
            let found = self.text.get(offset..)?.find(needle)?;
            offset += found + needle.len();
        }
        let found_at = offset - needle.len();
        let line = self.line_starts.partition_point(|&begin| begin <= found_at);
        let begin = self.line_starts[line - 1];
        let column = self.text.get(begin..found_at)?.chars().count() + 1;
        Some(Loc {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
            width: u32::try_from(needle.chars().count()).unwrap_or(u32::MAX),
            file: 0,
        })
    }

    /// Line `line` (1-based) without its line ending, if it exists.
    pub(crate) fn line_text(&self, line: u32) -> Option<&'a str> {
        let index = (line as usize).checked_sub(1)?;
        let start = *self.line_starts.get(index)?;
        let end = self
            .line_starts
            .get(index + 1)
            .map_or(self.text.len(), |&next| next - 1);
        let text = self.text.get(start..end)?;
        Some(text.strip_suffix('\r').unwrap_or(text))
    }

    /// A diagnostic at `loc` (a zero line means "no known place").
    pub(crate) fn at(
        &self,
        severity: Severity,
        code: &'static str,
        loc: Loc,
        message: impl Into<String>,
    ) -> Diagnostic {
        let (file, chain) = self.file_of(loc);
        let mut diagnostic = Diagnostic::new(severity, code, file.path, message);
        if loc.line > 0 {
            diagnostic.line = Some(loc.line);
            diagnostic.column = Some(loc.column.max(1));
            diagnostic.width = loc.width.max(1);
            diagnostic.source_line = file.line_text(loc.line).map(str::to_owned);
        }
        if let Some(chain) = chain {
            diagnostic.notes.push(chain.to_owned());
        }
        diagnostic
    }

    pub(crate) fn error(
        &self,
        code: &'static str,
        loc: Loc,
        message: impl Into<String>,
    ) -> Diagnostic {
        self.at(Severity::Error, code, loc, message)
    }

    pub(crate) fn warning(
        &self,
        code: &'static str,
        loc: Loc,
        message: impl Into<String>,
    ) -> Diagnostic {
        self.at(Severity::Warning, code, loc, message)
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a plausible typo.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let score = strsim::jaro_winkler(word, candidate);
        if score >= 0.8 && best.is_none_or(|(best_score, _)| score > best_score) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// Like [`closest`], and failing that the candidate within two edits (a swap of two
/// neighbouring letters is one): Jaro-Winkler misses transpositions in short words such as
/// `dya` for `day`, which param names often are.
pub(crate) fn closest_or_near<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str> + Clone,
) -> Option<&'c str> {
    closest(word, candidates.clone()).or_else(|| {
        candidates
            .into_iter()
            .map(|candidate| (strsim::osa_distance(word, candidate), candidate))
            .filter(|&(distance, candidate)| {
                distance <= 2 && distance < word.chars().count().min(candidate.chars().count())
            })
            .min_by_key(|&(distance, _)| distance)
            .map(|(_, candidate)| candidate)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_points_at_the_column_with_carets() {
        let text = "units:\n  - name: fetch\n    retires: 2\n";
        let source = SourceFile::new(Path::new("config/pipeline.yaml"), text);
        let diagnostic = source
            .error(
                "unknown-key",
                Loc {
                    line: 3,
                    column: 5,
                    width: 7,
                    file: 0,
                },
                "unknown key `retires` in unit `fetch`",
            )
            .with_hint("did you mean `retries`?");
        assert_eq!(
            diagnostic.render(),
            "error: unknown key `retires` in unit `fetch`\n  --> config/pipeline.yaml:3:5\n   |\n 3 |     retires: 2\n   |     ^^^^^^^\n   = help: did you mean `retries`?\n"
        );
    }

    #[test]
    fn render_without_location_names_the_file() {
        let diagnostic =
            Diagnostic::new(Severity::Error, "empty-file", "p.yaml", "the file is empty");
        assert_eq!(
            diagnostic.with_hint("write a pipeline").render(),
            "error: the file is empty\n --> p.yaml\n  = help: write a pipeline\n"
        );
    }

    #[test]
    fn closest_suggests_typos_only() {
        assert_eq!(closest("retires", ["retries", "timeout"]), Some("retries"));
        assert_eq!(closest("zzz", ["retries", "timeout"]), None);
    }
}
