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
/// link, never a FIFO or device (refused, not blocked on).
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
mod tests {
    use super::unnamed::held_elsewhere;
    use super::*;
    use spares::Availability;
    use std::io::Write;

    fn named(dir: &Path, name: &str) -> LogFile {
        LogFile::open(&LogSpares::default(), dir, name, true).unwrap()
    }

    /// Whether unnamed files work in `dir` (they do on ext4, xfs, btrfs, tmpfs). Where they
    /// do not, named files are used and a test of unnamed files has nothing to check: it
    /// prints a visible `SKIPPED: …` and passes, except under `CI=true`, where it fails.
    fn unnamed_files_work(dir: &Path) -> bool {
        let works = LogFile::open(&LogSpares::default(), dir, "probe", false)
            .is_ok_and(|log| log.home.is_some())
            && create_unnamed(dir)
                .is_ok_and(|(file, _)| held_elsewhere(&file) == Availability::Free);
        if !works {
            let what = format!(
                "O_TMPFILE, /proc/self/fd and write leases in {}",
                dir.display()
            );
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "this test needs {what} (under CI=true that is a failure, not a skip)"
            );
            // Straight to stderr: the test harness captures `eprintln!` of passing tests.
            let _ = std::io::stderr().write_all(format!("SKIPPED: needs {what}\n").as_bytes());
        }
        works
    }
    /// A temporary folder where unnamed files work, or `None` (said on stderr) where they
    /// do not, and the test has nothing to check.
    fn unnamed_files_root() -> Option<tempfile::TempDir> {
        let root = tempfile::tempdir().unwrap();
        unnamed_files_work(root.path()).then_some(root)
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
    fn output_is_never_written_through_a_symbolic_link() {
        let dir = tempfile::tempdir().unwrap();
        let spares = LogSpares::default();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        // The file is a link.
        let log_dir = dir.path().join("units/a/1");
        std::fs::create_dir_all(&log_dir).unwrap();
        std::os::unix::fs::symlink(&victim, log_dir.join("stdout")).unwrap();
        assert!(LogFile::open(&spares, &log_dir, "stdout", true).is_err());
        // The unit's folder is a link.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("units/b")).unwrap();
        let error = LogFile::open(&spares, &dir.path().join("units/b/1"), "stdout", true)
            .expect_err("a linked folder is refused");
        assert!(error.to_string().contains("not a folder"), "{error}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    }

    #[test]
    fn output_named_at_the_end_never_goes_through_a_linked_folder() {
        // A hook's folder (`runs/<id>/hooks`) planted as a link to a folder that has the
        // hook's sub-folder: the link at the end is refused, and the copy it falls back to
        // must be refused too.
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("on_finish")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.path().join("hooks")).unwrap();
        let log_dir = root.path().join("hooks/on_finish");
        let log = LogFile::open(&spares, &log_dir, "stdout", false).unwrap();
        log.for_child().unwrap().write_all(b"hook output").unwrap();
        let error = log
            .finish(&spares, None)
            .expect_err("a linked folder is refused");
        assert!(error.contains("not a folder"), "{error}");
        assert!(!elsewhere.join("on_finish/stdout").exists());
    }

    #[test]
    fn a_silent_attempt_creates_nothing_and_its_file_is_reused() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        std::fs::create_dir(root.path().join("units")).unwrap();
        let first_dir = root.path().join("units/a/1");
        let log = LogFile::open(&spares, &first_dir, "stdout", false).unwrap();
        log.finish(&spares, None).unwrap();
        assert!(!root.path().join("units/a").exists(), "nothing named");
        assert_eq!(spares.spares.lock().unwrap().len(), 1);
        let second_dir = root.path().join("units/b/1");
        let log = LogFile::open(&spares, &second_dir, "stdout", false).unwrap();
        assert!(
            spares.spares.lock().unwrap().is_empty(),
            "the spare was reused"
        );
        log.for_child().unwrap().write_all(b"out").unwrap();
        log.finish(&spares, None).unwrap();
        assert_eq!(std::fs::read(second_dir.join("stdout")).unwrap(), b"out");
        assert!(
            spares.spares.lock().unwrap().is_empty(),
            "a named file is not reused"
        );
    }

    #[test]
    fn a_file_named_early_keeps_what_is_written_after() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        let dir = root.path().join("u/1");
        let log = LogFile::open(&spares, &dir, "stdout", false).unwrap();
        let mut child = log.for_child().unwrap();
        child.write_all(b"early ").unwrap();
        log.name_now().unwrap();
        child.write_all(b"late").unwrap();
        log.finish(&spares, None).unwrap();
        assert_eq!(std::fs::read(dir.join("stdout")).unwrap(), b"early late");
    }

    #[test]
    fn output_written_after_a_silent_attempt_goes_to_that_attempt() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        let first = root.path().join("a/1");
        let log = LogFile::open(&spares, &first, "stdout", false).unwrap();
        // A process that escaped the attempt's group still holds the file.
        let mut escaped = log.for_child().unwrap();
        log.finish(&spares, None).unwrap();
        escaped.write_all(b"too late").unwrap();
        let second = root.path().join("b/1");
        let log = LogFile::open(&spares, &second, "stdout", false).unwrap();
        assert_eq!(log.len().unwrap(), 0, "the next attempt starts empty");
        assert_eq!(std::fs::read(first.join("stdout")).unwrap(), b"too late");
    }

    #[test]
    fn naming_into_an_existing_file_appends_to_it() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        std::fs::write(root.path().join("stdout"), b"before ").unwrap();
        let log = LogFile::open(&spares, root.path(), "stdout", false).unwrap();
        log.for_child().unwrap().write_all(b"after").unwrap();
        log.finish(&spares, None).unwrap();
        assert_eq!(
            std::fs::read(root.path().join("stdout")).unwrap(),
            b"before after"
        );
    }

    #[test]
    fn a_name_that_cannot_be_linked_mid_attempt_loses_nothing_at_the_end() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        std::fs::write(root.path().join("stdout"), b"before ").unwrap();
        let log = LogFile::open(&spares, root.path(), "stdout", false).unwrap();
        let mut child = log.for_child().unwrap();
        child.write_all(b"early ").unwrap();
        assert!(log.name_now().is_err(), "the name is taken: no link");
        child.write_all(b"late").unwrap();
        drop(child);
        log.finish(&spares, None).unwrap();
        assert_eq!(
            std::fs::read(root.path().join("stdout")).unwrap(),
            b"before early late"
        );
    }

    #[test]
    fn an_attempt_cut_short_still_keeps_its_output() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let dir = root.path().join("u/1");
        let log = LogFile::open(&LogSpares::default(), &dir, "stderr", false).unwrap();
        log.for_child().unwrap().write_all(b"panic ahead").unwrap();
        drop(log);
        assert_eq!(std::fs::read(dir.join("stderr")).unwrap(), b"panic ahead");
    }

    #[test]
    fn a_file_an_escaped_process_holds_is_not_reused_and_is_named_when_dropped() {
        let Some(root) = unnamed_files_root() else {
            return;
        };
        let spares = LogSpares::default();
        let log = LogFile::open(&spares, &root.path().join("a/1"), "stdout", false).unwrap();
        let escaped = log.for_child().unwrap();
        log.finish(&spares, None).unwrap();
        let next = LogFile::open(&spares, &root.path().join("b/1"), "stdout", false).unwrap();
        next.finish(&spares, None).unwrap();
        assert_eq!(
            spares.spares.lock().unwrap().len(),
            2,
            "the held one was skipped"
        );
        drop(spares);
        assert!(
            root.path().join("a/1/stdout").exists(),
            "named for what the escaped process writes later"
        );
        assert!(
            !root.path().join("b").exists(),
            "a free spare is just closed"
        );
        drop(escaped);
    }
}
