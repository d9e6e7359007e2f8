//! Values in shell commands (DESIGN §18, "Values in commands"): where each `${…}` stands in a
//! command run by `/bin/sh -c`, and how a value is written there so that it stays one value and
//! never becomes code.
//!
//! [`placements`] is a small POSIX-shell lexer over the command *as written*: it follows
//! quotes (`'…'`, `"…"`), command substitutions (`$(…)`, nested in quotes or not), comments,
//! and the places where a value cannot be written safely whatever it is: a here-document's
//! body, `$(( ))`, backticks, a parameter expansion `${VAR:-…}`, `$'…'`, and a `${…}` right
//! after a `\`. It only has to find the quoting state at each apollo placeholder; it does not
//! parse commands.
//!
//! [`quote`] writes a value for its place: a value made only of `[A-Za-z0-9_@%+=:,./-]` is
//! written as it is (so most commands, and their input hashes, are unchanged); any other is a
//! single-quoted word (`'…'`, a `'` as `'\''`) in a bare word; inside `"…"` its `" \ $ \``
//! are escaped; inside `'…'` the quote is closed, the value written as a single-quoted word and
//! the quote reopened. A list param is written item by item.
//!
//! Why not a crate: the quoting itself is one line, and its "as it is" set is fixed by the
//! design (a crate's differs, which would change commands and their hashes); no crate reports
//! the quoting state at a position of a POSIX shell command.

use std::borrow::Cow;

use super::interpolate::is_ours;

/// Where a placeholder stands in a shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// An unquoted word (`./x.sh ${params.day}`, `--day=${params.day}`).
    Bare,
    /// Inside `"…"`.
    Double,
    /// Inside `'…'`.
    Single,
    /// Inside a `#` comment: never run, but a newline in a value would end it.
    Comment,
    /// Somewhere no quoting is right for every value.
    Unsafe(Unsafe),
}

/// The places where apollo cannot write a value safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsafe {
    /// The body of a here-document (`<<EOF` … `EOF`): a line equal to its end marker ends it.
    HereDocument,
    /// `$(( … ))`: the value would be evaluated as arithmetic.
    Arithmetic,
    /// `` `…` ``: backslashes and quotes mean something else there.
    Backticks,
    /// A parameter expansion such as `${VAR:-…}`: quotes inside it mean different things to
    /// different shells.
    ParameterExpansion,
    /// `$'…'`: backslash escapes are interpreted there.
    AnsiQuote,
    /// Right after a `\`, which would escape the first character written.
    Escaped,
    /// Somewhere the lexer does not follow (a here-document's end marker, an escape inside
    /// `$'…'`).
    Unrecognised,
}

impl Unsafe {
    /// The place, for messages: "inside …".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Unsafe::HereDocument => "inside a here-document (`<<EOF`)",
            Unsafe::Arithmetic => "inside an arithmetic expansion `$(( ))`",
            Unsafe::Backticks => "inside backticks",
            Unsafe::ParameterExpansion => "inside a shell parameter expansion `${VAR…}`",
            Unsafe::AnsiQuote => "inside `$'…'`",
            Unsafe::Escaped => "right after a `\\`",
            Unsafe::Unrecognised => {
                "in a part apollo does not follow (such as a here-document's end marker)"
            }
        }
    }
}

/// One frame of the lexer's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// The top level, or the inside of `$( … )`; `parens` counts `(` opened inside it, `cases`
    /// the `case` commands open in it (whose patterns end with a `)` that closes nothing).
    Bare {
        parens: u32,
        cases: u32,
    },
    Double,
    Single,
    Comment,
    Backticks,
    Arithmetic {
        parens: u32,
    },
    Parameter {
        braces: u32,
    },
    AnsiQuote,
}

/// A here-document announced on the current line: its end marker, and whether leading tabs
/// are stripped (`<<-`).
struct PendingHereDocument {
    marker: String,
    strip_tabs: bool,
}

/// The byte offset of every apollo placeholder (`${params.x}`, `${item}`, …; not `$${…}`) in
/// `script`, in order, with where it stands.
pub(crate) fn placements(script: &str) -> Vec<(usize, Placement)> {
    Lexer {
        bytes: script.as_bytes(),
        text: script,
        index: 0,
        stack: vec![Frame::Bare {
            parens: 0,
            cases: 0,
        }],
        pending: Vec::new(),
        word_start: true,
        command_start: true,
        found: Vec::new(),
    }
    .run()
}

