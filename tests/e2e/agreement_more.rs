//! The steps of `agreement.rs`'s random seeds that are more than an invocation: apollo
//! SIGKILLed while a unit runs (its views read before the resume), and `apollo reproduce` of a
//! unit (a run of its own kind, which no view counts as one of the pipeline's runs).

use crate::agreement::{Pipeline, json};
use crate::agreement_views::{Model, check_diff, check_run};
use crate::support::Apollo;

/// Runs the pipeline until `blocking` has started (its marker, never a sleep), SIGKILLs
/// apollo, and checks every view of the run it left: `blocking` cut off, nothing running.
/// Releases `blocking` for the resume.
pub(crate) fn kill_mid_unit(apollo: &mut Apollo, seed: u64, blocking: &str) {
    let running = apollo.args(&["run", "--format", "json"]).spawn();
    apollo.wait_for_marker(&format!("{blocking}.started"));
    running.kill9();
    apollo.assert_no_processes_left();
    let context = format!("seed {seed}, apollo killed while {blocking} ran");
    let model = check_run(apollo, &context, "latest");
    assert_eq!(
        model.states[blocking], "cut_off",
        "{context}: {:#}",
        model.show
    );
    assert_eq!(
        model.show["status"], "incomplete",
        "{context}: {:#}",
        model.show
    );
    for (unit, state) in &model.states {
        assert!(
            !["running", "needs_verdict", "already_done"].contains(&state.as_str()),
            "{context}: {unit} is {state} in a dead run\n{:#}",
            model.show
        );
    }
    apollo.release(&format!("{blocking}.release"));
}

/// Reproduces a unit that succeeded in the latest run (`runs`: the pipeline's runs, the
/// latest last), then checks that the reproduction is a run of kind `reproduction` in every
/// view of it, and is not one of the pipeline's runs for `latest`, `latest~1` or `stats`.
pub(crate) fn reproduce(apollo: &mut Apollo, seed: u64, pipeline: &Pipeline, runs: &[Model]) {
    let latest = &runs[runs.len() - 1];
    // A unit with an attempt of its own that succeeded (not reused), not the one that blocks
    // on a marker. One with a `when: {command}` finds no flag in the scratch tree: its
    // condition is false there, so it is not reproduced; any other is.
    let candidates: Vec<&String> = (pipeline.units.iter())
        .filter(|unit| pipeline.blocking.as_ref() != Some(*unit))
        .filter(|unit| latest.states[*unit] == "succeeded")
        .collect();
    if candidates.is_empty() {
        return;
    }
    let when_command = |unit: &String| pipeline.when_commands.contains(unit);
    let unit = match candidates.iter().find(|unit| when_command(unit)) {
        Some(unit) if seed % 4 == 2 => unit,
        _ => candidates[(seed / 2) as usize % candidates.len()],
    };
    let when_command = when_command(unit);
    let context = format!("seed {seed}, reproduction of {unit}");
    let reproduced = apollo.args(&["reproduce", "latest", unit]).run();
    reproduced.code(if when_command { 1 } else { 0 });

    let listed = apollo.args(&["runs", "--format", "json"]).run();
    let listed = json(&listed.stdout, "runs");
    let of_kind = |kind: &str| -> Vec<String> {
        (listed["runs"].as_array().into_iter().flatten())
            .filter(|run| run["kind"] == kind)
            .filter_map(|run| Some(run["id"].as_str()?.to_owned()))
            .collect()
    };
    let ordinary: Vec<String> = runs.iter().map(|model| model.run.clone()).collect();
    assert_eq!(of_kind("run"), ordinary, "{context}: runs\n{listed:#}");
    let reproductions = of_kind("reproduction");
    assert_eq!(reproductions.len(), 1, "{context}: runs\n{listed:#}");
    let id = &reproductions[0];

    let model = check_run(apollo, &context, id);
    assert_eq!(
        model.show["kind"], "reproduction",
        "{context}: {:#}",
        model.show
    );
    let verdict = &model.show["reproduction"];
    assert_eq!(verdict["reproduced"], !when_command, "{context}: {verdict}");
    // The verdict's status is the reproduction's attempt as the model tells it.
    let attempt = model.attempts.get(unit).and_then(|states| states.last());
    assert_eq!(
        verdict["status"].as_str(),
        attempt.map(String::as_str),
        "{context}: the verdict and the reproduction's attempt\n{:#}",
        model.show
    );
    let state = if when_command {
        "skipped_when"
    } else {
        "succeeded"
    };
    let expected = std::collections::BTreeMap::from([(unit.clone(), state.to_owned())]);
    assert_eq!(model.states, expected, "{context}: {:#}", model.show);
    check_diff(apollo, &context, latest, &model);

    // `latest` and `latest~1` still name the pipeline's runs.
    for (name, model) in [("latest", latest), ("latest~1", &runs[runs.len() - 2])] {
        let show = apollo.args(&["show", name, "--format", "json"]).run();
        assert_eq!(
            json(&show.stdout, "show")["run"],
            model.run.as_str(),
            "{context}: {name}"
        );
    }
    // `stats` leaves it out unless asked (the default is checked by `check_stats`).
    for (kind, expected) in [
        ("reproduction", vec![id.clone()]),
        ("all", [ordinary.clone(), vec![id.clone()]].concat()),
    ] {
        let stats = apollo
            .args(&["stats", "--kind", kind, "--format", "json"])
            .run();
        stats.code(0);
        let stats = json(&stats.stdout, "stats");
        assert_eq!(
            stats["runs"],
            serde_json::json!(expected),
            "{context}: stats --kind {kind}"
        );
    }
}
