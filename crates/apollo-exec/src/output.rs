//! The attempt's `stdout` and `stderr` files: opened once per attempt in append mode, handed
//! to every phase's processes directly (no pipe), measured by their length, and hashed by
//! streaming a byte range back from disk.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Bytes read at a time when hashing: memory stays flat whatever the output size.
const HASH_CHUNK: usize = 64 * 1024;

/// One output file of an attempt.
#[derive(Debug)]
pub(crate) struct LogFile {
    file: File,
}

impl LogFile {
    /// Open (creating it if needed) `log_dir/name` for appending and reading.
    pub(crate) fn open(log_dir: &Path, name: &str) -> io::Result<LogFile> {
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .open(log_dir.join(name))?;
        Ok(LogFile { file })
    }

    /// Its current length: every byte any phase wrote so far.
    pub(crate) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// A new descriptor on the same open file, for a child's stdout or stderr. It shares the
    /// append flag, so concurrent writers in the group never overwrite each other.
    pub(crate) fn for_child(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// SHA-256 (lowercase hex) of bytes `start..end`, read back in fixed-size chunks.
    pub(crate) fn sha256_of_range(&self, start: u64, end: u64) -> io::Result<String> {
        let mut hasher = Sha256::new();
        let mut buffer = vec![0_u8; HASH_CHUNK];
        let mut offset = start;
        while offset < end {
            let want =
                usize::try_from(end - offset).map_or(HASH_CHUNK, |left| left.min(HASH_CHUNK));
            let read = self.file.read_at(&mut buffer[..want], offset)?;
            if read == 0 {
                // Truncated under us: hash what there was.
                break;
            }
            hasher.update(&buffer[..read]);
            offset += read as u64;
        }
        Ok(hex(&hasher.finalize()))
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn hashes_exactly_the_requested_range() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogFile::open(dir.path(), "stdout").unwrap();
        log.for_child()
            .unwrap()
            .write_all(b"before|hello\n|after")
            .unwrap();
        assert_eq!(log.len().unwrap(), 19);
        // sha256("hello\n")
        assert_eq!(
            log.sha256_of_range(7, 13).unwrap(),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        // The empty range is the hash of nothing.
        assert_eq!(
            log.sha256_of_range(3, 3).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn reopening_appends_instead_of_truncating() {
        let dir = tempfile::tempdir().unwrap();
        LogFile::open(dir.path(), "stderr")
            .unwrap()
            .for_child()
            .unwrap()
            .write_all(b"one")
            .unwrap();
        let again = LogFile::open(dir.path(), "stderr").unwrap();
        again.for_child().unwrap().write_all(b"two").unwrap();
        assert_eq!(std::fs::read(dir.path().join("stderr")).unwrap(), b"onetwo");
    }
}
