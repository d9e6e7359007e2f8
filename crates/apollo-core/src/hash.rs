//! Input and output hashes (DESIGN §5): SHA-256 over canonical, length-prefixed encodings,
//! so a value never changes between versions or platforms.
//!
//! A unit's **input hash** covers its commands, its declared env, the content of each declared
//! input file (sorted by path) and the output hash of each dependency; each component's own
//! hash is recorded too, so a diff can name what changed. Its **output hash** covers the
//! declared output files (sorted by path), or `execute`'s stdout when none are declared.
//!
//! Files are hashed by streaming; nothing loads a whole file into memory. Only regular files
//! are read: a FIFO, a device or a socket may never end, so a declared file that is one is
//! refused with an error naming it and what it is. The engine hashes declared files off its
//! own thread, within [`Limits`] (the unit's timeout and the run's cancellation, checked
//! before every read).

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::cancel::{CancelLevel, CancelToken};
use crate::capture::{Capture, FileEntry, PendingBlob};
use crate::event::{InputComponent, InputKind};
use crate::hash_cache::{CachedHash, FileHashCache, FileStamp, Timestamps};
use crate::model::{Command, Unit};

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut hex = Vec::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        hex.extend_from_slice(&HEX_PAIRS[usize::from(byte)]);
    }
    // Only ASCII digits were written (a no-op run of 10,000 reused units writes ~50,000 hashes
    // in hex: a byte at a time, not a `char`).
    String::from_utf8(hex).unwrap_or_default()
}

/// Each byte's two lower-case hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// Each byte's value as a lower-case hex digit, or 0xff.
const HEX_VALUES: [u8; 256] = {
    let mut values = [0xff; 256];
    let mut digit = 0;
    while digit < 16 {
        values[b"0123456789abcdef"[digit] as usize] = digit as u8;
        digit += 1;
    }
    values
};

/// The 32 bytes of a SHA-256 written as [`to_hex`] writes one (64 lower-case hex digits);
/// `None` for any other text.
pub fn sha256_from_hex(text: &str) -> Option<[u8; 32]> {
    let text: &[u8; 64] = text.as_bytes().try_into().ok()?;
    let mut bytes = [0; 32];
    // No branch per digit: a digit that is not one sets a high bit, checked once.
    let mut invalid = 0;
    for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
        let (high, low) = (
            HEX_VALUES[usize::from(pair[0])],
            HEX_VALUES[usize::from(pair[1])],
        );
        invalid |= high | low;
        *byte = high << 4 | (low & 0xf);
    }
    (invalid & 0xf0 == 0).then_some(bytes)
}

/// Whether `text` is `bytes` as [`to_hex`] writes them, without writing them.
pub fn is_hex_of(text: &str, bytes: &[u8]) -> bool {
    text.len() == bytes.len() * 2
        && text
            .as_bytes()
            .chunks_exact(2)
            .zip(bytes)
            .all(|(pair, &byte)| *pair == HEX_PAIRS[usize::from(byte)])
}

/// An [`io::Write`] that passes everything on to `inner` and hashes it (SHA-256) on the way:
/// the hash of content too big to hold in memory at once, such as the definition snapshot of
/// 100,000 units, made while it is written (or, with [`io::sink`], without keeping it).
///
/// ```
/// use std::io::Write;
/// let mut writer = apollo_core::hash::HashingWriter::new(Vec::new());
/// writer.write_all(b"abc").unwrap();
/// let (hash, bytes) = writer.finish();
/// assert_eq!(bytes, b"abc");
/// assert_eq!(hash, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
/// ```
#[derive(Debug)]
pub struct HashingWriter<W> {
    hasher: Sha256,
    inner: W,
}

impl<W: io::Write> HashingWriter<W> {
    /// A writer into `inner` that hashes what goes through.
    pub fn new(inner: W) -> Self {
        Self {
            hasher: Sha256::new(),
            inner,
        }
    }

    /// The SHA-256 (lowercase hex) of everything written, and `inner`.
    pub fn finish(self) -> (String, W) {
        (to_hex(&self.hasher.finalize()), self.inner)
    }
}

/// The SHA-256 (lowercase hex) of what `write` writes, passed on to `inner` through a buffer
/// (serialisers write in small pieces): [`HashingWriter`] in one call. With [`io::sink`], the
/// hash of content that is never held anywhere.
pub fn sha256_of_written(
    inner: impl io::Write,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<String> {
    let mut buffered = io::BufWriter::with_capacity(256 * 1024, HashingWriter::new(inner));
    write(&mut buffered)?;
    let (hash, _) = buffered
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .finish();
    Ok(hash)
}

impl<W: io::Write> io::Write for HashingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// SHA-256 of `bytes`, as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

/// SHA-256 of a file's content, streamed in 64 KiB blocks, without limits. Declared inputs
/// and outputs are hashed by [`input_components_within`] and [`output_hash_within`] instead,
/// within [`Limits`], and only if they are regular files.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    // Only a regular file, opened without waiting: a FIFO or a device where a file was
    // expected is an error, not a hang.
    let hashed = stat_regular(path)
        .and_then(|_| open_regular(path))
        .and_then(|(file, _)| stream_sha256(file, &Limits::none(), None))
        .map(|(hash, _)| hash);
    hashed.map_err(|problem| match problem {
        Problem::Io(error) => error,
        other => io::Error::other(other.to_string()),
    })
}

