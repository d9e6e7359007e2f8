//! The file hash cache seam: declared files whose (device, inode, size, mtime, ctime) have not
//! changed since they were hashed are not read again (as git's index does, DESIGN §12).
//!
//! [`crate::hash`] asks a [`FileHashCache`] (given through [`Limits::with_cache`]) before it
//! reads a declared input or output file, and tells it what it hashed. Where the cache lives
//! is the caller's business (apollo-store keeps one in the state directory); this crate only
//! applies the rules:
//!
//! * the key is the [`FileStamp`] of the *opened* file (`fstat`), so a file replaced under its
//!   name has another inode or ctime and misses;
//! * **racily clean** (git's rule): an entry is trusted only if the file's mtime and ctime are
//!   older than the moment it was hashed by more than the filesystem's timestamp granularity.
//!   A file rewritten with the same size within that granularity after it was hashed keeps
//!   the same stamp; such a file was hashed too soon after a change to be trusted later, so
//!   it is read again (and cached anew, trustworthy once the window has passed). The window
//!   is [`RACY_WINDOW_FINE`] on a local filesystem that keeps nanoseconds (ext4, XFS, Btrfs,
//!   tmpfs, F2FS, ZFS, overlayfs over them; [`Timestamps::of`] asks `statfs` once per device)
//!   for times with a fraction of a second: such a filesystem stamps a file from this kernel's
//!   clock, coarse by a scheduler tick (10 ms at `HZ=100`, the lowest), and a fraction rules
//!   out an ext2/ext3 inode that keeps whole seconds. Anywhere else it is [`RACY_WINDOW`]:
//!   whole seconds may come from a filesystem that keeps seconds or two (ext3, HFS+, FAT), and
//!   a network or host-shared filesystem (NFS, SMB, 9p, virtiofs, FUSE) is stamped by another
//!   machine's clock, which may be off from the one `hashed_at` is read from. So a file hashed
//!   a second after a run wrote it is trusted on a local disk, and a no-op run right after
//!   another reads nothing.
//!
//!   Not guarded against, whatever the window (as git's index is not): a clock stepped back to
//!   the very tick of a file's last change before it is rewritten at the same size, and a
//!   network filesystem's attribute cache returning a stamp older than another client's
//!   rewrite.
//!
//! [`Limits::with_cache`]: crate::hash::Limits::with_cache

use std::fs::Metadata;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much older than the moment of hashing a file's mtime and ctime must be for its cached
/// hash to be trusted, when either is in whole seconds: above the timestamp granularity of
/// every common filesystem (2 s on FAT, 1 s on ext3 and HFS+).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The same on a local filesystem that keeps nanoseconds, for times with a fraction of a
/// second ([`Timestamps::Fine`]): 25 times the longest scheduler tick the kernel's clock is
/// coarse by (see the module docs), room for a virtual machine whose clock tick was late.
pub const RACY_WINDOW_FINE: Duration = Duration::from_millis(250);

/// How finely the filesystem holding a file stamps it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// A local filesystem that keeps nanoseconds, stamping from this kernel's clock.
    Fine,
    /// Any other, or unknown.
    Coarse,
}

impl Timestamps {
    /// The timestamps of the filesystem holding `path`, whose device is `dev`: asked of
    /// `statfs` once per device in the process, then remembered.
    pub fn of(dev: u64, path: &std::path::Path) -> Self {
        static KNOWN: std::sync::Mutex<Vec<(u64, Timestamps)>> = std::sync::Mutex::new(Vec::new());
        let mut known = KNOWN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(_, timestamps)) = known.iter().find(|(known, _)| *known == dev) {
            return timestamps;
        }
        let timestamps = match rustix::fs::statfs(path) {
            Ok(stat) => Self::of_filesystem(i128::from(stat.f_type)),
            // Unknown (gone meanwhile, or refused): not remembered, asked again next time.
            Err(_) => return Self::Coarse,
        };
        known.push((dev, timestamps));
        timestamps
    }

    /// The timestamps of a filesystem of type `magic` (`statfs`'s `f_type`).
    pub fn of_filesystem(magic: i128) -> Self {
        const FINE: [i128; 7] = [
            0xEF53,      // ext2, ext3, ext4 (an inode of ext2/ext3 keeps whole seconds)
            0x5846_5342, // XFS
            0x9123_683E, // Btrfs
            0x0102_1994, // tmpfs
            0xF2F5_2010, // F2FS
            0x2FC1_2FC1, // ZFS
            0x794C_7630, // overlayfs (its upper layer is one of these)
        ];
        if FINE.contains(&magic) {
            Self::Fine
        } else {
            Self::Coarse
        }
    }
}

/// What identifies a file's content without reading it, as `stat` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    /// The device holding the file.
    pub dev: u64,
    /// Its inode number.
    pub ino: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, in nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Its status-change time, in nanoseconds since the Unix epoch.
    pub ctime_ns: i64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(metadata: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns =
            |seconds: i64, nanos: i64| seconds.saturating_mul(1_000_000_000).saturating_add(nanos);
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

/// A hash the cache holds for a stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedHash {
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// When the file was stat'ed before it was hashed, in nanoseconds since the Unix epoch.
    pub hashed_at_ns: i64,
}

