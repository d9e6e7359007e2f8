//! The arguments of `apollo run` and `apollo resume`, and how they map onto a
//! [`RunSession`].

use std::path::PathBuf;

use apollo_core::config::{self, ParamOverride};
use apollo_core::engine::OnInputChange;
use apollo_runner::RunSession;
use apollo_store::Durability;
use apollo_store::testing::FaultPlan;

use crate::cmd::ConfigArg;
use crate::error::CliError;

/// What to do when a succeeded unit's inputs changed (or its declared outputs are missing or
/// changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InputChange {
    /// Run an idempotent unit again; stop before an `idempotent: false` one and say what changed (exit 5): `apollo mark RUN UNIT --rerun` allows it
    Auto,
    /// Run it again with the new inputs, idempotent or not
    Rerun,
    /// Stop before running it and say what changed (exit 5), whatever the unit
    Fail,
}

/// Journal durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DurabilityArg {
    /// fdatasync every batch of records before acting on it (the default; what makes resume safe)
    Fsync,
    /// Write at once, fdatasync within the pipeline's sync_interval (10ms) off the critical path, and before an idempotent: false or Slurm unit starts; a power loss may cost the last interval's records (their idempotent units run again)
    Batched,
    /// Never fsync: for tests and benchmarks only; a crash may lose records
    None,
}

/// Options shared by `run` and `resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecutionArgs {
    /// Keep running every unit that does not depend on a failed one (like `make -k`)
    #[arg(long, short = 'k')]
    pub(crate) keep_going: bool,
    /// When a unit that already succeeded in this run has different inputs now, or its declared outputs are missing or changed
    #[arg(long, value_enum, default_value_t = InputChange::Auto, value_name = "WHAT")]
    pub(crate) on_input_change: InputChange,
    /// Run only this unit (repeat, or separate with commas), and whatever of its upstream has not succeeded
    #[arg(long, value_name = "UNIT", action = clap::ArgAction::Append, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Print what would run and why, without running anything or writing state
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Say for every unit why it runs or is not run again
    #[arg(long)]
    pub(crate) explain: bool,
    /// Run `reuse: true` units even when an earlier run already produced their outputs from identical inputs
    #[arg(long)]
    pub(crate) no_reuse: bool,
    /// Units running at once [default: the config's max_parallel]
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_parallel: Option<u32>,
    /// Wait for another apollo using the state directory to finish, instead of exiting 4
    #[arg(long)]
    pub(crate) wait: bool,
    /// Journal durability [default: the config's durability, else fsync]
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) durability: Option<DurabilityArg>,
    /// Print the units' output as they write it, each line prefixed `unit | ` (stderr: `unit ! `)
    #[arg(long)]
    pub(crate) stream: bool,
    /// When the run ends, write it as JUnit XML to PATH (for CI test reporters)
    #[arg(long, value_name = "PATH")]
    pub(crate) junit: Option<PathBuf>,
    /// Keep the run's OpenTelemetry trace (OTLP/JSON, as `apollo export --format otlp-json`) in PATH while it runs, replaced as units end
    #[arg(long, value_name = "PATH")]
    pub(crate) otlp_file: Option<PathBuf>,
    /// Output format (json: a JSON-lines event stream on stdout; with --dry-run, one document with each unit's plan)
    #[arg(long, value_enum, default_value_t = crate::cmd::replay::TableFormat::Text, conflicts_with = "stream")]
    pub(crate) format: crate::cmd::replay::TableFormat,
    /// Set a param of the pipeline for this run: `-p day=2026-11-30`, a list as `-p regions=eu,us` (repeatable; wins over --params-file)
    #[arg(short = 'p', long = "param", value_name = "NAME=VALUE")]
    pub(crate) params: Vec<String>,
    /// Read params from a YAML or JSON file holding a mapping of names to values
    #[arg(long, value_name = "FILE")]
    pub(crate) params_file: Option<PathBuf>,
    /// Who may use the state directory this command makes: private (you only: 0700, the
    /// default) or group (you and its group: folders 2770, files 0660). Chosen once, when it is
    /// made, and recorded in it; an existing one keeps its own
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) state_dir_mode: Option<StateDirMode>,
}

/// The values of `--state-dir-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StateDirMode {
    /// You only
    Private,
    /// You and the state directory's group
    Group,
}

/// Arguments of `apollo run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArg,
    /// Start a new run even if the latest one is incomplete
    #[arg(long)]
    pub(crate) fresh: bool,
    #[command(flatten)]
    pub(crate) execution: ExecutionArgs,
}

/// Arguments of `apollo resume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ResumeArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success`
    #[arg(value_name = "RUN", default_value = "latest")]
    pub(crate) run: String,
    /// The pipeline config [default: the one the run was started from]
    #[arg(long, short = 'c', value_name = "CONFIG")]
    pub(crate) config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) execution: ExecutionArgs,
}