/// How long hashing may take and what stops it: a deadline (the unit's timeout) and a
/// cancellation, both checked before every read, so hashing a huge file or a slow disk ends
/// promptly when either comes.
#[derive(Debug, Clone)]
pub struct Limits<'a> {
    /// When hashing must have ended, and the timeout it came from (for the message).
    deadline: Option<(Instant, Duration)>,
    cancel: Option<&'a CancelToken>,
    /// A flag that, raised, stops hashing like a cancellation (the engine's "start nothing").
    halt: Option<&'a AtomicBool>,
    /// How long hashing may go on after a graceful cancellation (`None`: it stops at once).
    grace: Option<Duration>,
    /// When a graceful cancellation was first seen.
    cancel_seen: Cell<Option<Instant>>,
    /// Hashes of files already hashed, by stamp: a file whose stamp is unchanged is not read
    /// again (see [`crate::hash_cache`]).
    cache: Option<&'a dyn FileHashCache>,
    /// Nothing may be read or copied, only `stat`ed: a file whose hash the cache does not
    /// hold is a [`NotReadHere`] error (the engine's own thread, see `stat_only`).
    stat_only: bool,
}

impl<'a> Limits<'a> {
    /// No deadline, no cancellation.
    pub const fn none() -> Limits<'static> {
        Limits {
            deadline: None,
            cancel: None,
            halt: None,
            grace: None,
            cancel_seen: Cell::new(None),
            cache: None,
            stat_only: false,
        }
    }

    /// Hashing that stops when `cancel` is raised or once `budget` (if any) has passed from
    /// now. `timeout` is what the error names (the unit's timeout, of which `budget` is what
    /// is left).
    pub fn new(
        cancel: &'a CancelToken,
        budget: Option<Duration>,
        timeout: Option<Duration>,
    ) -> Self {
        let now = Instant::now();
        Self {
            deadline: budget
                .and_then(|budget| Some((now.checked_add(budget)?, timeout.unwrap_or(budget)))),
            cancel: Some(cancel),
            ..Limits::none()
        }
    }

    /// The same limits, also stopping (as cancelled) once `halt` is raised.
    pub fn with_halt(self, halt: &'a AtomicBool) -> Self {
        Self {
            halt: Some(halt),
            ..self
        }
    }

    /// The same limits, taking a file's hash from `cache` when its stamp (device, inode, size,
    /// mtime, ctime) is unchanged and not racily clean, and telling `cache` every hash it
    /// computes. `None`: every file is read.
    pub fn with_cache(self, cache: Option<&'a dyn FileHashCache>) -> Self {
        Self { cache, ..self }
    }

    /// The same limits, for a thread that must not block on a file's content (the engine's
    /// own): a file is only `stat`ed, its hash taken from the cache; one the cache does not
    /// vouch for (or whose bytes would have to be copied into the blob store), and a declared
    /// output that is a directory (its tree is not walked), is not read but fails hashing with
    /// an error for which [`HashError::not_read_here`] holds, and the caller hands the work to
    /// a thread that may read.
    pub(crate) fn stat_only(self) -> Self {
        Self {
            stat_only: true,
            ..self
        }
    }

    /// Whether these limits allow no reading ([`stat_only`](Self::stat_only)).
    pub(crate) fn is_stat_only(&self) -> bool {
        self.stat_only
    }

    /// The same limits, going on for `grace` after a graceful cancellation (as a unit's
    /// process gets its kill grace); an immediate one still stops hashing at once.
    pub fn with_grace(self, grace: Duration) -> Self {
        Self {
            grace: Some(grace),
            ..self
        }
    }

    /// `Err` when hashing must stop now.
    fn check(&self) -> Result<(), Problem> {
        if self.halt.is_some_and(|halt| halt.load(Ordering::SeqCst)) {
            return Err(Problem::Cancelled);
        }
        match self.cancel.map(CancelToken::level) {
            None | Some(CancelLevel::None) => {}
            Some(CancelLevel::Graceful) if self.grace.is_some() => {
                let now = Instant::now();
                let seen = *self.cancel_seen.get().get_or_insert(now);
                self.cancel_seen.set(Some(seen));
                if now.duration_since(seen) >= self.grace.unwrap_or_default() {
                    return Err(Problem::Cancelled);
                }
            }
            Some(_) => return Err(Problem::Cancelled),
        }
        match self.deadline {
            Some((deadline, timeout)) if Instant::now() >= deadline => {
                Err(Problem::TimedOut(timeout))
            }
            _ => Ok(()),
        }
    }
}

