//! The quoting of `shell.rs` checked against a real `/bin/sh`: for random values in every
//! context, the shell gets the value back exactly. (Test-only; the one place apollo-core
//! starts a process, allowed by `cargo xtask tidy` for that reason.)

use proptest::prelude::*;

use super::shell::{Placement, Value, is_plain, placements, quote};

/// Runs `script` with `/bin/sh -c` and returns what it printed.
fn shell_prints(script: &str) -> String {
    #[allow(clippy::disallowed_methods)] // A test checking what a real shell does.
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("/bin/sh runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn written(template: &str, value: &str) -> String {
    let found = placements(template);
    assert_eq!(found.len(), 1, "{template}");
    let (at, placement) = found[0];
    let quoted = quote(Value::Text(value), placement).unwrap();
    format!(
        "{}{}{}",
        &template[..at],
        quoted,
        &template[at + "${params.x}".len()..]
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the value, the shell prints it back exactly, in each place.
    #[test]
    fn the_shell_gets_the_value_back(value in "[ -~\n\té]{0,24}") {
        for template in [
            "printf %s ${params.x}",
            "printf %s \"${params.x}\"",
            "printf %s '${params.x}'",
            "v=\"$(printf %s. ${params.x})\"; printf %s \"${v%.}\"",
            "v=\"$(printf %s. \"${params.x}\")\"; printf %s \"${v%.}\"",
            "v=$(printf %s. '${params.x}'); printf %s \"${v%.}\"",
            "printf %s x${params.x}x",
            "v=\"$\"\"${params.x}\"; printf %s \"${v#?}\"",
            "case a in a) printf %s ${params.x};; esac",
            "v=\"$(case a in a) printf %s. ${params.x};; esac)\"; printf %s \"${v%.}\"",
            "# ${params.x}\nprintf %s ok",
        ] {
            let expected = if template.starts_with('#') {
                "ok".to_owned()
            } else if template.contains("x${") {
                format!("x{value}x")
            } else {
                value.clone()
            };
            let printed = shell_prints(&written(template, &value));
            prop_assert_eq!(printed, expected, "{}", template);
        }
    }

    /// A list param's items stay one word each.
    #[test]
    fn list_items_stay_words(items in prop::collection::vec("[ -~]{0,8}", 1..4)) {
        let quoted = quote(Value::List(&items), Placement::Bare).unwrap();
        let printed = shell_prints(&format!("printf '<%s>' {quoted}"));
        let expected: String = if items.iter().all(|item| is_plain(item)) {
            // As before: a plain list is written as it is, and split by the shell.
            items.iter().filter(|item| !item.is_empty()).map(|item| format!("<{item}>")).collect()
        } else {
            items.iter().map(|item| format!("<{item}>")).collect()
        };
        let expected = if expected.is_empty() { "<>".to_owned() } else { expected };
        prop_assert_eq!(printed, expected);
    }
}
