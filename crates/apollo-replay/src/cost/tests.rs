use apollo_core::Record;
use apollo_core::cost::{CostTable, Money};
use apollo_core::event::{Event, UnitReused};

use crate::Timeline;
use crate::testkit::{RunBuilder, at, fake_hash};

fn money(text: &str) -> Money {
    text.parse().unwrap()
}

/// One currency unit per CPU-second, 2 per node-hour of partition `gpu`.
fn table() -> CostTable {
    let mut table = CostTable::default();
    table.cpu_hour = Some(money("3600"));
    table.node_hour.insert("gpu".to_owned(), money("2"));
    table.currency = Some("EUR".to_owned());
    table
}

fn records() -> Vec<Record> {
    let mut run = RunBuilder::new("20261204T000000Z-0001", &["a", "b", "c", "d"]);
    // a fails once (1 s: 250 ms user + 50 ms system CPU), then succeeds (2 s: 600 ms CPU).
    run.start(0, "a", 1).fail(1_000, "a", 1, 1, "boom");
    run.start(1_000, "a", 2).succeed(3_000, "a", 2);
    // d is a cluster job of 2 nodes in `gpu`.
    run.start(3_000, "d", 1)
        .submit(3_010, "d", 1, None)
        .succeed(4_000, "d", 1);
    // b is cut off by apollo's death; the resume does not run it again.
    run.start(4_000, "b", 1);
    run.resume(10_000, &["a", "b", "c", "d"]);
    let mut records = run.records();
    for record in &mut records {
        if let Event::UnitSubmitted(submitted) = &mut record.event {
            submitted.partition = Some("gpu".to_owned());
            submitted.nodes = Some(2);
        }
    }
    let seq = records.len() as u64 + 1;
    records.push(Record {
        seq,
        ts: at(10_001),
        event: Event::UnitReused(UnitReused {
            unit: "c".into(),
            from_run: "20261203T000000Z-0001".into(),
            from_attempt: 3,
            input_hash: fake_hash("c"),
            inputs: Vec::new(),
            output_hash: fake_hash("c out"),
            restored: Vec::new(),
        }),
    });
    records
}

fn timeline() -> Timeline {
    Timeline::from_records(records().into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap()
}

#[test]
fn a_run_without_a_price_table_has_no_cost() {
    assert_eq!(timeline().cost(&|_| None, &|_| None), None);
}

#[test]
fn each_attempt_is_priced_and_summed_with_wasted_and_saved_beside() {
    let timeline = timeline();
    let cost = timeline
        .cost(
            &|hash| (hash == fake_hash("definition")).then(table),
            &|reused| {
                assert_eq!(
                    (reused.from_run.as_str(), reused.from_attempt),
                    ("20261203T000000Z-0001", 3)
                );
                Some(money("0.75"))
            },
        )
        .expect("priced");
    assert_eq!(cost.currency.as_deref(), Some("EUR"));
    let a = cost.unit("a").unwrap();
    let prices: Vec<(Money, bool)> = (a.attempts.iter())
        .map(|attempt| (attempt.cost, attempt.wasted))
        .collect();
    assert_eq!(prices, [(money("0.3"), true), (money("0.6"), false)]);
    assert_eq!(
        (a.total, a.wasted, a.saved),
        (money("0.9"), money("0.3"), None)
    );
    // d: CPU (its record's) plus 2 nodes × its phases' wall time × 2 an hour.
    let d_attempt = &timeline.unit("d").unwrap().attempts[0];
    let outcome = d_attempt.outcome.as_ref().unwrap();
    let (first, last) = (&outcome.phases[0], outcome.phases.last().unwrap());
    let wall_ms = i128::from(last.offset_ms + last.duration_ms - first.offset_ms);
    let cpu_ms = i128::from(outcome.user_cpu_ms + outcome.sys_cpu_ms);
    // In billionths: cpu_ms × 1,000,000 + 2 × wall_ms × 2e9 / 3.6e6, rounded half up.
    let node_nanos = (2 * wall_ms * 2_000_000_000 + 1_800_000) / 3_600_000;
    let d = cost.unit("d").unwrap();
    assert_eq!(d.total, Money::from_nanos(cpu_ms * 1_000_000 + node_nanos));
    // b was cut off: it recorded no CPU time, and it is wasted.
    let b = cost.unit("b").unwrap();
    assert_eq!((b.total, b.attempts[0].wasted), (Money::ZERO, true));
    // c was reused: it cost nothing here and saved its original attempt's price.
    let c = cost.unit("c").unwrap();
    assert_eq!((c.total, c.saved), (Money::ZERO, Some(money("0.75"))));
    assert_eq!(cost.total, a.total + d.total);
    assert_eq!(cost.wasted, money("0.3"));
    assert_eq!((cost.saved, cost.saved_unknown), (money("0.75"), 0));
    assert_eq!(cost.show(cost.wasted), "0.3000 EUR");
}

#[test]
fn a_live_runs_running_attempt_is_not_wasted_and_an_unknown_original_is_counted() {
    let mut records = records();
    // Drop the resume and what follows: b is the last thing a live apollo started.
    records.retain(|record| !matches!(record.event, Event::RunResumed(_) | Event::UnitReused(_)));
    let mut timeline =
        Timeline::from_records(records.into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap();
    timeline.live = true;
    let cost = timeline.cost(&|_| Some(table()), &|_| None).unwrap();
    assert!(!cost.unit("b").unwrap().attempts[0].wasted);
    assert_eq!(cost.saved_unknown, 0);
    let timeline = super::tests::timeline();
    let cost = timeline.cost(&|_| Some(table()), &|_| None).unwrap();
    assert_eq!((cost.saved, cost.saved_unknown), (Money::ZERO, 1));
}

#[test]
fn an_attempt_is_priced_by_the_table_of_the_process_that_started_it() {
    let mut records = records();
    for record in &mut records {
        if let Event::RunResumed(resumed) = &mut record.event {
            resumed.definition_hash = fake_hash("changed");
        }
    }
    // After the resume the table is twice as dear, in another currency.
    let timeline =
        Timeline::from_records(records.into_iter().map(Ok::<_, std::convert::Infallible>)).unwrap();
    assert_eq!(
        timeline.facts.definitions,
        [fake_hash("definition"), fake_hash("changed")]
    );
    let cost = timeline
        .cost(
            &|hash| {
                let mut table = table();
                if hash == fake_hash("changed") {
                    table.cpu_hour = Some(money("7200"));
                    table.currency = Some("USD".to_owned());
                }
                Some(table)
            },
            &|_| None,
        )
        .unwrap();
    // Every attempt started before the resume: priced by the table it ran under. The
    // currency shown is the latest table's.
    assert_eq!(cost.unit("a").unwrap().total, money("0.9"));
    assert_eq!(cost.currency.as_deref(), Some("USD"));
}