/// Why a declared file could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// Opening or reading it failed.
    #[error("cannot read it: {0}")]
    Io(io::Error),
    /// It is not a regular file (a FIFO, a device, a socket): its content may never end, so
    /// it is not read.
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    /// The unit's timeout ran out while hashing.
    #[error("hashing it did not finish within the unit's timeout of {0:?}")]
    TimedOut(Duration),
    /// The run was cancelled while hashing.
    #[error("hashing it was cancelled")]
    Cancelled,
}

/// What a file is, when it is not a regular file or a directory ("a FIFO", "a character
/// device", …); `None` for a regular file or a directory.
pub fn special_file_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else if file_type.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// Whether a file of `file_type` may be hashed: only a regular file. A directory, FIFO,
/// socket or device is refused (reading it may never end, opening it can have effects).
fn refuse_irregular(file_type: std::fs::FileType) -> Result<(), Problem> {
    if file_type.is_file() {
        Ok(())
    } else if file_type.is_dir() {
        Err(Problem::NotRegular("a directory"))
    } else {
        Err(Problem::NotRegular(
            special_file_kind(file_type).unwrap_or("not a regular file"),
        ))
    }
}

/// `stat` of `path` (symlinks followed), refused unless it is a regular file: what is checked
/// before a file is opened, and what the hash cache is asked with.
fn stat_regular(path: &Path) -> Result<std::fs::Metadata, Problem> {
    let metadata = std::fs::metadata(path).map_err(Problem::Io)?;
    refuse_irregular(metadata.file_type())?;
    Ok(metadata)
}

/// Open `path` for hashing, after [`stat_regular`] allowed it: a special file is refused
/// before it is opened (opening a device can have effects), and the open itself does not
/// block (`O_NONBLOCK`: a FIFO put in its place meanwhile would otherwise wait for a writer
/// forever); what was opened is checked again (the open and the check are [`crate::safe_file`]).
fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata), Problem> {
    // A declared input may be a symbolic link (followed); see `crate::safe_file`.
    crate::safe_file::open(path, crate::safe_file::SafeOpen::FOLLOW).map_err(|error| match error {
        crate::safe_file::SafeOpenError::NotRegular(file_type) => match refuse_irregular(file_type)
        {
            Err(problem) => problem,
            Ok(()) => Problem::NotRegular("not a regular file"),
        },
        crate::safe_file::SafeOpenError::Open(error)
        | crate::safe_file::SafeOpenError::Stat(error) => Problem::Io(error),
        other => Problem::Io(std::io::Error::other(other)),
    })
}

/// What hashing one declared file found: its hash, size and mode, and whether its bytes were
/// kept (see [`crate::capture`]).
struct Seen {
    sha256: String,
    size: u64,
    mode: u32,
    not_captured: Option<String>,
    /// The `stat` identity of what was hashed.
    stamp: FileStamp,
}

/// The declared input files of a unit as hashed: their manifest (what `unit_files` records)
/// and, by absolute path, the `stat` identity each had when it was hashed, which the engine
/// checks again when the attempt ends (an input changed under a running attempt makes its
/// outputs untrustworthy, see `engine::workers`).
#[derive(Debug, Clone, Default)]
pub struct HashedFiles {
    /// One entry per file hashed, in hashing order.
    pub entries: Vec<FileEntry>,
    /// Each file's absolute path and stamp, in the same order.
    pub stamps: Vec<(PathBuf, FileStamp)>,
}

/// Hash the regular file `path` within `limits` and, with `capture`, keep its bytes as they
/// are read (one read: what was hashed is what was kept). A file over the cap, or one the
/// store could not take, is hashed all the same and says why it was not kept.
fn hash_and_capture(
    path: &Path,
    limits: &Limits<'_>,
    capture: Option<&Capture<'_>>,
    not_captured: &str,
) -> Result<Seen, Problem> {
    hash_and_capture_stat(path, None, limits, capture, not_captured)
}

