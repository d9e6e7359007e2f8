//! The small files an executor keeps in an attempt folder beside the output (apollo-slurm's
//! wrapper script, job id, `result`): read and written without following a symbolic link and
//! without blocking on a FIFO, as the attempt's `stdout` and `stderr` are (see `output`). The
//! attempt folder is inside the state directory; a link planted there must not make apollo
//! write outside it, nor a FIFO or `/dev/zero` make it wait or read forever.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use apollo_core::safe_file::{SafeOpen, SafeOpenError};

/// Opens the existing file `path` for reading through `apollo_core::safe_file`: never through
/// a symbolic link (the last component; the folders are checked when the attempt folder is
/// made, see [`create_attempt_dir`]), never blocking, and only a regular file. `Ok(None)`:
/// there is no such file.
pub fn open_attempt_file(path: &Path) -> io::Result<Option<File>> {
    match apollo_core::safe_file::open(path, SafeOpen::NO_FOLLOW) {
        Ok((file, _)) => Ok(Some(file)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(refusal(path, error)),
    }
}

/// The message of an attempt file that cannot be opened or read, as this module has always
/// worded it.
fn refusal(path: &Path, error: SafeOpenError) -> io::Error {
    match error {
        SafeOpenError::SymbolicLink => io::Error::other(format!(
            "refusing to read {}: it is a symbolic link, not a regular file",
            path.display()
        )),
        SafeOpenError::NotRegular(file_type) => {
            use std::os::unix::fs::FileTypeExt as _;
            let what = if file_type.is_fifo() {
                "a FIFO"
            } else if file_type.is_dir() {
                "a folder"
            } else {
                "a device or socket"
            };
            io::Error::other(format!(
                "refusing to read {}: it is {what}, not a regular file",
                path.display()
            ))
        }
        SafeOpenError::TooLarge { bound, .. } => io::Error::other(format!(
            "refusing to read {}: it is larger than the {bound} bytes such a file holds",
            path.display()
        )),
        SafeOpenError::Open(error) | SafeOpenError::Stat(error) | SafeOpenError::Read(error) => {
            error
        }
        other => io::Error::other(other),
    }
}

/// Reads the small file `path` whole, as [`open_attempt_file`] opens it; more than `max_len`
/// bytes is an error naming the file (these files are written by apollo or its job wrapper,
/// a few KB at most). `Ok(None)`: there is no such file.
pub fn read_attempt_file(path: &Path, max_len: u64) -> io::Result<Option<Vec<u8>>> {
    match apollo_core::safe_file::read_bounded(path, SafeOpen::NO_FOLLOW, max_len) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(refusal(path, error)),
    }
}

/// Writes `bytes` to `path` through a new temporary file in the same folder, renamed over
/// `path`: a symbolic link or a FIFO planted at `path` is replaced, never written through or
/// blocked on. Nothing is fsynced (these files are not part of the journal's promise).
pub fn write_attempt_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::other(format!(
            "{} is not a file name",
            path.display()
        )));
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = dir.join(temp_name);
    let sharing = crate::output::sharing_of(dir);
    let create = || {
        // `create_new` (O_EXCL) never follows a link at the temporary's name either.
        // The owner's only, as everything in the state directory, unless it is shared with
        // its group (DESIGN §18).
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(sharing.file_mode())
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temp)?;
        sharing.apply(&file, false)?;
        Ok::<File, io::Error>(file)
    };
    let result = (|| {
        // Something at the temporary's name (left by a killed apollo of the same pid, or
        // planted) is removed — a link itself, never what it points to — and the name taken.
        let mut file = match create() {
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&temp)?;
                create()?
            }
            opened => opened?,
        };
        io::Write::write_all(&mut file, bytes)?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Creates the attempt folder `log_dir` and its parent (`<unit>/<attempt>`), never a folder
/// above them, and refuses either when it is not a real folder (a symbolic link): what the
/// local executor does before it names an attempt's output.
pub fn create_attempt_dir(log_dir: &Path) -> io::Result<()> {
    crate::output::create_log_dir(log_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leftover_or_planted_temporary_neither_blocks_the_write_nor_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let folder = dir.path().join("attempt");
        std::fs::create_dir(&folder).unwrap();
        let temp = folder.join(format!(".job_id.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &temp).unwrap();
        write_attempt_file(&folder.join("job_id"), b"42\n").unwrap();
        assert_eq!(std::fs::read(folder.join("job_id")).unwrap(), b"42\n");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(!temp.exists() && temp.symlink_metadata().is_err());
        // A leftover regular file at the name: the same.
        std::fs::write(&temp, "half").unwrap();
        write_attempt_file(&folder.join("job_id"), b"43\n").unwrap();
        assert_eq!(std::fs::read(folder.join("job_id")).unwrap(), b"43\n");
    }
}
