//! Feeds arbitrary text to the pipeline config loader (`apollo_core::config::load_str`), the
//! path every `apollo run`/`apollo check` takes with a user's YAML. Nothing may panic, and
//! the result must keep the loader's promises: a valid pipeline has unique unit names, only
//! dependencies on units that exist, no cycle and at least one parallel slot; an invalid one
//! carries at least one error diagnostic; every diagnostic renders.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use apollo_core::config::{LoadError, load_str};
use apollo_core::diagnostic::render_all;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match load_str(&text, Path::new("/fuzz/pipeline.yaml")) {
        Ok(loaded) => {
            let pipeline = &loaded.pipeline;
            assert!(pipeline.max_parallel >= 1, "max_parallel 0 accepted");
            let mut names = BTreeSet::new();
            for unit in &pipeline.units {
                assert!(names.insert(unit.name.as_str()), "duplicate unit {}", unit.name);
            }
            for unit in &pipeline.units {
                for dep in &unit.deps {
                    assert!(names.contains(dep.as_str()), "{} depends on missing {dep}", unit.name);
                }
            }
            assert_acyclic(pipeline);
            let _ = render_all(&loaded.warnings);
        }
        Err(LoadError::Invalid { diagnostics, .. }) => {
            assert!(
                diagnostics.iter().any(|diagnostic| diagnostic.is_error()),
                "rejected without an error diagnostic"
            );
            let _ = render_all(&diagnostics);
        }
        Err(_) => {}
    }
});

/// Kahn's algorithm: every unit must come out.
fn assert_acyclic(pipeline: &apollo_core::model::Pipeline) {
    let mut indegree: BTreeMap<&str, usize> = pipeline
        .units
        .iter()
        .map(|unit| (unit.name.as_str(), unit.deps.len()))
        .collect();
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, degree)| **degree == 0)
        .map(|(name, _)| *name)
        .collect();
    let mut done = 0;
    while let Some(name) = ready.pop() {
        done += 1;
        for unit in &pipeline.units {
            let edges = unit.deps.iter().filter(|dep| *dep == name).count();
            if edges > 0 {
                if let Some(degree) = indegree.get_mut(unit.name.as_str()) {
                    *degree -= edges;
                    if *degree == 0 {
                        ready.push(unit.name.as_str());
                    }
                }
            }
        }
    }
    assert_eq!(done, pipeline.units.len(), "a cycle was accepted");
}
