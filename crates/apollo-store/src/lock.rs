//! The single-writer lock: `flock(2)` on the state directory's `lock` file.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::safe_dir::{Access, Dir, held_state, path_id};

/// Who holds (or last held) the lock, as written into the lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's process id.
    pub pid: Option<u32>,
    /// The holder's host name.
    pub host: Option<String>,
    /// The run the holder is writing, once it said so ([`StateLock::set_run`]).
    pub run: Option<String>,
    /// The holder's boot (`/proc/sys/kernel/random/boot_id`), to tell its pid from the same
    /// number after a reboot.
    pub boot: Option<String>,
    /// Whether the holder could not be checked: on a network filesystem, read without trying
    /// the lock ([`crate::StateDir::never_locking`]), the lock file names an apollo on another
    /// host (or of another boot), whose process cannot be looked at from here. It may hold
    /// the lock still, or have died without emptying the file.
    pub unverified: bool,
    /// Read by a handle that never writes ([`crate::StateDir::never_locking`]): a holder that
    /// is this very process (a program embedding a run and a view of it) still counts as the
    /// writer of its run.
    pub(crate) for_reader: bool,
}

impl LockHolder {
    fn parse(text: &str) -> Self {
        let mut holder = LockHolder::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", pid)) => holder.pid = pid.trim().parse().ok(),
                Some(("host", host)) => holder.host = Some(host.trim().to_owned()),
                Some(("run", run)) => holder.run = Some(run.trim().to_owned()),
                Some(("boot", boot)) => holder.boot = Some(boot.trim().to_owned()),
                _ => {}
            }
        }
        holder
    }
}

/// The held lock. Dropping it releases the lock (the file stays: deleting it would let a
/// second writer lock a new file while the first still holds the old one).
///
/// The descriptor is close-on-exec (Rust opens every file with `O_CLOEXEC`), so a unit's
/// leftover process cannot keep the lock held after apollo exits.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
}

enum Attempt {
    Acquired,
    Busy,
}

fn flock(file: &File, path: &Path, wait: bool) -> Result<Attempt, StoreError> {
    use rustix::fs::FlockOperation;
    let operation = if wait {
        FlockOperation::LockExclusive
    } else {
        FlockOperation::NonBlockingLockExclusive
    };
    loop {
        match rustix::fs::flock(file, operation) {
            Ok(()) => return Ok(Attempt::Acquired),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(Attempt::Busy),
            Err(errno) => return Err(StoreError::io("lock", path, errno.into())),
        }
    }
}

/// Filesystems whose locks another host may hold (`statfs`'s `f_type`): NFS, SMB/CIFS,
/// Lustre, GPFS, CephFS, BeeGFS, AFS, 9p and FUSE. `/proc/locks` shows only this kernel's.
const NETWORK_FILESYSTEMS: [i64; 11] = [
    0x6969,
    0x517B,
    0xFF53_4D42,
    0xFE53_4D42,
    0x0BD0_0BD0,
    0x4750_4653,
    0x00C3_6400,
    0x1983_0326,
    0x5346_414F,
    0x0102_1997,
    0x6573_5546,
];

/// Whether some process holds a `flock` on `file`, read from `/proc/locks` (Linux) without
/// locking anything: `None` when that file cannot be read, or `file` is on a network
/// filesystem (a holder on another host would not be listed: the caller then tries the lock).
/// A line is `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF` (device numbers in hex); `N:
/// -> ...` lines are waiters.
fn held_in_proc_locks(file: &File) -> Option<bool> {
    if is_network_filesystem(filesystem_kind(file)?) {
        return None;
    }
    held_in_proc_locks_here(file)
}

/// The filesystem `file` is on (`statfs`'s `f_type`).
fn filesystem_kind(file: &File) -> Option<i64> {
    let statfs = rustix::fs::fstatfs(file).ok()?;
    // `f_type` is a C long, or an unsigned int on some targets; the magic numbers fit either.
    #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
    Some(statfs.f_type as i64 & 0xFFFF_FFFF)
}

fn is_network_filesystem(kind: i64) -> bool {
    NETWORK_FILESYSTEMS.contains(&kind)
}

/// [`held_in_proc_locks`] whatever the filesystem.
fn held_in_proc_locks_here(file: &File) -> Option<bool> {
    let stat = rustix::fs::fstat(file).ok()?;
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let dev = stat.st_dev;
    let wanted = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev),
        stat.st_ino
    );
    Some(text.lines().any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        fields.next() == Some("FLOCK") && fields.nth(3) == Some(wanted.as_str())
    }))
}

