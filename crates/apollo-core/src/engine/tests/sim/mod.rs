//! A seeded deterministic simulation of the scheduler: the real machine of
//! `engine/scheduler/` (the one `engine::run` drives with threads) under random DAGs, unit
//! kinds (idempotent or not, local or Slurm, hashed first, checked for reuse), outcomes
//! (successes, skips, failures, timeouts, kills from outside, attempts that need a human),
//! retry delays and backoff caps, `keep_going`, cancellations, crashes at any step, and random
//! orders of what its driver may deliver — appends reported late, hashing results, workers
//! taking jobs and ending attempts, the clock. The driver here (`machine.rs`) has no thread,
//! no clock and no I/O, so every seed replays exactly; what it checks is listed there.
//!
//! `APOLLO_SIM_SEEDS=N` runs N seeds (default [`DEFAULT_SEEDS`]) from `APOLLO_SIM_FIRST`
//! (default 0); `cargo xtask sim --seeds N` does the same. A failing seed is printed with the
//! command that replays it alone (`APOLLO_SIM_SEED=S`).

mod draw;
mod machine;

use machine::MachineSim;

/// Seeds run by `cargo test` (a few seconds on a loaded 2-core machine, debug build).
const DEFAULT_SEEDS: u64 = 10_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.parse() {
        Ok(number) => Some(number),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

/// Run one seed: its steps, or its first violation (or the panic it ended in).
fn run_seed(seed: u64) -> Result<usize, String> {
    std::panic::catch_unwind(|| MachineSim::new(seed).run()).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
            .unwrap_or_default();
        Err(format!("panicked: {message}"))
    })
}

#[test]
fn the_scheduler_keeps_its_rules_under_random_dags_outcomes_event_orders_and_crashes() {
    let seeds: Vec<u64> = match env_u64("APOLLO_SIM_SEED") {
        Some(seed) => vec![seed],
        None => {
            let first = env_u64("APOLLO_SIM_FIRST").unwrap_or(0);
            let count = env_u64("APOLLO_SIM_SEEDS").unwrap_or(DEFAULT_SEEDS);
            (first..first.saturating_add(count)).collect()
        }
    };
    let mut steps = 0;
    for &seed in &seeds {
        match run_seed(seed) {
            Ok(taken) => steps += taken,
            Err(violation) => panic!(
                "simulation seed {seed}: {violation}\nreplay it alone: APOLLO_SIM_SEED={seed} \
                 cargo test -p apollo-core --lib engine::tests::sim -- --nocapture"
            ),
        }
    }
    println!(
        "simulation: {} seeds, {steps} steps, no violation",
        seeds.len()
    );
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [1, 42, 4242] {
        let trace = |seed| {
            let mut sim = MachineSim::new(seed);
            sim.run().map(|steps| (steps, sim.journal_trace()))
        };
        assert_eq!(trace(seed), trace(seed));
    }
}

/// Whether some seed of `seeds`, run with `setup`, ends in a violation that says `what`.
fn caught(seeds: std::ops::Range<u64>, setup: impl Fn(&mut MachineSim), what: &str) -> bool {
    seeds.into_iter().any(|seed| {
        let mut sim = MachineSim::new(seed);
        setup(&mut sim);
        matches!(sim.run(), Err(violation) if violation.contains(what))
    })
}

#[test]
fn the_simulation_notices_a_driver_that_hands_out_before_the_append_is_durable() {
    let caught = caught(
        0..200,
        |sim| sim.break_write_ahead = true,
        "before its unit_started was durable",
    );
    assert!(caught, "no seed caught an attempt handed out early");
}

#[test]
fn the_simulation_notices_a_machine_that_leaves_starts_out_of_its_append() {
    // The machine itself breaks the rule (`scheduler::BREAK_WRITE_AHEAD`): its batches lose
    // their `unit_started` and their attempts go out all the same.
    crate::engine::scheduler::BREAK_WRITE_AHEAD.set(true);
    let caught = caught(0..200, |_| {}, "before its unit_started was durable");
    crate::engine::scheduler::BREAK_WRITE_AHEAD.set(false);
    assert!(caught, "no seed caught a start left out of its batch");
}

#[test]
fn the_simulation_notices_a_non_idempotent_unit_committed_ahead() {
    // The machine takes every unit for idempotent when it decides how far ahead to commit.
    crate::engine::scheduler::BREAK_NON_IDEMPOTENT_RULE.set(true);
    let caught = caught(0..500, |_| {}, "waits behind");
    crate::engine::scheduler::BREAK_NON_IDEMPOTENT_RULE.set(false);
    assert!(
        caught,
        "no seed caught a non-idempotent attempt queued behind others"
    );
}

#[test]
fn the_simulation_notices_a_resume_that_runs_a_done_unit_again() {
    // After a crash, the new apollo forgets the journal: a unit whose success is durable runs
    // again, and the check must see it.
    let caught = caught(
        0..500,
        |sim| sim.break_resume = true,
        "runs though the journal holds its success",
    );
    assert!(caught, "no seed caught a done unit run again after a crash");
}
