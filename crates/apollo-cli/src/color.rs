//! Colour on a terminal, the conventional way: `--color auto|always|never`, and with `auto`
//! (the default) `NO_COLOR` (no colour), `CLICOLOR_FORCE` (colour even into a pipe),
//! `CLICOLOR=0`, `TERM=dumb` and whether the stream is a terminal, as anstream decides them.
//! Styles are anstyle's; text is coloured only where [`stdout`] or [`stderr`] says so, so
//! what goes to a file or a pipe stays plain.

use std::sync::OnceLock;

use anstream::ColorChoice;
use anstyle::{AnsiColor, Style};

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorArg {
    /// Colour on a terminal, unless NO_COLOR is set (CLICOLOR_FORCE: also into pipes)
    #[default]
    Auto,
    /// Always colour
    Always,
    /// Never colour
    Never,
}

static STDOUT: OnceLock<bool> = OnceLock::new();
static STDERR: OnceLock<bool> = OnceLock::new();

/// Sets the choice for the whole process (once, from the command line).
pub(crate) fn init(arg: ColorArg) {
    match arg {
        ColorArg::Auto => {}
        ColorArg::Always => ColorChoice::Always.write_global(),
        ColorArg::Never => ColorChoice::Never.write_global(),
    }
}

/// Whether to colour what goes to stdout.
pub(crate) fn stdout() -> bool {
    *STDOUT.get_or_init(|| anstream::AutoStream::choice(&std::io::stdout()) != ColorChoice::Never)
}

/// Whether to colour what goes to stderr.
pub(crate) fn stderr() -> bool {
    *STDERR.get_or_init(|| anstream::AutoStream::choice(&std::io::stderr()) != ColorChoice::Never)
}

/// The style of a status word (`ok`, `FAILED`, `succeeded`, `running`, …).
pub(crate) fn status_style(status: &str) -> Style {
    let color = match status.trim() {
        "ok" | "succeeded" | "done" | "marked succeeded" => AnsiColor::Green,
        "FAILED" | "TIMEOUT" | "failed" | "timed_out" | "timed out" | "corrupt"
        | "marked failed" | "error:" => {
            return Style::new().fg_color(Some(AnsiColor::Red.into())).bold();
        }
        "skipped" | "upstream failed" | "upstream_failed" => AnsiColor::Cyan,
        "running" => AnsiColor::Blue,
        "stopped" | "interrupted" | "incomplete" | "unfinished" | "warning:" | "FLAKY" => {
            AnsiColor::Yellow
        }
        _ => return Style::new(),
    };
    Style::new().fg_color(Some(color.into()))
}

/// `text` in the style of `status` when `enabled`, else as it is. Padding belongs inside
/// `text`, so columns line up whether coloured or not.
pub(crate) fn paint(enabled: bool, status: &str, text: &str) -> String {
    let style = status_style(status);
    if enabled && style != Style::new() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_colours_only_when_enabled_and_keeps_padding_inside() {
        assert_eq!(paint(false, "FAILED", "FAILED  "), "FAILED  ");
        let painted = paint(true, "FAILED", "FAILED  ");
        assert!(
            painted.starts_with("\u{1b}[") && painted.contains("FAILED  "),
            "{painted:?}"
        );
        assert_eq!(paint(true, "whatever", "x"), "x");
    }
}