/// How long a lock whose recorded holder is dead may stay held before it is reported as held.
const STALE_HOLDER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Who holds the lock, judged from what the lock file records alone (`holder`), for a reader
/// that never tries the lock where `/proc/locks` cannot tell: an empty file is a released
/// lock (a writer empties it as it releases it); a holder on this host (and boot) holds it
/// while its process exists; one elsewhere is returned [`LockHolder::unverified`].
fn judge_recorded_holder(holder: LockHolder, host: &str, boot: Option<&str>) -> Option<LockHolder> {
    let pid = holder.pid?;
    let same_host = holder
        .host
        .as_deref()
        .is_none_or(|recorded| recorded == host);
    let same_boot = match (holder.boot.as_deref(), boot) {
        (Some(recorded), Some(ours)) => recorded == ours,
        _ => true,
    };
    if same_host && same_boot {
        return crate::process::exists(pid).then_some(holder);
    }
    if same_host {
        // The machine restarted since: nothing of that boot runs any more.
        return None;
    }
    Some(LockHolder {
        unverified: true,
        ..holder
    })
}

/// Opens (creating it when missing) the lock file at `path`: never through a symbolic link,
/// and only if it is a regular file, so nothing else is ever written as a lock file.
fn open_lock_file(path: &Path) -> Result<File, StoreError> {
    let (parent, name) = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => (parent, name),
        _ => {
            return Err(StoreError::invalid(format!(
                "{} cannot be a lock file",
                path.display()
            )));
        }
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    Dir::open(parent)?.open_file(name, Access::ReadWriteCreate)
}

