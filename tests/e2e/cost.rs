//! Cost (issue 40 item 2): a pipeline with a `cost:` table, a unit failing once then retried
//! and a unit reused by a second run. Every figure `show`, `runs` and `stats` print is checked
//! against the price computed here, in integers, from the numbers the journal recorded (CPU
//! time, largest resident set, wall time) — never against a figure written into the test.
//! On a Slurm cluster, a job's cost is priced by what it asked for, recorded at submission.

use apollo_core::cost::Money;

use crate::slurm_cluster::{cluster, guard};
use crate::support::Apollo;

/// 3600 a CPU-hour (one per CPU-second) and 36.5 a GiB-hour, in billionths.
const CPU_HOUR_NANOS: u128 = 3_600_000_000_000;
const GIB_HOUR_NANOS: u128 = 36_500_000_000;

const PIPELINE: &str = "cost:
  cpu_hour: 3600
  gib_hour: 36.5
  currency: EUR
units:
  - name: build
    reuse: true
    outputs: [out/build.txt]
    execute: mkdir -p out && i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo built > out/build.txt
  - name: flaky
    retries: 1
    retry_delay: 0s
    execute: bin/count flaky && [ \"$APOLLO_ATTEMPT\" -ge 2 ]
";

/// The price of a local attempt as issue 40 defines it, from its `unit_finished` record:
/// CPU-hours × `cpu_hour` + GiB-hours (largest resident set × wall time) × `gib_hour`,
/// rounded half up to a billionth.
fn local_price(outcome: &serde_json::Value) -> Money {
    let number = |key: &str| u128::from(outcome[key].as_u64().expect(key));
    let cpu_ms = number("user_cpu_ms") + number("sys_cpu_ms");
    let numerator = cpu_ms * CPU_HOUR_NANOS * 1_048_576
        + number("max_rss_kib") * number("duration_ms") * GIB_HOUR_NANOS;
    let denominator = 3_600_000 * 1_048_576;
    Money::from_nanos(i128::try_from((numerator + denominator / 2) / denominator).unwrap())
}

fn money(value: &serde_json::Value) -> Money {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a decimal string, found {value}"))
        .parse()
        .unwrap()
}

fn json(apollo: &mut Apollo, args: &[&str]) -> serde_json::Value {
    let output = apollo.args(args).run();
    output.code(0);
    serde_json::from_str(&output.stdout).unwrap()
}

/// Each attempt's price computed here, checked against the one `show RUN UNIT --format json`
/// gives it, and whether it was wasted.
fn attempt_prices(apollo: &mut Apollo, run: &str, unit: &str) -> Vec<(Money, bool)> {
    let document = json(apollo, &["show", run, unit, "--format", "json"]);
    assert_eq!(document["schema"], "apollo.show_unit/3");
    let attempts = document["attempts"].as_array().unwrap();
    let mut prices = Vec::new();
    for attempt in attempts {
        let expected = local_price(&attempt["outcome"]);
        assert_eq!(money(&attempt["cost"]), expected, "{unit} {attempt}");
        let wasted = attempt["wasted"].as_bool().unwrap();
        assert_eq!(wasted, attempt["state"] != "succeeded", "{attempt}");
        prices.push((expected, wasted));
    }
    prices
}

fn show(amount: Money) -> String {
    format!("{} EUR", amount.human())
}

#[test]
fn cost_of_a_retried_unit_and_a_reused_one_is_shown_by_show_runs_and_stats() {
    let mut apollo = Apollo::new();
    apollo.config(PIPELINE);
    apollo.args(&["run"]).run().code(0);
    apollo.args(&["run"]).run().code(0);
    let runs = apollo.run_ids();
    let (first, second) = (runs[0].as_str(), runs[1].as_str());

    // First run: build once, flaky failed (wasted) then succeeded.
    let build = attempt_prices(&mut apollo, first, "build");
    assert_eq!(build.len(), 1);
    let flaky = attempt_prices(&mut apollo, first, "flaky");
    assert_eq!(flaky.len(), 2);
    assert_eq!((flaky[0].1, flaky[1].1), (true, false));
    let total_1 = build[0].0 + flaky[0].0 + flaky[1].0;
    let wasted_1 = flaky[0].0;
    let document = json(&mut apollo, &["show", first, "--format", "json"]);
    assert_eq!(document["schema"], "apollo.show_run/3");
    let cost = &document["cost"];
    assert_eq!(cost["currency"], "EUR");
    assert_eq!(money(&cost["total"]), total_1);
    assert_eq!(money(&cost["wasted"]), wasted_1);
    assert_eq!(money(&cost["saved"]), Money::ZERO);
    let units = document["units"].as_array().unwrap();
    assert_eq!(money(&units[1]["cost"]["total"]), flaky[0].0 + flaky[1].0);
    assert_eq!(money(&units[1]["cost"]["wasted"]), wasted_1);

    // Second run: build reused (saving its first attempt's price), flaky failed and succeeded
    // again (its attempts count from 1 in each run).
    let second_flaky = attempt_prices(&mut apollo, second, "flaky");
    assert_eq!(second_flaky.len(), 2);
    let total_2 = second_flaky[0].0 + second_flaky[1].0;
    let document = json(&mut apollo, &["show", second, "--format", "json"]);
    let cost = &document["cost"];
    assert_eq!(money(&cost["total"]), total_2);
    assert_eq!(money(&cost["wasted"]), second_flaky[0].0);
    assert_eq!(money(&cost["saved"]), build[0].0);
    assert_eq!(cost["saved_unknown"], 0);
    let build_line = &document["units"][0];
    assert_eq!(build_line["status"], "reused");
    assert_eq!(money(&build_line["cost"]["saved"]), build[0].0);

    // The text of `show`.
    let output = apollo.args(&["show", first]).run();
    output.code(0);
    let line = format!(
        "cost {}, wasted {}, saved {}",
        show(total_1),
        show(wasted_1),
        show(Money::ZERO)
    );
    assert!(output.stdout.contains(&line), "{line}\n{}", output.stdout);
    let flaky_line = format!(
        "cost {} (wasted {})",
        show(flaky[0].0 + flaky[1].0),
        show(wasted_1)
    );
    assert!(
        output.stdout.contains(&flaky_line),
        "{flaky_line}\n{}",
        output.stdout
    );
    let output = apollo.args(&["show", second]).run();
    let saved = format!("saved {}", show(build[0].0));
    assert!(output.stdout.contains(&saved), "{saved}\n{}", output.stdout);
    let output = apollo.args(&["show", first, "flaky"]).run();
    let wasted_line = format!("cost        {} (wasted)", show(flaky[0].0));
    assert!(
        output.stdout.contains(&wasted_line),
        "{wasted_line}\n{}",
        output.stdout
    );

    // `runs`: a COST column, and the cost in JSON.
    let output = apollo.args(&["runs"]).run();
    output.code(0);
    assert!(output.stdout.contains("COST"), "{}", output.stdout);
    for (run, total) in [(first, total_1), (second, total_2)] {
        let line = output
            .stdout
            .lines()
            .find(|line| line.starts_with(run))
            .unwrap();
        assert!(line.contains(&show(total)), "{line}");
    }
    let document = json(&mut apollo, &["runs", "--format", "json"]);
    assert_eq!(money(&document["runs"][0]["cost"]["total"]), total_1);
    assert_eq!(money(&document["runs"][1]["cost"]["saved"]), build[0].0);

    check_stats(
        &mut apollo,
        build[0].0,
        (
            flaky[0].0 + flaky[1].0 + total_2,
            wasted_1 + second_flaky[0].0,
        ),
    );
}

/// `stats`: each unit's mean per run it ran in, its total, wasted and saved: `build` ran once
/// for `build_price`, `flaky` in both runs for `flaky_total`, `flaky_wasted` of it wasted.
fn check_stats(
    apollo: &mut Apollo,
    build_price: Money,
    (flaky_total, flaky_wasted): (Money, Money),
) {
    let document = json(apollo, &["stats", "--format", "json"]);
    let units = document["cost"]["units"].as_array().unwrap();
    assert_eq!(document["cost"]["currency"], "EUR");
    let flaky_mean = Money::from_nanos((flaky_total.nanos() + 1) / 2);
    assert_eq!(units[0]["unit"], "build");
    assert_eq!(
        (money(&units[0]["total"]), money(&units[0]["mean"])),
        (build_price, build_price)
    );
    assert_eq!(money(&units[0]["saved"]), build_price);
    assert_eq!(units[1]["runs"], 2);
    assert_eq!(
        (money(&units[1]["total"]), money(&units[1]["mean"])),
        (flaky_total, flaky_mean)
    );
    assert_eq!(money(&units[1]["wasted"]), flaky_wasted);
    let output = apollo.args(&["stats"]).run();
    output.code(0);
    let (_, cost_table) = output.stdout.split_once("cost (EUR)\n").unwrap_or_default();
    let line = cost_table.lines().find(|line| line.starts_with("flaky"));
    let line = line.unwrap_or_default();
    assert!(
        line.contains(&flaky_mean.human()) && line.contains(&flaky_total.human()),
        "{}",
        output.stdout
    );
}

#[test]
fn without_a_cost_table_no_cost_is_shown_anywhere() {
    let mut apollo = Apollo::new();
    apollo.config("units:\n  - name: a\n    execute: 'true'\n");
    apollo.args(&["run"]).run().code(0);
    for args in [
        &["show"][..],
        &["runs"],
        &["stats"],
        &["show", "latest", "a"],
    ] {
        let output = apollo.args(args).run();
        output.code(0);
        assert!(
            !output.stdout.to_lowercase().contains("cost"),
            "{args:?}: {}",
            output.stdout
        );
    }
    let document = json(&mut apollo, &["show", "--format", "json"]);
    assert!(document.get("cost").is_none());
    let document = json(&mut apollo, &["runs", "--format", "json"]);
    assert!(document["runs"][0].get("cost").is_none());
}

#[test]
fn a_bad_cost_table_is_refused_by_check_saying_where_and_what() {
    let mut apollo = Apollo::new();
    apollo.config("cost:\n  cpu_hour: cheap\nunits:\n  - name: a\n    execute: 'true'\n");
    let output = apollo.args(&["check"]).run();
    assert_ne!(output.code, Some(0));
    let text = format!("{}{}", output.stdout, output.stderr);
    assert!(text.contains("apollo.yaml:2:13"), "{text}");
    assert!(
        text.contains("`cost.cpu_hour` is not a decimal number"),
        "{text}"
    );
    assert!(
        text.contains("help: write a price as a decimal number"),
        "{text}"
    );
}

#[test]
fn a_slurm_jobs_cost_is_priced_by_its_request_recorded_at_submission() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "cost:\n  gib_hour: 1\n  node_hour: {debug: 3}\nunits:\n  - name: job\n    executor: slurm\n    \
         resources: {memory: 100M}\n    execute: 'true'\n",
    );
    apollo.args(&["run"]).run().code(0);
    let journal = apollo.journal_text();
    let submitted = journal
        .lines()
        .filter_map(|line| line.splitn(3, ' ').nth(2))
        .filter_map(|json| serde_json::from_str::<serde_json::Value>(json).ok())
        .find(|record| record["kind"] == "unit_submitted")
        .expect("a unit_submitted record");
    assert_eq!(submitted["partition"], "debug", "{submitted}");
    assert_eq!(submitted["nodes"], 1);
    assert_eq!(submitted["mem_mib"], 100);
    let document = json(&mut apollo, &["show", "latest", "job", "--format", "json"]);
    let attempt = &document["attempts"][0];
    let phases = attempt["outcome"]["phases"].as_array().unwrap();
    let first = phases[0]["offset_ms"].as_u64().unwrap();
    let last = phases.last().unwrap();
    let wall_ms = u128::from(
        last["offset_ms"].as_u64().unwrap() + last["duration_ms"].as_u64().unwrap() - first,
    );
    // 100 MiB at 1 a GiB-hour and 1 node at 3 an hour, over the job's wall time.
    let numerator = 100 * 1024 * wall_ms * 1_000_000_000 + wall_ms * 3_000_000_000 * 1_048_576;
    let denominator = 3_600_000 * 1_048_576;
    let expected =
        Money::from_nanos(i128::try_from((numerator + denominator / 2) / denominator).unwrap());
    assert_eq!(money(&attempt["cost"]), expected, "{attempt}");
}

