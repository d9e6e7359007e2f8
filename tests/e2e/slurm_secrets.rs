//! Secrets on a real Slurm cluster (issue 36, DESIGN §18 "Secrets"): the value reaches the job
//! through a 0600 file in the attempt folder that the wrapper reads and deletes; it is in no
//! file of the state directory afterwards (the logs masked), and slurmctld keeps it neither in
//! the job script nor in the job's environment (`sbatch` runs without the secret's source
//! variable).

use std::path::Path;

use crate::slurm_cluster::{cluster, guard};
use crate::support::Apollo;

const VALUE: &str = "slurm-secret-93b7e1";

/// Every file under `dir` whose bytes contain `needle` (unreadable ones left out).
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                stack.push(path);
            } else if std::fs::read(&path)
                .unwrap_or_default()
                .windows(needle.len())
                .any(|window| window == needle.as_bytes())
            {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn a_slurm_units_secret_reaches_its_job_and_is_kept_nowhere() {
    if !cluster() {
        return;
    }
    let mut apollo = Apollo::new();
    let _guard = guard(&apollo);
    apollo.config(
        "secrets:\n  TOKEN: {env: APOLLO_E2E_SLURM_TOKEN}\ndefaults: {executor: slurm}\nunits:\n\
         - {name: deploy, secrets: [TOKEN], \
            execute: 'printf %s \"$TOKEN\" > markers/seen && echo \"token is $TOKEN\"'}\n",
    );
    apollo.envs(&[("APOLLO_E2E_SLURM_TOKEN", VALUE)]);
    apollo.args(&["run"]).run().code(0);
    assert_eq!(
        std::fs::read_to_string(apollo.path("markers/seen")).unwrap(),
        VALUE
    );
    assert_eq!(
        files_containing(&apollo.path(".apollo"), VALUE),
        Vec::<String>::new()
    );
    let logs = apollo.args(&["logs", "latest", "deploy"]).run();
    logs.code(0);
    assert!(logs.stdout.contains("token is ***"), "{}", logs.stdout);
    // slurmctld's copy of the job (its script and environment), where this test can read it.
    let spool = Path::new("/var/spool/slurmctld");
    assert_eq!(files_containing(spool, VALUE), Vec::<String>::new());
}
