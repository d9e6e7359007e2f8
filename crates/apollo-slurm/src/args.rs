//! The `sbatch` command lines: an attempt's own job, and a job array of several attempts.

use std::path::Path;

use apollo_core::AttemptRequest;
use apollo_core::model::Unit;

use crate::client::ClientFailure;
use crate::script::SCRIPT;

/// The `sbatch` arguments of an attempt (without `--parsable`).
pub(crate) fn sbatch_args(
    request: &AttemptRequest<'_>,
    name: &str,
    token: &str,
    dir: &Path,
) -> Vec<String> {
    let path = |file: &str| dir.join(file).display().to_string();
    let mut args = vec![
        format!("--job-name={name}"),
        // The token again where a site's tools show it (`squeue -o %k`).
        format!("--comment=apollo-token:{token}"),
        format!("--chdir={}", dir.display()),
        format!("--output={}", path("stdout")),
        format!("--error={}", path("stderr")),
    ];
    args.extend(options_args(request.unit));
    args.push(path(SCRIPT));
    args
}

/// The `sbatch` arguments of a job array of `count` attempts whose files are in the
/// submission folder `dir` (its `array.sh` is the job script). Each task's own output goes to
/// its attempt's `stdout`/`stderr` (`array.sh` redirects it); what Slurm itself writes for a
/// task (a `slurmstepd` message) goes to `dir/<task>.out`.
pub(crate) fn array_args(
    unit: &Unit,
    name: &str,
    token: &str,
    dir: &Path,
    count: usize,
) -> Vec<String> {
    let mut args = vec![
        format!("--job-name={name}"),
        format!("--comment=apollo-token:{token}"),
        format!("--chdir={}", dir.display()),
        format!("--output={}", dir.join("%a.out").display()),
        format!("--array=0-{}", count.saturating_sub(1)),
    ];
    args.extend(options_args(unit));
    args.push(dir.join(crate::array::ARRAY_SCRIPT).display().to_string());
    args
}

/// The options that come from the unit (its timeout, its resources, its `extra_args`), the
/// same for every attempt of it: attempts whose options are equal may share a job array.
pub(crate) fn options_args(unit: &Unit) -> Vec<String> {
    let resources = &unit.resources;
    let mut args = vec![
        "--open-mode=append".to_owned(),
        // apollo decides about retries; a job Slurm requeued would run twice.
        "--no-requeue".to_owned(),
    ];
    if let Some(timeout) = unit.timeout {
        // Slurm's limit is whole minutes: rounded up, so apollo's own deadline comes first.
        let minutes = timeout.as_secs().div_ceil(60).max(1);
        args.push(format!("--time={minutes}"));
    }
    if let Some(cpus) = resources.cpus {
        args.push(format!("--cpus-per-task={cpus}"));
    }
    if let Some(memory) = resources.memory {
        args.push(format!("--mem={}M", memory.div_ceil(1 << 20)));
    }
    if let Some(gpus) = resources.gpus {
        args.push(format!("--gpus={gpus}"));
    }
    let slurm = &resources.slurm;
    for (option, value) in [
        ("partition", &slurm.partition),
        ("account", &slurm.account),
        ("qos", &slurm.qos),
    ] {
        if let Some(value) = value {
            args.push(format!("--{option}={value}"));
        }
    }
    args.extend(slurm.extra_args.iter().cloned());
    args
}

/// The attempt's error when `sbatch` refused it: what it said, and the partition, account
/// and QoS asked for (the usual culprits).
pub(crate) fn submit_error(unit: &Unit, error: &ClientFailure) -> String {
    let slurm = &unit.resources.slurm;
    let asked: Vec<String> = [
        ("partition", &slurm.partition),
        ("account", &slurm.account),
        ("qos", &slurm.qos),
    ]
    .into_iter()
    .filter_map(|(what, value)| value.as_ref().map(|value| format!("{what} `{value}`")))
    .collect();
    let asked = if asked.is_empty() {
        String::new()
    } else {
        format!(" ({})", asked.join(", "))
    };
    let mut message = format!("sbatch refused the job{asked}: {error}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_timeout_becomes_whole_minutes_and_resources_become_options() {
        let mut unit = crate::test_support::unit(apollo_core::Command::Shell("true".into()));
        unit.timeout = Some(Duration::from_secs(61));
        unit.resources.cpus = Some(4);
        unit.resources.memory = Some((1 << 30) + 1);
        unit.resources.gpus = Some(1);
        let slurm = std::sync::Arc::make_mut(&mut unit.resources.slurm);
        slurm.partition = Some("long".into());
        slurm.extra_args = vec!["--exclusive".into()];
        let dir = Path::new("/shared/a/1");
        let request = AttemptRequest::new("r", &unit, 1, dir);
        let args = sbatch_args(&request, "apollo:r:align:1:0f", "0f", dir);
        assert_eq!(
            args,
            [
                "--job-name=apollo:r:align:1:0f",
                "--comment=apollo-token:0f",
                "--chdir=/shared/a/1",
                "--output=/shared/a/1/stdout",
                "--error=/shared/a/1/stderr",
                "--open-mode=append",
                "--no-requeue",
                "--time=2",
                "--cpus-per-task=4",
                "--mem=1025M",
                "--gpus=1",
                "--partition=long",
                "--exclusive",
                "/shared/a/1/slurm.sh",
            ]
        );
    }

    #[test]
    fn an_array_runs_its_submission_folders_script_with_the_units_options() {
        let mut unit = crate::test_support::unit(apollo_core::Command::Shell("true".into()));
        unit.resources.cpus = Some(2);
        let dir = Path::new("/shared/run/slurm/0f");
        let args = array_args(&unit, "apollo:r:@array:3:0f", "0f", dir, 3);
        assert_eq!(
            args,
            [
                "--job-name=apollo:r:@array:3:0f",
                "--comment=apollo-token:0f",
                "--chdir=/shared/run/slurm/0f",
                "--output=/shared/run/slurm/0f/%a.out",
                "--array=0-2",
                "--open-mode=append",
                "--no-requeue",
                "--time=2",
                "--cpus-per-task=2",
                "/shared/run/slurm/0f/array.sh",
            ]
        );
    }
}
