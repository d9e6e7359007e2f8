//! The one door for opening an existing file that may not be what it claims to be: a config,
//! an input to hash, a segment of the journal, a small file an executor left in an attempt
//! folder. Any of them may have been replaced by a symbolic link, a FIFO, a device or a
//! folder (planted, or by mistake), and apollo must then refuse it, never follow the link out
//! of the state directory, never wait forever on a FIFO without a writer and never read
//! `/dev/zero` until memory runs out (issue 36).
//!
//! [`open`] opens the file without blocking (`O_NONBLOCK`), without taking a controlling
//! terminal (`O_NOCTTY`), and, unless [`SafeOpen::follow_symlinks`] says so, without
//! following a symbolic link at the last component (`O_NOFOLLOW`); then it checks what was
//! opened with `fstat`, so a file swapped between a caller's own check and the open is caught.
//! [`read_to_end`] reads a regular file whole within a byte bound.
//!
//! The callers word their own errors: [`SafeOpenError`] says what was found and each caller
//! turns it into the message its users and tests know.
//!
//! Opening for writing or creating is not here: apollo-store opens relative to a folder's
//! descriptor (`safe_dir`) and apollo-exec creates output files with a mode of the state
//! directory; those stay with their owners.

use std::fs::{File, FileType, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// How [`open`] opens a file: the legitimate differences between its callers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SafeOpen {
    /// Follow a symbolic link at the last component. A user's own files (a config, an
    /// include, an input to hash) may be links; a file in the state directory may not.
    pub follow_symlinks: bool,
    /// Accept a FIFO as well as a regular file (a config or `--params-file <(vault …)`); the
    /// caller then reads it with a time limit of its own, the file still non-blocking.
    pub accept_fifo: bool,
    /// Clear `O_NONBLOCK` on the opened regular file, for a caller that hands it on (to a
    /// child, or to code that expects blocking reads). A FIFO keeps it.
    pub blocking_after_open: bool,
}

impl SafeOpen {
    /// A regular file only, never through a symbolic link: what a file in the state
    /// directory must be.
    pub const NO_FOLLOW: Self = Self {
        follow_symlinks: false,
        accept_fifo: false,
        blocking_after_open: false,
    };

    /// A regular file only, symbolic links followed: a user's own file.
    pub const FOLLOW: Self = Self {
        follow_symlinks: true,
        accept_fifo: false,
        blocking_after_open: false,
    };
}

/// Why [`open`] or [`read_to_end`] refused or failed. Each variant states a fact; the caller
/// names the file and words the message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SafeOpenError {
    /// The open failed (a missing file is `io::ErrorKind::NotFound`).
    #[error("cannot open it: {0}")]
    Open(#[source] io::Error),
    /// The last component is a symbolic link, which was not to be followed.
    #[error("it is a symbolic link, not a regular file")]
    SymbolicLink,
    /// `fstat` of the opened file failed.
    #[error("cannot stat it: {0}")]
    Stat(#[source] io::Error),
    /// What was opened is not a regular file (nor an accepted FIFO).
    #[error("it is {}, not a regular file", describe(*.0))]
    NotRegular(FileType),
    /// Clearing `O_NONBLOCK` failed.
    #[error("cannot make it blocking: {0}")]
    SetBlocking(#[source] io::Error),
    /// The file holds more than the bound: `len` is its size or what was read of it.
    #[error("it holds more than {bound} bytes ({len} found)")]
    TooLarge {
        /// The size found (or the bytes read, one past the bound).
        len: u64,
        /// The most bytes the caller reads.
        bound: u64,
    },
    /// A read failed.
    #[error("cannot read it: {0}")]
    Read(#[source] io::Error),
}

impl SafeOpenError {
    /// Whether the file was not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Open(error) if error.kind() == io::ErrorKind::NotFound)
    }
}

/// A file type in words, as the messages say it: "a folder", "a FIFO", "a character device".
pub fn describe(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a folder"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "a file of unknown type"
    }
}

/// The flags of every open here: read only (std adds `O_CLOEXEC`), non-blocking, no
/// controlling terminal, and `O_NOFOLLOW` unless links are followed.
fn open_flags(options: SafeOpen) -> i32 {
    use rustix::fs::OFlags;
    let mut flags = OFlags::NONBLOCK | OFlags::NOCTTY;
    if !options.follow_symlinks {
        flags |= OFlags::NOFOLLOW;
    }
    // The flags are small positive bits; the cast cannot truncate.
    flags.bits() as i32
}

/// Opens the existing file `path` for reading as `options` say, and checks with `fstat` that
/// it is a regular file (or an accepted FIFO). The open never blocks; the file's metadata is
/// returned with it.
pub fn open(path: &Path, options: SafeOpen) -> Result<(File, Metadata), SafeOpenError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(open_flags(options))
        .open(path)
        .map_err(|error| {
            let is_loop = rustix::io::Errno::from_io_error(&error) == Some(rustix::io::Errno::LOOP);
            if is_loop && !options.follow_symlinks {
                SafeOpenError::SymbolicLink
            } else {
                SafeOpenError::Open(error)
            }
        })?;
    let metadata = file.metadata().map_err(SafeOpenError::Stat)?;
    let file_type = metadata.file_type();
    let is_fifo = file_type.is_fifo() && options.accept_fifo;
    if !(file_type.is_file() || is_fifo) {
        return Err(SafeOpenError::NotRegular(file_type));
    }
    if options.blocking_after_open && !is_fifo {
        let flags = rustix::fs::fcntl_getfl(&file)
            .map_err(|errno| SafeOpenError::SetBlocking(errno.into()))?;
        rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)
            .map_err(|errno| SafeOpenError::SetBlocking(errno.into()))?;
    }
    Ok((file, metadata))
}

