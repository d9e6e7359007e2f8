//! The one error type of the crate, and the warnings readers and recovery hand back.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What class of failure a [`StoreError`] is; the CLI maps it to an exit code.
///
/// Suggested mapping (DESIGN §10): `Corruption` and `NewerVersion` → 3, `Locked` → 4,
/// `Io` → 6, `NotFound` and `InvalidInput` → 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A journal or blob does not hold what its checksums and sequence numbers promise.
    Corruption,
    /// A journal was written by a newer apollo with an incompatible (major) format.
    NewerVersion,
    /// Another apollo holds the state directory's lock.
    Locked,
    /// A system call failed (disk full, EIO, fsync failure, permission...), or the writer is
    /// poisoned by such an earlier failure.
    Io,
    /// A run, segment or blob that was asked for does not exist.
    NotFound,
    /// An argument was malformed (a run id, a unit name, a fault plan, an oversized record).
    InvalidInput,
}

/// Everything that can go wrong in apollo-store.
///
/// Messages are lowercase and state facts: where (file, byte offset, seq) and what. They give
/// no advice that names a command or a flag of the `apollo` binary; the CLI adds that. No
/// message repeats its [`source`](std::error::Error::source): an error either prints its
/// cause or returns it, never both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A journal record, segment header or segment sequence is wrong in a way that is not a
    /// torn tail.
    #[error(
        "journal corrupt: {path} at byte {offset}{seq}: {what}",
        path = .path.display(),
        seq = fmt_seq(*.seq)
    )]
    Corruption {
        /// The segment (or blob) file.
        path: PathBuf,
        /// Byte offset of the bad record (or header) in the file.
        offset: u64,
        /// The sequence number involved, when one is known (the bad record's expected seq).
        seq: Option<u64>,
        /// What is wrong.
        what: String,
    },
    /// A segment declares a format major version this apollo cannot read.
    #[error(
        "cannot read {path}: journal format {found} is newer than this apollo supports ({supported}); upgrade apollo to read it",
        path = .path.display()
    )]
    NewerVersion {
        /// The segment.
        path: PathBuf,
        /// The version found in its header (`major.minor`).
        found: String,
        /// The newest version this build reads.
        supported: String,
    },
    /// The state directory's lock is held by another apollo.
    #[error(
        "state directory is locked by another apollo ({holder}, lock file {path})",
        path = .path.display(),
        holder = fmt_holder(*.pid, .host.as_deref())
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The holder's process id, when it could be read from the lock file.
        pid: Option<u32>,
        /// The holder's host name, when it could be read from the lock file.
        host: Option<String>,
    },
    /// A system call on a file failed.
    ///
    /// The operating system's error is part of the message (it is the fact that matters, and
    /// the message is kept as text when a writer is poisoned), so it is not also returned by
    /// `source()`; [`StoreError::io_error`] gives it back as a value.
    #[error("{action} {path}: {error}", path = .path.display())]
    Io {
        /// What apollo was doing ("fsync", "write to", "open"...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        error: io::Error,
    },
    /// The journal writer failed earlier (a write or fsync error); it accepts nothing more.
    #[error(
        "journal writer stopped after an earlier failure ({cause}); nothing after the last acknowledged record is durable, and reopening the journal recovers from what is on disk"
    )]
    Poisoned {
        /// The first failure, as text.
        cause: String,
    },
    /// Something asked for does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for ("run 2026…", "blob ab12…").
        what: String,
    },
    /// An argument is malformed.
    #[error("{what}")]
    InvalidInput {
        /// What is wrong with it.
        what: String,
    },
    /// Something in the state directory is not of the type apollo keeps there (a symbolic
    /// link, a FIFO or a device where a regular file or a folder belongs); nothing was
    /// written through it.
    #[error("refusing to use {path}: it is {found}, not {expected}", path = .path.display())]
    UnexpectedFileType {
        /// The file or folder.
        path: PathBuf,
        /// What apollo keeps there ("a regular file", "a folder").
        expected: &'static str,
        /// What is there ("a symbolic link", "a FIFO"...).
        found: &'static str,
    },
    /// While a run was active, the lock file or the run's folder was deleted or replaced
    /// under the running apollo: its records would go to files nobody reads, or a second
    /// apollo may be writing the same run.
    #[error("the state directory changed under the running apollo: {path} {what}", path = .path.display())]
    StateChanged {
        /// The lock file or folder that changed.
        path: PathBuf,
        /// What happened to it ("was deleted", "was replaced").
        what: &'static str,
    },
    /// A record whose checksum holds but whose kind this build does not know: a newer apollo
    /// (a newer format minor) wrote it. Refused, never skipped, even in salvage mode.
    #[error(
        "cannot read {path} at byte {offset}: record kind `{kind}` was written by a newer apollo (journal format {found}; this apollo reads up to {supported})",
        path = .path.display()
    )]
    NewerRecordKind {
        /// The segment.
        path: PathBuf,
        /// Byte offset of the record in the file.
        offset: u64,
        /// The unknown kind.
        kind: String,
        /// The version in the segment's header (`major.minor`).
        found: String,
        /// The newest version this build writes.
        supported: String,
    },
}

fn fmt_seq(seq: Option<u64>) -> String {
    match seq {
        Some(seq) => format!(" (seq {seq})"),
        None => String::new(),
    }
}

fn fmt_holder(pid: Option<u32>, host: Option<&str>) -> String {
    match (pid, host) {
        (Some(pid), Some(host)) => format!("pid {pid} on {host}"),
        (Some(pid), None) => format!("pid {pid}"),
        (None, _) => "holder unknown".to_owned(),
    }
}

