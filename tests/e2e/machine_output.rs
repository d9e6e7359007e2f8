//! Every JSON document and event apollo prints carries a `"schema"`, and the guide lists it
//! (issue 35 item 6: a script can tell which shape it reads, and a change of shape bumps the
//! version). The one exception, `replay --format json`, is the journal's records as stored, and
//! the guide says so.

use std::path::Path;

use crate::support::Apollo;

/// Every `--format json` command on one finished run: the arguments, the exit code expected.
const DOCUMENTS: [(&[&str], i32); 11] = [
    (&["check", "--format", "json"], 0),
    (&["run", "--dry-run", "--format", "json"], 0),
    (&["runs", "--format", "json"], 0),
    (&["show", "latest", "--format", "json"], 0),
    (&["show", "latest", "make", "--format", "json"], 0),
    (&["diff", "latest", "latest", "--format", "json"], 0),
    (&["stats", "--format", "json"], 0),
    (&["verify", "--format", "json"], 0),
    (&["reproduce", "latest", "make", "--format", "json"], 0),
    // The same run on both sides: no change to bisect (exit 1), still a document.
    (
        &["bisect", "latest", "latest", "make", "--format", "json"],
        1,
    ),
    // The hook summary, as the hook received it (copied by the pipeline's `on_finish`).
    (&["__hook_summary__"], 0),
];

fn schema_of(document: &serde_json::Value, what: &str) -> String {
    (document["schema"].as_str())
        .unwrap_or_else(|| panic!("{what}: no \"schema\" in {document}"))
        .to_owned()
}

#[test]
fn every_json_document_and_event_carries_a_documented_schema() {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/commands.md"),
    )
    .unwrap();
    let mut apollo = Apollo::new();
    apollo.config(
        "on_finish: cp \"$APOLLO_SUMMARY_JSON\" summary.json\nunits:\n  - name: make\n    outputs: [out.txt]\n    execute: echo made > out.txt\n",
    );
    let run = apollo.args(&["run", "--format", "json"]).run();
    run.code(0);
    let mut schemas = Vec::new();
    for line in run.stdout.lines() {
        let event: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("run --format json: {error}: {line}"));
        schemas.push(schema_of(&event, &format!("run event {line}")));
    }

    for (args, code) in DOCUMENTS {
        let text = if args == ["__hook_summary__"] {
            std::fs::read_to_string(apollo.path("summary.json")).unwrap()
        } else {
            let output = apollo.args(args).run();
            output.code(code);
            output.stdout
        };
        let document: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|error| panic!("{args:?}: {error}: {text}"));
        schemas.push(schema_of(&document, &format!("{args:?}")));
    }
    for schema in &schemas {
        assert!(
            schema.starts_with("apollo.") && guide.contains(&format!("`{schema}`")),
            "docs/guide/commands.md lists {schema}"
        );
    }

    // The exception: the journal's records, one a line, as stored (their version is the
    // journal format's), which the guide names as such.
    let replay = apollo.args(&["replay", "--format", "json"]).run();
    replay.code(0);
    for line in replay.stdout.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            record["kind"].is_string() && record["seq"].is_u64(),
            "{line}"
        );
        assert!(record.get("schema").is_none(), "a record as stored: {line}");
    }
    assert!(
        guide.contains("`apollo replay --format json` is the exception"),
        "the guide names the exception"
    );
}
