//! Secrets at run time (DESIGN §18): reading each value from its source when a run starts
//! ([`read_secret`]; a `{command: ...}` is a process, so it is read here, where processes are
//! made), handing the values to the executor ([`SecretValues`], set into a unit's environment
//! at spawn, never on a command line), and masking them in the output of the units that
//! receive them ([`Masker`]: such a unit's stdout and stderr go through a pipe and a relay
//! thread of apollo's instead of straight into the log files).
//!
//! Nothing here writes a value anywhere but into a child's environment.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use apollo_core::model::{Command, SecretSource};

use crate::client::ClientCommand;

/// A secret file larger than this is refused: a secret is a token or a key, not a data set,
/// and a path pointing at the wrong file must not be read into memory whole.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// How long a secret's `{command: ...}` may take.
pub const SECRET_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Values shorter than this are not masked in output: masking `abc` would garble every log
/// that happens to contain those letters, and hide nothing worth hiding.
pub const MIN_MASKED_LEN: usize = 6;

/// What a masked value is replaced with in a unit's log files.
const MASK: &[u8] = b"***";

/// Secret values by name, read when the run started. Its `Debug` shows names only.
#[derive(Default, Clone)]
pub struct SecretValues {
    values: BTreeMap<String, String>,
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl SecretValues {
    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the value of secret `name`.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.values.insert(name.into(), value.into());
    }

    /// The value of secret `name`, if it was read.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether no secret was read.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Reads every secret some unit of `units` receives (each once), the first failure
    /// ending it. `base_dir` is where a `{command: ...}` runs (the config file's folder).
    pub fn read_for<'u>(
        units: impl IntoIterator<Item = &'u apollo_core::Unit>,
        base_dir: &Path,
    ) -> Result<SecretValues, SecretError> {
        let mut values = SecretValues::new();
        for unit in units {
            for (name, source) in &unit.secrets {
                if values.values.contains_key(name) {
                    continue;
                }
                let value = read_secret(name, source, base_dir)?;
                values.insert(name.clone(), value);
            }
        }
        Ok(values)
    }
}

/// A secret whose value could not be read: which one, from where, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot read secret `{name}` from {source_described}: {problem}")]
#[non_exhaustive]
pub struct SecretError {
    /// The secret's name.
    pub name: String,
    /// Its source, as messages name it (`env API_TOKEN`).
    pub source_described: String,
    /// What went wrong.
    pub problem: String,
}

/// Reads the value of secret `name` from `source`: an environment variable of apollo's, a
/// regular file (at most [`MAX_SECRET_FILE_BYTES`]) or what a command prints, without one
/// trailing newline.
pub fn read_secret(
    name: &str,
    source: &SecretSource,
    base_dir: &Path,
) -> Result<String, SecretError> {
    let fail = |problem: String| SecretError {
        name: name.to_owned(),
        source_described: source.describe(),
        problem,
    };
    let value = match source {
        SecretSource::Env(variable) => match std::env::var(variable) {
            Ok(value) => value,
            Err(std::env::VarError::NotPresent) => {
                return Err(fail(format!(
                    "the environment variable `{variable}` is not set"
                )));
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(fail(format!(
                    "the environment variable `{variable}` is not UTF-8"
                )));
            }
        },
        SecretSource::File(path) => read_secret_file(path).map_err(fail)?,
        SecretSource::Command(command) => run_secret_command(command, base_dir).map_err(fail)?,
    };
    let value = value.strip_suffix('\n').unwrap_or(&value).to_owned();
    if value.contains('\0') {
        return Err(fail(
            "the value contains a NUL byte, which an environment variable cannot hold".to_owned(),
        ));
    }
    Ok(value)
}

