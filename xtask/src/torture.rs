//! `cargo xtask torture [--iterations N] [--seed S] [--first I] [--durability fsync|batched]
//! [--slurm]`: the long crash-injection run (`--durability`: the mode every generated pipeline
//! asks for; `--slurm`: about a third of the units run on the local Slurm cluster).
//!
//! Builds `apollo` and the `torture` harness (release: the attack is on apollo's logic, not on
//! a debug build's slowness), then runs the harness, which SIGKILLs apollo at random moments,
//! resumes it until each generated pipeline completes, and checks the invariants (see
//! `tests/src/torture.rs`). Mixed into the same schedule, from a generator of their own: state
//! directory tampering (the lock file a symbolic link, FIFOs and links to `/dev/zero` planted as
//! segments, the lock file deleted or the run folder moved away while apollo runs) and journal
//! clock steps back (`APOLLO_CLOCK_OFFSET`), each with the invariant it checks. The harness prints iterations, kills, resumes and violations;
//! this command fails when it reports any violation.

use std::path::Path;
use std::process::Command;

/// The options of `cargo xtask torture`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// How many pipelines to generate and attack.
    pub(crate) iterations: u64,
    /// The seed of the generator.
    pub(crate) seed: u64,
    /// The first iteration's index (to replay one iteration of a long run).
    pub(crate) first: u64,
    /// The journal durability mode of the generated pipelines (`fsync`, `batched`), when
    /// given.
    pub(crate) durability: Option<String>,
    /// Whether some units run on the local Slurm cluster.
    pub(crate) slurm: bool,
}

impl Options {
    /// Parse the arguments after `torture`.
    pub(crate) fn parse(args: &[&str]) -> Result<Self, String> {
        let mut options = Options {
            iterations: 200,
            seed: 1,
            first: 0,
            durability: None,
            slurm: false,
        };
        let mut iter = args.iter();
        while let Some(&flag) = iter.next() {
            if flag == "--slurm" {
                options.slurm = true;
                continue;
            }
            if flag == "--durability" {
                match iter.next() {
                    Some(&mode @ ("fsync" | "batched")) => {
                        options.durability = Some(mode.to_owned())
                    }
                    Some(other) => {
                        return Err(format!(
                            "torture: --durability takes fsync or batched, not `{other}`"
                        ));
                    }
                    None => return Err("torture: --durability needs a mode".to_owned()),
                }
                continue;
            }
            let target = match flag {
                "--iterations" => &mut options.iterations,
                "--seed" => &mut options.seed,
                "--first" => &mut options.first,
                other => return Err(format!("torture: unknown argument `{other}`")),
            };
            let value = iter
                .next()
                .ok_or_else(|| format!("torture: {flag} needs a number"))?;
            *target = value
                .parse()
                .map_err(|_| format!("torture: {flag} takes a number, not `{value}`"))?;
        }
        Ok(options)
    }
}

/// Build both binaries in release mode, run the harness, fail on any violation.
pub(crate) fn run(root: &Path, options: &Options) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    #[allow(clippy::disallowed_methods, reason = "xtask drives cargo")]
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            "apollo-cli",
            "--bin",
            "apollo",
            "-p",
            "apollo-tests",
            "--bin",
            "torture",
        ])
        .current_dir(root)
        .status()
        .map_err(|error| format!("cannot run cargo build: {error}"))?;
    if !status.success() {
        return Err(format!("building apollo and torture failed ({status})"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), Into::into)
        .join("release");
    println!(
        "torture: {} iterations from seed {} (first {}), durability {}",
        options.iterations,
        options.seed,
        options.first,
        options.durability.as_deref().unwrap_or("fsync")
    );
    #[allow(clippy::disallowed_methods, reason = "xtask runs the harness it built")]
    let mut harness = Command::new(target.join("torture"));
    harness
        .arg("--apollo")
        .arg(target.join("apollo"))
        .args(["--iterations", &options.iterations.to_string()])
        .args(["--seed", &options.seed.to_string()])
        .args(["--first", &options.first.to_string()]);
    if options.slurm {
        harness.arg("--slurm");
    }
    if let Some(durability) = &options.durability {
        harness.args(["--durability", durability]);
    }
    let status = harness
        .current_dir(root)
        .status()
        .map_err(|error| format!("cannot run the torture harness: {error}"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => Err("torture found violations (listed above)".into()),
        _ => Err(format!("the torture harness failed ({status})")),
    }
}

#[cfg(test)]
mod tests {
    use super::Options;

    #[test]
    fn parses_defaults_and_flags() {
        assert_eq!(
            Options::parse(&[]),
            Ok(Options {
                iterations: 200,
                seed: 1,
                first: 0,
                durability: None,
                slurm: false,
            })
        );
        assert_eq!(
            Options::parse(&["--seed", "7", "--iterations", "3", "--first", "2"]),
            Ok(Options {
                iterations: 3,
                seed: 7,
                first: 2,
                durability: None,
                slurm: false,
            })
        );
        assert_eq!(
            Options::parse(&["--durability", "batched"]).map(|options| options.durability),
            Ok(Some("batched".to_owned()))
        );
        assert_eq!(
            Options::parse(&["--slurm"]).map(|options| options.slurm),
            Ok(true)
        );
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(Options::parse(&["--iterations"]).is_err());
        assert!(Options::parse(&["--iterations", "many"]).is_err());
        assert!(Options::parse(&["--fast"]).is_err());
        assert!(Options::parse(&["--durability", "none"]).is_err());
        assert!(Options::parse(&["--durability"]).is_err());
    }
}
