//! A value never becomes code (issue 36 item 10, DESIGN §18): hostile param values and file
//! names reach the unit exactly, through every way a command can take them, and run nothing.

use crate::support::Apollo;

/// Each unit writes the value it received, taken a different way, to `out/<unit>`.
const PIPELINE: &str = r#"params:
  x: {type: string, default: a}
units:
  - name: bare
    execute: mkdir -p out && printf %s ${params.x} > out/bare
  - name: double
    execute: mkdir -p out && printf %s "${params.x}" > out/double
  - name: single
    execute: mkdir -p out && printf %s '${params.x}' > out/single
  - name: substituted
    execute: mkdir -p out && v="$(printf %s. ${params.x})" && printf %s "${v%.}" > out/substituted
  - name: list_form
    execute: [/bin/sh, -c, 'mkdir -p out && printf %s "$1" > out/list_form', sh, "${params.x}"]
  - name: variable
    execute: mkdir -p out && printf %s "$APOLLO_PARAM_X" > out/variable
"#;

const UNITS: [&str; 6] = [
    "bare",
    "double",
    "single",
    "substituted",
    "list_form",
    "variable",
];

fn assert_nothing_ran(apollo: &Apollo) {
    let pwned: Vec<_> = walk(apollo.root())
        .into_iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("PWNED"))
        })
        .collect();
    assert!(pwned.is_empty(), "a value ran as code: {pwned:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[test]
fn a_hostile_param_reaches_every_unit_exactly_and_runs_nothing() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    for value in [
        "a;touch PWNED",
        "$(touch PWNED1)",
        "`touch PWNED2`",
        "a\ntouch PWNED3\n",
        "it's \"q\" \\ $HOME * ~ #x |touch PWNED4",
        "'; touch PWNED5; '",
    ] {
        let option = format!("x={value}");
        apollo
            .args(&["run", "--fresh", "-p", &option])
            .run()
            .code(0);
        assert_nothing_ran(&apollo);
        for unit in UNITS {
            let seen = std::fs::read_to_string(apollo.path(&format!("out/{unit}"))).unwrap();
            assert_eq!(seen, value, "unit `{unit}` saw another value");
        }
    }
}

