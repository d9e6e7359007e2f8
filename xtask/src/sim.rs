//! `cargo xtask sim [--seeds N] [--first S] [--seed S]`: the scheduler's deterministic
//! simulation (`apollo-core`, `engine/tests/sim/`) over many more seeds than `cargo test`
//! runs, or one seed replayed alone. A failing seed is printed with the command replaying it.

use std::path::Path;

/// What to run: `count` seeds from `first`, or the one `seed`.
struct Options {
    first: u64,
    count: u64,
    seed: Option<u64>,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut options = Options {
        first: 0,
        count: 1_000_000,
        seed: None,
    };
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = value
            .parse::<u64>()
            .map_err(|_| format!("{flag} takes a number, not {value:?}"))?;
        match *flag {
            "--seeds" => options.count = number,
            "--first" => options.first = number,
            "--seed" => options.seed = Some(number),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let options = parse(args)?;
    #[allow(clippy::disallowed_methods)] // xtask drives cargo.
    let mut command =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .args([
            "test",
            "-p",
            "apollo-core",
            "--lib",
            "engine::tests::sim::the_scheduler_keeps_its_rules",
            "--",
            "--nocapture",
        ])
        .current_dir(root);
    match options.seed {
        Some(seed) => command.env("APOLLO_SIM_SEED", seed.to_string()),
        None => command
            .env("APOLLO_SIM_FIRST", options.first.to_string())
            .env("APOLLO_SIM_SEEDS", options.count.to_string()),
    };
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the simulation found a violation ({status}): see the seed above"
        ))
    }
}