struct Lexer<'t> {
    bytes: &'t [u8],
    text: &'t str,
    index: usize,
    stack: Vec<Frame>,
    pending: Vec<PendingHereDocument>,
    /// Whether the next byte in a bare frame starts a word (a `#` there starts a comment).
    word_start: bool,
    /// Whether the next word in a bare frame is in command position (where `case` and
    /// `esac` are keywords).
    command_start: bool,
    found: Vec<(usize, Placement)>,
}

impl Lexer<'_> {
    fn run(mut self) -> Vec<(usize, Placement)> {
        while self.index < self.bytes.len() {
            self.step();
        }
        self.found
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.index + ahead).copied()
    }

    fn top(&self) -> Frame {
        self.stack.last().copied().unwrap_or(Frame::Bare {
            parens: 0,
            cases: 0,
        })
    }

    /// The length of an apollo placeholder starting at `at` (`${ours}`), if one does.
    fn placeholder_at(&self, at: usize) -> Option<usize> {
        let rest = self.text.get(at..)?;
        let body = rest.strip_prefix("${")?;
        let close = body.find('}')?;
        is_ours(&body[..close]).then_some(close + 3)
    }

    /// Where a placeholder at the current position stands.
    fn placement(&self) -> Placement {
        let innermost_unsafe = self.stack.iter().rev().find_map(|frame| match frame {
            Frame::Backticks => Some(Unsafe::Backticks),
            Frame::Arithmetic { .. } => Some(Unsafe::Arithmetic),
            Frame::Parameter { .. } => Some(Unsafe::ParameterExpansion),
            Frame::AnsiQuote => Some(Unsafe::AnsiQuote),
            _ => None,
        });
        if let Some(kind) = innermost_unsafe {
            return Placement::Unsafe(kind);
        }
        match self.top() {
            Frame::Double => Placement::Double,
            Frame::Single => Placement::Single,
            Frame::Comment => Placement::Comment,
            _ => Placement::Bare,
        }
    }

    /// At a `$`: an apollo placeholder (recorded), `$${…}` or `$$` (skipped); `true` if it
    /// was one of those.
    fn dollar_of_ours(&mut self, placement: Placement) -> bool {
        if self.peek(1) == Some(b'$') {
            // `$${params.x}` is a literal `${params.x}` for the shell; `$$` its pid.
            self.index += match self.placeholder_at(self.index + 1) {
                Some(length) => 1 + length,
                None => 2,
            };
            return true;
        }
        if let Some(length) = self.placeholder_at(self.index) {
            self.found.push((self.index, placement));
            self.index += length;
            return true;
        }
        false
    }

    /// A `\` in a frame where it escapes the next byte: a placeholder right after it cannot
    /// be placed.
    fn backslash(&mut self) {
        if self.peek(1) == Some(b'$')
            && self.peek(2) != Some(b'$')
            && self.placeholder_at(self.index + 1).is_some()
        {
            self.index += 1;
            let placement = match self.placement() {
                Placement::Unsafe(kind) => Placement::Unsafe(kind),
                _ => Placement::Unsafe(Unsafe::Escaped),
            };
            self.dollar_of_ours(placement);
            return;
        }
        self.index += 2;
    }

    /// `$(`, `$((`, `${` (not ours) and `$'` open a frame; anything else after `$` is a
    /// parameter (`$#`, `$HOME`) and is skipped.
    fn dollar_of_the_shell(&mut self) {
        match (self.peek(1), self.peek(2)) {
            (Some(b'('), Some(b'(')) => {
                self.stack.push(Frame::Arithmetic { parens: 0 });
                self.index += 3;
            }
            (Some(b'('), _) => {
                self.stack.push(Frame::Bare {
                    parens: 0,
                    cases: 0,
                });
                self.word_start = true;
                self.command_start = true;
                self.index += 2;
            }
            (Some(b'{'), _) => {
                self.stack.push(Frame::Parameter { braces: 0 });
                self.index += 2;
            }
            (Some(b'\''), _) if matches!(self.top(), Frame::Bare { .. }) => {
                self.stack.push(Frame::AnsiQuote);
                self.index += 2;
            }
            // A parameter: `$HOME`, `$1`, `$#`, `$?`, … (its first character is skipped, so
            // that `$#` starts no comment).
            (Some(next), _)
                if next.is_ascii_alphanumeric()
                    || matches!(next, b'_' | b'@' | b'*' | b'#' | b'?' | b'-' | b'!') =>
            {
                self.index += 2;
            }
            // A `$` standing for itself (`"cost: $"`, `$"…"` in dash): what follows is read
            // as usual.
            _ => self.index += 1,
        }
    }

    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    fn step(&mut self) {
        let byte = self.bytes[self.index];
        if byte == b'$' {
            let placement = self.placement();
            if self.dollar_of_ours(placement) {
                self.word_start = false;
                return;
            }
        }
        match self.top() {
            Frame::Single => {
                if byte == b'\'' {
                    self.stack.pop();
                }
                self.index += 1;
            }
            Frame::AnsiQuote => match byte {
                b'\\' => self.index += 2,
                b'\'' => {
                    self.stack.pop();
                    self.index += 1;
                }
                _ => self.index += 1,
            },
            Frame::Comment => {
                if byte == b'\n' {
                    self.stack.pop();
                    // The newline ends the line for here-documents too.
                    self.newline();
                } else {
                    self.index += 1;
                }
            }
            Frame::Backticks => match byte {
                b'\\' => self.backslash(),
                b'`' => {
                    self.stack.pop();
                    self.index += 1;
                }
                _ => self.index += 1,
            },
            Frame::Arithmetic { parens } => {
                match byte {
                    b'(' => self.set_top(Frame::Arithmetic { parens: parens + 1 }),
                    b')' if parens == 0 && self.peek(1) == Some(b')') => {
                        self.stack.pop();
                        self.index += 1;
                    }
                    b')' => self.set_top(Frame::Arithmetic {
                        parens: parens.saturating_sub(1),
                    }),
                    b'$' => {
                        self.dollar_of_the_shell();
                        return;
                    }
                    b'`' => self.stack.push(Frame::Backticks),
                    _ => {}
                }
                self.index += 1;
            }
            Frame::Parameter { braces } => match byte {
                b'\\' => self.backslash(),
                b'}' => {
                    if braces == 0 {
                        self.stack.pop();
                    } else {
                        self.set_top(Frame::Parameter { braces: braces - 1 });
                    }
                    self.index += 1;
                }
                b'$' if self.peek(1) == Some(b'{') => {
                    self.set_top(Frame::Parameter { braces: braces + 1 });
                    self.index += 2;
                }
                b'$' => self.dollar_of_the_shell(),
                b'\'' => {
                    self.stack.push(Frame::Single);
                    self.index += 1;
                }
                b'"' => {
                    self.stack.push(Frame::Double);
                    self.index += 1;
                }
                b'`' => {
                    self.stack.push(Frame::Backticks);
                    self.index += 1;
                }
                _ => self.index += 1,
            },
            Frame::Double => match byte {
                b'\\' => self.backslash(),
                b'"' => {
                    self.stack.pop();
                    self.index += 1;
                }
                b'`' => {
                    self.stack.push(Frame::Backticks);
                    self.index += 1;
                }
                b'$' => self.dollar_of_the_shell(),
                _ => self.index += 1,
            },
            Frame::Bare { parens, cases } => self.bare(byte, parens, cases),
        }
    }

    fn set_top(&mut self, frame: Frame) {
        if let Some(top) = self.stack.last_mut() {
            *top = frame;
        }
    }

    /// Whether the word `keyword` starts at the current position (and ends there).
    fn keyword_here(&self, keyword: &str) -> bool {
        self.text[self.index..].starts_with(keyword)
            && self
                .bytes
                .get(self.index + keyword.len())
                .is_none_or(|next| {
                    matches!(
                        next,
                        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b')' | b'('
                    )
                })
    }

    fn bare(&mut self, byte: u8, parens: u32, cases: u32) {
        let starts_word = self.word_start;
        if self.command_start && starts_word {
            // Reserved words after which a command follows: skipped, still in command
            // position.
            for keyword in [
                "then", "do", "else", "elif", "if", "while", "until", "time", "!", "{",
            ] {
                if self.keyword_here(keyword) {
                    self.index += keyword.len();
                    return;
                }
            }
            let change = if self.keyword_here("case") {
                Some(("case", cases + 1))
            } else if self.keyword_here("esac") {
                Some(("esac", cases.saturating_sub(1)))
            } else {
                None
            };
            if let Some((keyword, cases)) = change {
                self.set_top(Frame::Bare { parens, cases });
                self.word_start = false;
                self.command_start = false;
                self.index += keyword.len();
                return;
            }
        }
        self.word_start = matches!(
            byte,
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
        );
        if !matches!(byte, b' ' | b'\t') {
            self.command_start = matches!(byte, b'\n' | b';' | b'&' | b'|' | b'(' | b')');
        }
        match byte {
            b'\\' => self.backslash(),
            b'\'' => {
                self.stack.push(Frame::Single);
                self.index += 1;
            }
            b'"' => {
                self.stack.push(Frame::Double);
                self.index += 1;
            }
            b'`' => {
                self.stack.push(Frame::Backticks);
                self.index += 1;
            }
            b'$' => self.dollar_of_the_shell(),
            b'#' if starts_word => {
                self.stack.push(Frame::Comment);
                self.index += 1;
            }
            b'(' => {
                self.set_top(Frame::Bare {
                    parens: parens + 1,
                    cases,
                });
                self.index += 1;
            }
            b')' => {
                if parens == 0 && cases == 0 && self.stack.len() > 1 {
                    // The end of a `$( … )`.
                    self.stack.pop();
                    self.word_start = false;
                } else {
                    // A subshell's end, or a `case` pattern's.
                    self.set_top(Frame::Bare {
                        parens: parens.saturating_sub(1),
                        cases,
                    });
                }
                self.index += 1;
            }
            b'<' if self.peek(1) == Some(b'<') => self.here_document_operator(),
            b'\n' => self.newline(),
            _ => self.index += 1,
        }
    }

    /// At `<<`: notes the here-document it announces (`<<<`, a here-string, is not one).
    fn here_document_operator(&mut self) {
        self.index += 2;
        if self.peek(0) == Some(b'<') {
            self.index += 1;
            return;
        }
        let strip_tabs = self.peek(0) == Some(b'-');
        if strip_tabs {
            self.index += 1;
        }
        while matches!(self.peek(0), Some(b' ' | b'\t')) {
            self.index += 1;
        }
        // The end marker: a word, its quotes removed. (A placeholder in it is not recorded:
        // an unrecorded placeholder cannot be placed.)
        let mut marker = String::new();
        let mut quote: Option<u8> = None;
        while let Some(byte) = self.peek(0) {
            match quote {
                Some(open) if byte == open => quote = None,
                Some(_) => marker.push(char::from(byte)),
                None => match byte {
                    b'\'' | b'"' => quote = Some(byte),
                    b'\\' => {
                        if let Some(next) = self.peek(1) {
                            marker.push(char::from(next));
                            self.index += 1;
                        }
                    }
                    b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')' => {
                        break;
                    }
                    _ => marker.push(char::from(byte)),
                },
            }
            self.index += 1;
        }
        // (A marker holding non-ASCII bytes is compared byte by byte below.)
        self.pending
            .push(PendingHereDocument { marker, strip_tabs });
        self.word_start = false;
    }

    /// At an unquoted newline: the bodies of the here-documents announced on the line follow.
    fn newline(&mut self) {
        self.index += 1;
        self.word_start = true;
        self.command_start = true;
        let pending = std::mem::take(&mut self.pending);
        for here_document in pending {
            loop {
                if self.index >= self.bytes.len() {
                    return;
                }
                let line_end = self.text[self.index..]
                    .find('\n')
                    .map_or(self.bytes.len(), |offset| self.index + offset);
                let line = &self.text[self.index..line_end];
                let compared = if here_document.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if compared.as_bytes() == marker_bytes(&here_document.marker).as_slice() {
                    self.index = (line_end + 1).min(self.bytes.len());
                    break;
                }
                let mut at = self.index;
                // (A `${…}` may run past the line's end: `at` then passes it.)
                while at < line_end
                    && let Some(offset) = self.text[at..line_end].find('$')
                {
                    at += offset;
                    if self.text[at..].starts_with("$$") {
                        at += match self.placeholder_at(at + 1) {
                            Some(length) => 1 + length,
                            None => 2,
                        };
                    } else if let Some(length) = self.placeholder_at(at) {
                        self.found
                            .push((at, Placement::Unsafe(Unsafe::HereDocument)));
                        at += length;
                    } else {
                        at += 1;
                    }
                }
                self.index = (line_end + 1).min(self.bytes.len());
            }
        }
    }
}

