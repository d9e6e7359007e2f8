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
//!   is [`RACY_WINDOW`] for timestamps in whole seconds, which may come from a filesystem
//!   that keeps seconds or two (ext3, HFS+, FAT), and [`RACY_WINDOW_FINE`] for timestamps
//!   with a fraction of a second: a filesystem that keeps nanoseconds stamps a file from the
//!   kernel's clock, which is coarse by one scheduler tick at most (10 ms at `HZ=100`, the
//!   lowest). So a file hashed a second after a run wrote it is trusted on ext4, XFS, Btrfs
//!   and tmpfs, and a no-op run right after another reads nothing.
//!
//! [`Limits::with_cache`]: crate::hash::Limits::with_cache

use std::fs::Metadata;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much older than the moment of hashing a file's mtime and ctime must be for its cached
/// hash to be trusted, when either is in whole seconds: above the timestamp granularity of
/// every common filesystem (2 s on FAT, 1 s on ext3 and HFS+).
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The same when both have a fraction of a second, which only a filesystem that keeps
/// nanoseconds gives: five of the longest scheduler tick its kernel clock is coarse by (see
/// the module docs).
pub const RACY_WINDOW_FINE: Duration = Duration::from_millis(50);

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
    /// Whether the hash may be used for a file with `stamp`: it was hashed at least the
    /// filesystem's timestamp granularity after the file's last change (not "racily clean"):
    /// [`RACY_WINDOW_FINE`] when both its times have a fraction of a second, else
    /// [`RACY_WINDOW`].
    pub fn trusted_for(&self, stamp: &FileStamp) -> bool {
        const SECOND: i64 = 1_000_000_000;
        let fine = stamp.mtime_ns.rem_euclid(SECOND) != 0 && stamp.ctime_ns.rem_euclid(SECOND) != 0;
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
            name: "u".into(),
            deps: Vec::new(),
            timeout: None,
            retries: 0,
            retry_delay: Duration::ZERO,
            kill_grace: Duration::ZERO,
            prepare: None,
            execute: crate::model::Command::Shell("true".into()),
            cleanup: None,
            inputs: Vec::new(),
            outputs: vec!["data.csv".into()],
            env: Default::default(),
            workdir: dir.to_owned(),
            idempotent: true,
            reuse: true,
            capture: Default::default(),
            executor: Default::default(),
            resources: Default::default(),
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
        assert!(cached.trusted_for(&stamp(97 * second, 98 * second)));
        assert!(cached.trusted_for(&stamp(98 * second, 98 * second)));
        // Changed within the window before it was hashed: a same-size rewrite in the same
        // timestamp tick would keep this stamp.
        assert!(!cached.trusted_for(&stamp(99 * second, 98 * second)));
        assert!(!cached.trusted_for(&stamp(97 * second, 99 * second + 1)));
        // Changed after it was hashed (a clock step): never trusted.
        assert!(!cached.trusted_for(&stamp(101 * second, 101 * second)));
    }

    #[test]
    fn times_with_a_fraction_of_a_second_come_from_a_fine_filesystem_and_a_short_window() {
        let (second, ms) = (1_000_000_000, 1_000_000);
        let cached = CachedHash {
            sha256: "h".into(),
            hashed_at_ns: 100 * second,
        };
        // Nanosecond times (ext4, XFS, tmpfs): trusted once the fine window has passed.
        let fine = |at: i64| stamp(at + 123, at + 456);
        assert!(cached.trusted_for(&fine(100 * second - 60 * ms)));
        assert!(!cached.trusted_for(&fine(100 * second - 40 * ms)));
        // Either time in whole seconds (FAT, ext3, HFS+, or by chance): the long window.
        assert!(!cached.trusted_for(&stamp(99 * second, 99 * second + 7)));
        assert!(!cached.trusted_for(&stamp(99 * second + 7, 99 * second)));
        assert!(cached.trusted_for(&stamp(97 * second, 97 * second + 7)));
        // Before the epoch (a clock set back far): a fraction is still a fraction.
        assert!(
            !CachedHash {
                sha256: "h".into(),
                hashed_at_ns: -second,
            }
            .trusted_for(&stamp(-second - 7, -second - 7))
        );
    }
}
