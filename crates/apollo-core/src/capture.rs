//! Capture: keeping the bytes of an attempt's declared files, not only their hashes (DESIGN
//! §12).
//!
//! When a unit's declared input files are hashed before an attempt, and its declared outputs
//! after a success, each file can be handed to a [`BlobSink`] **as it is hashed**: one read
//! of the file feeds both the hash and the copy, so what was hashed is what was kept, even if
//! the unit later rewrites its inputs in place. apollo-store's blob store implements the sink
//! (a content-addressed `blobs/sha256/ab/cdef…`); the engine only sees this trait, so
//! apollo-core still writes no file.
//!
//! What was seen is recorded as a **manifest**: one [`FileEntry`] per file (path relative to
//! the config folder, SHA-256, size, mode), in `unit_started` for inputs and in
//! `unit_finished` for outputs. A file that was not kept says why ([`FileEntry::not_captured`]:
//! `"3.1 GiB > 64 MiB"`, `"capture: none"`, or the store's error): a reproduction names it.
//!
//! Which files are kept is the unit's [`CapturePolicy`] (`capture:` and `capture_max_file:`
//! in the config, pipeline default under `defaults:` and per unit).

use std::fmt;
use std::fs::File;
use std::io;

use serde::{Deserialize, Serialize};

use crate::codec::{IsDefault, journal_struct};

/// The default `capture_max_file`: 64 MiB.
pub const DEFAULT_CAPTURE_MAX_FILE: u64 = 64 * 1024 * 1024;

/// The default `blob_store_max`: 20 GiB.
pub const DEFAULT_BLOB_STORE_MAX: u64 = 20 * 1024 * 1024 * 1024;

/// Which of a unit's declared files are kept in the blob store (`capture:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    /// Inputs before each attempt and outputs after a success (the default).
    #[default]
    All,
    /// Only the declared input files.
    Inputs,
    /// Only the declared outputs.
    Outputs,
    /// Nothing: only hashes are recorded.
    None,
}

impl CaptureMode {
    /// The mode as written in a config (`all`, `inputs`, `outputs`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            CaptureMode::All => "all",
            CaptureMode::Inputs => "inputs",
            CaptureMode::Outputs => "outputs",
            CaptureMode::None => "none",
        }
    }

    /// The mode written `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        [
            CaptureMode::All,
            CaptureMode::Inputs,
            CaptureMode::Outputs,
            CaptureMode::None,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == text)
    }

    /// Whether declared input files are kept.
    pub fn inputs(self) -> bool {
        matches!(self, CaptureMode::All | CaptureMode::Inputs)
    }

    /// Whether declared outputs are kept.
    pub fn outputs(self) -> bool {
        matches!(self, CaptureMode::All | CaptureMode::Outputs)
    }
}

/// A unit's capture settings, resolved from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturePolicy {
    /// Which files are kept.
    #[serde(default)]
    pub mode: CaptureMode,
    /// Files larger than this many bytes keep only their hash.
    #[serde(default = "default_max_file")]
    pub max_file: u64,
}

fn default_max_file() -> u64 {
    DEFAULT_CAPTURE_MAX_FILE
}

impl Default for CapturePolicy {
    fn default() -> Self {
        Self {
            mode: CaptureMode::All,
            max_file: DEFAULT_CAPTURE_MAX_FILE,
        }
    }
}

journal_struct! {
    /// One file of a manifest: what an attempt's declared input or output file was.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct FileEntry {
        /// The file's path relative to the config folder (absolute when outside it).
        pub path: String,
        /// SHA-256 (hex) of its content: its blob's name when it was captured.
        pub sha256: String,
        /// Its size in bytes.
        pub size: u64,
        /// Its permission bits (`st_mode & 0o7777`).
        pub mode: u32,
        /// Why its bytes were not kept (`"3.1 GiB > 64 MiB"`, `"capture: outputs"`, `"no blob
        /// store"`, a store error);
        /// absent when they were.
        #[serde(default, skip_serializing_if = "IsDefault::is_default")]
        pub not_captured: Option<String>,
    }
}

impl FileEntry {
    /// Whether the file's bytes are in the blob store.
    pub fn captured(&self) -> bool {
        self.not_captured.is_none()
    }
}

/// Where captured bytes go: implemented by apollo-store's blob store.
///
/// The engine calls [`begin`](BlobSink::begin) with a declared file it is about to hash, then
/// feeds the pending blob every block it hashes (or hashes the pending blob's own copy, see
/// [`PendingBlob::take_copy`]), and finally [`commit`](PendingBlob::commit)s it under the hash
/// it computed. Dropping a pending blob without committing it discards it: a blob's name never
/// lies about its content.
pub trait BlobSink: Send + Sync + fmt::Debug {
    /// Start keeping the content of `source`, an open regular file of `len` bytes.
    fn begin(&self, source: &File, len: u64) -> io::Result<Box<dyn PendingBlob>>;