#[test]
fn a_unit_that_never_ran_shows_no_cost_and_a_failed_one_is_all_wasted() {
    let mut apollo = Apollo::new();
    apollo.config(
        "cost: {cpu_hour: 3600, gib_hour: 36.5}\nunits:\n  - name: breaks\n    execute: exit 3\n  \
         - name: after\n    deps: [breaks]\n    execute: 'true'\n",
    );
    apollo.args(&["run"]).run().code(1);
    let breaks = attempt_prices(&mut apollo, "latest", "breaks");
    assert_eq!(breaks.len(), 1);
    let output = apollo.args(&["show"]).run();
    let line = output
        .stdout
        .lines()
        .find(|line| line.trim_start().starts_with("after"));
    let line = line.unwrap_or_default();
    assert!(
        !line.contains("cost") && !line.contains("saved"),
        "{}",
        output.stdout
    );
    // No currency: amounts alone.
    let wasted = format!(
        "cost {}, wasted {}",
        breaks[0].0.human(),
        breaks[0].0.human()
    );
    assert!(
        output.stdout.contains(&wasted),
        "{wasted}\n{}",
        output.stdout
    );
    let output = apollo.args(&["show", "latest", "after"]).run();
    output.code(0);
    assert!(!output.stdout.contains("\n  \n"), "{}", output.stdout);
    assert!(!output.stdout.contains("cost"), "{}", output.stdout);
}
