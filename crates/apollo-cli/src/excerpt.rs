//! Why an attempt failed, where people look: the last lines of its captured stderr (its
//! stdout when stderr is empty), shown under a `FAILED` line and again in the run's summary,
//! with the `apollo logs` command that prints the whole file.
//!
//! Only the end of the file is read (at most [`TAIL_BYTES`]), through
//! `apollo_store::open_regular_file` (a FIFO or a link to `/dev/zero` planted in the state
//! directory is refused, never read). Lines are cut at [`MAX_LINE_CHARS`] and control
//! characters are escaped, so a unit's output cannot move the cursor or clear the screen.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How many lines an excerpt shows at most.
pub(crate) const EXCERPT_LINES: usize = 8;

/// How much of the end of a file is read for an excerpt.
const TAIL_BYTES: u64 = 16 * 1024;

/// Longer lines are cut (with `…`).
pub(crate) const MAX_LINE_CHARS: usize = 200;

/// The end of one captured stream of an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Excerpt {
    /// `stderr` or `stdout`.
    pub(crate) stream: &'static str,
    /// The last lines, escaped and cut, oldest first.
    pub(crate) lines: Vec<String>,
}

/// The excerpt of the attempt whose files are in `log_dir`: its stderr's last `n_lines`, or its
/// stdout's when stderr is empty or missing. `None` when the attempt wrote nothing.
pub(crate) fn of_attempt(log_dir: &Path, n_lines: usize) -> Option<Excerpt> {
    ["stderr", "stdout"].into_iter().find_map(|stream| {
        tail(&log_dir.join(stream), n_lines).map(|lines| Excerpt { stream, lines })
    })
}

/// The last `n_lines` lines of `path` (trailing blank lines dropped).
fn tail(path: &Path, n_lines: usize) -> Option<Vec<String>> {
    let mut file = apollo_store::open_regular_file(path).ok()??;
    let len = file.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    // What a terminal would show of each line: a `\r` progress bar's last state.
    let mut lines: Vec<&str> = text.lines().map(last_redraw).collect();
    // The first line of a tail read mid-file is a fragment: dropped, unless it is all there
    // is — the end of one long line (minified JSON, a progress bar), which is kept, its end
    // shown (issue 36: such an attempt was reported as having written nothing).
    let mut fragment = None;
    if start > 0 && !lines.is_empty() {
        fragment = Some(lines.remove(0));
    }
    while lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    if lines.is_empty() {
        let fragment = fragment.filter(|fragment| !fragment.trim().is_empty())?;
        return Some(vec![end_of_line(fragment)]);
    }
    let first = lines.len().saturating_sub(n_lines);
    Some(lines[first..].iter().map(|line| clean_line(line)).collect())
}

/// The part of `line` after its last `\r` that is not blank: what a terminal shows of a
/// line a progress bar redrew.
fn last_redraw(line: &str) -> &str {
    line.rsplit('\r')
        .find(|part| !part.trim().is_empty())
        .unwrap_or(line)
}

/// The end of a line too long to show whole: `…` and its last [`MAX_LINE_CHARS`] characters,
/// cleaned.
fn end_of_line(line: &str) -> String {
    let n_chars = line.chars().count();
    if n_chars <= MAX_LINE_CHARS {
        return format!("…{}", clean_line(line));
    }
    let tail: String = line.chars().skip(n_chars - MAX_LINE_CHARS).collect();
    format!("…{}", clean_line(&tail))
}

/// `line` made safe for a terminal: control characters escaped (`\t` as spaces, `\r` and
/// escapes as `\x1b`…), cut at [`MAX_LINE_CHARS`] characters.
pub(crate) fn clean_line(line: &str) -> String {
    clean_line_to(line, MAX_LINE_CHARS)
}

/// The files a reuse put back from the blob store, after what the reuse says: `; restored
/// out/a.csv, out/b.csv` (each made safe for a terminal), or nothing when none was.
pub(crate) fn restored_text(restored: &[String]) -> String {
    if restored.is_empty() {
        return String::new();
    }
    let paths: Vec<String> = restored.iter().map(|path| clean_line(path)).collect();
    format!("; restored {}", paths.join(", "))
}

/// [`clean_line`] with another length limit.
pub(crate) fn clean_line_to(line: &str, max_chars: usize) -> String {
    let mut cleaned = String::with_capacity(line.len().min(max_chars + 8));
    for (n_chars, character) in line.chars().enumerate() {
        if n_chars >= max_chars {
            cleaned.push('…');
            break;
        }
        match character {
            '\t' => cleaned.push_str("    "),
            control if control.is_control() => {
                cleaned.push_str(&control.escape_default().to_string());
            }
            other => cleaned.push(other),
        }
    }
    cleaned
}

