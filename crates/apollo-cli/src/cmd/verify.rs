//! `apollo verify [RUN]`: check the integrity of one run's journal, or of every run.

use std::io::Write;
use std::path::Path;

use crate::cmd::StateArgs;
use crate::cmd::replay::TableFormat;
use crate::error::{CliError, output};
use crate::exit::Exit;
use crate::state;

/// Arguments of `apollo verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {
    /// The run: an id, a unique prefix or suffix, `latest`, `latest~N` or `last-success` [default: every run]
    #[arg(value_name = "RUN")]
    pub(crate) run: Option<String>,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    /// Output format (json: one document, `runs` with each run's verdict)
    #[arg(long, value_enum, default_value_t = TableFormat::Text)]
    pub(crate) format: TableFormat,
    /// Take the group and other permission bits off every file and folder of the state
    /// directory (an older apollo left blobs 0444 under 0755 folders), keeping the owner's
    #[arg(long)]
    pub(crate) fix_permissions: bool,
}

/// Reads every record of the run(s); exit 3 when any journal is corrupt, 0 otherwise (a torn
/// tail — the last write of a killed apollo, never acknowledged — is only a warning).
pub(crate) fn run(
    args: &VerifyArgs,
    state_dir: Option<&Path>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let state = args.state.open(state_dir)?;
    permissions(state.path(), args.fix_permissions, stdout, stderr)?;
    let runs = match &args.run {
        Some(spec) => vec![state::resolve_run(&state, spec)?],
        None => state.run_ids()?,
    };
    let mut n_corrupt = 0;
    let json = args.format == TableFormat::Json;
    let mut documents = Vec::new();
    for run_id in &runs {
        let report = match state.verify_run(run_id) {
            Ok(report) => report,
            Err(error) => {
                n_corrupt += 1;
                if json {
                    documents.push(serde_json::json!({
                        "run": run_id.as_str(), "ok": false, "error": error.to_string(),
                    }));
                } else {
                    let _ = writeln!(stderr, "{run_id}: cannot be read: {error}");
                }
                continue;
            }
        };
        if json {
            n_corrupt += usize::from(!report.is_clean());
            documents.push(serde_json::json!({
                "run": run_id.as_str(),
                "ok": report.is_clean(),
                "segments": report.n_segments,
                "records": report.n_records,
                "last_seq": report.last_seq,
                "corruptions": report.corruptions.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "torn_tail": report.torn_tail.as_ref().map(ToString::to_string),
            }));
            continue;
        }
        let segments = if report.n_segments == 1 {
            "segment"
        } else {
            "segments"
        };
        if report.is_clean() {
            writeln!(
                stdout,
                "{run_id}: ok, {} records in {} {segments}",
                report.n_records, report.n_segments
            )
            .map_err(output)?;
        } else {
            n_corrupt += 1;
            writeln!(
                stdout,
                "{run_id}: CORRUPT, {} good records in {} {segments}, {} problem{}",
                report.n_records,
                report.n_segments,
                report.corruptions.len(),
                if report.corruptions.len() == 1 {
                    ""
                } else {
                    "s"
                }
            )
            .map_err(output)?;
            for corruption in &report.corruptions {
                let _ = writeln!(stderr, "  error: {corruption}");
            }
        }
        if let Some(torn) = &report.torn_tail {
            let _ = writeln!(
                stderr,
                "  warning: torn tail (the last write of an apollo that was killed; never acknowledged, cut off by the next run): {torn}"
            );
        }
    }
    if json {
        let document = serde_json::json!({"schema": "apollo.verify/1", "runs": documents, "corrupt": n_corrupt});
        serde_json::to_writer_pretty(&mut *stdout, &document)
            .map_err(|error| output(error.into()))?;
        writeln!(stdout).map_err(output)?;
        return Ok(if n_corrupt > 0 {
            Exit::Corruption
        } else {
            Exit::Success
        });
    }
    if n_corrupt > 0 {
        let _ = writeln!(
            stderr,
            "error: {n_corrupt} of {} run{} corrupt; `apollo replay RUN --salvage` reads past bad records",
            runs.len(),
            if runs.len() == 1 { "" } else { "s" }
        );
        return Ok(Exit::Corruption);
    }
    Ok(Exit::Success)
}

/// Warns when files or folders of the state directory can be read by other users (a state
/// directory made by an older apollo, or changed by hand); with `fix`, makes them private.
fn permissions(
    root: &Path,
    fix: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CliError> {
    if fix {
        let n_changed = apollo_store::make_private(root)?;
        writeln!(
            stdout,
            "{}: made {n_changed} file{} and folder{} private (owner only)",
            root.display(),
            if n_changed == 1 { "" } else { "s" },
            if n_changed == 1 { "" } else { "s" },
        )
        .map_err(output)?;
        return Ok(());
    }
    let readable = apollo_store::readable_by_others(root)?;
    if let Some(first) = readable.first() {
        let _ = writeln!(
            stderr,
            "warning: {} file{} and folder{} of the state directory {} are readable by other users (captured files, logs, caches), e.g. {} ({:o})\n  = help: run `apollo verify --fix-permissions` to make them the owner's only",
            readable.len(),
            if readable.len() == 1 { "" } else { "s" },
            if readable.len() == 1 { "" } else { "s" },
            root.display(),
            first.path.display(),
            first.mode,
        );
    }
    Ok(())
}
