//! A run that stops for a human's verdict (exit 5) ends with the same summary as every other
//! run end, rendered from the run model: the counts (with `needs_verdict`), the unit that needs
//! a verdict, and the `apollo mark` commands that give it — as a text line and as the JSON
//! stream's `summary` event, both when the run itself stops and when the next run refuses.

use crate::support::Apollo;

const PIPELINE: &str = "units:
  - name: quick
    execute: 'true'
  - name: charge
    deps: [quick]
    idempotent: false
    execute: 'kill -9 $$'
  - name: receipt
    deps: [charge]
    execute: 'true'
";

/// The last line of `stdout` as the JSON `summary` event.
fn summary_event(stdout: &str) -> serde_json::Value {
    let last = stdout.lines().last().unwrap_or_default();
    let event: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|error| panic!("{error}: {stdout}"));
    assert_eq!(event["event"], "summary", "{stdout}");
    event
}

fn assert_text_summary(stdout: &str, run: &str) {
    for part in [
        format!("apollo: run {run} stopped for a verdict in "),
        "1 succeeded, 0 failed, 0 skipped, 1 needs a verdict, 1 not started".to_owned(),
        "needs a verdict: charge (attempt 1)".to_owned(),
        format!("`apollo mark {run} charge --succeeded`"),
        format!("`apollo mark {run} charge --rerun`"),
    ] {
        assert!(stdout.contains(&part), "{part}:\n{stdout}");
    }
}

fn assert_json_summary(apollo: &mut Apollo, event: &serde_json::Value, run: &str) {
    assert_eq!(event["schema"], "apollo.run_events/2", "{event:#}");
    assert_eq!(event["run_id"], run, "{event:#}");
    assert_eq!(event["status"], "needs_human", "{event:#}");
    let show = apollo.args(&["show", "latest", "--format", "json"]).run();
    let show: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(event["counts"], show["counts"], "the run model's counts");
    assert_eq!(event["counts"]["needs_verdict"], 1, "{event:#}");
    assert_eq!(event["counts"]["succeeded"], 1, "{event:#}");
    let charge = (event["units"].as_array().unwrap().iter())
        .find(|unit| unit["unit"] == "charge")
        .unwrap_or_else(|| panic!("{event:#}"));
    assert_eq!(charge["status"], "needs_verdict", "{event:#}");
    let verdict = &event["needs_verdict"][0];
    assert_eq!(verdict["unit"], "charge", "{event:#}");
    assert_eq!(verdict["attempt"], 1, "{event:#}");
    let next: Vec<&str> = (verdict["next"].as_array().unwrap().iter())
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert!(
        next.contains(&format!("apollo mark {run} charge --succeeded").as_str())
            && next.contains(&format!("apollo mark {run} charge --rerun").as_str()),
        "{event:#}"
    );
}

#[test]
fn a_run_stopped_for_a_verdict_prints_the_summary_then_the_refusal_the_json_event() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    let stopped = apollo.args(&["run"]).run();
    stopped.code(5);
    let run = apollo.run_ids().pop().unwrap();
    assert_text_summary(&stopped.stdout, &run);

    let refused = apollo.args(&["run", "--format", "json"]).run();
    refused.code(5);
    let event = summary_event(&refused.stdout);
    assert_json_summary(&mut apollo, &event, &run);
}

#[test]
fn a_run_stopped_for_a_verdict_emits_the_json_event_then_the_refusal_the_summary() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    let stopped = apollo.args(&["run", "--format", "json"]).run();
    stopped.code(5);
    let run = apollo.run_ids().pop().unwrap();
    let event = summary_event(&stopped.stdout);
    assert_json_summary(&mut apollo, &event, &run);

    let refused = apollo.args(&["run"]).run();
    refused.code(5);
    assert_text_summary(&refused.stdout, &run);
    // The refusal's own message and advice stay on stderr.
    assert!(
        refused.stderr.contains("unit `charge` (attempt 1)"),
        "{}",
        refused.stderr
    );
}
