//! A seeded deterministic simulation of the scheduler's deciding parts (the in-flight ledger,
//! `admission.rs`, the pacer, `outcome.rs` for every attempt's outcome, and the resume code:
//! `PriorState`, `check_in_flight`, the resume policy's `decide`) under random DAGs, unit
//! kinds, outcomes (successes, skips, failures, timeouts, kills from outside, attempts that
//! need a human), retry delays and backoff caps, `keep_going`, crashes, and orders of the
//! events the driver may deliver: hashing results, workers taking jobs and ending attempts,
//! commits becoming durable, the clock (retries come due on it), a cancellation, a crash. The
//! driver around them is a model (`model.rs`) of the engine thread's loop, the workers' FIFO
//! queue and the journal — no threads, no clock, no I/O — so every seed replays exactly.
//!
//! Checked at every step (`model/`, where the rules could be broken): no attempt runs before
//! its `unit_started` is durable; a unit's `unit_started` is appended only after the success
//! (or reuse) of each of its dependencies; a non-idempotent attempt never waits for a worker
//! behind other attempts (its start means its process is about to exist) and never runs while
//! an earlier attempt of its unit has no durable end; no unit runs twice at once; nothing whose
//! success is durable runs again (across crashes); `max_parallel` and `max_jobs` hold; the run
//! always ends (every state has a next event), with every unit whose dependencies succeeded
//! done or failed. After every durable commit, and at each crash, a resume from the durable
//! journal stops for a human exactly when a non-idempotent unit is left half done (a start
//! without an end, or an end that cut it off) — `model/crash.rs`; after a crash the run
//! resumes from that journal alone (an idempotent unit left in flight runs again).
//!
//! `APOLLO_SIM_SEEDS=N` runs N seeds (default [`DEFAULT_SEEDS`]) from `APOLLO_SIM_FIRST`
//! (default 0); `cargo xtask sim --seeds N` does the same. A failing seed is printed with the
//! command that replays it alone (`APOLLO_SIM_SEED=S`).

mod model;

use model::Sim;

/// Seeds run by `cargo test` (a few seconds on a loaded 2-core machine, debug build).
const DEFAULT_SEEDS: u64 = 10_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.parse() {
        Ok(number) => Some(number),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

/// Run one seed: its violations, or the panic it ended in.
fn run_seed(seed: u64) -> Result<usize, String> {
    std::panic::catch_unwind(|| Sim::new(seed).run()).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
            .unwrap_or_default();
        Err(format!("panicked: {message}"))
    })
}

#[test]
fn the_scheduler_keeps_its_rules_under_random_dags_outcomes_and_event_orders() {
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
        assert_eq!(Sim::new(seed).run(), Sim::new(seed).run());
        let trace = |seed| {
            let mut sim = Sim::new(seed);
            sim.run().map(|_| sim.journal_trace())
        };
        assert_eq!(trace(seed), trace(seed));
    }
}

#[test]
fn the_simulation_notices_a_broken_write_ahead_rule() {
    // Jobs handed to the workers before their batch is durable: the check must see it.
    let caught = (0..200).any(|seed| {
        let mut sim = Sim::new(seed);
        sim.break_write_ahead = true;
        matches!(sim.run(), Err(violation) if violation.contains("before its unit_started"))
    });
    assert!(
        caught,
        "no seed caught an attempt run before its start was durable"
    );
}

#[test]
fn the_simulation_notices_a_non_idempotent_unit_committed_ahead() {
    // Every unit treated as idempotent by the decision, but not by the checks.
    let caught = (0..500).any(|seed| {
        let mut sim = Sim::new(seed);
        sim.decide_all_idempotent = true;
        matches!(sim.run(), Err(violation) if violation.contains("waits behind"))
    });
    assert!(
        caught,
        "no seed caught a non-idempotent attempt queued behind others"
    );
}

#[test]
fn the_simulation_notices_a_resume_that_runs_a_done_unit_again() {
    // After a crash, the resume policy told to run every unit again: a unit whose success is
    // durable runs again, and the check must see it.
    let caught = (0..500).any(|seed| {
        let mut sim = Sim::new(seed);
        sim.break_resume = true;
        matches!(sim.run(), Err(violation) if violation.contains("holds its success"))
    });
    assert!(caught, "no seed caught a done unit run again after a crash");
}
