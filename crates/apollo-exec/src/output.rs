//! The attempt's `stdout` and `stderr` files: opened once per attempt in append mode, handed
//! to every phase's processes directly (no pipe), measured by their length, and hashed by
//! streaming a byte range back from disk.
//!
//! A file gets its name (`<log_dir>/stdout`, and the folder) only when it is worth one. It
//! starts as an unnamed file (`O_TMPFILE`) in an existing folder above `log_dir`, and is linked
//! into place when the attempt ends with something in it, when the attempt has run for
//! `ExecOptions::name_output_after` (100 ms), or at once for a unit that is not idempotent (its half-done attempt is what
//! a human reads before `apollo mark`). An attempt that is quick and silent creates nothing on
//! disk, and its empty unnamed files are reused by the next attempt: on a busy scheduler,
//! allocating four inodes per attempt (two folders, two files) cost more than running `true`.
//! Where `O_TMPFILE` is not supported, the named files are created at once.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

/// Bytes read at a time when hashing: memory stays flat whatever the output size.
const HASH_CHUNK: usize = 64 * 1024;

/// Spare unnamed files kept for reuse, at most.
const MAX_SPARES: usize = 64;

/// Empty unnamed files left by quick, silent attempts, for the next attempts to reuse.
#[derive(Debug, Default)]
pub(crate) struct LogSpares {
    spares: Mutex<Vec<Spare>>,
    /// Set once `O_TMPFILE` failed for a reason other than a missing folder: from then on, log
    /// files are created with their names at once.
    unsupported: AtomicBool,
}

#[derive(Debug)]
struct Spare {
    file: File,
    /// The folder it was created in: it can only be linked under it (same filesystem).
    home: PathBuf,
    /// The name it would have had in the attempt that used it last, for output that a process
    /// which escaped that attempt's group wrote after the attempt ended.
    last_path: PathBuf,
}

/// One output file of an attempt.
#[derive(Debug)]
pub(crate) struct LogFile {
    file: File,
    /// `<log_dir>/<name>`: where it is, or will be once named.
    path: PathBuf,
    /// The folder of the unnamed file, while it has no name yet.
    home: Option<PathBuf>,
    named: AtomicBool,
}

impl LogFile {
    /// The file for `log_dir/name`: a reused or new unnamed file, or, without `O_TMPFILE`
    /// support or when `name_now`, the named file itself (created with its folder if needed,
    /// appended to if it exists).
    pub(crate) fn open(
        spares: &LogSpares,
        log_dir: &Path,
        name: &str,
        name_now: bool,
    ) -> io::Result<LogFile> {
        let path = log_dir.join(name);
        if !name_now && !spares.unsupported.load(Ordering::Relaxed) {
            if let Some(spare) = spares.take(log_dir) {
                return Ok(LogFile {
                    file: spare.file,
                    path,
                    home: Some(spare.home),
                    named: AtomicBool::new(false),
                });
            }
            match create_unnamed(log_dir) {
                Ok((file, home)) => {
                    return Ok(LogFile {
                        file,
                        path,
                        home: Some(home),
                        named: AtomicBool::new(false),
                    });
                }
                // The kernel or the filesystem does not know `O_TMPFILE`.
                Err(error)
                    if matches!(
                        error.raw_os_error(),
                        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                    ) =>
                {
                    spares.unsupported.store(true, Ordering::Relaxed);
                }
                // Named files get the same error, with the file's name in the message.
                Err(_) => {}
            }
        }
        std::fs::create_dir_all(log_dir)?;
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .open(&path)?;
        Ok(LogFile {
            file,
            path,
            home: None,
            named: AtomicBool::new(true),
        })
    }

    /// Where the file is, or will be once it has its name.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Give the file its name now (creating its folder), if it has none yet.
    pub(crate) fn name_now(&self) -> io::Result<()> {
        if self.named.load(Ordering::Relaxed) {
            return Ok(());
        }
        give_name(&self.file, &self.path)?;
        self.named.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The attempt is over: name the file if anything was written to it, otherwise hand it
    /// back to `spares` for the next attempt.
    pub(crate) fn finish(self, spares: &LogSpares) -> io::Result<()> {
        let LogFile {
            file,
            path,
            home,
            named,
        } = self;
        let Some(home) = home.filter(|_| !named.load(Ordering::Relaxed)) else {
            return Ok(());
        };
        if file.metadata()?.len() > 0 {
            return give_name(&file, &path);
        }
        spares.put(Spare {
            file,
            home,
            last_path: path,
        });
        Ok(())
    }

    /// Its current length: every byte any phase wrote so far.
    pub(crate) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// A new descriptor on the same open file. It shares the append flag, so concurrent
    /// writers never overwrite each other.
    #[cfg(test)]
    pub(crate) fn for_child(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// The descriptor a child's stdout or stderr is made from (`dup2`, so it shares the
    /// append flag and concurrent writers in the group never overwrite each other).
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.file)
    }

    /// SHA-256 (lowercase hex) of bytes `start..end`, read back in fixed-size chunks.
    pub(crate) fn sha256_of_range(&self, start: u64, end: u64) -> io::Result<String> {
        let mut hasher = Sha256::new();
        if start < end {
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
        }
        Ok(hex(&hasher.finalize()))
    }
}

impl LogSpares {
    /// An empty spare that can be named under `log_dir`. A spare that is no longer empty holds
    /// late output of the attempt that used it last: it goes to that attempt's file instead.
    fn take(&self, log_dir: &Path) -> Option<Spare> {
        loop {
            let spare = {
                let mut spares = self
                    .spares
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let index = spares
                    .iter()
                    .rposition(|spare| log_dir.starts_with(&spare.home))?;
                spares.swap_remove(index)
            };
            match spare.file.metadata() {
                Ok(metadata) if metadata.len() == 0 => return Some(spare),
                // Best effort: the attempt it belongs to is long recorded.
                Ok(_) => {
                    let _ = give_name(&spare.file, &spare.last_path);
                }
                Err(_) => {}
            }
        }
    }

