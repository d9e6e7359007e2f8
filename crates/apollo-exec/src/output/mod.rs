//! The attempt's `stdout` and `stderr` files: opened once per attempt in append mode, handed
//! to every phase's processes directly (no pipe), measured by their length, and hashed by
//! streaming a byte range back from disk. [`LogFile`] is one such file; `spares` keeps
//! unnamed files for reuse; `unnamed` makes, reopens and names unnamed files.
//!
//! A file gets its name (`<log_dir>/stdout`, and the folder) only when it is worth one. It
//! starts as an unnamed file (`O_TMPFILE`) in an existing folder above `log_dir`, and is linked
//! into place when the attempt ends with something in it, when the attempt has run for
//! `ExecOptions::name_output_after` (100 ms), or at once for a unit that is not idempotent (its
//! half-done attempt is what a human reads before `apollo mark`). An attempt that is quick and
//! silent creates nothing on disk, and its empty unnamed file is reused by the next attempt
//! (see `spares` for when a file counts as free). Where `O_TMPFILE`, `/proc/self/fd` or leases
//! are not available, the named files are created at once. Why: see
//! `docs/design/2026-11-30-exec-spawn-and-output.md`.

mod spares;
mod unnamed;

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use sha2::{Digest, Sha256};

use apollo_core::sharing::Sharing;
pub(crate) use spares::LogSpares;
use spares::Spare;
use unnamed::{create_unnamed, give_name, link, reopen_for_appending};

/// Bytes read at a time when hashing and copying: memory stays flat whatever the output size.
const CHUNK: usize = 64 * 1024;

/// Creates the attempt's folder `log_dir` and its parent (`<unit>/<attempt>` in apollo's
/// layout), never a folder above them: the grandparent (the run's `units/`) must exist.
/// `create_dir_all` would bring back, at the old path, a run folder that was moved or deleted
/// while the attempt ran (a `git clean` of the state directory), with nothing but this
/// attempt's output in it; here the attempt's output is lost instead (`NotFound`) and apollo
/// stops at its next journal commit, which finds its run folder gone.
pub(crate) fn create_log_dir(log_dir: &Path) -> io::Result<()> {
    if let Some(parent) = log_dir.parent() {
        ensure_real_dir(parent)?;
    }
    ensure_real_dir(log_dir)
}

/// Creates the folder `dir` (its parent must exist), or checks that what is there is a real
/// folder: a symbolic link would send the output (and apollo's writes) elsewhere. apollo-store
/// checked the attempt's folders before the attempt; this is the check at the moment of use.
fn ensure_real_dir(dir: &Path) -> io::Result<()> {
    let sharing = sharing_of(dir.parent().unwrap_or(Path::new(".")));
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, sharing.dir_mode());
    match builder.create(dir) {
        Ok(()) => return sharing.apply(File::open(dir)?, true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    if std::fs::symlink_metadata(dir)?.is_dir() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} is not a folder (a symbolic link?): refusing to write the attempt's output through it",
            dir.display()
        )))
    }
}

/// How the state directory's folder `dir` wants what is created in it: the owner's only, or
/// shared with its group (a 2770 folder; see [`Sharing`]). The state directory decides,
/// through its folders' bits; apollo-exec never picks a mode of its own.
pub(crate) fn sharing_of(dir: &Path) -> Sharing {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(dir).map_or(Sharing::Private, |meta| {
        Sharing::of_folder_mode(meta.permissions().mode())
    })
}

/// Opens (creating) the named output file `path` for appending: never through a symbolic
/// link, never a FIFO or device (refused, not blocked on). Not `apollo_core::safe_file`, which
/// opens existing files for reading only: this one creates and appends, with the mode the
/// state directory's folder asks for.
fn open_named(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let sharing = sharing_of(path.parent().unwrap_or(Path::new(".")));
    let file = OpenOptions::new()
        .append(true)
        .read(true)
        .create(true)
        .mode(sharing.file_mode())
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file: refusing to write the attempt's output to it",
            path.display()
        )));
    }
    sharing.apply(&file, false)?;
    // The children get this file as stdout or stderr: no flag of apollo's check on it.
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(file)
}

/// One output file of an attempt.
#[derive(Debug)]
pub(crate) struct LogFile {
    /// Apollo's open of the file: lengths, hashing, naming.
    file: File,
    /// What the children's stdout or stderr is made from: a separate open of the same file
    /// while it is unnamed (see the module docs), else `file` itself.
    for_children: Option<File>,
    /// `<log_dir>/<name>`: where it is, or will be once named.
    path: PathBuf,
    /// The folder of the unnamed file, while it has no name yet.
    home: Option<PathBuf>,
    named: Cell<bool>,
    /// Its length when the attempt began (0 for an unnamed file).
    initial_len: u64,
    /// `finish` ran (else the drop names a file with output, so none is lost).
    finished: bool,
}

