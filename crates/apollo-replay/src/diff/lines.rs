//! A changed command of several lines, line by line: what `apollo diff` prints under the unit
//! (a one-line command reads better as `old → new`, see [`InputChange::describe`]).

use apollo_core::event::InputKind;

use super::InputChange;

/// Above this many lines on a side, the line diff (quadratic in the lines) is not computed:
/// every line of A is shown removed and every line of B added.
const MAX_LINES: usize = 2_000;

impl InputChange {
    /// A changed command of several lines (on either side) as a line diff: each line of run
    /// A's command missing from run B's prefixed `- `, each line only B has `+ `, and each line
    /// both have a space and a space. `None` for anything else: a one-line command (described
    /// as `old → new`), a command whose text was not read, or a change that is not a command.
    pub fn command_line_diff(&self) -> Option<Vec<String>> {
        if self.kind != InputKind::Command || self.quoting_only {
            return None;
        }
        let (before, after) = (self.before.as_deref()?, self.after.as_deref()?);
        if !is_multi_line(before) && !is_multi_line(after) {
            return None;
        }
        Some(line_diff(before, after))
    }
}

/// A changed one-line command's before and after, each cut to 60 characters; `None` when
/// either side has several lines (see [`InputChange::command_line_diff`]) or was not read.
pub(super) fn one_line_change(change: &InputChange) -> Option<(String, String)> {
    let (before, after) = (change.before.as_deref()?, change.after.as_deref()?);
    let cut = |command: &str| {
        let line = command.trim_end();
        let mut cut: String = line.chars().take(60).collect();
        if cut.len() < line.len() {
            cut.push('…');
        }
        cut
    };
    (!is_multi_line(before) && !is_multi_line(after)).then(|| (cut(before), cut(after)))
}

/// Whether `command` has more than one line (a final newline does not count).
fn is_multi_line(command: &str) -> bool {
    command.trim_end().contains('\n')
}

/// `a` and `b` compared line by line through their longest common subsequence of lines.
fn line_diff(a: &str, b: &str) -> Vec<String> {
    let a: Vec<&str> = a.trim_end().lines().collect();
    let b: Vec<&str> = b.trim_end().lines().collect();
    if a.len() > MAX_LINES || b.len() > MAX_LINES {
        let removed = a.iter().map(|line| format!("- {line}"));
        return removed
            .chain(b.iter().map(|line| format!("+ {line}")))
            .collect();
    }
    // common[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut common = vec![vec![0_usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut lines = Vec::with_capacity(a.len() + b.len());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push(format!("  {}", a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j == b.len() || (i < a.len() && common[i + 1][j] >= common[i][j + 1]) {
            lines.push(format!("- {}", a[i]));
            i += 1;
        } else {
            lines.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::line_diff;

    #[test]
    fn a_changed_second_line_is_removed_then_added_after_the_kept_first() {
        assert_eq!(
            line_diff("echo one\necho two\n", "echo one\necho three\n"),
            ["  echo one", "- echo two", "+ echo three"]
        );
    }

    #[test]
    fn added_and_removed_lines_keep_the_lines_around_them() {
        assert_eq!(
            line_diff("a\nb\nc", "a\nc\nd"),
            ["  a", "- b", "  c", "+ d"]
        );
        assert_eq!(line_diff("a", "a\nb"), ["  a", "+ b"]);
    }
}