    fn put(&self, spare: Spare) {
        let mut spares = self
            .spares
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spares.len() >= MAX_SPARES {
            spares.remove(0);
        }
        spares.push(spare);
    }
}

/// A new unnamed file in the nearest existing folder at or above `log_dir`, and that folder.
fn create_unnamed(log_dir: &Path) -> io::Result<(File, PathBuf)> {
    for dir in log_dir.ancestors().take(8) {
        let opened = OpenOptions::new()
            .read(true)
            .append(true)
            .mode(0o644)
            .custom_flags(libc::O_TMPFILE)
            .open(dir);
        match opened {
            Ok(file) => return Ok((file, dir.to_owned())),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no folder above {} exists", log_dir.display()),
    ))
}

/// Link the unnamed `file` to `path` (creating its folder). Only a link keeps a running
/// attempt's later output in the named file.
fn link(file: &File, path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let source = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let target = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths for the duration of the call. Linking an
    // `O_TMPFILE` file through its `/proc/self/fd` entry needs no privilege (see open(2)).
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            source.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Give the finished, unnamed `file` the name `path`: a link, or, when that is impossible
/// (`path` exists, no `/proc`), a copy appended to `path`.
fn give_name(file: &File, path: &Path) -> io::Result<()> {
    if link(file, path).is_ok() {
        return Ok(());
    }
    let target = OpenOptions::new().append(true).create(true).open(path)?;
    let mut buffer = vec![0_u8; HASH_CHUNK];
    let mut offset = 0;
    loop {
        let read = file.read_at(&mut buffer, offset)?;
        if read == 0 {
            return Ok(());
        }
        io::Write::write_all(&mut &target, &buffer[..read])?;
        offset += read as u64;
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

    fn named(dir: &Path, name: &str) -> LogFile {
        LogFile::open(&LogSpares::default(), dir, name, true).unwrap()
    }

    #[test]
    fn hashes_exactly_the_requested_range() {
        let dir = tempfile::tempdir().unwrap();
        let log = named(dir.path(), "stdout");
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
        named(dir.path(), "stderr")
            .for_child()
            .unwrap()
            .write_all(b"one")
            .unwrap();
        let again = named(dir.path(), "stderr");
        again.for_child().unwrap().write_all(b"two").unwrap();
        assert_eq!(std::fs::read(dir.path().join("stderr")).unwrap(), b"onetwo");
    }

    #[test]
    fn a_silent_attempt_creates_nothing_and_its_file_is_reused() {
        let root = tempfile::tempdir().unwrap();
        let spares = LogSpares::default();
        let first_dir = root.path().join("units/a/1");
        let log = LogFile::open(&spares, &first_dir, "stdout", false).unwrap();
        log.finish(&spares).unwrap();
        assert!(!root.path().join("units").exists(), "nothing named");
        assert_eq!(spares.spares.lock().unwrap().len(), 1);
        let second_dir = root.path().join("units/b/1");
        let log = LogFile::open(&spares, &second_dir, "stdout", false).unwrap();
        assert!(
            spares.spares.lock().unwrap().is_empty(),
            "the spare was reused"
        );
        log.for_child().unwrap().write_all(b"out").unwrap();
        log.finish(&spares).unwrap();
        assert_eq!(std::fs::read(second_dir.join("stdout")).unwrap(), b"out");
        assert!(
            spares.spares.lock().unwrap().is_empty(),
            "a named file is not reused"
        );
    }

    #[test]
    fn a_file_named_early_keeps_what_is_written_after() {
        let root = tempfile::tempdir().unwrap();
        let spares = LogSpares::default();
        let dir = root.path().join("u/1");
        let log = LogFile::open(&spares, &dir, "stdout", false).unwrap();
        let mut child = log.for_child().unwrap();
        child.write_all(b"early ").unwrap();
        log.name_now().unwrap();
        child.write_all(b"late").unwrap();
        log.finish(&spares).unwrap();
        assert_eq!(std::fs::read(dir.join("stdout")).unwrap(), b"early late");
    }

    #[test]
    fn output_written_after_a_silent_attempt_goes_to_that_attempt() {
        let root = tempfile::tempdir().unwrap();
        let spares = LogSpares::default();
        let first = root.path().join("a/1");
        let log = LogFile::open(&spares, &first, "stdout", false).unwrap();
        // A process that escaped the attempt's group still holds the file.
        let mut escaped = log.for_child().unwrap();
        log.finish(&spares).unwrap();
        escaped.write_all(b"too late").unwrap();
        let second = root.path().join("b/1");
        let log = LogFile::open(&spares, &second, "stdout", false).unwrap();
        assert_eq!(log.len().unwrap(), 0, "the next attempt starts empty");
        assert_eq!(std::fs::read(first.join("stdout")).unwrap(), b"too late");
    }

    #[test]
    fn naming_into_an_existing_file_appends_to_it() {
        let root = tempfile::tempdir().unwrap();
        let spares = LogSpares::default();
        std::fs::write(root.path().join("stdout"), b"before ").unwrap();
        let log = LogFile::open(&spares, root.path(), "stdout", false).unwrap();
        log.for_child().unwrap().write_all(b"after").unwrap();
        log.finish(&spares).unwrap();
        assert_eq!(
            std::fs::read(root.path().join("stdout")).unwrap(),
            b"before after"
        );
    }
}
