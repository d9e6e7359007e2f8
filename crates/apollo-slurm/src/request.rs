//! What a job asks for — partition, nodes, memory — recorded with its `unit_submitted`
//! (journal format 1.7), so its cost is priced by the request (issue 40, DESIGN §18).
//!
//! The request is read from the same options `sbatch` gets (`args.rs::options_args`): the
//! unit's `resources:`, then its `extra_args`, which come later on the command line and so win
//! as they do for `sbatch`. A unit that names no partition runs in the cluster's default one,
//! asked of `scontrol show partition` once.

use apollo_core::model::Unit;
use apollo_core::{AttemptEvent, JobRequest};

use crate::executor::{EXECUTOR_NAME, SlurmExecutor};

impl SlurmExecutor {
    /// The `unit_submitted` report of `unit`'s job `job_id`, with what the job asked for.
    pub(crate) fn submitted_event(&self, unit: &Unit, job_id: &str) -> AttemptEvent {
        let request = job_request(unit, || self.client.default_partition());
        AttemptEvent::submitted(EXECUTOR_NAME, job_id).with_request(request)
    }
}

/// What `unit`'s job asks for; `default_partition` is asked only when the unit names none.
pub(crate) fn job_request(
    unit: &Unit,
    default_partition: impl FnOnce() -> Option<String>,
) -> JobRequest {
    let resources = &unit.resources;
    let extra = &resources.slurm.extra_args;
    let partition = option_value(extra, "--partition", "-p")
        .or_else(|| resources.slurm.partition.clone())
        .or_else(default_partition);
    let nodes = option_value(extra, "--nodes", "-N")
        .and_then(|nodes| leading_number(&nodes))
        .and_then(|nodes| u32::try_from(nodes).ok())
        .unwrap_or(1);
    let cpus = option_value(extra, "--cpus-per-task", "-c")
        .and_then(|cpus| leading_number(&cpus))
        .or(resources.cpus.map(u64::from))
        .unwrap_or(1);
    let mem_mib = match option_value(extra, "--mem", "") {
        Some(mem) => slurm_mib(&mem),
        None => match option_value(extra, "--mem-per-cpu", "") {
            Some(per_cpu) => slurm_mib(&per_cpu).map(|mib| mib.saturating_mul(cpus)),
            None => resources.memory.map(|bytes| bytes.div_ceil(1 << 20)),
        },
    };
    JobRequest::new(partition, Some(nodes), mem_mib)
}

/// The value of the last `--long=V`, `--long V`, `-sV` or `-s V` in `args` (`short` empty:
/// none), as `sbatch` takes the last one.
fn option_value(args: &[String], long: &str, short: &str) -> Option<String> {
    let mut value = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if let Some(rest) = arg.strip_prefix(long) {
            if let Some(inline) = rest.strip_prefix('=') {
                value = Some(inline.to_owned());
            } else if rest.is_empty() {
                value = args.next().cloned();
            }
        } else if !short.is_empty()
            && let Some(rest) = arg.strip_prefix(short)
        {
            value = if rest.is_empty() {
                args.next().cloned()
            } else {
                Some(rest.trim_start_matches('=').to_owned())
            };
        }
    }
    value
}

/// The number a value starts with (`2-4` → 2, the fewest nodes asked for).
fn leading_number(text: &str) -> Option<u64> {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A Slurm memory amount in MiB: a number with an optional `K`, `M` (the default), `G` or
/// `T`. `0` (all of a node's memory) is not an amount: `None`.
fn slurm_mib(text: &str) -> Option<u64> {
    let text = text.trim();
    let number = leading_number(text)?;
    let unit = text.trim_start_matches(|c: char| c.is_ascii_digit());
    let mib = match unit.to_ascii_uppercase().as_str() {
        "" | "M" | "MB" => number,
        "K" | "KB" => number.div_ceil(1024),
        "G" | "GB" => number.saturating_mul(1024),
        "T" | "TB" => number.saturating_mul(1 << 20),
        _ => return None,
    };
    (mib > 0).then_some(mib)
}

/// The default partition in `scontrol -o show partition`'s output: the `PartitionName` of the
/// line with `Default=YES`.
pub(crate) fn default_partition(output: &str) -> Option<String> {
    output
        .lines()
        .find(|line| line.split_whitespace().any(|field| field == "Default=YES"))?
        .split_whitespace()
        .find_map(|field| field.strip_prefix("PartitionName="))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(yaml_resources: &str) -> Unit {
        let text = format!(
            "units: [{{name: a, execute: 'true', executor: slurm, resources: {yaml_resources}}}]"
        );
        let loaded = apollo_core::config::load_str(&text, "p.yaml".as_ref()).unwrap();
        loaded.pipeline.units[0].clone()
    }

    #[test]
    fn the_request_comes_from_resources_and_extra_args_win_as_for_sbatch() {
        let plain = job_request(&unit("{memory: 1500M, slurm: {partition: gpu}}"), || {
            panic!("the unit names its partition")
        });
        assert_eq!(
            plain,
            JobRequest::new(Some("gpu".into()), Some(1), Some(1500))
        );
        let extra = job_request(
            &unit(
                "{cpus: 4, memory: 1G, slurm: {extra_args: ['-p', batch, '--nodes=2-3', '--mem-per-cpu=2G']}}",
            ),
            || None,
        );
        assert_eq!(
            extra,
            JobRequest::new(Some("batch".into()), Some(2), Some(8192))
        );
        let overridden = job_request(
            &unit("{memory: 1G, slurm: {extra_args: [--mem=512]}}"),
            || Some("debug".into()),
        );
        assert_eq!(
            overridden,
            JobRequest::new(Some("debug".into()), Some(1), Some(512))
        );
        let whole_node = job_request(&unit("{slurm: {extra_args: [--mem=0, -N4]}}"), || None);
        assert_eq!(whole_node, JobRequest::new(None, Some(4), None));
    }

    #[test]
    fn the_default_partition_is_the_one_marked_default() {
        let output = "PartitionName=long AllowGroups=ALL Default=NO MaxTime=UNLIMITED\n\
                      PartitionName=debug AllowGroups=ALL Default=YES Nodes=vm\n";
        assert_eq!(default_partition(output), Some("debug".to_owned()));
        assert_eq!(default_partition("PartitionName=x Default=NO\n"), None);
    }
}
