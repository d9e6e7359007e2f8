//! `torture --apollo PATH [--iterations N] [--seed S] [--first I] [--workdir DIR]
//! [--durability fsync|batched]`: the
//! crash-injection harness (`apollo_tests::torture`) as a program, for `cargo xtask torture`.
//! Exits 1 when an invariant was violated, 2 on bad usage.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use apollo_tests::torture;

fn main() -> ExitCode {
    let options = match torture::parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("torture: {message}");
            return ExitCode::from(2);
        }
    };
    match torture::run(&options) {
        Ok(summary) => {
            println!("{summary}");
            if summary.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(message) => {
            eprintln!("torture: {message}");
            ExitCode::from(2)
        }
    }
}