fn read_secret_file(path: &Path) -> Result<String, String> {
    use apollo_core::safe_file::{SafeOpen, SafeOpenError};
    // Through the one door: non-blocking, so that a FIFO put where the file should be does
    // not hang the run's start; it is then refused as not a regular file. A symbolic link is
    // followed (the user's own file).
    let bytes = apollo_core::safe_file::read_bounded(path, SafeOpen::FOLLOW, MAX_SECRET_FILE_BYTES)
        .map_err(|error| match error {
            SafeOpenError::Open(error) => format!("cannot open {}: {error}", path.display()),
            SafeOpenError::NotRegular(_) => format!("{} is not a regular file", path.display()),
            SafeOpenError::TooLarge { len, .. } => format!(
                "{} is {len} bytes, more than a secret may be ({MAX_SECRET_FILE_BYTES})",
                path.display()
            ),
            SafeOpenError::Stat(error) | SafeOpenError::Read(error) => {
                format!("cannot read {}: {error}", path.display())
            }
            other => format!("cannot read {}: {other}", path.display()),
        })?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

fn run_secret_command(command: &Command, base_dir: &Path) -> Result<String, String> {
    let client = match command {
        Command::Shell(script) => ClientCommand::program("/bin/sh")
            .arg("-c")
            .arg(script.clone()),
        Command::Argv(argv) => ClientCommand::program(&argv[0]).args(argv[1..].iter().cloned()),
    };
    let output = client
        .timeout(SECRET_COMMAND_TIMEOUT)
        .current_dir(base_dir)
        .run()
        .map_err(|error| {
            let mut message = error.to_string();
            if let Some(source) = std::error::Error::source(&error) {
                message.push_str(&format!(": {source}"));
            }
            message
        })?;
    if !output.success() {
        let last_line = output.stderr.lines().last().unwrap_or("").trim();
        let code = output
            .code
            .map_or_else(|| "a signal".to_owned(), |code| format!("exit {code}"));
        return Err(if last_line.is_empty() {
            format!("the command failed ({code})")
        } else {
            format!("the command failed ({code}): {last_line}")
        });
    }
    Ok(output.stdout)
}

/// Replaces every occurrence of the values it masks with `***` in a stream of bytes that
/// arrives in pieces: a value split across two pieces is still masked (the bytes that could
/// be the start of a value are held back until the next piece or the end).
#[derive(Debug)]
pub struct Masker {
    /// Longest first, so that a value containing another is masked whole.
    values: Vec<Vec<u8>>,
    /// Whether a byte is the first byte of some value.
    first_bytes: [bool; 256],
    held: Vec<u8>,
}

impl Masker {
    /// A masker of `values`, leaving out those shorter than [`MIN_MASKED_LEN`].
    pub fn new<'v>(values: impl IntoIterator<Item = &'v str>) -> Self {
        let mut values: Vec<Vec<u8>> = values
            .into_iter()
            .filter(|value| value.len() >= MIN_MASKED_LEN)
            .map(|value| value.as_bytes().to_vec())
            .collect();
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        values.dedup();
        let mut first_bytes = [false; 256];
        for value in &values {
            first_bytes[usize::from(value[0])] = true;
        }
        Masker {
            values,
            first_bytes,
            held: Vec::new(),
        }
    }

    /// Takes the next piece; returns what can be written now.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(piece);
        let mut out = Vec::with_capacity(self.held.len());
        let mut at = 0;
        'bytes: while at < self.held.len() {
            // Bytes that start no value are copied in one go (most of any output).
            let skip = self.held[at..]
                .iter()
                .position(|byte| self.first_bytes[usize::from(*byte)])
                .unwrap_or(self.held.len() - at);
            out.extend_from_slice(&self.held[at..at + skip]);
            at += skip;
            if at == self.held.len() {
                break;
            }
            let rest = &self.held[at..];
            for value in &self.values {
                if rest.starts_with(value) {
                    out.extend_from_slice(MASK);
                    at += value.len();
                    continue 'bytes;
                }
            }
            if self
                .values
                .iter()
                .any(|value| rest.len() < value.len() && value.starts_with(rest))
            {
                // Maybe the start of a value: wait for more.
                break;
            }
            out.push(rest[0]);
            at += 1;
        }
        self.held.drain(..at);
        out
    }

    /// The stream ended: what was held back (it was not a whole value).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked_in_pieces(values: &[&str], pieces: &[&[u8]]) -> Vec<u8> {
        let mut masker = Masker::new(values.iter().copied());
        let mut out = Vec::new();
        for piece in pieces {
            out.extend(masker.push(piece));
        }
        out.extend(masker.finish());
        out
    }

    #[test]
    fn a_value_is_masked_whole_and_short_values_are_left_alone() {
        assert_eq!(
            masked_in_pieces(&["hunter2secret", "abc"], &[b"pw=hunter2secret abc\n"]),
            b"pw=*** abc\n"
        );
    }

    #[test]
    fn a_value_split_across_pieces_is_still_masked() {
        let text = b"token: s3cr3t-token-value, again s3cr3t-token-value.";
        for split in 0..text.len() {
            let (first, second) = text.split_at(split);
            assert_eq!(
                masked_in_pieces(&["s3cr3t-token-value"], &[first, second]),
                b"token: ***, again ***.",
                "split at {split}"
            );
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(
            masked_in_pieces(&["s3cr3t-token-value"], &bytes),
            b"token: ***, again ***."
        );
    }

    proptest::proptest! {
        /// However the stream is cut into pieces, the result is the one of a single piece,
        /// and no value is left in it.
        #[test]
        fn masking_does_not_depend_on_where_the_stream_is_cut(
            text in "[ab-]{0,60}",
            cuts in proptest::collection::vec(0_usize..60, 0..6),
        ) {
            let values = ["abab-a", "bbbbbb", "ab-ab-ab"];
            let bytes = text.as_bytes();
            let whole = masked_in_pieces(&values, &[bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|cut| *cut <= bytes.len()).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for cut in cuts {
                pieces.push(&bytes[start..cut]);
                start = cut;
            }
            pieces.push(&bytes[start..]);
            proptest::prop_assert_eq!(&masked_in_pieces(&values, &pieces), &whole);
            for value in values {
                proptest::prop_assert!(!whole.windows(value.len()).any(|window| window == value.as_bytes()));
            }
        }
    }

    #[test]
    fn a_held_back_prefix_that_never_completes_is_written_at_the_end() {
        assert_eq!(
            masked_in_pieces(&["s3cr3t-token"], &[b"ends with s3cr3t-to"]),
            b"ends with s3cr3t-to"
        );
    }

    #[test]
    fn a_value_containing_another_is_masked_whole() {
        assert_eq!(
            masked_in_pieces(&["secret", "secret-longer"], &[b"secret-longer secret"]),
            b"*** ***"
        );
    }

    #[test]
    fn values_are_read_from_env_file_and_command_without_the_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token.txt"), "from-a-file\n").unwrap();
        let file = SecretSource::File(dir.path().join("token.txt"));
        assert_eq!(read_secret("T", &file, dir.path()).unwrap(), "from-a-file");
        let command = SecretSource::Command(Command::Shell("cat token.txt".to_owned()));
        assert_eq!(
            read_secret("T", &command, dir.path()).unwrap(),
            "from-a-file"
        );
        let path = SecretSource::Env("PATH".to_owned());
        assert_eq!(
            read_secret("T", &path, dir.path()).unwrap(),
            std::env::var("PATH").unwrap()
        );
    }

    #[test]
    fn a_missing_secret_names_itself_its_source_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let unset = SecretSource::Env("APOLLO_TEST_SURELY_UNSET_VARIABLE".to_owned());
        let message = read_secret("API_TOKEN", &unset, dir.path())
            .unwrap_err()
            .to_string();
        assert!(message.contains("`API_TOKEN`"), "{message}");
        assert!(
            message.contains("env APOLLO_TEST_SURELY_UNSET_VARIABLE"),
            "{message}"
        );
        assert!(message.contains("not set"), "{message}");

        let missing = SecretSource::File(dir.path().join("nope"));
        let message = read_secret("K", &missing, dir.path())
            .unwrap_err()
            .to_string();
        assert!(message.contains("cannot open"), "{message}");

        let folder = SecretSource::File(dir.path().to_owned());
        let message = read_secret("K", &folder, dir.path())
            .unwrap_err()
            .to_string();
        assert!(message.contains("not a regular file"), "{message}");

        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let message = read_secret("K", &SecretSource::File(fifo), dir.path())
            .unwrap_err()
            .to_string();
        assert!(message.contains("not a regular file"), "{message}");

        std::fs::write(
            dir.path().join("big"),
            vec![b'x'; usize::try_from(MAX_SECRET_FILE_BYTES).unwrap() + 1],
        )
        .unwrap();
        let big = SecretSource::File(dir.path().join("big"));
        let message = read_secret("K", &big, dir.path()).unwrap_err().to_string();
        assert!(message.contains("more than a secret may be"), "{message}");

        let failing = SecretSource::Command(Command::Shell(
            "echo vault: permission denied >&2; exit 3".to_owned(),
        ));
        let message = read_secret("K", &failing, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("exit 3") && message.contains("vault: permission denied"),
            "{message}"
        );
    }

    #[test]
    fn the_debug_form_shows_names_only() {
        let mut values = SecretValues::new();
        values.insert("API_TOKEN", "s3cr3t-value");
        let shown = format!("{values:?}");
        assert!(
            shown.contains("API_TOKEN") && !shown.contains("s3cr3t"),
            "{shown}"
        );
    }
}
