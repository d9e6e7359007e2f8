//! Reading the files a load reads — the config, its includes, a params file — bounded in
//! size and never blocking on a FIFO or a device (issue 36: `include: [/dev/zero]` grew until
//! the OOM killer; a FIFO as include or `--params-file` hung `check` and `run` forever).
//!
//! A config or an included file must be a regular file of at most [`MAX_CONFIG_BYTES`]. The
//! config and a params file may also be a pipe (`apollo run --params-file <(vault …)`): it is
//! read to its end within the same bound and within [`PIPE_TIME_LIMIT`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest config, included file or params file apollo reads: 64 MiB.
pub const MAX_CONFIG_BYTES: u64 = 64 * 1024 * 1024;

/// How long a pipe given as the config or a params file may take to reach its end.
pub const PIPE_TIME_LIMIT: Duration = Duration::from_secs(30);

/// What kinds of file a read accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accept {
    /// Regular files only (included files).
    Regular,
    /// Regular files and pipes (the config, a params file).
    RegularOrPipe,
}

/// The whole of `path`, checked as [`Accept`] says, at most [`MAX_CONFIG_BYTES`]. A pipe
/// gets [`PIPE_TIME_LIMIT`] to reach its end.
pub(crate) fn read_bounded(path: &Path, accept: Accept) -> io::Result<Vec<u8>> {
    read_bounded_with(path, accept, MAX_CONFIG_BYTES, PIPE_TIME_LIMIT)
}

fn read_bounded_with(
    path: &Path,
    accept: Accept,
    max_bytes: u64,
    time_limit: Duration,
) -> io::Result<Vec<u8>> {
    // Refused before it is opened: opening some devices has effects of their own.
    let kind = std::fs::metadata(path)?.file_type();
    let pipe_allowed = accept == Accept::RegularOrPipe;
    if !(kind.is_file() || (kind.is_fifo() && pipe_allowed)) {
        return Err(not_accepted(kind, pipe_allowed));
    }
    // Opened through the one door (`crate::safe_file`): non-blocking, so that a FIFO (or a
    // file swapped for one meanwhile) cannot block the open on a writer that never comes; no
    // controlling terminal from a tty; a symbolic link followed (a user's own file). A pipe
    // stays here: it is read with a time limit, which the door does not do.
    use crate::safe_file::{SafeOpen, SafeOpenError};
    let options = SafeOpen {
        accept_fifo: pipe_allowed,
        ..SafeOpen::FOLLOW
    };
    let as_io = |error: SafeOpenError| match error {
        SafeOpenError::Open(error) | SafeOpenError::Stat(error) | SafeOpenError::Read(error) => {
            error
        }
        SafeOpenError::NotRegular(kind) => not_accepted(kind, pipe_allowed),
        SafeOpenError::TooLarge { len, bound } => too_large(len, bound),
        other => io::Error::other(other),
    };
    let (file, metadata) = crate::safe_file::open(path, options).map_err(as_io)?;
    if metadata.file_type().is_fifo() {
        return read_pipe(&file, max_bytes, time_limit);
    }
    crate::safe_file::read_to_end(&file, &metadata, max_bytes).map_err(as_io)
}

/// A pipe to its end (every writer closed it), polling so neither a silent writer nor one
/// that never closes holds apollo beyond `time_limit`.
fn read_pipe(file: &File, max_bytes: u64, time_limit: Duration) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + time_limit;
    let mut bytes = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match (&*file).read(&mut buffer) {
            Ok(0) => return Ok(bytes),
            Ok(n_read) => {
                bytes.extend_from_slice(&buffer[..n_read]);
                if bytes.len() as u64 > max_bytes {
                    return Err(too_large(bytes.len() as u64, max_bytes));
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the pipe gave no end within {} s (its writer never closed it)",
                            time_limit.as_secs()
                        ),
                    ));
                }
                let timeout = rustix::event::Timespec {
                    tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                let mut fds = [rustix::event::PollFd::new(
                    file,
                    rustix::event::PollFlags::IN,
                )];
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(errno) => return Err(errno.into()),
                }
            }
            Err(error) => return Err(error),
        }
    }
}

fn too_large(len: u64, max_bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "it holds more than {} MiB ({len} bytes read); a config, an included file or a params file may be at most {} MiB",
            max_bytes / (1024 * 1024),
            max_bytes / (1024 * 1024)
        ),
    )
}

fn not_accepted(kind: std::fs::FileType, pipe_allowed: bool) -> io::Error {
    let what = if kind.is_dir() {
        "a folder"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_fifo() {
        "a FIFO"
    } else {
        "not a regular file"
    };
    let wanted = if pipe_allowed {
        "a regular file or a pipe"
    } else {
        "a regular file"
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, and apollo reads only {wanted} here"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_is_refused_before_it_is_read() {
        let error = read_bounded(Path::new("/dev/zero"), Accept::RegularOrPipe).unwrap_err();
        assert!(error.to_string().contains("a character device"), "{error}");
    }

    #[test]
    fn a_file_over_the_bound_is_refused_without_reading_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, vec![b'#'; 2048]).unwrap();
        let error = read_bounded_with(&path, Accept::Regular, 1024, PIPE_TIME_LIMIT).unwrap_err();
        assert!(error.to_string().contains("at most"), "{error}");
        let small = read_bounded_with(&path, Accept::Regular, 4096, PIPE_TIME_LIMIT).unwrap();
        assert_eq!(small.len(), 2048);
    }

    #[test]
    fn a_fifo_include_is_refused_and_a_silent_pipe_ends_at_the_time_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let error = read_bounded(&path, Accept::Regular).unwrap_err();
        assert!(error.to_string().contains("a FIFO"), "{error}");
        // A writer that holds the pipe open and never writes: the read ends at the limit.
        let _writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let error = read_bounded_with(
            &path,
            Accept::RegularOrPipe,
            MAX_CONFIG_BYTES,
            Duration::from_millis(50),
        )
        .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
    }
}