/// Reads the regular file `file` (as [`open`] gave it, with its `metadata`) whole, refusing
/// more than `bound` bytes: a size over the bound is refused before any byte is read, and a
/// file that grows meanwhile is cut one byte past the bound and refused.
pub fn read_to_end(file: &File, metadata: &Metadata, bound: u64) -> Result<Vec<u8>, SafeOpenError> {
    if metadata.len() > bound {
        return Err(SafeOpenError::TooLarge {
            len: metadata.len(),
            bound,
        });
    }
    let mut bytes = Vec::new();
    file.take(bound.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(SafeOpenError::Read)?;
    if bytes.len() as u64 > bound {
        return Err(SafeOpenError::TooLarge {
            len: bytes.len() as u64,
            bound,
        });
    }
    Ok(bytes)
}

/// [`open`] then [`read_to_end`]: the whole of a small regular file.
pub fn read_bounded(path: &Path, options: SafeOpen, bound: u64) -> Result<Vec<u8>, SafeOpenError> {
    let (file, metadata) = open(
        path,
        SafeOpen {
            accept_fifo: false,
            ..options
        },
    )?;
    read_to_end(&file, &metadata, bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    #[test]
    fn a_normal_file_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, b"hello").unwrap();
        let bytes = read_bounded(&path, SafeOpen::NO_FOLLOW, 5).unwrap();
        assert_eq!(bytes, b"hello");
    }

    #[test]
    fn a_symlink_is_refused_unless_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = open(&link, SafeOpen::NO_FOLLOW).unwrap_err();
        assert!(matches!(error, SafeOpenError::SymbolicLink), "{error}");
        assert_eq!(read_bounded(&link, SafeOpen::FOLLOW, 10).unwrap(), b"x");
    }

    #[test]
    fn a_fifo_does_not_block_and_is_refused_unless_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        make_fifo(&path);
        // No writer: a blocking open would wait forever; this one returns at once.
        let error = open(&path, SafeOpen::NO_FOLLOW).unwrap_err();
        assert!(
            matches!(&error, SafeOpenError::NotRegular(kind) if kind.is_fifo()),
            "{error}"
        );
        assert!(error.to_string().contains("a FIFO"), "{error}");
        let accept = SafeOpen {
            accept_fifo: true,
            ..SafeOpen::NO_FOLLOW
        };
        let (_file, metadata) = open(&path, accept).unwrap();
        assert!(metadata.file_type().is_fifo());
        // Reading whole is for regular files only, even when asked to accept a FIFO.
        let error = read_bounded(&path, accept, 10).unwrap_err();
        assert!(matches!(error, SafeOpenError::NotRegular(_)), "{error}");
    }

    #[test]
    fn a_folder_or_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = open(dir.path(), SafeOpen::FOLLOW).unwrap_err();
        assert!(error.to_string().contains("a folder"), "{error}");
        let error = read_bounded(Path::new("/dev/zero"), SafeOpen::FOLLOW, 10).unwrap_err();
        assert!(error.to_string().contains("a character device"), "{error}");
    }

    #[test]
    fn a_file_over_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'#'; 2048]).unwrap();
        let error = read_bounded(&path, SafeOpen::NO_FOLLOW, 1024).unwrap_err();
        assert!(
            matches!(
                error,
                SafeOpenError::TooLarge {
                    len: 2048,
                    bound: 1024
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_not_found_and_blocking_can_be_restored() {
        let dir = tempfile::tempdir().unwrap();
        let error = open(&dir.path().join("none"), SafeOpen::NO_FOLLOW).unwrap_err();
        assert!(error.is_not_found(), "{error}");
        let path = dir.path().join("file");
        std::fs::write(&path, b"x").unwrap();
        let options = SafeOpen {
            blocking_after_open: true,
            ..SafeOpen::NO_FOLLOW
        };
        let (file, _) = open(&path, options).unwrap();
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK));
    }
}