/// Reads the holder information from the open lock file.
fn read_holder(file: &File) -> LockHolder {
    use std::os::unix::fs::FileExt;
    // The holder writes a few short lines; more than this is not a holder's.
    let mut buffer = vec![0u8; 4096];
    let mut n_read = 0;
    while n_read < buffer.len() {
        match file.read_at(&mut buffer[n_read..], n_read as u64) {
            Ok(0) => break,
            Ok(n) => n_read += n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    LockHolder::parse(&String::from_utf8_lossy(&buffer[..n_read]))
}

/// Whether the lock file at `path` is still the file `file` (not deleted, not replaced).
fn still_named(file: &File, path: &Path) -> Result<bool, StoreError> {
    let held = held_state(file, path)?;
    Ok(held.n_links > 0 && path_id(path)? == Some(held.id))
}

/// The lock file at `path` opened read only (`flock` needs no write access, so read commands
/// work on a read-only state directory); `None` when it is missing (held by nobody).
fn open_for_probe(path: &Path) -> Result<Option<File>, StoreError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return open_lock_file(path).map(|_| None);
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    match Dir::open(parent).and_then(|dir| dir.open_file(name, Access::Read)) {
        Ok(file) => Ok(Some(file)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// [`StateLock::probe_without_locking`] of the open lock file on a filesystem of `kind`
/// (unknown: judged as a network one).
fn judge_without_locking(file: &File, kind: Option<i64>) -> Option<LockHolder> {
    if let Some(kind) = kind
        && !is_network_filesystem(kind)
        && let Some(held) = held_in_proc_locks_here(file)
    {
        return held.then(|| read_holder(file));
    }
    judge_recorded_holder(
        read_holder(file),
        &crate::process::host_name(),
        crate::process::boot_id().as_deref(),
    )
}

impl StateLock {
    /// Takes the lock at `path`. With `wait`, blocks until it is free; without, fails at once
    /// with [`StoreError::Locked`] naming the holder.
    pub(crate) fn acquire(path: &Path, wait: bool) -> Result<Self, StoreError> {
        let mut file = open_lock_file(path)?;
        let mut stale_until = None;
        loop {
            match flock(&file, path, wait)? {
                Attempt::Acquired => {
                    // The file may have been deleted (or replaced) between the open and the
                    // lock: a lock on a file nobody else can open excludes nobody. Lock the
                    // file the path names now instead.
                    if still_named(&file, path)? {
                        break;
                    }
                    file = open_lock_file(path)?;
                    continue;
                }
                Attempt::Busy => {
                    let holder = read_holder(&file);
                    // The holder named in the file is gone, yet the lock is still held: a
                    // process it was starting still has the descriptor for the moment between
                    // its fork and its exec (the descriptor is close-on-exec). That clears in
                    // microseconds; give it a bounded grace instead of refusing.
                    let holder_dead = holder.pid.is_some_and(|pid| !crate::process::exists(pid))
                        && holder
                            .host
                            .as_deref()
                            .is_none_or(|host| host == crate::process::host_name());
                    let deadline = *stale_until
                        .get_or_insert_with(|| std::time::Instant::now() + STALE_HOLDER_GRACE);
                    if holder_dead && std::time::Instant::now() < deadline {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        continue;
                    }
                    return Err(StoreError::Locked {
                        path: path.to_path_buf(),
                        pid: holder.pid,
                        host: holder.host,
                    });
                }
            }
        }
        let mut lock = Self {
            file,
            path: path.to_path_buf(),
        };
        lock.write_holder(None)?;
        Ok(lock)
    }

    /// Whether another open file description holds the lock at `path` right now, and who.
    /// On Linux it looks the lock file up in `/proc/locks` and never takes the lock, so a
    /// reader polling it (`apollo serve`) cannot make a starting `apollo run` find the state
    /// directory locked; elsewhere (or without `/proc`) it takes and releases the lock when
    /// it is free.
    ///
    /// The file is opened read only (`flock` needs no write access), so read commands work on
    /// a read-only state directory; a missing lock file is held by nobody.
    pub(crate) fn probe(path: &Path) -> Result<Option<LockHolder>, StoreError> {
        let Some(file) = open_for_probe(path)? else {
            return Ok(None);
        };
        if let Some(held) = held_in_proc_locks(&file) {
            return Ok(held.then(|| read_holder(&file)));
        }
        match flock(&file, path, false)? {
            Attempt::Acquired => Ok(None),
            Attempt::Busy => Ok(Some(read_holder(&file))),
        }
    }

    /// Whether another apollo holds the lock at `path`, without ever taking or trying it
    /// (`apollo serve`, which must never make a starting `apollo run` find the state directory
    /// locked): from `/proc/locks` on a local filesystem; on a network filesystem (where
    /// another host's locks are not listed there) from the holder the lock file records
    /// ([`judge_recorded_holder`]).
    pub(crate) fn probe_without_locking(path: &Path) -> Result<Option<LockHolder>, StoreError> {
        let Some(file) = open_for_probe(path)? else {
            return Ok(None);
        };
        Ok(
            judge_without_locking(&file, filesystem_kind(&file)).map(|holder| LockHolder {
                for_reader: true,
                ..holder
            }),
        )
    }

    /// Records which run this process is writing, so `list_runs` and `prune` in other
    /// processes can tell the running run from incomplete ones.
    pub fn set_run(&mut self, run: &crate::RunId) -> Result<(), StoreError> {
        self.write_holder(Some(run.as_str()))
    }

    fn write_holder(&mut self, run: Option<&str>) -> Result<(), StoreError> {
        let mut text = format!(
            "pid={}\nhost={}\n",
            std::process::id(),
            crate::process::host_name()
        );
        if let Some(boot) = crate::process::boot_id() {
            text.push_str(&format!("boot={boot}\n"));
        }
        if let Some(run) = run {
            text.push_str(&format!("run={run}\n"));
        }
        // Write in place, then trim: the file itself is never replaced or removed.
        self.file
            .seek(SeekFrom::Start(0))
            .and_then(|_| self.file.write_all(text.as_bytes()))
            .and_then(|_| self.file.set_len(text.len() as u64))
            .map_err(|source| StoreError::io("write lock file", &self.path, source))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the lock file is still the one this lock holds: not deleted (a deleted
    /// lock file lets a second apollo create and lock a new one) and not replaced. Two
    /// `stat` calls; [`JournalWriter::watch_lock`](crate::JournalWriter::watch_lock) makes the
    /// writer run it before each commit.
    pub fn check_held(&self) -> Result<(), StoreError> {
        check_lock_file(&self.file, &self.path)
    }

    /// A second descriptor of the held lock file (it shares the lock), for the writer's checks.
    pub(crate) fn watch(&self) -> Result<LockWatch, StoreError> {
        let file = self
            .file
            .try_clone()
            .map_err(|source| StoreError::io("duplicate descriptor of", &self.path, source))?;
        Ok(LockWatch {
            file,
            path: self.path.clone(),
        })
    }
}

impl Drop for StateLock {
    /// Empties the lock file before the lock is released (the descriptor closes after this):
    /// a reader that never tries the lock reads an empty file as a free lock
    /// ([`StateLock::probe_without_locking`] on a network filesystem). Best effort: a writer
    /// that dies leaves its pid, which a reader on its host checks.
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
    }
}

/// What a writer keeps to check, before each commit, that its lock file is still in place.
#[derive(Debug)]
pub(crate) struct LockWatch {
    file: File,
    path: PathBuf,
}

impl LockWatch {
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        check_lock_file(&self.file, &self.path)
    }
}

fn check_lock_file(file: &File, path: &Path) -> Result<(), StoreError> {
    let held = held_state(file, path)?;
    if held.n_links == 0 {
        return Err(StoreError::StateChanged {
            path: path.to_path_buf(),
            what: "was deleted",
        });
    }
    if path_id(path)? != Some(held.id) {
        return Err(StoreError::StateChanged {
            path: path.to_path_buf(),
            what: "was replaced by another file",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
