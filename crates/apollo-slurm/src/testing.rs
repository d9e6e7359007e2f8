//! Testing aids (public, so other crates' tests can use them): whether a Slurm cluster is up
//! on this machine, for `apollo_core::testing::require`.

use std::time::Duration;

use apollo_exec::ClientCommand;

/// Whether `sinfo` answers and shows a node ready to run jobs (`idle`, `mixed` or
/// `allocated`). `ci/slurm-up.sh` brings such a cluster up on a Debian machine.
pub fn cluster_is_up() -> bool {
    ClientCommand::program("sinfo")
        .args(["--noheader", "--format=%T"])
        .timeout(Duration::from_secs(20))
        .run()
        .is_ok_and(|output| {
            output.success()
                && output.stdout.lines().any(|state| {
                    let state = state
                        .trim()
                        .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
                    matches!(state, "idle" | "mixed" | "allocated")
                })
        })
}

/// What a test prints when it needs a cluster: the `how` of `apollo_core::testing::require`.
pub const HOW_TO_GET_A_CLUSTER: &str = "run `bash ci/slurm-up.sh` as root";
