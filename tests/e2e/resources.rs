//! Local resources (issue 15): a local unit runs only while the running units' `cpus` fit
//! the capacity (`max_cpus`), on top of `max_parallel`.

use crate::support::Apollo;

#[test]
fn two_units_that_each_take_the_whole_capacity_never_run_at_once() {
    let mut apollo = Apollo::new();
    // Both could start at once by `max_parallel`; their cpus only fit one at a time. `second`
    // fails if it runs before `first` was let go.
    apollo.config(
        "max_parallel: 2\nmax_cpus: 2\nunits:\n  \
         - {name: first, resources: {cpus: 2}, execute: bin/block first}\n  \
         - {name: second, resources: {cpus: 2}, execute: 'test -e markers/first.release'}\n",
    );
    let running = apollo.args(&["run"]).spawn();
    apollo.wait_for_marker("first.started");
    apollo.release("first.release");
    running.wait().code(0);
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