/// The excerpt as lines indented by `indent`, then the command that prints the whole stream:
///
/// ```text
///     │ Traceback (most recent call last):
///     │ ValueError: bad row 7
///     full stderr: apollo logs RUN UNIT --stderr
/// ```
pub(crate) fn render(
    excerpt: &Excerpt,
    indent: &str,
    run_id: &str,
    unit: &str,
    attempt: Option<u32>,
) -> String {
    let mut text = String::new();
    for line in &excerpt.lines {
        text.push_str(&format!("{indent}│ {line}\n"));
    }
    text.push_str(&format!(
        "{indent}full {}: {}",
        excerpt.stream,
        logs_command(run_id, unit, attempt, excerpt.stream)
    ));
    text
}

/// `apollo logs RUN UNIT [--attempt N] [--stderr]`, ready to paste.
pub(crate) fn logs_command(run_id: &str, unit: &str, attempt: Option<u32>, stream: &str) -> String {
    let mut command = format!("apollo logs {run_id} {}", shell_word(unit));
    if let Some(attempt) = attempt {
        command.push_str(&format!(" --attempt {attempt}"));
    }
    if stream == "stderr" {
        command.push_str(" --stderr");
    }
    command
}

/// `word` quoted for a POSIX shell when it needs to be.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/@%+=".contains(c))
        && !word.starts_with('-');
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt_dir(stderr: &str, stdout: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if !stderr.is_empty() {
            std::fs::write(dir.path().join("stderr"), stderr).unwrap();
        }
        std::fs::write(dir.path().join("stdout"), stdout).unwrap();
        dir
    }

    #[test]
    fn the_excerpt_is_the_end_of_stderr_with_the_logs_command() {
        let traceback = "starting\nTraceback (most recent call last):\n  File \"etl.py\", line 7, in <module>\n\tload(rows)\nValueError: bad row 7\n\n";
        let dir = attempt_dir(traceback, "some progress\n");
        let excerpt = of_attempt(dir.path(), 3).unwrap();
        assert_eq!(excerpt.stream, "stderr");
        insta::assert_snapshot!(render(
            &excerpt,
            "           ",
            "20261201T030000Z-3f9a",
            "report",
            None
        ));
    }

    #[test]
    fn stdout_stands_in_when_stderr_is_empty() {
        let dir = attempt_dir("", "error: no rows\n");
        let excerpt = of_attempt(dir.path(), 8).unwrap();
        assert_eq!(excerpt.stream, "stdout");
        insta::assert_snapshot!(render(
            &excerpt,
            "  ",
            "20261201T030000Z-3f9a",
            "load data",
            Some(2)
        ));
    }

    #[test]
    fn nothing_written_is_no_excerpt() {
        let dir = attempt_dir("", "");
        assert_eq!(of_attempt(dir.path(), 8), None);
        assert_eq!(of_attempt(&dir.path().join("missing"), 8), None);
    }

    #[test]
    fn control_characters_are_escaped_and_long_lines_cut() {
        let line = format!("\x1b[2Jred\r{}", "x".repeat(300));
        let cleaned = clean_line(&line);
        assert!(
            !cleaned.contains('\x1b') && !cleaned.contains('\r'),
            "{cleaned}"
        );
        assert!(cleaned.starts_with("\\u{1b}[2Jred\\r"), "{cleaned}");
        assert!(cleaned.ends_with('…'));
        // The escape grows by 5 characters, `\r` by 1, and `…` ends the line.
        assert_eq!(cleaned.chars().count(), MAX_LINE_CHARS + 6 + 1);
    }

    #[test]
    fn a_last_line_longer_than_the_tail_read_is_shown_by_its_end() {
        let mut json = "{\"rows\":[".to_owned();
        json.push_str(&"1,".repeat(20_000));
        json.push_str("2]} error: bad row");
        let dir = attempt_dir(&json, "");
        let excerpt = of_attempt(dir.path(), 8).expect("not \"wrote nothing\"");
        assert_eq!(excerpt.lines.len(), 1);
        assert!(excerpt.lines[0].starts_with('…'), "{:?}", excerpt.lines);
        assert!(
            excerpt.lines[0].ends_with("2]} error: bad row"),
            "{:?}",
            excerpt.lines
        );

        let progress = format!("{}\r  done 100%\r", "\r 37%".repeat(5_000));
        let dir = attempt_dir(&progress, "");
        let excerpt = of_attempt(dir.path(), 8).unwrap();
        assert_eq!(excerpt.lines, vec!["…  done 100%"]);
    }

    #[test]
    fn a_huge_stderr_is_read_from_its_end_only() {
        let mut text = "early line\n".repeat(10_000);
        text.push_str("the last words\n");
        let dir = attempt_dir(&text, "");
        let excerpt = of_attempt(dir.path(), 2).unwrap();
        assert_eq!(excerpt.lines, vec!["early line", "the last words"]);
    }
}
