//! Local resources (issue 15): a local unit runs only while the running units' `cpus` fit
//! the capacity (`max_cpus`), on top of `max_parallel`.

use crate::support::Apollo;

#[test]
fn two_units_that_each_take_the_whole_capacity_never_run_at_once() {
    let mut apollo = Apollo::new();
    // Both could start at once by `max_parallel`; their cpus only fit one at a time. Either
    // may be first (two workers race for the capacity). Each holds `markers/held` while it
    // runs: a unit that finds it held ran beside the other, says so and fails.
    let unit = |name: &str| {
        format!(
            "  - {{name: {name}, resources: {{cpus: 2}}, execute: 'if mkdir markers/held; then \
             bin/block {name} && rmdir markers/held; else : > markers/{name}.clash; \
             : > markers/{name}.started; exit 1; fi'}}\n"
        )
    };
    apollo.config(&format!(
        "max_parallel: 2\nmax_cpus: 2\nunits:\n{}{}",
        unit("first"),
        unit("second")
    ));
    let running = apollo.args(&["run"]).spawn();
    let started = |name: &str| apollo.path(&format!("markers/{name}.started")).exists();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let first = loop {
        if let Some(name) = ["first", "second"].into_iter().find(|name| started(name)) {
            break name;
        }
        assert!(std::time::Instant::now() < deadline, "no unit started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let other = if first == "first" { "second" } else { "first" };
    apollo.release(&format!("{first}.release"));
    apollo.wait_for_marker(&format!("{other}.started"));
    apollo.release(&format!("{other}.release"));
    let output = running.wait();
    for name in ["first", "second"] {
        assert!(
            !apollo.path(&format!("markers/{name}.clash")).exists(),
            "{name} ran while the other held the whole capacity\n{}",
            output.stdout
        );
    }
    output.code(0);
}

#[test]
fn a_local_unit_asking_for_more_than_the_capacity_is_a_check_error() {
    let mut apollo = Apollo::new();
    apollo.config("max_cpus: 2\nunits:\n  - {name: big, resources: {cpus: 3}, execute: 'true'}\n");
    let output = apollo.args(&["check"]).run();
    output.code(2);
    let everything = format!("{}{}", output.stdout, output.stderr);
    assert!(
        everything.contains("unit `big` asks for 3 CPUs, more than the local capacity of 2"),
        "{everything}"
    );
    apollo.args(&["run"]).run().code(2);
}