impl LogFile {
    /// The file for `log_dir/name`: a reused or new unnamed file, or, without support for
    /// those or when `name_now`, the named file itself (created with its folder if needed,
    /// appended to if it exists).
    pub(crate) fn open(
        spares: &LogSpares,
        log_dir: &Path,
        name: &str,
        name_now: bool,
    ) -> io::Result<LogFile> {
        let path = log_dir.join(name);
        if !name_now && !spares.unsupported.load(Ordering::Relaxed) {
            let unnamed = match spares.take(log_dir) {
                Some(spare) => Ok((spare.file, spare.home)),
                None => create_unnamed(log_dir),
            };
            match unnamed.and_then(|(file, home)| {
                let for_children = reopen_for_appending(&file)?;
                Ok((file, for_children, home))
            }) {
                Ok((file, for_children, home)) => {
                    return Ok(LogFile {
                        file,
                        for_children: Some(for_children),
                        path,
                        home: Some(home),
                        named: Cell::new(false),
                        initial_len: 0,
                        finished: false,
                    });
                }
                // The kernel or the filesystem does not know `O_TMPFILE`, or there is no
                // `/proc` to reopen the file through.
                Err(error)
                    if error.kind() == io::ErrorKind::Unsupported
                        || matches!(
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
        create_log_dir(log_dir)?;
        let file = open_named(&path)?;
        let initial_len = file.metadata()?.len();
        Ok(LogFile {
            file,
            for_children: None,
            path,
            home: None,
            named: Cell::new(true),
            initial_len,
            finished: false,
        })
    }

    /// Its length when the attempt began: where this attempt's output starts.
    pub(crate) fn initial_len(&self) -> u64 {
        self.initial_len
    }

    /// Give the file its name now (creating its folder), if it has none yet. Only a link
    /// will do while children may still write: on failure the file stays unnamed, and
    /// [`LogFile::finish`] copies what it cannot link.
    pub(crate) fn name_now(&self) -> io::Result<()> {
        if self.named.get() {
            return Ok(());
        }
        link(&self.file, &self.path)?;
        self.named.set(true);
        Ok(())
    }

    /// The attempt is over: name the file if anything was written to it (`len`, when the
    /// caller knows its length); otherwise hand it back to `spares` for a later attempt. The
    /// error says which file could not be saved.
    pub(crate) fn finish(mut self, spares: &LogSpares, len: Option<u64>) -> Result<(), String> {
        self.finished = true;
        let Some(home) = self.home.take().filter(|_| !self.named.get()) else {
            return Ok(());
        };
        let saved = match len.map_or_else(|| self.file.metadata().map(|m| m.len()), Ok) {
            Ok(0) => {
                // Apollo's open goes to the pool; this LogFile keeps the children's open,
                // closed when it drops (only an escaped process can still hold one then).
                // Whether one does is asked when the spare is taken.
                if let Some(for_children) = self.for_children.take() {
                    let file = std::mem::replace(&mut self.file, for_children);
                    spares.put(Spare {
                        file,
                        home,
                        last_path: self.path.clone(),
                    });
                }
                Ok(())
            }
            Ok(_) => give_name(&self.file, &self.path),
            Err(error) => Err(error),
        };
        saved.map_err(|error| format!("cannot save {}: {error}", self.path.display()))
    }

    /// Its current length: every byte any phase wrote so far.
    pub(crate) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// A new descriptor on the same open file. It shares the append flag, so concurrent
    /// writers never overwrite each other.
    #[cfg(test)]
    pub(crate) fn for_child(&self) -> io::Result<File> {
        self.for_children.as_ref().unwrap_or(&self.file).try_clone()
    }

    /// The descriptor a child's stdout or stderr is made from (`dup2`, so it shares the
    /// append flag and concurrent writers in the group never overwrite each other).
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.for_children.as_ref().unwrap_or(&self.file))
    }

    /// SHA-256 (lowercase hex) of bytes `start..end`, read back in fixed-size chunks.
    pub(crate) fn sha256_of_range(&self, start: u64, end: u64) -> io::Result<String> {
        let mut hasher = Sha256::new();
        if start < end {
            let mut buffer = vec![0_u8; CHUNK];
            let mut offset = start;
            while offset < end {
                let want = usize::try_from(end - offset).map_or(CHUNK, |left| left.min(CHUNK));
                let read = self.file.read_at(&mut buffer[..want], offset)?;
                if read == 0 {
                    // Truncated under us: hash what there was.
                    break;
                }
                hasher.update(&buffer[..read]);
                offset += read as u64;
            }
        }
        Ok(apollo_core::hash::to_hex(&hasher.finalize()))
    }
}

impl Drop for LogFile {
    /// An attempt cut short (a panic) still keeps its output: a written, unnamed file gets
    /// its name.
    fn drop(&mut self) {
        if !self.finished
            && self.home.is_some()
            && !self.named.get()
            && self
                .file
                .metadata()
                .is_ok_and(|metadata| metadata.len() > 0)
        {
            let _ = give_name(&self.file, &self.path);
        }
    }
}

#[cfg(test)]
mod tests;