/// [`hash_and_capture`], with the `stat` of `path` when the caller just made it (one stat per
/// file: a trusted cache hit then costs no other system call).
fn hash_and_capture_stat(
    path: &Path,
    stat: Option<std::fs::Metadata>,
    limits: &Limits<'_>,
    capture: Option<&Capture<'_>>,
    not_captured: &str,
) -> Result<Seen, Problem> {
    use std::os::unix::fs::PermissionsExt;
    limits.check()?;
    let over_cap = |size: u64, capture: &Capture<'_>| {
        format!(
            "{} > {}",
            crate::capture::human_size(size),
            crate::capture::human_size(capture.max_file)
        )
    };
    // A file whose stamp the hash cache trusts is not opened, let alone read: its hash is
    // known, and when its bytes are to be kept they already are (its blob exists). The stamp
    // is the path's `stat`: a file replaced under its name has another inode or ctime, so it
    // misses as it would with `fstat` of an opened file.
    let checked = match stat {
        Some(stat) => {
            refuse_irregular(stat.file_type())?;
            stat
        }
        None => stat_regular(path)?,
    };
    if let Some(cache) = limits.cache {
        let stamp = FileStamp::of(&checked);
        if let Some(cached) = cache.get(&stamp)
            && cached.trusted_for(&stamp, Timestamps::of(stamp.dev, path))
        {
            let size = checked.len();
            let reason = match capture {
                None => Some(Some(not_captured.to_owned())),
                Some(capture) if size > capture.max_file => Some(Some(over_cap(size, capture))),
                Some(capture) if capture.sink.contains(&cached.sha256) => Some(None),
                // Kept nowhere yet: read it once more, into the store.
                Some(_) => None,
            };
            if let Some(not_captured) = reason {
                return Ok(Seen {
                    sha256: cached.sha256,
                    size,
                    mode: checked.permissions().mode() & 0o7777,
                    not_captured,
                    stamp,
                });
            }
        }
    }
    if limits.stat_only {
        return Err(not_read_here());
    }
    let (file, meta) = open_regular(path)?;
    let mode = meta.permissions().mode() & 0o7777;
    let over_cap = |capture: &Capture<'_>| over_cap(meta.len(), capture);
    // What is read is keyed by the opened file's own stamp.
    let opened = FileStamp::of(&meta);
    let stamp = limits.cache.map(|_| opened);
    // Taken before the read: a change during or after it is newer than this, so the entry is
    // racily clean (not trusted) until the window has passed since that change.
    let hashed_at_ns = crate::hash_cache::now_ns();
    let (sink, reason) = match capture {
        Some(capture) if meta.len() > capture.max_file => (None, Some(over_cap(capture))),
        Some(capture) => match capture.sink.begin(&file, meta.len()) {
            Ok(pending) => (Some(pending), None),
            Err(error) => (None, Some(format!("the blob store refused it: {error}"))),
        },
        None => (None, Some(not_captured.to_owned())),
    };
    let (sha256, size, reason) = match sink {
        None => {
            let (sha256, size) = stream_sha256(file, limits, None)?;
            (sha256, size, reason)
        }
        Some(mut pending) => {
            // A copy the store made (a reflink) is hashed instead of the source: its bytes
            // are the ones kept, whatever happens to the source meanwhile.
            let (sha256, size, write_error) = match pending.take_copy() {
                Some(copy) => {
                    let (sha256, size) = stream_sha256(copy, limits, None)?;
                    (sha256, size, None)
                }
                None => {
                    let mut write_error = None;
                    let (sha256, size) =
                        stream_sha256(file, limits, Some((&mut *pending, &mut write_error)))?;
                    (sha256, size, write_error)
                }
            };
            let reason = match write_error {
                Some(error) => Some(format!("writing its blob failed: {error}")),
                None => pending
                    .commit(&sha256)
                    .err()
                    .map(|error| format!("storing its blob failed: {error}")),
            };
            (sha256, size, reason)
        }
    };
    if let (Some(cache), Some(stamp)) = (limits.cache, stamp) {
        cache.put(
            stamp,
            CachedHash {
                sha256: sha256.clone(),
                hashed_at_ns,
            },
        );
    }
    Ok(Seen {
        sha256,
        size,
        mode,
        not_captured: reason,
        stamp: opened,
    })
}

/// Where the blocks read go besides the hash, and the first error writing them (after which
/// nothing more is written, but hashing goes on).
type Tee<'a> = (&'a mut dyn PendingBlob, &'a mut Option<std::io::Error>);

fn stream_sha256(
    mut file: File,
    limits: &Limits<'_>,
    mut tee: Option<Tee<'_>>,
) -> Result<(String, u64), Problem> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        limits.check()?;
        let n_read = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n_read) => n_read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(Problem::Io(error)),
        };
        hasher.update(&buffer[..n_read]);
        size += n_read as u64;
        if let Some((pending, write_error)) = &mut tee
            && write_error.is_none()
            && let Err(error) = pending.write(&buffer[..n_read])
        {
            **write_error = Some(error);
        }
    }
    // A file whose last read ended past the deadline was not hashed in time either.
    limits.check()?;
    Ok((to_hex(&hasher.finalize()), size))
}

/// A length-prefixed canonical encoder: every field is `u64 big-endian length || bytes`, so
/// no two different field sequences encode to the same bytes.
#[derive(Default)]
struct Canonical {
    hasher: Sha256,
}

impl Canonical {
    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.hasher.update((bytes.len() as u64).to_be_bytes());
        self.hasher.update(bytes);
        self
    }

    fn finish(self) -> String {
        to_hex(&self.hasher.finalize())
    }
}

