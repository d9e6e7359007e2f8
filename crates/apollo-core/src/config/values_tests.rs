//! Values in commands (DESIGN §18) as the loader writes them: quoted for their place in shell
//! commands, whole in argument vectors, never evaluated by `when:`, and given to units as
//! `APOLLO_PARAM_<NAME>`.

use std::path::Path;

use super::{LoadError, LoadOptions, Loaded, ParamOverride, load_str_with};
use crate::diagnostic::Diagnostic;
use crate::model::{Command, Unit};

const HOSTILE: &str = "a;touch PWNED $(touch PWNED) `touch PWNED` \"'\n";

fn load_with_params(yaml: &str, params: &[(&str, &str)]) -> Result<Loaded, Vec<Diagnostic>> {
    let options = LoadOptions::default()
        .params(
            params
                .iter()
                .map(|(name, value)| ParamOverride::text(*name, *value, "-p"))
                .collect(),
        )
        .env([("REGION".to_owned(), "eu west".to_owned())].into())
        .check_notes(true);
    match load_str_with(yaml, Path::new("/base/p.yaml"), &options) {
        Ok(loaded) => Ok(loaded),
        Err(LoadError::Invalid { diagnostics, .. }) => Err(diagnostics),
        Err(error) => panic!("{error}"),
    }
}

fn units(yaml: &str, params: &[(&str, &str)]) -> Vec<Unit> {
    match load_with_params(yaml, params) {
        Ok(loaded) => loaded.pipeline.units,
        Err(diagnostics) => panic!("{}", crate::diagnostic::render_all(&diagnostics)),
    }
}

fn shell(command: &Command) -> &str {
    match command {
        Command::Shell(script) => script,
        Command::Argv(_) => panic!("a shell command"),
    }
}

#[test]
fn a_plain_value_is_written_as_it_is() {
    let units = units(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    execute: ./x.sh ${params.x} \"${params.x}\" '${params.x}' --x=${params.x}\n",
        &[("x", "2026-11-30_a@b%c+d=e:f,g.h/i-j")],
    );
    let value = "2026-11-30_a@b%c+d=e:f,g.h/i-j";
    assert_eq!(
        shell(&units[0].execute),
        format!("./x.sh {value} \"{value}\" '{value}' --x={value}")
    );
}

#[test]
fn any_other_value_is_quoted_for_its_place() {
    let units = units(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    execute: ./x.sh ${params.x} \"v=${params.x}\" 'v=${params.x}' ${env.REGION}\n",
        &[("x", "it's $(id)")],
    );
    assert_eq!(
        shell(&units[0].execute),
        r#"./x.sh 'it'\''s $(id)' "v=it's \$(id)" 'v=''it'\''s $(id)''' 'eu west'"#
    );
}