impl ExecutionArgs {
    /// The param values given on the command line: the params file's, then each `-p`.
    pub(crate) fn param_overrides(&self) -> Result<Vec<ParamOverride>, CliError> {
        param_overrides(&self.params, self.params_file.as_deref())
    }

    /// `session` with these options. The journal's options (and `APOLLO_FAULTS`) matter only
    /// to a real run: a dry run writes nothing.
    pub(crate) fn configure<'a>(
        &self,
        session: RunSession<'a>,
    ) -> Result<RunSession<'a>, CliError> {
        let mut session = session
            .keep_going(self.keep_going)
            .on_input_change(match self.on_input_change {
                InputChange::Auto => OnInputChange::Auto,
                InputChange::Rerun => OnInputChange::Rerun,
                InputChange::Fail => OnInputChange::Fail,
            })
            .only(self.only.clone())
            .reuse(!self.no_reuse)
            .wait_for_lock(self.wait)
            .state_dir_mode(self.state_dir_mode.map(|mode| match mode {
                StateDirMode::Private => apollo_core::sharing::Sharing::Private,
                StateDirMode::Group => apollo_core::sharing::Sharing::Group,
            }));
        if let Some(max_parallel) = self.max_parallel {
            session = session.max_parallel(usize::try_from(max_parallel).unwrap_or(usize::MAX));
        }
        if !self.dry_run {
            let mut options = apollo_runner::pipeline_writer_options(session.pipeline())
                .faults(fault_plan_from_env()?);
            if let Some(durability) = self.durability {
                options = options.durability(match durability {
                    DurabilityArg::Fsync => Durability::Fsync,
                    DurabilityArg::Batched => Durability::Batched,
                    DurabilityArg::None => Durability::None,
                });
            }
            if let Some(clock) = clock_from_env()? {
                options = options.clock(clock);
            }
            session = session.writer_options(options);
        }
        Ok(session)
    }
}

/// `APOLLO_FAULTS=write:5:ENOSPC,fsync:3:EIO` injects journal I/O faults: a testing hook for
/// the crash and full-disk tests, documented in apollo-store.
fn fault_plan_from_env() -> Result<FaultPlan, CliError> {
    match std::env::var("APOLLO_FAULTS") {
        Ok(text) if !text.is_empty() => text.parse().map_err(|error| CliError::Usage {
            message: format!("APOLLO_FAULTS: {error}"),
        }),
        _ => Ok(FaultPlan::default()),
    }
}

/// `APOLLO_CLOCK_OFFSET=SECONDS[,STEP]` shifts the journal's clock by SECONDS (signed), and then
/// by STEP more seconds at each reading: a testing hook for the torture harness, which steps the
/// clock back between invocations and during a run. Record times only; nothing orders runs by it.
fn clock_from_env() -> Result<Option<apollo_store::testing::Clock>, CliError> {
    let Ok(text) = std::env::var("APOLLO_CLOCK_OFFSET") else {
        return Ok(None);
    };
    let usage = || CliError::Usage {
        message: format!("APOLLO_CLOCK_OFFSET: expected SECONDS[,STEP], got `{text}`"),
    };
    let mut parts = text.split(',');
    let offset: i64 = parts
        .next()
        .and_then(|part| part.trim().parse().ok())
        .ok_or_else(usage)?;
    let step: i64 = match parts.next() {
        Some(part) => part.trim().parse().map_err(|_| usage())?,
        None => 0,
    };
    if parts.next().is_some() {
        return Err(usage());
    }
    let readings = std::sync::atomic::AtomicI64::new(0);
    Ok(Some(std::sync::Arc::new(move || {
        let n = readings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seconds = offset.saturating_add(step.saturating_mul(n));
        chrono::Utc::now()
            + chrono::TimeDelta::try_seconds(seconds).unwrap_or(chrono::TimeDelta::zero())
    })))
}

/// The param values given on a command line: the params file's, then each `-p NAME=VALUE`.
pub(crate) fn param_overrides(
    params: &[String],
    params_file: Option<&std::path::Path>,
) -> Result<Vec<ParamOverride>, CliError> {
    let mut overrides = match params_file {
        Some(path) => config::read_params_file(path)?,
        None => Vec::new(),
    };
    for given in params {
        let Some((name, value)) = given.split_once('=') else {
            return Err(CliError::Usage {
                message: format!(
                    "`-p {given}`: a param is given as NAME=VALUE, e.g. `-p day=2026-11-30`"
                ),
            });
        };
        overrides.push(ParamOverride::text(
            name.trim(),
            value,
            format!("given as `-p {given}`"),
        ));
    }
    Ok(overrides)
}