/// The hash of a command: its form (shell or argv) and its text or arguments.
pub fn command_hash(command: &Command) -> String {
    let mut canonical = Canonical::default();
    match command {
        Command::Shell(script) => {
            canonical.field(b"shell").field(script.as_bytes());
        }
        Command::Argv(argv) => {
            canonical
                .field(b"argv")
                .field(&(argv.len() as u64).to_be_bytes());
            for argument in argv {
                canonical.field(argument.as_bytes());
            }
        }
    }
    canonical.finish()
}

/// Whether the variable `name` of `unit.env` is part of its input hash: every variable but an
/// `APOLLO_PARAM_<NAME>` its commands do not name. The loader gives a unit that variable for
/// each param it uses; when it uses it as `${params.name}`, the value is in its definition
/// already (so adding the variable changed no hash), and when a command reads
/// `"$APOLLO_PARAM_NAME"`, the command names it and the value is hashed here.
pub fn env_is_hashed(unit: &Unit, name: &str) -> bool {
    if !name.starts_with("APOLLO_PARAM_") {
        return true;
    }
    let names_it = |text: &str| {
        text.match_indices(name).any(|(at, _)| {
            !text[at + name.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    (unit.phase_commands().into_iter()).any(|(_, command)| match command {
        None => false,
        Some(Command::Shell(script)) => names_it(script),
        Some(Command::Argv(argv)) => argv.iter().any(|argument| names_it(argument)),
    })
}

/// At most this many single-quoted words of a command are tried unquoted (2^n hashes) by
/// [`only_quoting_changed`].
const MAX_QUOTED_WORDS_TRIED: usize = 10;

/// Whether `command` differs from the command that hashed to `old_hash` only by single-quoted
/// words that were unquoted there — what an upgrade to an apollo that quotes values in shell
/// commands changes (DESIGN §18): `./x.sh 'a b'` now, `./x.sh a b` then. Tries every subset of
/// the command's first 10 single-quoted words; a match means the two
/// texts differ by those quotes and nothing else.
pub fn only_quoting_changed(command: &Command, old_hash: &str) -> bool {
    let Command::Shell(script) = command else {
        return false;
    };
    let words = single_quoted_words(script);
    if words.is_empty() {
        return false;
    }
    let words = &words[..words.len().min(MAX_QUOTED_WORDS_TRIED)];
    (1_u32..1 << words.len()).any(|subset| {
        let mut unquoted = String::with_capacity(script.len());
        let mut from = 0;
        for (index, (start, end)) in words.iter().enumerate() {
            if subset & (1 << index) == 0 {
                continue;
            }
            unquoted.push_str(&script[from..*start]);
            unquoted.push_str(&script[start + 1..end - 1].replace(r"'\''", "'"));
            from = *end;
        }
        unquoted.push_str(&script[from..]);
        command_hash(&Command::Shell(unquoted)) == old_hash
    })
}

/// The byte ranges of the single-quoted words of `script` as apollo writes them (`'…'`, a `'`
/// inside as `'\''`).
fn single_quoted_words(script: &str) -> Vec<(usize, usize)> {
    let mut words = Vec::new();
    let mut index = 0;
    while let Some(offset) = script[index..].find('\'') {
        let start = index + offset;
        let Some(length) = script[start + 1..].find('\'') else {
            break;
        };
        let mut end = start + 1 + length + 1;
        // `'it'\''s'` is one word.
        while script[end..].starts_with(r"\''") {
            match script[end + 3..].find('\'') {
                Some(length) => end = end + 3 + length + 1,
                None => break,
            }
        }
        words.push((start, end));
        index = end;
    }
    words
}

/// Adds "(quoting changed …)" to each "command PHASE changed" of `changes` that
/// [`only_quoting_changed`] explains, given the unit now and the components recorded before.
pub fn explain_quoting_changes(changes: &mut [String], unit: &Unit, before: &[InputComponent]) {
    for change in changes.iter_mut() {
        let Some(phase) = change
            .strip_prefix("command ")
            .and_then(|rest| rest.strip_suffix(" changed"))
        else {
            continue;
        };
        let command = (unit.phase_commands().into_iter())
            .find_map(|(named, command)| command.filter(|_| named.as_str() == phase));
        let old = before
            .iter()
            .find(|component| component.kind == InputKind::Command && component.name == phase);
        if let (Some(command), Some(old)) = (command, old)
            && only_quoting_changed(command, &old.hash)
        {
            change.push_str(" (quoting changed: values are now quoted, see UPGRADING.md)");
        }
    }
}

/// The hash a secret enters a unit's input hash with: its source's, never its value's.
pub fn secret_source_hash(source: &crate::model::SecretSource) -> String {
    use crate::model::SecretSource;
    let mut canonical = Canonical::default();
    canonical.field(b"secret-source");
    match source {
        SecretSource::Env(variable) => {
            canonical.field(b"env").field(variable.as_bytes());
        }
        SecretSource::File(path) => {
            canonical
                .field(b"file")
                .field(path.as_os_str().as_encoded_bytes());
        }
        SecretSource::Command(command) => {
            canonical
                .field(b"command")
                .field(command_hash(command).as_bytes());
        }
    }
    canonical.finish()
}

/// The hash that stands for a folder an input glob matched (its files are hashed apart).
fn folder_hash() -> String {
    let mut canonical = Canonical::default();
    canonical.field(b"folder");
    canonical.finish()
}

/// The hash recorded for a declared input file that does not exist, so that its appearing
/// later counts as a change.
pub fn missing_file_hash() -> String {
    let mut canonical = Canonical::default();
    canonical.field(b"missing");
    canonical.finish()
}

/// The input hash over a unit's components: sorted by (kind, name), each encoded as
/// kind, name and component hash.
pub fn combine_components(components: &[InputComponent]) -> String {
    let mut sorted: Vec<&InputComponent> = components.iter().collect();
    sorted.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    let mut canonical = Canonical::default();
    canonical.field(b"apollo-input-v1");
    for component in sorted {
        let kind: &[u8] = match component.kind {
            InputKind::Command => b"command",
            InputKind::Env => b"env",
            InputKind::File => b"file",
            InputKind::Upstream => b"upstream",
        };
        canonical
            .field(kind)
            .field(component.name.as_bytes())
            .field(component.hash.as_bytes());
    }
    canonical.finish()
}

/// A declared input or output file could not be hashed.
///
/// The cause is part of the message (the engine records the message as the attempt's error),
/// so it is not also returned by `source()`.
#[derive(Debug, thiserror::Error)]
#[error("{what} `{}`: {problem}", path.display())]
pub struct HashError {
    /// "input file" or "output file".
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub problem: Problem,
}

impl HashError {
    /// Whether the unit's timeout ran out while hashing.
    pub fn timed_out(&self) -> bool {
        matches!(self.problem, Problem::TimedOut(_))
    }

    /// Whether the run was cancelled while hashing.
    pub fn cancelled(&self) -> bool {
        matches!(self.problem, Problem::Cancelled)
    }

    /// Whether the file does not exist.
    pub fn not_found(&self) -> bool {
        matches!(&self.problem, Problem::Io(error) if error.kind() == io::ErrorKind::NotFound)
    }

    /// Whether the file was not read because the limits allowed only a `stat` (the engine's
    /// own thread hashes that way, handing anything else to its hashing threads): nothing is
    /// known about it yet.
    pub fn not_read_here(&self) -> bool {
        matches!(&self.problem, Problem::Io(error)
            if error.get_ref().is_some_and(|inner| inner.is::<NotReadHere>()))
    }
}

/// Why a file was not read under [`Limits::stat_only`].
#[derive(Debug)]
struct NotReadHere;

/// The problem of a file not read under [`Limits::stat_only`].
fn not_read_here() -> Problem {
    Problem::Io(io::Error::new(io::ErrorKind::WouldBlock, NotReadHere))
}

impl std::fmt::Display for NotReadHere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not read on the engine's own thread")
    }
}

impl std::error::Error for NotReadHere {}

/// The declared inputs (literal paths, not globs: a glob only matches regular files) and
/// outputs of `unit` that exist now and are neither regular files nor directories: each
/// with "input file" or "output file" and what it is. `apollo check` warns about them; a run
/// refuses them.
pub fn special_declared_files(
    unit: &Unit,
    base_dir: &Path,
) -> Vec<(&'static str, PathBuf, &'static str)> {
    let inputs = unit
        .inputs
        .iter()
        .filter(|pattern| !is_glob(pattern))
        .map(|pattern| ("input file", pattern));
    let outputs = unit.outputs.iter().map(|output| ("output file", output));
    inputs
        .chain(outputs)
        .filter_map(|(what, declared)| {
            let path = base_dir.join(declared);
            let kind = special_file_kind(std::fs::metadata(&path).ok()?.file_type())?;
            Some((what, path, kind))
        })
        .collect()
}

/// Whether the declared output `declared` (a path or a glob, relative to `base_dir`) stands on
/// disk: a glob when it matches anything (as [`expand_outputs`] expands it), a path when it
/// exists (a dangling link included: it is what the unit left). A glob is never looked up as
/// a file name (issue 35: `parts/*.part` was "missing" on every resume).
pub fn declared_output_exists(base_dir: &Path, declared: &str) -> bool {
    let absolute = base_dir.join(declared);
    if is_glob(declared) {
        absolute
            .to_str()
            .and_then(|pattern| glob::glob(pattern).ok())
            .is_some_and(|mut matches| matches.any(|found| found.is_ok()))
    } else {
        std::fs::symlink_metadata(absolute).is_ok()
    }
}

/// Whether a pattern has glob syntax.
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Display name of a path: relative to `base_dir` when inside it.
fn display_name(path: &Path, base_dir: &Path) -> String {
    path.strip_prefix(base_dir)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Every input component of `unit`: commands, declared env, input files, upstream outputs,
/// without limits (see [`input_components_within`]).
///
/// `upstream_outputs` gives each dependency's name and output hash.
pub fn input_components(
    unit: &Unit,
    base_dir: &Path,
    upstream_outputs: &[(&str, &str)],
) -> Result<Vec<InputComponent>, HashError> {
    input_components_within(unit, base_dir, upstream_outputs, &Limits::none())
}

/// Every input component of `unit`, hashing its input files within `limits`. An input file
/// that is not a regular file is refused (it may never end).
pub fn input_components_within(
    unit: &Unit,
    base_dir: &Path,
    upstream_outputs: &[(&str, &str)],
    limits: &Limits<'_>,
) -> Result<Vec<InputComponent>, HashError> {
    input_files_within(unit, base_dir, upstream_outputs, limits, None)
        .map(|(components, _)| components)
}

/// [`input_components_within`], and the manifest of the input files hashed: each file's
/// bytes are kept through `capture` as they are hashed (one read), unless it is larger than
/// the cap; without `capture` every entry says `capture: none`. A declared file that does not
/// exist has a component (hashed as missing) and no entry.
pub fn input_files_within(
    unit: &Unit,
    base_dir: &Path,
    upstream_outputs: &[(&str, &str)],
    limits: &Limits<'_>,
    capture: Option<&Capture<'_>>,
) -> Result<(Vec<InputComponent>, HashedFiles), HashError> {
    let mut components = Vec::new();
    let mut files = HashedFiles::default();
    for (phase, command) in unit.phase_commands() {
        if let Some(command) = command {
            components.push(InputComponent {
                kind: InputKind::Command,
                name: phase.as_str().to_owned(),
                hash: command_hash(command),
            });
        }
    }
    for (name, value) in &unit.env {
        if !env_is_hashed(unit, name) {
            continue;
        }
        components.push(InputComponent {
            kind: InputKind::Env,
            name: name.clone(),
            hash: sha256_hex(value.as_bytes()),
        });
    }
    // A secret is an environment variable of the unit whose value apollo never hashes: its
    // name and source stand for it (a rotated value reruns nothing, and a low-entropy
    // password is never hashed to disk). The loader refuses an env entry of the same name.
    for (name, source) in &unit.secrets {
        components.push(InputComponent {
            kind: InputKind::Env,
            name: name.clone(),
            hash: secret_source_hash(source),
        });
    }
    let (input_files, input_folders) = expand_inputs_and_folders(unit, base_dir);
    // A folder a glob matched stands for itself too: an empty one added or removed changes
    // what a unit that lists it sees.
    components.extend(input_folders.iter().map(|folder| InputComponent {
        kind: InputKind::File,
        name: format!("{}/", display_name(folder, base_dir)),
        hash: folder_hash(),
    }));
    for path in input_files {
        let name = display_name(&path, base_dir);
        let hash = match hash_and_capture(&path, limits, capture, "capture: none") {
            Ok(seen) => {
                let hash = seen.sha256.clone();
                files.stamps.push((path.clone(), seen.stamp));
                files.entries.push(FileEntry {
                    path: name.clone(),
                    sha256: seen.sha256,
                    size: seen.size,
                    mode: seen.mode,
                    not_captured: seen.not_captured,
                });
                hash
            }
            Err(Problem::Io(error)) if error.kind() == io::ErrorKind::NotFound => {
                missing_file_hash()
            }
            Err(problem) => {
                return Err(HashError {
                    what: "input file",
                    path,
                    problem,
                });
            }
        };
        components.push(InputComponent {
            kind: InputKind::File,
            name,
            hash,
        });
    }
    for (dependency, output_hash) in upstream_outputs {
        components.push(InputComponent {
            kind: InputKind::Upstream,
            name: (*dependency).to_owned(),
            hash: (*output_hash).to_owned(),
        });
    }
    components.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    Ok((components, files))
}

/// The output hash over a unit's declared outputs (sorted by path). `Ok(None)` when the
/// unit declares no outputs (the caller then uses the stdout hash). A declared output that
/// does not exist is an error: exit 0 alone is not proof of work. Without limits (see
/// [`output_hash_within`]).
pub fn output_hash(unit: &Unit, base_dir: &Path) -> Result<Option<String>, HashError> {
    output_hash_within(unit, base_dir, &Limits::none())
}

/// [`output_hash`] within `limits`. A declared output that is not a regular file or a
/// directory is refused.
pub fn output_hash_within(
    unit: &Unit,
    base_dir: &Path,
    limits: &Limits<'_>,
) -> Result<Option<String>, HashError> {
    output_files_within(unit, base_dir, limits, None).map(|hashed| hashed.map(|(hash, _)| hash))
}

/// Whether `recorded` — a path an output manifest lists, relative to `base_dir` unless
/// absolute (as [`output_files_within`] names them) — is among the files `unit`'s declared
/// outputs can stand for: a declared file, a file under a declared folder, a match of a
/// declared glob or a file under one. Beyond what the declaration itself spells, the path may
/// hold only plain names: no `..`, no `.`, no root. A manifest read back from the state
/// directory is checked with this before a file is written where it says (reuse restoring
/// outputs, `apollo reproduce`): a damaged or planted record must not name a file elsewhere.
pub fn declares_output(unit: &Unit, base_dir: &Path, recorded: &str) -> bool {
    // Both sides by their components: `./out/*.csv`, `out//x` and `out/dir/` name what
    // `out/*.csv`, `out/x` and `out/dir` do, and recorded names are written without them.
    let path: PathBuf = base_dir.join(recorded).components().collect();
    unit.outputs.iter().any(|declared| {
        let declared_path: PathBuf = base_dir.join(declared).components().collect();
        if !is_glob(declared) {
            return plainly_under(&path, &declared_path);
        }
        // The glob's components before its first pattern must be spelled out in `path`; below
        // them, `path` or one of its folders must match the whole glob.
        let literal: PathBuf = (declared_path.components())
            .take_while(|component| !is_glob(&component.as_os_str().to_string_lossy()))
            .collect();
        let Some(pattern) = (declared_path.to_str()).and_then(|text| glob::Pattern::new(text).ok())
        else {
            return false;
        };
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        plainly_under(&path, &literal)
            && (path.ancestors())
                .take_while(|folder| folder.starts_with(&literal))
                .any(|folder| pattern.matches_path_with(folder, options))
    })
}

/// Whether `path` is `folder` or below it by plain names only.
fn plainly_under(path: &Path, folder: &Path) -> bool {
    path.strip_prefix(folder).is_ok_and(|rest| {
        (rest.components()).all(|component| matches!(component, std::path::Component::Normal(_)))
    })
}

/// The output hash and the manifest of `unit`'s declared outputs (files, directories, globs:
/// see [`expand_outputs`]), within `limits`; each file's bytes kept through `capture` as they
/// are hashed. `Ok(None)` when the unit declares no outputs (nothing is read). The hash is
/// the same as before directories existed for a list of plain files.
pub fn output_files_within(
    unit: &Unit,
    base_dir: &Path,
    limits: &Limits<'_>,
    capture: Option<&Capture<'_>>,
) -> Result<Option<(String, Vec<FileEntry>)>, HashError> {
    if unit.outputs.is_empty() {
        return Ok(None);
    }
    let paths = expand_outputs_stat(unit, base_dir, limits.stat_only)?;
    let mut canonical = Canonical::default();
    canonical.field(b"apollo-output-v1");
    let mut files = Vec::with_capacity(paths.len());
    for (path, stat) in paths {
        let seen = hash_and_capture_stat(&path, stat, limits, capture, "capture: none").map_err(
            |problem| HashError {
                what: "output file",
                path: path.clone(),
                problem,
            },
        )?;
        let name = display_name(&path, base_dir);
        canonical
            .field(name.as_bytes())
            .field(seen.sha256.as_bytes());
        files.push(FileEntry {
            path: name,
            sha256: seen.sha256,
            size: seen.size,
            mode: seen.mode,
            not_captured: seen.not_captured,
        });
    }
    Ok(Some((canonical.finish(), files)))
}

/// The components that differ between two recorded input lists, as human phrases:
/// "input file data/raw.csv changed", "upstream fetch_data output changed", "command execute
/// changed", "env FOO added".
pub fn describe_input_changes(before: &[InputComponent], after: &[InputComponent]) -> Vec<String> {
    fn label(component: &InputComponent) -> String {
        match component.kind {
            InputKind::Command => format!("command {}", component.name),
            InputKind::Env => format!("env {}", component.name),
            InputKind::File => format!("input file {}", component.name),
            InputKind::Upstream => format!("upstream {} output", component.name),
        }
    }
    // Indexed by (kind, name): an input list can hold 100,000 files.
    fn index(components: &[InputComponent]) -> HashMap<(InputKind, &str), &str> {
        (components.iter())
            .map(|component| {
                (
                    (component.kind, component.name.as_str()),
                    component.hash.as_str(),
                )
            })
            .collect()
    }
    let (before_index, after_index) = (index(before), index(after));
    let mut changes = Vec::new();
    for component in after {
        match before_index.get(&(component.kind, component.name.as_str())) {
            Some(old_hash) if *old_hash != component.hash => {
                changes.push(format!("{} changed", label(component)))
            }
            Some(_) => {}
            None => changes.push(format!("{} added", label(component))),
        }
    }
    for component in before {
        if !after_index.contains_key(&(component.kind, component.name.as_str())) {
            changes.push(format!("{} removed", label(component)));
        }
    }
    changes
}

mod inputs;
pub use inputs::expand_inputs;
mod outputs;
use inputs::expand_inputs_and_folders;
pub use outputs::expand_outputs;
use outputs::expand_outputs_stat;

#[cfg(test)]
mod tests;
