//! Load + validate + topologically order a generated 100,000-unit layered pipeline.
//!
//! Run with `cargo bench -p apollo-core --bench load`. Prints the best of a few runs and the
//! ratio to two baselines measured in the same run on the same text: parsing it with
//! serde-saphyr into `serde::de::IgnoredAny` (what any serde-based loader pays at least), and
//! merely iterating granit-parser's YAML events (the parser apollo builds its tree from: the
//! floor for any loader using it).
#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use apollo_core::Dag;
use apollo_core::config;

const N_LAYERS: usize = 1_000;
const UNITS_PER_LAYER: usize = 100;
const ROUNDS: usize = 5;

/// 1,000 layers of 100 units; every unit after the first layer depends on two units of the
/// layer before it. Each unit has a timeout, a command and an output, like a real config.
fn generate() -> String {
    let mut yaml = String::with_capacity(N_LAYERS * UNITS_PER_LAYER * 120);
    yaml.push_str("name: bench\ndefaults:\n  timeout: 30s\n  retries: 1\nunits:\n");
    for layer in 0..N_LAYERS {
        for slot in 0..UNITS_PER_LAYER {
            yaml.push_str(&format!("  - name: u{layer}_{slot}\n"));
            if layer > 0 {
                let other = (slot * 7 + 3) % UNITS_PER_LAYER;
                yaml.push_str(&format!(
                    "    deps: [u{}_{slot}, u{}_{other}]\n",
                    layer - 1,
                    layer - 1
                ));
            }
            yaml.push_str(&format!(
                "    execute: ./work.sh {layer} {slot}\n    outputs: [out/{layer}/{slot}.txt]\n"
            ));
        }
    }
    yaml
}

fn best_of(mut run: impl FnMut()) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let yaml = generate();
    let path = Path::new("/bench/pipeline.yaml");
    let n_units = N_LAYERS * UNITS_PER_LAYER;

    let baseline = best_of(|| {
        let mut options = serde_saphyr::Options::default();
        options.budget = None;
        let parsed: Result<serde::de::IgnoredAny, _> =
            serde_saphyr::from_str_with_options(&yaml, options);
        assert!(parsed.is_ok(), "baseline parse failed");
    });

    let events_only = best_of(|| {
        let mut n_events = 0usize;
        for event in serde_saphyr::granit_parser::Parser::new_from_str(&yaml) {
            assert!(event.is_ok(), "baseline parse failed");
            n_events += 1;
        }
        assert!(n_events > n_units);
    });

    let mut n_ordered = 0;
    let full = best_of(|| {
        let loaded = match config::load_str(&yaml, path) {
            Ok(loaded) => loaded,
            Err(error) => panic!("generated pipeline is invalid: {error}"),
        };
        let dag = Dag::new(&loaded.pipeline).expect("acyclic");
        n_ordered = dag.topo_order().len();
    });
    assert_eq!(n_ordered, n_units);

    println!(
        "{n_units} units, {} MiB of YAML (best of {ROUNDS})",
        yaml.len() / (1024 * 1024)
    );
    println!(
        "  baseline: serde-saphyr parse only      {:>8.1} ms",
        baseline.as_secs_f64() * 1e3
    );
    println!(
        "  floor:    granit-parser events only    {:>8.1} ms",
        events_only.as_secs_f64() * 1e3
    );
    println!(
        "  apollo:   load + validate + topo order {:>8.1} ms",
        full.as_secs_f64() * 1e3
    );
    println!(
        "  ratio to serde-saphyr parse: {:.2}x, to the event floor: {:.2}x",
        full.as_secs_f64() / baseline.as_secs_f64(),
        full.as_secs_f64() / events_only.as_secs_f64()
    );
}