/// The marker's bytes as written in the script (it was collected byte by byte).
fn marker_bytes(marker: &str) -> Vec<u8> {
    marker.chars().map(|c| c as u32 as u8).collect()
}

/// Whether `value` is written as it is wherever it stands.
pub(crate) fn is_plain(value: &str) -> bool {
    value.bytes().all(|byte| {
        byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'_' | b'@' | b'%' | b'+' | b'=' | b':' | b',' | b'.' | b'/' | b'-'
            )
    })
}

/// `value` as one single-quoted shell word (`'` written `'\''`).
pub(crate) fn single_quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `value` escaped for the inside of `"…"`.
fn double_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 4);
    for c in value.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A value to write: one text, or a list param's items.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'v> {
    Text(&'v str),
    List(&'v [String]),
}

impl<'v> Value<'v> {
    fn is_plain(&self) -> bool {
        match self {
            Value::Text(text) => is_plain(text),
            Value::List(items) => items.iter().all(|item| is_plain(item)),
        }
    }

    /// The value as `${…}` wrote it before quoting: a list's items joined by spaces.
    pub(crate) fn raw(self) -> Cow<'v, str> {
        match self {
            Value::Text(text) => Cow::Borrowed(text),
            Value::List(items) => Cow::Owned(items.join(" ")),
        }
    }
}

/// `value` written for `placement`; `Err` where it cannot be (an unsafe place).
pub(crate) fn quote<'v>(value: Value<'v>, placement: Placement) -> Result<Cow<'v, str>, Unsafe> {
    if let Placement::Unsafe(kind) = placement {
        return Err(kind);
    }
    if value.is_plain() {
        return Ok(value.raw());
    }
    let items: Vec<&str> = match value {
        Value::Text(text) => vec![text],
        Value::List(items) => items.iter().map(String::as_str).collect(),
    };
    Ok(Cow::Owned(match placement {
        Placement::Bare => items
            .iter()
            .map(|item| single_quoted(item))
            .collect::<Vec<_>>()
            .join(" "),
        Placement::Double => items
            .iter()
            .map(|item| double_escaped(item))
            .collect::<Vec<_>>()
            .join(" "),
        // Still one word, as the quotes around it meant.
        Placement::Single => format!("'{}'", single_quoted(&items.join(" "))),
        // A comment is never run; only a line break would end it early.
        Placement::Comment => items.join(" ").replace(['\n', '\r'], " "),
        Placement::Unsafe(kind) => return Err(kind),
    }))
}

