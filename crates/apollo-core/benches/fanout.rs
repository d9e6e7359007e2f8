//! Load + validate + plan (topological order) a 100,000-instance pipeline made of 100 units ×
//! `foreach` over a 1,000-item list param, against the same graph written as 100,000 plain
//! units (issue 14's benchmark: within 1.5× of the plain pipeline).
//!
//! Run with `cargo bench -p apollo-core --bench fanout`. Prints the best of a few runs of each
//! and their ratio.
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::Dag;
use apollo_core::config;

const N_TEMPLATES: usize = 100;
const N_ITEMS: usize = 1_000;
const ROUNDS: usize = 5;

/// 100 units, each a fan-out over the param `items`; instance `t{k}[i{n}]` depends on
/// `t{k-1}[i{n}]`.
fn fanout() -> String {
    let items: Vec<String> = (0..N_ITEMS).map(|n| format!("i{n}")).collect();
    let mut yaml = format!(
        "name: bench\ndefaults:\n  timeout: 30s\nparams:\n  items: {{type: list, default: [{}]}}\nunits:\n",
        items.join(", ")
    );
    for template in 0..N_TEMPLATES {
        yaml.push_str(&format!(
            "  - name: t{template}\n    foreach: ${{params.items}}\n"
        ));
        if template > 0 {
            yaml.push_str(&format!("    deps: [\"t{}[${{item}}]\"]\n", template - 1));
        }
        yaml.push_str(&format!(
            "    execute: ./work.sh {template} ${{item}}\n    outputs: [\"out/{template}/${{item}}.txt\"]\n"
        ));
    }
    yaml
}

/// The same graph, written out: `t{k}_i{n}` depends on `t{k-1}_i{n}`.
fn plain() -> String {
    let mut yaml = String::with_capacity(N_TEMPLATES * N_ITEMS * 100);
    yaml.push_str("name: bench\ndefaults:\n  timeout: 30s\nunits:\n");
    for template in 0..N_TEMPLATES {
        for item in 0..N_ITEMS {
            yaml.push_str(&format!("  - name: t{template}_i{item}\n"));
            if template > 0 {
                yaml.push_str(&format!("    deps: [t{}_i{item}]\n", template - 1));
            }
            yaml.push_str(&format!(
                "    execute: ./work.sh {template} i{item}\n    outputs: [out/{template}/i{item}.txt]\n"
            ));
        }
    }
    yaml
}

fn load_and_plan(yaml: &str) -> usize {
    let loaded = match config::load_str(yaml, Path::new("/bench/pipeline.yaml")) {
        Ok(loaded) => loaded,
        Err(error) => panic!("generated pipeline is invalid: {error}"),
    };
    let dag = Dag::new(&loaded.pipeline).expect("acyclic");
    dag.topo_order().len()
}

fn best_of(yaml: &str) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            assert_eq!(load_and_plan(yaml), N_TEMPLATES * N_ITEMS);
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let fanout_yaml = fanout();
    let plain_yaml = plain();
    let plain_time = best_of(&plain_yaml);
    let fanout_time = best_of(&fanout_yaml);
    println!(
        "{} units (best of {ROUNDS}): load + validate + topological order",
        N_TEMPLATES * N_ITEMS
    );
    println!(
        "  plain:   {:>7} KiB of YAML  {:>8.1} ms",
        plain_yaml.len() / 1024,
        plain_time.as_secs_f64() * 1e3
    );
    println!(
        "  foreach: {:>7} KiB of YAML  {:>8.1} ms",
        fanout_yaml.len() / 1024,
        fanout_time.as_secs_f64() * 1e3
    );
    println!(
        "  ratio foreach / plain: {:.2}x",
        fanout_time.as_secs_f64() / plain_time.as_secs_f64()
    );
}
