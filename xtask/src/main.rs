//! `cargo xtask`: Apollo-11's development chores. Kept small: std plus apollo-core and
//! apollo-store.
//!
//! * `cargo xtask check-config` — validate every pipeline under `config/` and `examples/`.
//! * `cargo xtask snapshots [--accept]` — run the workspace tests, list the pending insta
//!   snapshots (`*.snap.new`), and with `--accept` accept them (no cargo-insta needed).
//! * `cargo xtask bench-sched [--n N] [--rounds R] [--shapes chain,wide,layered] [--no-op no]` — the
//!   scheduling benchmark against the C floor runner of `../shared/bench`, make and ninja.
//! * `cargo xtask bench-scale [--n N] [--rounds R]` — N (100,000) units: `apollo check`'s
//!   time and `apollo run`'s peak RSS (issue 39 goal 3).
//! * `cargo xtask bench-slurm [--n N] [--rounds R]` — a fan-out of N instances on the local
//!   Slurm cluster: job arrays against one `sbatch` per instance (issue 39).
//! * `cargo xtask synth-run --from STATE_DIR --into STATE_DIR [--records N]` — a large run
//!   made of a real run's records, for the read benchmarks (replay, verify).
//! * `cargo xtask sim [--seeds N] [--first S] [--seed S]` — the scheduler's deterministic
//!   simulation (`apollo-core`'s `engine/tests/sim/`) over many seeds, or one replayed.
//! * `cargo xtask test [--budget SUITE=SECONDS]... [CARGO_TEST_ARGS]` — the README's test
//!   command: `cargo test --workspace`, then each suite's time and what was skipped, and why.
//! * `cargo xtask tidy` — the architecture invariants a text scan can enforce (only
//!   apollo-exec creates processes, every `unsafe` block documented, no unwrap in library
//!   code, READMEs are the crate docs, publish metadata) and the guardrails (file sizes, long
//!   functions, `unsafe` forbidden, the crate graph); also `#[test]`s, so `cargo test`
//!   enforces them.
//! * `cargo xtask man` — the man pages, generated from the CLI's clap definition, into
//!   `target/man/` (builds apollo and runs its hidden `generate-man`).
//! * `cargo xtask torture [--iterations N] [--seed S] [--first I] [--durability MODE]` — the crash-injection run
//!   (release build): SIGKILL apollo at random moments, resume, check the invariants.
#![forbid(unsafe_code)]

mod bench_scale;
mod bench_sched;
mod bench_slurm;
mod check_config;
mod sim;
mod snapshots;
mod synth_run;
mod test;
mod tidy;
mod torture;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `cargo xtask man`: builds apollo and has it write its man pages to `target/man/`.
fn man(root: &Path) -> Result<(), String> {
    let out = root.join("target").join("man");
    #[allow(clippy::disallowed_methods)] // xtask drives cargo.
    let status =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args([
                "run",
                "--quiet",
                "-p",
                "apollo-cli",
                "--bin",
                "apollo",
                "--",
                "generate-man",
            ])
            .arg(&out)
            .current_dir(root)
            .status()
            .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err(format!("`apollo generate-man` failed ({status})"));
    }
    println!(
        "man pages in {}; install them with: sudo cp target/man/*.1 /usr/local/share/man/man1/ (or ~/.local/share/man/man1/)",
        out.display()
    );
    Ok(())
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  check-config          validate every pipeline under config/ and examples/
  snapshots [--accept]  run the tests, list pending snapshots (.snap.new); --accept accepts them
  bench-sched [--n N] [--rounds R] [--shapes chain,wide,layered] [--no-op no]
                        scheduling benchmark: apollo vs the C floor runner, make and ninja
  bench-scale [--n N] [--rounds R]
                        N (100,000) units: apollo check's time and apollo run's peak RSS
  bench-slurm [--n N] [--rounds R]
                        a fan-out of N (1,000) on the local Slurm cluster: job arrays vs one job each
  synth-run --from STATE_DIR --into STATE_DIR [--records N]
                        a large run (default 1,000,000 records) from a real one, to benchmark reads
  sim [--seeds N] [--first S] [--seed S]
                        the scheduler's deterministic simulation over N seeds (1,000,000), or one
  test [--budget SUITE=SECONDS]... [CARGO_TEST_ARGS]
                        every test (cargo test --workspace), then each suite's time and what
                        was skipped here and why; a suite over its budget fails
  tidy                  check the architecture invariants (also run by `cargo test`)
  man                   write the man pages to target/man/
  torture [--iterations N] [--seed S] [--first I] [--durability fsync|batched]
                        kill apollo at random moments, resume, check the invariants (release)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let root = workspace_root();
    let result = match args.as_slice() {
        ["check-config"] => check_config::run(&root),
        ["snapshots"] => snapshots::run(&root, false),
        ["snapshots", "--accept"] => snapshots::run(&root, true),
        ["tidy"] => tidy::run(&root),
        ["man"] => man(&root),
        ["bench-sched", rest @ ..] => bench_sched::run(&root, rest),
        ["bench-slurm", rest @ ..] => bench_slurm::run(&root, rest),
        ["bench-scale", rest @ ..] => bench_scale::run(&root, rest),
        ["synth-run", rest @ ..] => synth_run::run(rest),
        ["sim", rest @ ..] => sim::run(&root, rest),
        ["test", rest @ ..] => test::run(&root, rest),
        ["torture", rest @ ..] => {
            torture::Options::parse(rest).and_then(|options| torture::run(&root, &options))
        }
        ["help" | "--help" | "-h"] => {
            print!("{USAGE}");
            Ok(())
        }
        _ => {
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: xtask's parent folder.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// Every file under `dir` (recursively, skipping hidden folders and `target`) for which
/// `keep` is true, sorted.
fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type()?.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    pending.push(path);
                }
            } else if keep(&path) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}