impl CachedHash {
    /// Whether the hash may be used for a file with `stamp` on a filesystem with
    /// `timestamps`: it was hashed at least the filesystem's timestamp granularity after the
    /// file's last change (not "racily clean"): [`RACY_WINDOW_FINE`] on a [`Timestamps::Fine`]
    /// filesystem when both its times have a fraction of a second, else [`RACY_WINDOW`].
    pub fn trusted_for(&self, stamp: &FileStamp, timestamps: Timestamps) -> bool {
        const SECOND: i64 = 1_000_000_000;
        let fine = timestamps == Timestamps::Fine
            && stamp.mtime_ns.rem_euclid(SECOND) != 0
            && stamp.ctime_ns.rem_euclid(SECOND) != 0;
        let window = if fine { RACY_WINDOW_FINE } else { RACY_WINDOW };
        let window = i64::try_from(window.as_nanos()).unwrap_or(i64::MAX);
        stamp.mtime_ns.max(stamp.ctime_ns).saturating_add(window) <= self.hashed_at_ns
    }
}

/// A cache of file hashes by [`FileStamp`]. Shared by the engine's hashing threads.
pub trait FileHashCache: Send + Sync + std::fmt::Debug {
    /// The hash recorded for a file with exactly `stamp`, if any. The caller checks
    /// [`CachedHash::trusted_for`].
    fn get(&self, stamp: &FileStamp) -> Option<CachedHash>;

    /// Record that a file with `stamp` hashed to `hash`.
    fn put(&self, stamp: FileStamp, hash: CachedHash);
}

/// Which of `stamps` (a file's path and the identity it had when hashed) no longer match the
/// file there: changed (another size, times, inode or device), replaced, or gone. One `stat`
/// per file: what an attempt's end pays to know its inputs held still while it ran. A write
/// through a shared `mmap` changes neither time and is not seen (as with git's index).
pub fn changed_since(stamps: &[(std::path::PathBuf, FileStamp)]) -> Vec<&std::path::Path> {
    stamps
        .iter()
        .filter(|(path, stamp)| {
            std::fs::metadata(path).map_or(true, |metadata| FileStamp::of(&metadata) != *stamp)
        })
        .map(|(path, _)| path.as_path())
        .collect()
}

/// How an attempt's `error` begins when its declared input files changed while it ran (see
/// [`inputs_changed_while_running`]).
pub const INPUTS_CHANGED: &str = "its input files changed while it ran";

/// Whether `finished` is an attempt whose input files changed while it ran: an
/// `idempotent: false` unit's such success stays done in its run but is never reused by
/// another (its outputs may come from content its input hash does not name).
pub fn inputs_changed_while_running(finished: &crate::event::UnitFinished) -> bool {
    finished
        .error
        .as_deref()
        .is_some_and(|error| error.starts_with(INPUTS_CHANGED))
}

