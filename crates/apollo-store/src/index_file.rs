//! The files of the state directory's `index/` folder: caches **derived** from the journals
//! (and from the files they hash), never a source of truth. Each is one checksummed file,
//! `<CRC-32C of the body, 8 hex digits>\n<body>`, replaced atomically (temporary name, rename;
//! with `durable`, fsyncs of the file and the folder too): a reader sees the old file or the
//! new one, and a file that is torn, truncated, bit-flipped or not ours fails its checksum and
//! is treated as missing — its owner rebuilds it. Nothing here is ever followed through a
//! symbolic link.
//!
//! The checksum is the journal frames' (CRC-32C, in hardware): it guards against damage, not
//! against a forger, who could write a matching SHA-256 as easily — and nothing read here is
//! trusted beyond a cache (a reuse is checked against the files on disk). A no-op run reads
//! these files whole, and SHA-256 over them showed in its time (`docs/design/2026-12-02-noop-footprint.md`). Files
//! an older apollo wrote (`<sha256 of the body, hex>`) are still read, and checked so.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::safe_dir::{Access, Dir};
use crate::state_dir::StateDir;

/// The folder, in the state directory.
pub(crate) const INDEX_DIR: &str = "index";

/// The largest index file read (a bigger one is treated as damaged and rebuilt).
const MAX_INDEX_BYTES: u64 = 1 << 30;

/// Why an index file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// There is none.
    Missing,
    /// It is there but cannot be trusted: the phrase says why.
    Damaged(String),
}

/// The body of `index/<name>`, checked against its checksum.
pub(crate) fn read(state: &StateDir, name: &str) -> Result<Vec<u8>, Unusable> {
    read_checked(state, name).map(|(_, body)| body)
}

/// The checksum (hex) and body of `index/<name>`, checked against each other.
pub(crate) fn read_checked(state: &StateDir, name: &str) -> Result<(String, Vec<u8>), Unusable> {
    let file = Dir::open(state.path())
        .and_then(|root| root.subdir(INDEX_DIR))
        .and_then(|dir| dir.open_file(name, Access::Read));
    let file = match file {
        Ok(file) => file,
        Err(StoreError::NotFound { .. }) => return Err(Unusable::Missing),
        Err(error) => return Err(Unusable::Damaged(error.to_string())),
    };
    // Read into a buffer of the file's size, and the body kept where it was read: growing
    // and copying a large parse cache touched three times as many fresh pages, each a page
    // fault.
    let size = file.metadata().map_or(0, |metadata| metadata.len());
    let mut bytes = Vec::with_capacity(usize::try_from(size.min(MAX_INDEX_BYTES)).unwrap_or(0));
    file.take(MAX_INDEX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|error| Unusable::Damaged(format!("cannot be read: {error}")))?;
    let Some(newline) = bytes.iter().position(|&byte| byte == b'\n') else {
        return Err(Unusable::Damaged("has no checksum line".to_owned()));
    };
    let body = &bytes[newline + 1..];
    let checksum = match newline {
        OLD_CHECKSUM_LEN => apollo_core::hash::to_hex(&Sha256::digest(body)),
        _ => checksum_of(body),
    };
    if bytes[..newline] != *checksum.as_bytes() {
        return Err(Unusable::Damaged("fails its checksum".to_owned()));
    }
    bytes.drain(..=newline);
    Ok((checksum, bytes))
}

/// The length of an older apollo's checksum line (SHA-256, hex), still read.
const OLD_CHECKSUM_LEN: usize = 64;

/// Whether `checksum` (as [`read_checked`] returns it) is an older apollo's: its owner may
/// write the file again, to be checked the cheaper way from then on.
pub(crate) fn is_older_checksum(checksum: &str) -> bool {
    checksum.len() == OLD_CHECKSUM_LEN
}

/// The checksum line of `body`: its CRC-32C, as 8 lower-case hex digits.
fn checksum_of(body: &[u8]) -> String {
    format!("{:08x}", crc32c::crc32c(body))
}

