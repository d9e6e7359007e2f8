//! The single-writer lock: `flock(2)` on the state directory's `lock` file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// Who holds (or last held) the lock, as written into the lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's process id.
    pub pid: Option<u32>,
    /// The holder's host name.
    pub host: Option<String>,
    /// The run the holder is writing, once it said so ([`StateLock::set_run`]).
    pub run: Option<String>,
}

impl LockHolder {
    fn parse(text: &str) -> Self {
        let mut holder = LockHolder::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", pid)) => holder.pid = pid.trim().parse().ok(),
                Some(("host", host)) => holder.host = Some(host.trim().to_owned()),
                Some(("run", run)) => holder.run = Some(run.trim().to_owned()),
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
    let operation = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let result = unsafe { libc::flock(file.as_raw_fd(), operation) };
        if result == 0 {
            return Ok(Attempt::Acquired);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(Attempt::Busy),
            _ => return Err(StoreError::io("lock", path, error)),
        }
    }
}

/// How long a lock whose recorded holder is dead may stay held before it is reported as held.
const STALE_HOLDER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a process with this pid exists (on this host).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the pid exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn open_lock_file(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|source| StoreError::io("open lock file", path, source))
}

/// Reads the holder information from the lock file.
pub(crate) fn read_holder(path: &Path) -> LockHolder {
    let mut text = String::new();
    match File::open(path).and_then(|mut file| file.read_to_string(&mut text)) {
        Ok(_) => LockHolder::parse(&text),
        Err(_) => LockHolder::default(),
    }
}

impl StateLock {
    /// Takes the lock at `path`. With `wait`, blocks until it is free; without, fails at once
    /// with [`StoreError::Locked`] naming the holder.
    pub(crate) fn acquire(path: &Path, wait: bool) -> Result<Self, StoreError> {
        let file = open_lock_file(path)?;
        let mut stale_until = None;
        loop {
            match flock(&file, path, wait)? {
                Attempt::Acquired => break,
                Attempt::Busy => {
                    let holder = read_holder(path);
                    // The holder named in the file is gone, yet the lock is still held: a
                    // process it was starting still has the descriptor for the moment between
                    // its fork and its exec (the descriptor is close-on-exec). That clears in
                    // microseconds; give it a bounded grace instead of refusing.
                    let holder_dead = holder.pid.is_some_and(|pid| !process_exists(pid))
                        && holder
                            .host
                            .as_deref()
                            .is_none_or(|host| host == host_name());
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
    /// Takes and releases the lock when it is free.
    pub(crate) fn probe(path: &Path) -> Result<Option<LockHolder>, StoreError> {
        let file = open_lock_file(path)?;
        match flock(&file, path, false)? {
            Attempt::Acquired => Ok(None),
            Attempt::Busy => Ok(Some(read_holder(path))),
        }
    }

    /// Records which run this process is writing, so `list_runs` and `prune` in other
    /// processes can tell the running run from incomplete ones.
    pub fn set_run(&mut self, run: &crate::RunId) -> Result<(), StoreError> {
        self.write_holder(Some(run.as_str()))
    }

    fn write_holder(&mut self, run: Option<&str>) -> Result<(), StoreError> {
        let mut text = format!("pid={}\nhost={}\n", std::process::id(), host_name());
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_with_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = StateLock::acquire(&path, false).unwrap();
        // flock locks belong to open file descriptions: a second open in the same process
        // conflicts exactly as another process would.
        let error = StateLock::acquire(&path, false).unwrap_err();
        match &error {
            StoreError::Locked { pid, .. } => assert_eq!(*pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other}"),
        }
        assert!(
            error
                .to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{error}"
        );
        assert!(StateLock::probe(&path).unwrap().is_some());
        drop(first);
        assert!(StateLock::probe(&path).unwrap().is_none());
        let _again = StateLock::acquire(&path, false).unwrap();
        assert!(path.exists());
    }

    #[test]
    fn the_holder_names_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let mut lock = StateLock::acquire(&path, false).unwrap();
        let run: crate::RunId = "20261130T021507Z-3f9a".parse().unwrap();
        lock.set_run(&run).unwrap();
        let holder = StateLock::probe(&path).unwrap().unwrap();
        assert_eq!(holder.run.as_deref(), Some("20261130T021507Z-3f9a"));
        assert_eq!(holder.pid, Some(std::process::id()));
    }
}