/// Now, in nanoseconds since the Unix epoch (0 before it).
pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::cancel::CancelToken;
    use crate::hash::{self, Limits};

    #[derive(Debug, Default)]
    struct MemoryCache {
        entries: Mutex<HashMap<FileStamp, CachedHash>>,
        puts: Mutex<u32>,
    }

    impl FileHashCache for MemoryCache {
        fn get(&self, stamp: &FileStamp) -> Option<CachedHash> {
            self.entries.lock().unwrap().get(stamp).cloned()
        }
        fn put(&self, stamp: FileStamp, hash: CachedHash) {
            *self.puts.lock().unwrap() += 1;
            self.entries.lock().unwrap().insert(stamp, hash);
        }
    }

    fn output_hash_with(cache: &MemoryCache, dir: &std::path::Path) -> String {
        let unit = crate::model::Unit {
            skip_when: None,
            when_command: None,
            log_limit: None,
            queue_timeout: None,
            deadline: None,
            name: "u".into(),
            deps: Vec::new(),
            timeout: None,
            retries: 0,
            retry_delay: Duration::ZERO,
            retry_on_exit: Vec::new(),
            retry_max_delay: None,
            kill_grace: Duration::ZERO,
            prepare: None,
            execute: crate::model::Command::Shell("true".into()),
            cleanup: None,
            cleanup_timeout: crate::model::DEFAULT_CLEANUP_TIMEOUT,
            inputs: Vec::new(),
            outputs: vec!["data.csv".into()],
            env: Default::default(),
            workdir: dir.to_owned(),
            idempotent: true,
            reuse: true,
            capture: Default::default(),
            executor: Default::default(),
            resources: Default::default(),
            secrets: Default::default(),
        };
        let cancel = CancelToken::new();
        let limits = Limits::new(&cancel, None, None).with_cache(Some(cache));
        hash::output_hash_within(&unit, dir, &limits)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn an_unchanged_file_is_not_read_again_and_a_rewritten_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.csv");
        std::fs::write(&path, "a,b\n").unwrap();
        let cache = MemoryCache::default();
        let real = output_hash_with(&cache, dir.path());
        assert_eq!(*cache.puts.lock().unwrap(), 1);
        // Just written: racily clean, so it is read again (and the hash stays right).
        assert_eq!(output_hash_with(&cache, dir.path()), real);
        assert_eq!(*cache.puts.lock().unwrap(), 2);
        // An entry hashed long after the file's last change is trusted: the file is not read
        // (the cache's made-up hash is what comes back).
        let stamp = FileStamp::of(&std::fs::metadata(&path).unwrap());
        cache.entries.lock().unwrap().insert(
            stamp,
            CachedHash {
                sha256: "0".repeat(64),
                hashed_at_ns: stamp.ctime_ns + 10_000_000_000,
            },
        );
        assert_ne!(
            output_hash_with(&cache, dir.path()),
            real,
            "served from the cache"
        );
        // Rewritten with the same size and its mtime put back: its ctime moved, so it misses.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, "a,c\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let rewritten = output_hash_with(&cache, dir.path());
        assert_ne!(rewritten, real);
        std::fs::write(&path, "a,b\n").unwrap();
        assert_eq!(output_hash_with(&cache, dir.path()), real);
    }

    fn stamp(mtime_ns: i64, ctime_ns: i64) -> FileStamp {
        FileStamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns,
            ctime_ns,
        }
    }

    #[test]
    fn a_hash_taken_too_soon_after_the_last_change_is_racily_clean_and_not_trusted() {
        let second = 1_000_000_000;
        let cached = CachedHash {
            sha256: "h".into(),
            hashed_at_ns: 100 * second,
        };
        assert!(cached.trusted_for(&stamp(97 * second, 98 * second), Timestamps::Fine));
        assert!(cached.trusted_for(&stamp(98 * second, 98 * second), Timestamps::Fine));
        // Changed within the window before it was hashed: a same-size rewrite in the same
        // timestamp tick would keep this stamp.
        assert!(!cached.trusted_for(&stamp(99 * second, 98 * second), Timestamps::Fine));
        assert!(!cached.trusted_for(&stamp(97 * second, 99 * second + 1), Timestamps::Fine));
        // Changed after it was hashed (a clock step): never trusted.
        assert!(!cached.trusted_for(&stamp(101 * second, 101 * second), Timestamps::Fine));
    }

    #[test]
    fn times_with_a_fraction_of_a_second_on_a_fine_local_filesystem_get_the_short_window() {
        let (second, ms) = (1_000_000_000, 1_000_000);
        let cached = CachedHash {
            sha256: "h".into(),
            hashed_at_ns: 100 * second,
        };
        let trusted = |stamp: FileStamp, timestamps| cached.trusted_for(&stamp, timestamps);
        // Nanosecond times on ext4, XFS, tmpfs…: trusted once the short window has passed.
        let fine = |at: i64| stamp(at + 123, at + 456);
        assert!(trusted(fine(100 * second - 300 * ms), Timestamps::Fine));
        assert!(!trusted(fine(100 * second - 200 * ms), Timestamps::Fine));
        // The same times on a network or unknown filesystem: the long window.
        assert!(!trusted(fine(100 * second - 300 * ms), Timestamps::Coarse));
        assert!(!trusted(fine(99 * second), Timestamps::Coarse));
        assert!(trusted(fine(97 * second), Timestamps::Coarse));
        // Either time in whole seconds (ext3's inodes, or by chance): the long window.
        assert!(!trusted(
            stamp(99 * second, 99 * second + 7),
            Timestamps::Fine
        ));
        assert!(!trusted(
            stamp(99 * second + 7, 99 * second),
            Timestamps::Fine
        ));
        assert!(trusted(
            stamp(97 * second, 97 * second + 7),
            Timestamps::Fine
        ));
        // Before the epoch (a clock set back far): a fraction is still a fraction.
        let before = CachedHash {
            sha256: "h".into(),
            hashed_at_ns: -second,
        };
        let early = -second - 300 * ms - 7;
        assert!(before.trusted_for(&stamp(early, early), Timestamps::Fine));
        assert!(!before.trusted_for(&stamp(early, early), Timestamps::Coarse));
    }

    #[test]
    fn local_filesystems_that_keep_nanoseconds_are_fine_and_the_rest_coarse() {
        assert_eq!(Timestamps::of_filesystem(0xEF53), Timestamps::Fine);
        assert_eq!(Timestamps::of_filesystem(0x0102_1994), Timestamps::Fine);
        // NFS, SMB2, FUSE, 9p: stamped by another machine's clock.
        for remote in [0x6969, 0xFE53_4D42, 0x6573_5546, 0x0102_1997] {
            assert_eq!(Timestamps::of_filesystem(remote), Timestamps::Coarse);
        }
        // This test's own temporary folder is on some filesystem, asked once and remembered.
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(dir.path()).unwrap().dev();
        let first = Timestamps::of(dev, dir.path());
        assert_eq!(
            Timestamps::of(dev, std::path::Path::new("/nonexistent")),
            first
        );
    }
}