impl StoreError {
    /// The class of the error, for exit codes.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Corruption { .. } => ErrorKind::Corruption,
            StoreError::NewerVersion { .. } => ErrorKind::NewerVersion,
            StoreError::Locked { .. } => ErrorKind::Locked,
            StoreError::Io { .. } | StoreError::Poisoned { .. } => ErrorKind::Io,
            StoreError::NotFound { .. } => ErrorKind::NotFound,
            StoreError::InvalidInput { .. } | StoreError::UnexpectedFileType { .. } => {
                ErrorKind::InvalidInput
            }
            StoreError::StateChanged { .. } => ErrorKind::Io,
            StoreError::NewerRecordKind { .. } => ErrorKind::NewerVersion,
        }
    }

    /// The operating system's error of an [`StoreError::Io`], e.g. to tell a full disk
    /// (`ENOSPC`) from a failing one (`EIO`).
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            StoreError::Io { error, .. } => Some(error),
            _ => None,
        }
    }

    pub(crate) fn io(action: &'static str, path: impl AsRef<Path>, error: io::Error) -> Self {
        StoreError::Io {
            action,
            path: path.as_ref().to_path_buf(),
            error,
        }
    }

    pub(crate) fn corruption(
        path: impl AsRef<Path>,
        offset: u64,
        seq: Option<u64>,
        what: impl Into<String>,
    ) -> Self {
        StoreError::Corruption {
            path: path.as_ref().to_path_buf(),
            offset,
            seq,
            what: what.into(),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        StoreError::InvalidInput { what: what.into() }
    }
}

/// What a [`Warning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// The last record of the last segment is incomplete or fails its checksum: a write that
    /// was never acknowledged. Readers stop there; the writer cuts it off.
    TornTail,
    /// Salvage mode read past a bad record, segment or sequence gap.
    Salvaged,
}

/// Something a reader or the recovery noticed that is not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// What kind of warning.
    pub kind: WarningKind,
    /// The segment file.
    pub path: PathBuf,
    /// Byte offset in the file.
    pub offset: u64,
    /// The seq expected at that point, when known.
    pub seq: Option<u64>,
    /// What happened, in a sentence.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}{}: {}",
            self.path.display(),
            self.offset,
            fmt_seq(self.seq),
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_message_says_where_and_what() {
        let error = StoreError::corruption("/s/000002.log", 420, Some(17), "checksum mismatch");
        assert_eq!(
            error.to_string(),
            "journal corrupt: /s/000002.log at byte 420 (seq 17): checksum mismatch"
        );
        assert_eq!(error.kind(), ErrorKind::Corruption);
    }

    #[test]
    fn locked_message_names_the_holder_pid() {
        let error = StoreError::Locked {
            path: "/s/lock".into(),
            pid: Some(4242),
            host: Some("build-1".into()),
        };
        assert!(error.to_string().contains("pid 4242 on build-1"), "{error}");
        assert_eq!(error.kind(), ErrorKind::Locked);
    }

    #[test]
    fn no_message_repeats_its_source() {
        let error = StoreError::io("fsync", "/s/x", io::Error::from_raw_os_error(libc::EIO));
        assert!(std::error::Error::source(&error).is_none());
        assert_eq!(
            error.io_error().and_then(io::Error::raw_os_error),
            Some(libc::EIO)
        );
        assert!(error.to_string().starts_with("fsync /s/x: "), "{error}");
    }

    #[test]
    fn messages_name_no_cli_flag_or_command() {
        let messages = [
            StoreError::corruption("/s/1.log", 1, None, "bad").to_string(),
            StoreError::Locked {
                path: "/s/lock".into(),
                pid: None,
                host: None,
            }
            .to_string(),
            StoreError::Poisoned { cause: "x".into() }.to_string(),
        ];
        for message in messages {
            assert!(
                !message.contains("--") && !message.contains("`apollo"),
                "{message}"
            );
        }
    }
}

#[cfg(test)]
mod snapshots {
    use super::*;

    /// Every user-facing message of the crate's errors and warnings, in one snapshot.
    #[test]
    fn error_and_warning_messages() {
        let messages = [
            StoreError::corruption(
                "/s/runs/r/journal/000002.log",
                4096,
                Some(17),
                "bad record (checksum mismatch) followed by a good record at byte 4321",
            )
            .to_string(),
            StoreError::NewerVersion {
                path: "/s/runs/r/journal/000001.log".into(),
                found: "2.0".into(),
                supported: "1.0".into(),
            }
            .to_string(),
            StoreError::Locked {
                path: "/s/lock".into(),
                pid: Some(4242),
                host: Some("build-1".into()),
            }
            .to_string(),
            StoreError::Locked {
                path: "/s/lock".into(),
                pid: None,
                host: None,
            }
            .to_string(),
            StoreError::io(
                "fdatasync",
                "/s/runs/r/journal/000001.log",
                io::Error::from_raw_os_error(libc::EIO),
            )
            .to_string(),
            StoreError::Poisoned {
                cause: "write to /s/runs/r/journal/000001.log: No space left on device (os error 28)"
                    .into(),
            }
            .to_string(),
            StoreError::NotFound {
                what: "run 20261130T021507Z-3f9a".into(),
            }
            .to_string(),
            Warning {
                kind: WarningKind::TornTail,
                path: "/s/runs/r/journal/000003.log".into(),
                offset: 812,
                seq: Some(40),
                message: "torn tail: the last 57 bytes (the file ends inside a record's payload) were never acknowledged; the next writer cuts them off".into(),
            }
            .to_string(),
        ];
        insta::assert_snapshot!(messages.join("\n"));
    }
}
