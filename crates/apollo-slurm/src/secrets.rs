//! Secrets on Slurm (DESIGN §18 "Secrets", issue 36): a unit's secrets reach its job through
//! a `secrets` file in the attempt folder, `0600`, written before `sbatch`, which the wrapper
//! reads (exporting each value as an environment variable) and deletes before anything of the
//! unit runs. The values are never in the job script (slurmctld keeps a copy of it) nor on a
//! command line. apollo deletes the file itself when the attempt is over and it is still there
//! (a job that never started).
//!
//! The job writes its output on the compute node, where apollo is not: the values are masked
//! (`***`, values of 6 bytes or more, as for local units) in the attempt's `stdout` and
//! `stderr` when apollo records the attempt — before it hashes the output or anyone reads the
//! logs through apollo. Until then they are in files of the attempt folder, which is its
//! owner's only (`0700`).

use std::io::Read as _;
use std::path::Path;

use apollo_core::model::Unit;
use apollo_exec::{Masker, SecretValues, write_attempt_file};

use crate::result::read_small;
use crate::script::{RESULT, quote};

/// The attempt folder's file of secret values, for the wrapper.
pub(crate) const SECRETS: &str = "secrets";

/// Writes the values of the secrets `unit` receives to `dir/secrets` (`0600`): `NAME='value'`
/// and `export NAME` lines. Nothing for a unit without secrets.
pub(crate) fn write_secrets(values: &SecretValues, unit: &Unit, dir: &Path) -> Result<(), String> {
    if unit.secrets.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for name in unit.secrets.keys() {
        let value = values.get(name).ok_or_else(|| {
            format!("the value of secret `{name}` was not read when the run started")
        })?;
        if !is_shell_name(name) {
            return Err(format!(
                "secret `{name}` cannot be an environment variable of a Slurm job (a name of \
                 letters, digits and `_`, not starting with a digit)"
            ));
        }
        text.push_str(&format!("{name}={}\nexport {name}\n", quote(value)));
    }
    let path = dir.join(SECRETS);
    write_attempt_file(&path, text.as_bytes())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// Whether `name` can be a shell variable's name.
fn is_shell_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|first| first == b'_' || first.is_ascii_alphabetic())
        && bytes.all(|byte| byte == b'_' || byte.is_ascii_alphanumeric())
}