    /// Whether the content with this SHA-256 is kept already (then a file whose hash is known
    /// without reading it, from the hash cache, needs no new blob). `false` when unsure.
    fn contains(&self, _sha256: &str) -> bool {
        false
    }
}

/// A blob being written: see [`BlobSink`].
pub trait PendingBlob: Send {
    /// A copy of the source the store already made (a reflink, `FICLONE`), positioned at its
    /// start. When it returns `Some`, the caller hashes that copy instead of the source and
    /// never calls [`write`](PendingBlob::write): the bytes hashed are the bytes kept. Called
    /// once, before any `write`.
    fn take_copy(&mut self) -> Option<File>;

    /// Append `block` (the next bytes hashed from the source).
    fn write(&mut self, block: &[u8]) -> io::Result<()>;

    /// Keep the blob under `sha256`, the hash of everything written (or of the copy): make it
    /// durable and give it its name. A blob already stored under that name is kept as it is.
    fn commit(self: Box<Self>, sha256: &str) -> io::Result<()>;
}

/// What hashing needs to capture: the sink and the unit's size cap.
#[derive(Clone, Copy)]
pub struct Capture<'a> {
    /// Where the bytes go.
    pub sink: &'a dyn BlobSink,
    /// Files larger than this keep only their hash.
    pub max_file: u64,
}

impl fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("max_file", &self.max_file)
            .finish_non_exhaustive()
    }
}

/// A size as people write it: `64MiB`, `1GiB`, `512KiB`, `100MB`, `4096` (bytes).
///
/// ```
/// use apollo_core::capture::parse_size;
/// assert_eq!(parse_size("64MiB"), Ok(64 << 20));
/// assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
/// assert_eq!(parse_size("4096"), Ok(4096));
/// assert!(parse_size("64 parsecs").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    const UNITS: [(&str, u64); 11] = [
        ("b", 1),
        ("k", 1 << 10),
        ("kb", 1_000),
        ("kib", 1 << 10),
        ("m", 1 << 20),
        ("mb", 1_000_000),
        ("mib", 1 << 20),
        ("g", 1 << 30),
        ("gb", 1_000_000_000),
        ("gib", 1 << 30),
        ("tib", 1 << 40),
    ];
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(SizeError::NoNumber);
    }
    let number: u64 = number.parse().map_err(|_| SizeError::Overflow)?;
    let unit = unit.trim().to_ascii_lowercase();
    let multiplier = if unit.is_empty() {
        1
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, multiplier)| *multiplier)
            .ok_or(SizeError::UnknownUnit { unit })?
    };
    number.checked_mul(multiplier).ok_or(SizeError::Overflow)
}

/// Why a size was rejected (reads after "invalid size `x`: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// It does not start with a number.
    #[error("it does not start with a number")]
    NoNumber,
    /// A unit apollo does not know.
    #[error("unknown unit `{unit}` (the units are B, KiB, MiB, GiB, TiB, KB, MB, GB)")]
    UnknownUnit {
        /// The unit as written (lowercased).
        unit: String,
    },
    /// More than 2^64 bytes.
    #[error("it is too large")]
    Overflow,
}

/// `bytes` for people: `512 B`, `64 MiB`, `3.1 GiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() < 0.05 || value >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("10 MB"), Ok(10_000_000));
        assert_eq!(parse_size("MiB"), Err(SizeError::NoNumber));
        assert!(matches!(
            parse_size("5 parsecs"),
            Err(SizeError::UnknownUnit { .. })
        ));
        assert_eq!(parse_size("99999999999999999999"), Err(SizeError::Overflow));
        assert_eq!(parse_size("20000000000 GiB"), Err(SizeError::Overflow));
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(64 << 20), "64 MiB");
        assert_eq!(human_size(3_328_599_654), "3.1 GiB");
    }

    #[test]
    fn modes_parse_and_say_what_they_keep() {
        for mode in ["all", "inputs", "outputs", "none"] {
            assert_eq!(CaptureMode::parse(mode).unwrap().as_str(), mode);
        }
        assert_eq!(CaptureMode::parse("everything"), None);
        assert!(CaptureMode::All.inputs() && CaptureMode::All.outputs());
        assert!(!CaptureMode::Outputs.inputs() && !CaptureMode::None.outputs());
    }
}