#[test]
fn a_foreach_over_hostile_file_names_runs_nothing_and_sees_each_name() {
    let mut apollo = Apollo::new();
    for name in [
        "b;touch PWNED;.csv",
        "with space.csv",
        "$(touch PWNED2).csv",
    ] {
        apollo.file(&format!("data/{name}"), name);
    }
    apollo.config(
        r#"units:
  - name: copy
    foreach: data/*.csv
    execute: cat ${item} > "${item}.seen" && printf %s ${unit.name} > "${item}.unit"
"#,
    );
    apollo.args(&["run"]).run().code(0);
    assert_nothing_ran(&apollo);
    for name in [
        "b;touch PWNED;.csv",
        "with space.csv",
        "$(touch PWNED2).csv",
    ] {
        let seen = std::fs::read_to_string(apollo.path(&format!("data/{name}.seen"))).unwrap();
        assert_eq!(seen, name);
        let unit = std::fs::read_to_string(apollo.path(&format!("data/{name}.unit"))).unwrap();
        assert!(unit.starts_with("copy["), "{unit}");
    }
}

#[test]
fn check_refuses_a_value_in_a_here_document_and_warns_about_raw_and_changed_quoting() {
    let mut apollo = Apollo::new();
    apollo.config(
        "params:\n  day: {type: string, default: \"2026-11-30\"}\nunits:\n  - name: report\n    execute: |\n      cat <<EOF\n      ${params.day}\n      EOF\n",
    );
    let refused = apollo.args(&["check"]).run();
    refused.code(2);
    assert!(
        refused
            .stderr
            .contains("`${params.day}` stands inside a here-document")
            && refused.stderr.contains("\"$APOLLO_PARAM_DAY\""),
        "{}",
        refused.stderr
    );
    apollo.args(&["run"]).run().code(2);

    apollo.config(
        "params:\n  files: {type: string, default: \"a b\"}\n  flags: {type: string, default: -v}\nunits:\n  - name: merge\n    execute: echo ${params.files} ${params.flags:raw}\n",
    );
    let warned = apollo.args(&["check"]).run();
    warned.code(0);
    assert!(
        warned
            .stderr
            .contains("the value of `${params.files}` is now quoted")
            && warned
                .stderr
                .contains("`${params.flags:raw}` writes its value"),
        "{}",
        warned.stderr
    );
    // A run says nothing of it: `check` is where an upgrade is reviewed.
    let ran = apollo.args(&["run"]).run();
    ran.code(0);
    assert!(!ran.stderr.contains("now quoted"), "{}", ran.stderr);
    let logs = apollo.args(&["logs", "latest", "merge"]).run();
    assert!(logs.stdout.contains("a b -v"), "{}", logs.stdout);
}

/// A unit whose command changed only because a value is now quoted (as after an upgrade) says
/// so when it reruns, rather than an unexplained "command execute changed".
#[test]
fn explain_says_quoting_changed_when_only_quoting_changed() {
    let mut apollo = Apollo::new();
    // The old apollo's command, written as it was: `:raw` writes what it wrote.
    let pipeline = |placeholder: &str| {
        format!(
            "params:\n  files: {{type: string, default: \"a b\"}}\nunits:\n  - name: merge\n    execute: bin/count merge {placeholder}\n  - name: report\n    deps: [merge]\n    execute: test -e markers/go\n"
        )
    };
    apollo.config(&pipeline("${params.files:raw}"));
    apollo.args(&["run"]).run().code(1);
    apollo.config(&pipeline("${params.files}"));
    apollo.file("markers/go", "");
    let resumed = apollo.args(&["run", "--explain"]).run();
    resumed.code(0);
    assert!(
        resumed.stdout.contains(
            "command execute changed (quoting changed: values are now quoted, see UPGRADING.md)"
        ),
        "{}",
        resumed.stdout
    );
    assert_eq!(apollo.count("merge"), 2);
}

/// `apollo diff` between a run of the old command and one of the quoted command says the
/// command changed by quoting alone.
#[test]
fn diff_says_quoting_changed_when_only_quoting_changed() {
    let mut apollo = Apollo::new();
    let pipeline = |placeholder: &str| {
        format!(
            "params:\n  files: {{type: string, default: \"a b\"}}\nunits:\n  - name: merge\n    execute: bin/count merge {placeholder}\n  - name: other\n    execute: bin/count other\n"
        )
    };
    apollo.config(&pipeline("${params.files:raw}"));
    apollo.args(&["run"]).run().code(0);
    apollo.config(&pipeline("${params.files}"));
    apollo.args(&["run"]).run().code(0);
    let diff = apollo.args(&["diff", "latest~1", "latest"]).run();
    assert!(
        diff.stdout.contains(
            "command execute changed (quoting changed: values are now quoted, see UPGRADING.md)"
        ),
        "{}",
        diff.stdout
    );
    let json = apollo
        .args(&["diff", "latest~1", "latest", "--format", "json"])
        .run();
    assert!(
        json.stdout.contains(r#""quoting_only": true"#),
        "{}",
        json.stdout
    );

    // A command changed otherwise says what it was and what it is.
    apollo.config(&pipeline("${params.files} c"));
    apollo.args(&["run"]).run().code(0);
    let diff = apollo.args(&["diff", "latest~1", "latest"]).run();
    assert!(
        diff.stdout.contains(
            "command execute changed: `bin/count merge 'a b'` → `bin/count merge 'a b' c`"
        ),
        "{}",
        diff.stdout
    );
    assert!(!diff.stdout.contains("quoting changed"), "{}", diff.stdout);
}

/// `apollo diff` shows a changed command of several lines line by line (`-` for run A's
/// line, `+` for run B's, a space for a line both have), not as its first line twice; the
/// JSON document keeps both commands whole (issue 35).
#[test]
fn diff_shows_a_changed_multi_line_command_line_by_line() {
    let mut apollo = Apollo::new();
    let pipeline = |second: &str| {
        format!("units:\n  - name: two_lines\n    execute: |\n      echo one\n      {second}\n")
    };
    apollo.config(&pipeline("echo two"));
    apollo.args(&["run"]).run().code(0);
    apollo.config(&pipeline("echo three"));
    apollo.args(&["run"]).run().code(0);

    let diff = apollo.args(&["diff", "latest~1", "latest"]).run();
    diff.code(1);
    let lines: Vec<&str> = diff.stdout.lines().collect();
    let at = |text: &str| {
        (lines.iter())
            .position(|line| line.trim_start() == text)
            .unwrap_or_else(|| panic!("no line {text:?}:\n{}", diff.stdout))
    };
    let (kept, removed, added) = (at("echo one"), at("- echo two"), at("+ echo three"));
    assert_eq!((removed, added), (kept + 1, kept + 2), "{}", diff.stdout);
    // The kept line's text lines up with the changed lines' (its prefix is a space).
    let column = |idx: usize, text: &str| lines[idx].find(text);
    assert_eq!(column(kept, "echo one"), column(removed, "echo two"));
    assert_eq!(column(kept, "echo one"), column(added, "echo three"));
    assert!(
        diff.stdout.contains("command execute changed"),
        "{}",
        diff.stdout
    );
    assert!(
        !diff.stdout.contains('→'),
        "not the one-line form: {}",
        diff.stdout
    );

    let json = apollo
        .args(&["diff", "latest~1", "latest", "--format", "json"])
        .run();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let unit = &json["units"][0];
    assert_eq!(unit["reasons"][0], "command execute changed", "{json}");
    let change = &unit["input_changes"][0];
    assert_eq!(change["before"], "echo one\necho two\n", "{json}");
    assert_eq!(change["after"], "echo one\necho three\n", "{json}");
}
