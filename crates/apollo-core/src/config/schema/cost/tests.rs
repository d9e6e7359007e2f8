use std::path::Path;

use crate::config::{LoadError, load_str};
use crate::cost::Money;

fn money(text: &str) -> Money {
    text.parse().unwrap()
}

#[test]
fn a_price_table_is_read_exactly_as_written() {
    let loaded = load_str(
        "cost:\n  cpu_hour: 0.05\n  gib_hour: '0.013'\n  node_hour: {gpu: 2.50, batch: 1}\n  currency: EUR\nunits: [{name: a, execute: 'true'}]\n",
        Path::new("p.yaml"),
    )
    .unwrap();
    let cost = loaded.pipeline.cost.expect("a cost table");
    assert_eq!(cost.cpu_hour, Some(money("0.05")));
    assert_eq!(cost.gib_hour, Some(money("0.013")));
    assert_eq!(cost.node_hour["gpu"], money("2.5"));
    assert_eq!(cost.node_hour["batch"], money("1"));
    assert_eq!(cost.currency.as_deref(), Some("EUR"));
    // Floats that are not exact in binary are still the decimal written.
    let loaded = load_str(
        "cost: {cpu_hour: 0.1, gib_hour: 0.000000007}\nunits: [{name: a, execute: 'true'}]\n",
        Path::new("p.yaml"),
    )
    .unwrap();
    let cost = loaded.pipeline.cost.unwrap();
    assert_eq!(cost.cpu_hour.unwrap().nanos(), 100_000_000);
    assert_eq!(cost.gib_hour.unwrap().nanos(), 7);
}

#[test]
fn no_cost_key_means_no_cost_and_the_snapshot_does_not_change() {
    let loaded = load_str("units: [{name: a, execute: 'true'}]\n", Path::new("p.yaml")).unwrap();
    assert_eq!(loaded.pipeline.cost, None);
    let snapshot = serde_json::to_string(&loaded.pipeline).unwrap();
    assert!(!snapshot.contains("\"cost\""), "{snapshot}");
}

#[test]
fn the_snapshot_keeps_prices_as_decimal_strings() {
    let loaded = load_str(
        "cost: {cpu_hour: 0.05, node_hour: {gpu: 2.5}}\nunits: [{name: a, execute: 'true'}]\n",
        Path::new("p.yaml"),
    )
    .unwrap();
    let snapshot = serde_json::to_value(&loaded.pipeline).unwrap();
    assert_eq!(
        snapshot["cost"],
        serde_json::json!({"cpu_hour": "0.05", "node_hour": {"gpu": "2.5"}})
    );
    let back: crate::Pipeline = serde_json::from_value(snapshot).unwrap();
    assert_eq!(back.cost, loaded.pipeline.cost);
}

#[test]
fn every_bad_price_is_reported_where_it_is_written() {
    let Err(LoadError::Invalid { diagnostics, .. }) = load_str(
        "cost:\n  cpu_hour: -1\n  gib_hour: 1e400\n  node_hour: [gpu]\n  tax: 1\nunits: [{name: a, execute: 'true'}]\n",
        Path::new("p.yaml"),
    ) else {
        panic!("expected invalid");
    };
    let found: Vec<(u32, &str)> = (diagnostics.iter())
        .map(|diagnostic| (diagnostic.line.unwrap_or(0), diagnostic.message.as_str()))
        .collect();
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(found[0].0, 2);
    assert!(found[0].1.contains("must not be negative"), "{found:?}");
    assert_eq!(found[1].0, 3);
    assert_eq!(found[2].0, 4);
    assert!(found[2].1.contains("partition to price"), "{found:?}");
    assert_eq!(found[3].0, 5);
    assert!(found[3].1.contains("tax"), "{found:?}");
    assert!(
        diagnostics
            .iter()
            .all(|diagnostic| diagnostic.hint.is_some())
    );
}