#[test]
fn a_list_param_is_written_item_by_item() {
    let yaml = "params:\n  files: {type: list, default: [a]}\nunits:\n  - name: u\n    execute: ./x.sh ${params.files} \"${params.files}\"\n";
    let plain = units(yaml, &[("files", "a.csv,b.csv")]);
    assert_eq!(
        shell(&plain[0].execute),
        "./x.sh a.csv b.csv \"a.csv b.csv\""
    );
    let spaced = units(yaml, &[("files", r#"["with space.csv", "b;c.csv"]"#)]);
    assert_eq!(
        shell(&spaced[0].execute),
        "./x.sh 'with space.csv' 'b;c.csv' \"with space.csv b;c.csv\""
    );
}

#[test]
fn foreach_items_and_file_names_are_quoted() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["b;touch PWNED;.csv", "with space.csv", "plain.csv"] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    let path = dir.path().join("p.yaml");
    std::fs::write(
        &path,
        "units:\n  - name: u\n    foreach: \"*.csv\"\n    execute: ./x.sh ${item} > \"out/${item}.txt\"\n    outputs: [\"out/${item}.txt\"]\n",
    )
    .unwrap();
    let loaded = super::load(&path).unwrap();
    let commands: Vec<&str> = loaded
        .pipeline
        .units
        .iter()
        .map(|unit| shell(&unit.execute))
        .collect();
    assert_eq!(
        commands,
        [
            r#"./x.sh 'b;touch PWNED;.csv' > "out/b;touch PWNED;.csv.txt""#,
            r#"./x.sh plain.csv > "out/plain.csv.txt""#,
            r#"./x.sh 'with space.csv' > "out/with space.csv.txt""#,
        ]
    );
    // A path is one string already: written as it is.
    assert_eq!(loaded.pipeline.units[2].outputs, ["out/with space.csv.txt"]);
}

#[test]
fn list_form_commands_and_env_values_get_the_value_whole() {
    let units = units(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    execute: [./x.sh, \"${params.x}\", \"--x=${params.x}\"]\n    env: {X: \"${params.x}\"}\n",
        &[("x", HOSTILE)],
    );
    assert_eq!(
        units[0].execute,
        Command::Argv(vec![
            "./x.sh".to_owned(),
            HOSTILE.to_owned(),
            format!("--x={HOSTILE}")
        ])
    );
    assert_eq!(units[0].env["X"], HOSTILE);
}

#[test]
fn raw_writes_the_value_as_it_is_and_check_warns() {
    let loaded = load_with_params(
        "params:\n  flags: {type: string, default: a}\nunits:\n  - name: u\n    execute: ./x.sh ${params.flags:raw}\n",
        &[("flags", "-v --fast")],
    )
    .unwrap();
    assert_eq!(shell(&loaded.pipeline.units[0].execute), "./x.sh -v --fast");
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert_eq!(loaded.warnings[0].code, "raw-value");
    assert!(loaded.warnings[0].message.contains("${params.flags:raw}"));
}

#[test]
fn check_names_each_placeholder_whose_meaning_quoting_changed() {
    let loaded = load_with_params(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    execute: ./x.sh ${params.x} \"${params.x}\"\n",
        &[("x", "a b")],
    )
    .unwrap();
    let codes: Vec<&str> = loaded.warnings.iter().map(|w| w.code).collect();
    // Unquoted, `a b` was two words; inside "…" it meant the same before.
    assert_eq!(codes, ["quoting-changed"]);
    assert!(
        loaded.warnings[0]
            .hint
            .as_deref()
            .is_some_and(|hint| hint.contains("`type: list`") && hint.contains(":raw}")),
        "{:?}",
        loaded.warnings[0]
    );
    // A run does not repeat them (a load with warnings is never cached).
    let options = LoadOptions::default().params(vec![ParamOverride::text("x", "a b", "-p")]);
    let run = load_str_with(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    execute: ./x.sh ${params.x}\n",
        Path::new("/base/p.yaml"),
        &options,
    )
    .unwrap();
    assert!(run.warnings.is_empty());
}

#[test]
fn a_placeholder_that_cannot_be_placed_is_an_error_whatever_its_value() {
    for (execute, place) in [
        (
            "|\n      cat <<EOF\n      ${params.x}\n      EOF",
            "here-document",
        ),
        ("echo $(( ${params.x} + 1 ))", "arithmetic"),
        ("echo `echo ${params.x}`", "backticks"),
        ("echo ${X:-${params.x}}", "parameter expansion"),
        ("cat <<${params.x}\n      EOF", "does not follow"),
    ] {
        let yaml = format!(
            "params:\n  x: {{type: string, default: a}}\nunits:\n  - name: u\n    execute: {execute}\n"
        );
        let diagnostics = load_with_params(&yaml, &[("x", "1")]).unwrap_err();
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert_eq!(diagnostics[0].code, "unsafe-placeholder");
        assert!(diagnostics[0].message.contains(place), "{diagnostics:?}");
        assert_eq!(
            diagnostics[0].hint.as_deref(),
            Some("write `\"$APOLLO_PARAM_X\"` (the unit's environment holds the value) instead")
        );
    }
    // `${run.id}` is the shell's own `${APOLLO_RUN_ID}`: fine anywhere.
    let units = units(
        "units:\n  - name: u\n    execute: |\n      cat <<EOF\n      ${run.id}\n      EOF\n      echo '${run.id}'\n",
        &[],
    );
    assert_eq!(
        shell(&units[0].execute),
        "cat <<EOF\n${APOLLO_RUN_ID}\nEOF\necho ''\"${APOLLO_RUN_ID}\"''\n"
    );
}

#[test]
fn when_expressions_never_run_a_value() {
    for value in [
        "zzz\" != \"q",
        "$(touch PWNED)",
        "`touch PWNED`",
        "zzz; touch PWNED",
    ] {
        let units = units(
            "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    when: ${params.x} == \"zzz\"\n    execute: ./x.sh\n",
            &[("x", value)],
        );
        // Compared as text (the operator was found before the value was written): false, so
        // apollo skips the unit, the value only in the recorded condition, never code; its
        // command stays the user's.
        let condition = units[0].skip_when.as_deref().expect("skipped by when:");
        assert!(condition.contains(value), "{condition}");
        assert!(
            !format!("{:?}", units[0].execute).contains("exit 77"),
            "{:?}",
            units[0].execute
        );
    }
}

#[test]
fn units_receive_the_params_they_use_as_variables() {
    let units = units(
        "params:\n  day: {type: string, default: d}\n  regions: {type: list, default: [eu, us]}\n  unused: {type: string, default: u}\n  file_name: {type: string, default: f}\nunits:\n  - name: a\n    execute: ./a.sh ${params.day}\n  - name: b\n    foreach: ${params.regions}\n    execute: ./b.sh ${item}\n  - name: c\n    execute: ./c.sh \"$APOLLO_PARAM_FILE_NAME\"\n  - name: d\n    execute: ./d.sh\n    outputs: [\"out/${params.day}\"]\n  - name: e\n    execute: ./e.sh\n",
        &[],
    );
    let variables = |unit: &Unit| -> Vec<(String, String)> {
        unit.env
            .iter()
            .filter(|(name, _)| name.starts_with("APOLLO_PARAM_"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    };
    let pair = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    assert_eq!(variables(&units[0]), [pair("APOLLO_PARAM_DAY", "d")]);
    // An instance has its item; the whole list is not given to each.
    assert_eq!(variables(&units[1]), []);
    assert_eq!(variables(&units[3]), [pair("APOLLO_PARAM_FILE_NAME", "f")]);
    assert_eq!(variables(&units[4]), [pair("APOLLO_PARAM_DAY", "d")]);
    assert_eq!(variables(&units[5]), []);
}

#[test]
fn two_params_with_one_variable_and_a_reserved_env_name_are_errors() {
    let diagnostics = load_with_params(
        "params:\n  day: a\n  DAY: b\nenv: {APOLLO_PARAM_X: c}\nunits:\n  - name: u\n    execute: ./x.sh\n",
        &[],
    )
    .unwrap_err();
    let codes: Vec<&str> = diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["param-variable-clash", "reserved-variable"]);
    assert!(diagnostics[0].message.contains("APOLLO_PARAM_DAY"));
}

#[test]
fn when_commands_prepare_and_cleanup_are_quoted_too() {
    let units = units(
        "params:\n  x: {type: string, default: a}\nunits:\n  - name: u\n    when:\n      command: test ${params.x} != b\n    execute: ./x.sh\n  - name: v\n    prepare: ./p.sh ${params.x}\n    execute: ./x.sh\n    cleanup: ./c.sh ${params.x}\n",
        &[("x", "a;touch PWNED")],
    );
    // The condition is a command of its own; the unit's `execute` stays as written.
    assert_eq!(
        units[0].when_command,
        Some(Command::Shell("test 'a;touch PWNED' != b".to_owned()))
    );
    assert_eq!(shell(&units[0].execute), "./x.sh");
    assert_eq!(
        units[1].prepare,
        Some(Command::Shell("./p.sh 'a;touch PWNED'".to_owned()))
    );
    assert_eq!(
        units[1].cleanup,
        Some(Command::Shell("./c.sh 'a;touch PWNED'".to_owned()))
    );
}

/// A unit skipped by `when:` has its declared files set aside (nothing of it runs): its
/// `reuse: true` is not "reuse without outputs" (found by the view-agreement test).
#[test]
fn a_unit_skipped_by_when_keeps_its_reuse_without_an_error() {
    let units = units(
        "units:\n  - name: u\n    when: \"false\"\n    outputs: [out/u]\n    reuse: true\n    execute: ./x.sh\n",
        &[],
    );
    assert!(units[0].skip_when.is_some());
}
