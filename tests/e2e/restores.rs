//! Outputs restored from the blob store are named (issue 35): a unit reused across runs whose
//! recorded output was deleted or changed on disk gets it back from the blob store, and its
//! `unit_reused` record, the run's progress line, `--explain`, `show` (text and JSON) and
//! `replay` say which files were put back.

use crate::reuse::{counts, ran_once};

#[test]
fn a_restored_output_is_named_by_the_record_the_run_explain_show_and_replay() {
    let (mut apollo, first) = ran_once();
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    apollo.file("out/other.csv", "tampered\n");
    // Said without `--explain`: a reuse that wrote files is worth a line; one that wrote
    // nothing is only counted.
    let output = apollo.args(&["run"]).run();
    output.code(0);
    assert_eq!(counts(&apollo), [1, 1, 1, 1], "{}", output.stdout);
    for (unit, path) in [("clean", "out/clean.csv"), ("other", "out/other.csv")] {
        let line = format!(
            "reused   {unit:<6}  inputs identical to run {first} attempt 1; restored {path}"
        );
        assert!(output.stdout.contains(&line), "{line}\n{}", output.stdout);
    }
    assert!(!output.stdout.contains("fetch"), "{}", output.stdout);
    assert!(
        (apollo.journal_text()).contains(r#""restored":["out/clean.csv"]}"#),
        "the unit_reused record names the file"
    );

    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    let output = apollo.args(&["run", "--explain"]).run();
    output.code(0);
    assert!(
        output.stdout.contains(&format!(
            "reused   clean   inputs identical to run {first} attempt 1; restored out/clean.csv"
        )),
        "{}",
        output.stdout
    );
    // Untouched outputs are neither rewritten nor named.
    assert!(
        output.stdout.contains(&format!(
            "reused   other   inputs identical to run {first} attempt 1\n"
        )),
        "{}",
        output.stdout
    );

    let show = apollo.args(&["show", "latest", "clean"]).run();
    show.code(0);
    assert!(
        show.stdout.contains("; restored out/clean.csv;"),
        "{}",
        show.stdout
    );
    let show = apollo
        .args(&["show", "latest", "clean", "--format", "json"])
        .run();
    show.code(0);
    let document: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(document["reused"]["from_run"], first.as_str(), "{document}");
    assert_eq!(
        document["reused"]["restored"],
        serde_json::json!(["out/clean.csv"])
    );
    let summary = apollo.args(&["show", "latest"]).run().stdout;
    assert!(summary.contains("; restored out/clean.csv"), "{summary}");
    let summary = apollo.args(&["show", "latest", "--format", "json"]).run();
    summary.code(0);
    assert!(
        summary.stdout.contains("out/clean.csv"),
        "the run's summary names it: {}",
        summary.stdout
    );
    let replay = apollo.args(&["replay", "latest"]).run();
    replay.code(0);
    assert!(
        replay.stdout.contains("restored out/clean.csv"),
        "{}",
        replay.stdout
    );
}

/// `--dry-run` names what a reuse would put back (the restorer's own decision, made without
/// writing), and writes nothing.
#[test]
fn dry_run_names_the_outputs_a_reuse_would_restore_and_restores_nothing() {
    let (mut apollo, first) = ran_once();
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    let plan = apollo.args(&["run", "--dry-run"]).run();
    plan.code(0);
    let line =
        format!("reused: inputs identical to run {first} attempt 1; would restore out/clean.csv\n");
    assert!(plan.stdout.contains(&line), "{line}\n{}", plan.stdout);
    assert!(
        plan.stdout.contains(&format!(
            "reused: inputs identical to run {first} attempt 1\n"
        )),
        "an untouched unit restores nothing: {}",
        plan.stdout
    );
    assert!(
        !apollo.path("out/clean.csv").exists(),
        "a plan writes nothing"
    );
    let plan = apollo.args(&["run", "--dry-run", "--format", "json"]).run();
    plan.code(0);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let unit = |name: &str| {
        (plan["units"].as_array().unwrap().iter())
            .find(|unit| unit["unit"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        unit("clean")["restores"],
        serde_json::json!(["out/clean.csv"])
    );
    assert!(unit("other").get("restores").is_none(), "{plan}");
}

/// JUnit (`run --junit`, `replay --format junit`) and the HTML report name the restored files
/// of a reused unit; in JUnit a passing case, the files in its properties and system-out.
#[test]
fn junit_and_the_html_report_name_the_restored_outputs() {
    let (mut apollo, _) = ran_once();
    std::fs::remove_file(apollo.path("out/clean.csv")).unwrap();
    apollo.args(&["run", "--junit", "report.xml"]).run().code(0);
    let xml = std::fs::read_to_string(apollo.path("report.xml")).unwrap();
    let case = xml
        .split("<testcase ")
        .find(|case| case.starts_with("name=\"clean\""))
        .unwrap_or_else(|| panic!("{xml}"));
    let case = case.split("</testcase>").next().unwrap();
    assert!(
        case.contains(r#"<property name="apollo.restored" value="out/clean.csv"/>"#),
        "{case}"
    );
    assert!(case.contains("restored out/clean.csv"), "{case}");
    assert!(case.contains("<system-out>"), "{case}");
    assert!(
        !case.contains("<failure") && !case.contains("<skipped"),
        "{case}"
    );
    let other = (xml
        .split("<testcase ")
        .find(|case| case.starts_with("name=\"other\"")))
    .unwrap_or_default();
    assert!(!other.contains("apollo.restored"), "{other}");
    let replayed = apollo.args(&["replay", "--format", "junit"]).run();
    replayed.code(0);
    assert_eq!(replayed.stdout, xml);

    let html = apollo.args(&["replay", "--format", "html"]).run();
    html.code(0);
    let row = (html.stdout.lines())
        .find(|line| line.contains("class=\"reused\" data-unit=\"clean\""))
        .unwrap_or_else(|| panic!("{}", html.stdout));
    assert!(row.contains("restored out/clean.csv"), "{row}");
}