/// The job of the attempt in `dir` is over: its `secrets` file goes (a job that never started
/// left it), and the values of `unit`'s secrets are masked in its `stdout` and `stderr`, the
/// range of `stdout` that execute wrote (in `result`) moved to match.
pub(crate) fn settle(values: &SecretValues, unit: &Unit, dir: &Path) {
    if unit.secrets.is_empty() {
        return;
    }
    let _ = std::fs::remove_file(dir.join(SECRETS));
    let masked: Vec<&str> = unit
        .secrets
        .keys()
        .filter_map(|name| values.get(name))
        .collect();
    if masked.is_empty() {
        return;
    }
    let result = read_small(&dir.join(RESULT)).ok().flatten();
    let range = result.as_deref().and_then(execute_range);
    let _ = mask_file(&dir.join("stderr"), &masked, None);
    if let Ok(Some(moved)) = mask_file(&dir.join("stdout"), &masked, range)
        && let Some(text) = result
    {
        let rewritten: String = text
            .lines()
            .map(|line| {
                if line.starts_with("execute_stdout ") {
                    format!("execute_stdout {} {}\n", moved.0, moved.1)
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        let _ = write_attempt_file(&dir.join(RESULT), rewritten.as_bytes());
    }
}

/// `execute_stdout <start> <end>` in a `result` file.
fn execute_range(result: &str) -> Option<(u64, u64)> {
    let line = result
        .lines()
        .find_map(|line| line.strip_prefix("execute_stdout "))?;
    let mut words = line.split_whitespace().map(str::parse::<u64>);
    match (words.next(), words.next()) {
        (Some(Ok(start)), Some(Ok(end))) => Some((start, end.max(start))),
        _ => None,
    }
}

/// Rewrites the regular file `path` with `values` masked, each part of it (before `range`,
/// the range, after it) masked on its own: the range's new bounds. `Ok(None)`: no file, or
/// nothing to change.
fn mask_file(
    path: &Path,
    values: &[&str],
    range: Option<(u64, u64)>,
) -> std::io::Result<Option<(u64, u64)>> {
    let Some(mut file) = apollo_exec::open_attempt_file(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let len = bytes.len() as u64;
    let (start, end) = range.map_or((len, len), |(start, end)| (start.min(len), end.min(len)));
    let cut = |at: u64| usize::try_from(at).unwrap_or(bytes.len());
    let mut out = Vec::with_capacity(bytes.len());
    let mut bounds = (0, 0);
    for (part, ends_at) in [
        (&bytes[..cut(start)], 0),
        (&bytes[cut(start)..cut(end)], 1),
        (&bytes[cut(end)..], 2),
    ] {
        let mut masker = Masker::new(values.iter().copied());
        out.extend(masker.push(part));
        out.extend(masker.finish());
        match ends_at {
            0 => bounds.0 = out.len() as u64,
            1 => bounds.1 = out.len() as u64,
            _ => {}
        }
    }
    if out == bytes {
        return Ok(None);
    }
    write_attempt_file(path, &out)?;
    Ok(Some(bounds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> SecretValues {
        let mut values = SecretValues::new();
        values.insert("API_TOKEN", "s3cr3t-'value'");
        values
    }

    fn unit_with_secret() -> Unit {
        let mut unit = crate::test_support::unit(apollo_core::Command::Shell("true".into()));
        unit.secrets.insert(
            "API_TOKEN".into(),
            apollo_core::model::SecretSource::Env("DEPLOY_TOKEN".into()),
        );
        unit
    }

    #[test]
    fn the_secrets_file_is_private_and_exports_each_value_quoted() {
        let dir = tempfile::tempdir().unwrap();
        write_secrets(&values(), &unit_with_secret(), dir.path()).unwrap();
        let path = dir.path().join(SECRETS);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "API_TOKEN='s3cr3t-'\\''value'\\'''\nexport API_TOKEN\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A value that was not read is an error, not an empty variable.
        let error = write_secrets(&SecretValues::new(), &unit_with_secret(), dir.path());
        assert!(error.unwrap_err().contains("API_TOKEN"));
    }

    #[test]
    fn settling_masks_the_logs_and_moves_executes_range_and_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "s3cr3t-'value'";
        let stdout = format!("prep {secret}\nexec {secret} done\nafter\n");
        std::fs::write(dir.path().join("stdout"), &stdout).unwrap();
        std::fs::write(dir.path().join("stderr"), format!("oops {secret}\n")).unwrap();
        std::fs::write(dir.path().join(SECRETS), "x").unwrap();
        let start = stdout.find("exec").unwrap();
        let end = stdout.find("after").unwrap();
        std::fs::write(
            dir.path().join(RESULT),
            format!("end 1\nsignal 0\nexecute_stdout {start} {end}\ncpu\n"),
        )
        .unwrap();
        settle(&values(), &unit_with_secret(), dir.path());
        let masked = std::fs::read_to_string(dir.path().join("stdout")).unwrap();
        assert_eq!(masked, "prep ***\nexec *** done\nafter\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("stderr")).unwrap(),
            "oops ***\n"
        );
        assert!(!dir.path().join(SECRETS).exists());
        let result = std::fs::read_to_string(dir.path().join(RESULT)).unwrap();
        let (new_start, new_end) = execute_range(&result).unwrap();
        assert_eq!(
            &masked[usize::try_from(new_start).unwrap()..usize::try_from(new_end).unwrap()],
            "exec *** done\n"
        );
    }
}