/// Whether writing `value` quoted at `placement` means something else than writing it as it
/// is did before (DESIGN §18, upgrading): unquoted, it was split into words, globbed or run;
/// inside `"…"` it was expanded; inside `'…'` a `'` ended the quote.
pub(crate) fn meaning_changed(value: &str, placement: Placement) -> bool {
    match placement {
        Placement::Bare => value.chars().any(|c| {
            c.is_whitespace()
                || matches!(
                    c,
                    '*' | '?'
                        | '['
                        | ']'
                        | '\''
                        | '"'
                        | '\\'
                        | '$'
                        | '`'
                        | ';'
                        | '&'
                        | '|'
                        | '<'
                        | '>'
                        | '('
                        | ')'
                        | '~'
                        | '#'
                )
        }),
        Placement::Double => value.contains(['"', '\\', '$', '`']),
        Placement::Single => value.contains('\''),
        Placement::Comment | Placement::Unsafe(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn placed(script: &str) -> Vec<Placement> {
        placements(script)
            .into_iter()
            .map(|(_, placement)| placement)
            .collect()
    }

    #[test]
    fn quotes_and_substitutions_are_followed() {
        use Placement::*;
        assert_eq!(
            placed(r#"./x.sh ${params.a} --b=${params.b} "${params.c}" '${params.d}'"#),
            [Bare, Bare, Double, Single]
        );
        assert_eq!(
            placed(r#"echo "x $(echo ${params.a} "${params.b}") y" $(cat '${item}')"#),
            [Bare, Double, Single]
        );
        assert_eq!(
            placed(r#"echo "it's ${params.a}" 'say "${params.b}"' \' ${params.c}"#),
            [Double, Single, Bare]
        );
        assert_eq!(
            placed("echo a#b ${params.a} # note ${params.b}\necho ${params.c} $# ${params.d}"),
            [Bare, Comment, Bare, Bare]
        );
        assert_eq!(
            placed("f() { echo ${params.a}; }; (cd x && echo ${params.b})"),
            [Bare, Bare]
        );
        assert_eq!(
            placed("echo \"cost: $\" ${params.a} $\"${params.b}\" $# ${params.c}"),
            [Bare, Double, Bare],
            "a `$` standing for itself opens nothing and skips nothing"
        );
        // `$${…}` is a literal, `$$` the shell's pid: neither is a placeholder.
        assert_eq!(
            placed("echo $${params.a} $$ ${params.b} $$${params.c}"),
            [Bare, Bare]
        );
        assert_eq!(placed("echo $HOME ${HOME} ${x:-a.b}"), []);
    }

    #[test]
    fn unsafe_places_are_found() {
        let unsafe_at = Placement::Unsafe;
        assert_eq!(
            placed("cat <<EOF\nday=${params.a}\nEOF\necho ${params.b}"),
            [unsafe_at(Unsafe::HereDocument), Placement::Bare]
        );
        assert_eq!(
            placed("cat <<-'END' > x; echo ${params.a}\n\tv=${params.b}\n\tEND\necho ${params.c}"),
            [
                Placement::Bare,
                unsafe_at(Unsafe::HereDocument),
                Placement::Bare
            ]
        );
        assert_eq!(placed("cat <<< ${params.a}"), [Placement::Bare]);
        assert_eq!(
            placed("echo $(( ${params.a} + (2 * 3) )) ${params.b}"),
            [unsafe_at(Unsafe::Arithmetic), Placement::Bare]
        );
        assert_eq!(
            placed("echo `echo ${params.a}` \"`echo ${params.b}`\" ${params.c}"),
            [
                unsafe_at(Unsafe::Backticks),
                unsafe_at(Unsafe::Backticks),
                Placement::Bare
            ]
        );
        assert_eq!(
            placed(r#"echo ${X:-${params.a}} "${Y:-'${params.b}'}" ${Z#${params.c}} ${params.d}"#),
            [
                unsafe_at(Unsafe::ParameterExpansion),
                unsafe_at(Unsafe::ParameterExpansion),
                unsafe_at(Unsafe::ParameterExpansion),
                Placement::Bare
            ]
        );
        assert_eq!(
            placed(r#"echo \${params.a} "\${params.b}" \\${params.c}"#),
            [
                unsafe_at(Unsafe::Escaped),
                unsafe_at(Unsafe::Escaped),
                Placement::Bare
            ]
        );
        assert_eq!(
            placed(
                "x=\"$(case ${params.a} in a) echo ${params.b};; (b) echo;; esac)\" ${params.c}"
            ),
            [Placement::Bare, Placement::Bare, Placement::Bare]
        );
        assert_eq!(
            placed("x=\"$(echo case) ${params.a}\"; if true; then case a in b) ;; esac; fi"),
            [Placement::Double],
            "`case` as an argument is no keyword"
        );
        assert_eq!(
            placed("cat <<${params.a}\nbody\n"),
            [],
            "a marker's placeholder is not placed (interpolation refuses it)"
        );
        assert_eq!(
            placed(r"echo $'a\'${params.a}' ${params.b}"),
            [unsafe_at(Unsafe::AnsiQuote), Placement::Bare]
        );
    }

    #[test]
    fn values_are_written_for_their_place() {
        let text = |value| Value::Text(value);
        assert_eq!(
            quote(text("2026-11-30"), Placement::Bare).unwrap(),
            "2026-11-30"
        );
        assert_eq!(
            quote(text("a=b,c:d@e%f+g/h.i_j"), Placement::Bare).unwrap(),
            "a=b,c:d@e%f+g/h.i_j"
        );
        assert_eq!(quote(text(""), Placement::Bare).unwrap(), "");
        assert_eq!(
            quote(text("a;touch PWNED"), Placement::Bare).unwrap(),
            "'a;touch PWNED'"
        );
        assert_eq!(quote(text("it's"), Placement::Bare).unwrap(), r"'it'\''s'");
        assert_eq!(
            quote(text(r#"a "$b" `c` \d"#), Placement::Double).unwrap(),
            r#"a \"\$b\" \`c\` \\d"#
        );
        assert_eq!(quote(text("a b"), Placement::Single).unwrap(), "''a b''");
        assert_eq!(quote(text("a\nb"), Placement::Comment).unwrap(), "a b");
        let items = ["eu".to_owned(), "us west".to_owned()];
        assert_eq!(
            quote(Value::List(&items), Placement::Bare).unwrap(),
            "'eu' 'us west'"
        );
        assert_eq!(
            quote(Value::List(&items[..1]), Placement::Bare).unwrap(),
            "eu"
        );
        assert_eq!(
            quote(Value::List(&items), Placement::Double).unwrap(),
            "eu us west"
        );
        assert_eq!(
            quote(text("x"), Placement::Unsafe(Unsafe::Backticks)),
            Err(Unsafe::Backticks)
        );
    }

    /// One layer around a placeholder, outside in.
    #[derive(Debug, Clone, Copy)]
    enum Layer {
        Double,
        Substitution,
        Case,
        Word,
    }

    /// Fragments before the command that the lexer must not be misled by.
    const PREFIXES: &[&str] = &[
        "",
        "echo \"$\" >/dev/null; ",
        ": '\"' ; ",
        ": \"'\" ; ",
        ": \\\" \\' ; ",
        "# a comment ' \" ( `\n",
        ": $# $? $$ \"$@\" ; ",
        ": $(echo ')' \")\") ; ",
        "case x in (x) : ;; y) : ;; esac; ",
        "echo case ) 2>/dev/null; ",
        ": ${HOME:-'}'} \"${HOME#\"}\"}\" ; ",
        ": $(( 1 + (2) )) ; ",
        ": `echo \"'\"` ; ",
        ": <<'EOF'\n' \" $HOME ${x:-(} `\nEOF\n",
        ": <<-EOF\n\t' \" $(\n\tEOF\n",
        "f() { : ; } ; ",
    ];

    /// A command with one placeholder in `layers` (and `single` quotes innermost), and where it
    /// stands.
    fn nested(prefix: &str, layers: &[Layer], single: bool) -> (String, Placement) {
        let mut placement = Placement::Bare;
        let mut open = String::new();
        let mut close = String::new();
        for layer in layers {
            let (before, after) = match layer {
                Layer::Double if placement == Placement::Double => continue,
                Layer::Double => {
                    placement = Placement::Double;
                    ("\"<", ">\"")
                }
                Layer::Substitution => {
                    placement = Placement::Bare;
                    ("$(printf %s. ", ")")
                }
                Layer::Case => {
                    placement = Placement::Bare;
                    ("$(case a in a) printf %s ", ";; esac)")
                }
                Layer::Word => ("x", "y"),
            };
            open.push_str(before);
            close.insert_str(0, after);
        }
        if single {
            open.push('\'');
            close.insert(0, '\'');
            if placement == Placement::Bare {
                placement = Placement::Single;
            }
        }
        (
            format!("{prefix}printf '<%s>' {open}${{params.x}}{close}"),
            placement,
        )
    }

    proptest! {
        /// The lexer places a placeholder where the shell reads it, through nested quotes,
        /// substitutions, `case` and misleading text before it.
        #[test]
        fn placeholders_are_placed_where_the_shell_reads_them(
            prefix in prop::sample::select(PREFIXES),
            layers in prop::collection::vec(
                prop::sample::select(&[Layer::Double, Layer::Substitution, Layer::Case, Layer::Word][..]),
                0..5,
            ),
            single in any::<bool>(),
        ) {
            let (script, expected) = nested(prefix, &layers, single);
            let found = placements(&script);
            prop_assert_eq!(found.len(), 1, "{}", script);
            prop_assert_eq!(found[0].1, expected, "{}", script);
        }

        #[test]
        fn the_lexer_never_panics(script in "(\\$|\\{|\\}|\\(|\\)|'|\"|`|<<|EOF|\\\\|#|\n|[a-z.]|params.x| |é){0,40}") {
            let _ = placements(&script);
        }
    }
}