/// The first line of an index file, `body`'s checksum, and the body: one buffer.
fn with_checksum_line(body: &[u8]) -> (String, Vec<u8>) {
    let checksum = checksum_of(body);
    let mut bytes = Vec::with_capacity(body.len() + checksum.len() + 1);
    bytes.extend_from_slice(checksum.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(body);
    (checksum, bytes)
}

/// Replace `index/<name>` with `body` (and its checksum line), atomically; durably with
/// `durable`. Returns the checksum (hex).
pub(crate) fn write(
    state: &StateDir,
    name: &str,
    body: &[u8],
    durable: bool,
) -> Result<String, StoreError> {
    let dir = Dir::open(state.path())?.create_subdir(INDEX_DIR, durable)?;
    let (checksum, bytes) = with_checksum_line(body);
    dir.write_file_atomic(name, &bytes, durable)?;
    // Temporary files of writers that died mid-write (SIGKILL, power loss) are litter: the
    // lock is held, so no other writer's temporary file can be among them.
    let prefix = format!(".{name}.tmp-");
    if let Ok(entries) = std::fs::read_dir(dir.path()) {
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_str()
                .is_some_and(|file| file.starts_with(&prefix))
            {
                let _ = dir.remove_file(entry.file_name());
            }
        }
    }
    Ok(checksum)
}

/// A cache file of the state directory's `index/` folder that its owner writes without the
/// state directory's lock (apollo-runner's parse cache): checksummed and replaced atomically
/// like the other index files, but a writer leaves other writers' temporary files alone.
/// Nothing is created when the state directory does not exist yet.
pub mod cache_file {
    use super::*;

    /// The body of `index/<name>`, checked against its checksum; `None` when it is missing,
    /// damaged or cannot be read (a cache miss).
    pub fn read(state_dir: &std::path::Path, name: &str) -> Option<Vec<u8>> {
        let state = StateDir::open_existing(state_dir).ok()?;
        super::read(&state, name).ok()
    }

    /// Replace `index/<name>` with `body`, atomically and not durably (a lost cache is
    /// rebuilt). Fails when the state directory does not exist.
    pub fn write(state_dir: &std::path::Path, name: &str, body: &[u8]) -> Result<(), StoreError> {
        let state = StateDir::open_existing(state_dir)?;
        let dir = Dir::open(state.path())?.create_subdir(INDEX_DIR, false)?;
        dir.write_file_atomic(name, &with_checksum_line(body).1, false)
    }

    /// [`write`](fn@write) of the body `fill` writes, a piece at a time: the body is never held in
    /// memory (a parse cache of 100,000 units is ~50 MB). The checksum line is written
    /// last, over a placeholder, before the file is renamed into place.
    pub fn write_with(
        state_dir: &std::path::Path,
        name: &str,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), StoreError> {
        use std::io::Write;
        use std::os::unix::fs::FileExt;
        let state = StateDir::open_existing(state_dir)?;
        let dir = Dir::open(state.path())?.create_subdir(INDEX_DIR, false)?;
        dir.write_file_atomic_with(name, false, |file| {
            file.write_all(b"00000000\n")?;
            let mut out = std::io::BufWriter::with_capacity(
                256 * 1024,
                CrcWriter {
                    inner: &mut *file,
                    crc: 0,
                },
            );
            fill(&mut out)?;
            let crc = out
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)?
                .crc;
            file.write_all_at(format!("{crc:08x}").as_bytes(), 0)
        })
    }

    /// Writes through to `inner`, keeping the CRC-32C of what was written.
    struct CrcWriter<W> {
        inner: W,
        crc: u32,
    }

    impl<W: std::io::Write> std::io::Write for CrcWriter<W> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let written = self.inner.write(bytes)?;
            self.crc = crc32c::crc32c_append(self.crc, &bytes[..written]);
            Ok(written)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            self.inner.flush()
        }
    }
}
