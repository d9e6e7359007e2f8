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
    /// Give every file and folder of the state directory the modes of its sharing: a private
    /// one loses the group and other bits (an older apollo left blobs 0444 under 0755
    /// folders), keeping the owner's; one shared with a group gets folders 2770 and files 0660
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
    permissions(&state, args.fix_permissions, stdout, stderr)?;
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

/// Warns when files or folders of the state directory do not have the modes its sharing wants
/// (a private one: readable by other users, as an older apollo or a hand left them; a shared
/// one: not usable by the group, or readable by others); with `fix`, gives them those modes.
fn permissions(
    state: &apollo_store::StateDir,
    fix: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), CliError> {
    use apollo_core::sharing::Sharing;
    let root = state.path();
    let sharing = state.sharing()?;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if fix {
        let (n_changed, n_others) = apollo_store::fix_modes(root, sharing)?;
        let made = match sharing {
            Sharing::Private => "private (owner only)",
            Sharing::Group => {
                "shared with the group (folders 2770, files 0660, blobs 0440 or 0400)"
            }
        };
        writeln!(
            stdout,
            "{}: made {n_changed} file{} and folder{} {made}",
            root.display(),
            plural(n_changed),
            plural(n_changed),
        )
        .map_err(output)?;
        if n_others > 0 {
            let _ = writeln!(
                stderr,
                "warning: {n_others} file{} and folder{} belong to another user and were left as they are\n  = help: their owner (or root) runs `apollo verify --fix-permissions` to fix them",
                plural(n_others),
                plural(n_others),
            );
        }
        return Ok(());
    }
    let misfits = apollo_store::misfit_modes(root, sharing)?;
    if let Some(first) = misfits.first() {
        let what = match sharing {
            Sharing::Private => "are readable by other users (captured files, logs, caches)",
            Sharing::Group => {
                "do not have the modes of a state directory shared with its group (folders 2770, files 0660: teammates cannot use them, or other users can read them)"
            }
        };
        let fixed = match sharing {
            Sharing::Private => "to make them the owner's only",
            Sharing::Group => "to give them the group's modes",
        };
        let _ = writeln!(
            stderr,
            "warning: {} file{} and folder{} of the state directory {} {what}, e.g. {} ({:o})\n  = help: run `apollo verify --fix-permissions` {fixed}",
            misfits.len(),
            plural(misfits.len()),
            plural(misfits.len()),
            root.display(),
            first.path.display(),
            first.mode,
        );
    }
    Ok(())
}
