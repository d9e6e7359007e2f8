//! Testing aids (public, so other crates' tests can use them): whether a Slurm cluster is up
//! on this machine, for `apollo_core::testing::require`.

use std::time::Duration;

use apollo_exec::ClientCommand;

/// Whether `sinfo` answers and shows a node ready to run jobs (`idle`, `mixed`, `allocated`
/// or `completing`), asked again for up to 30 s while it lists only nodes in other states
/// (and, on CI, while it does not answer).
/// `ci/slurm-up.sh` brings such a cluster up on a Debian machine.
pub fn cluster_is_up() -> bool {
    // A node is briefly `completing` as an earlier test's jobs end, or in another passing state:
    // while the controller answers and lists nodes, it is asked again for a while. No
    // controller (or no `sinfo`) is an answer at once, except on CI, which must have a cluster:
    // there a controller busy with an earlier test's jobs is asked again too.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match node_states() {
            None if !apollo_core::testing::on_ci() => return false,
            None if std::time::Instant::now() >= deadline => return false,
            None => std::thread::sleep(Duration::from_millis(200)),
            Some(states) if states.iter().any(|state| is_up(state)) => return true,
            Some(_) if std::time::Instant::now() >= deadline => return false,
            Some(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The nodes' states as `sinfo` prints them; `None` when it cannot say (no controller).
fn node_states() -> Option<Vec<String>> {
    let output = ClientCommand::program("sinfo")
        .args(["--noheader", "--format=%T"])
        .timeout(Duration::from_secs(20))
        .run()
        .ok()?;
    output.success().then(|| {
        output
            .stdout
            .lines()
            .map(|state| {
                state
                    .trim()
                    .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
                    .to_owned()
            })
            .collect()
    })
}

/// Whether a node in `state` takes jobs.
fn is_up(state: &str) -> bool {
    matches!(state, "idle" | "mixed" | "allocated" | "completing")
}

/// What a test prints when it needs a cluster: the `how` of `apollo_core::testing::require`.
pub const HOW_TO_GET_A_CLUSTER: &str = "run `bash ci/slurm-up.sh` as root";
