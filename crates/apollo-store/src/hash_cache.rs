//! The state directory's file hash cache (`index/hashes`): the hashes of declared files by
//! (device, inode, size, mtime ns, ctime ns), so that deciding whether a unit can be reused
//! does not read files that did not change (DESIGN §12, as git's index does). The rules —
//! which stamp, and when an entry is "racily clean" and read again anyway — are apollo-core's
//! (`apollo_core::hash_cache`); this is where the entries are kept between runs.
//!
//! It is a cache and nothing else: a file that is missing, fails its checksum or cannot be
//! parsed is ignored (and replaced at the next save), and the journal never depends on it.
//! Saved atomically under the state directory's lock (see `index_file.rs`). Entries not used
//! by a run are kept up to 200,000 entries; beyond that only those the run used are kept.

use foldhash::{HashMap, HashMapExt};
use std::sync::{Mutex, PoisonError};

use apollo_core::hash_cache::{CachedHash, FileHashCache, FileStamp};

use crate::error::StoreError;
use crate::index_file;
use crate::state_dir::StateDir;

const FILE_NAME: &str = "hashes";
/// The version of the file's body; another one is ignored (and replaced at the next save).
/// Format 1 was JSON with hashes in hex, decoded through a vector of strings into another;
/// this one is fixed-size binary entries, about half the size, decoded straight into the table.
const FORMAT: u32 = 2;
/// The most entries kept across runs.
const MAX_ENTRIES: usize = 200_000;

/// The body's first bytes, then [`FORMAT`] (u32, little-endian), then the entries.
const MAGIC: &[u8] = b"apollo hash cache\n";

/// One entry in the file: dev, ino, size, mtime ns, ctime ns, hashed-at ns (each 8 bytes,
/// little-endian), then the SHA-256 (32 bytes).
const ENTRY_LEN: usize = 6 * 8 + 32;

/// An entry in memory: the file's stamp, its hash and when it was hashed, and whether this
/// run used it.
#[derive(Debug)]
struct Entry {
    stamp: FileStamp,
    sha256: [u8; 32],
    hashed_at_ns: i64,
    used: bool,
}

#[derive(Debug, Default)]
struct Entries {
    by_file: HashMap<(u64, u64), Entry>,
    dirty: bool,
}

/// The entries of a body, `None` when it is not one of this format.
fn decode(body: &[u8]) -> Option<HashMap<(u64, u64), Entry>> {
    let rest = body.strip_prefix(MAGIC)?;
    let (format, entries) = rest.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*format) != FORMAT || entries.len() % ENTRY_LEN != 0 {
        return None;
    }
    let mut by_file = HashMap::with_capacity(entries.len() / ENTRY_LEN);
    for entry in entries.chunks_exact(ENTRY_LEN) {
        let field = |at: usize| {
            let mut bytes = [0; 8];
            bytes.copy_from_slice(&entry[at * 8..at * 8 + 8]);
            bytes
        };
        let stamp = FileStamp {
            dev: u64::from_le_bytes(field(0)),
            ino: u64::from_le_bytes(field(1)),
            size: u64::from_le_bytes(field(2)),
            mtime_ns: i64::from_le_bytes(field(3)),
            ctime_ns: i64::from_le_bytes(field(4)),
        };
        let mut sha256 = [0; 32];
        sha256.copy_from_slice(&entry[48..]);
        let entry = Entry {
            stamp,
            sha256,
            hashed_at_ns: i64::from_le_bytes(field(5)),
            used: false,
        };
        by_file.insert((entry.stamp.dev, entry.stamp.ino), entry);
    }
    Some(by_file)
}

/// The file hash cache of a state directory, loaded in memory; an
/// [`apollo_core::hash_cache::FileHashCache`] for the engine. Thread-safe.
#[derive(Debug, Default)]
pub struct HashCache {
    entries: Mutex<Entries>,
}

impl HashCache {
    /// The cache as saved in `state` — empty when there is none or it is damaged (then the
    /// next [`save`](Self::save) replaces it).
    pub fn load(state: &StateDir) -> Self {
        let by_file = index_file::read(state, FILE_NAME)
            .ok()
            .and_then(|bytes| decode(&bytes))
            .unwrap_or_default();
        Self {
            entries: Mutex::new(Entries {
                by_file,
                dirty: false,
            }),
        }
    }

    /// How many files it holds hashes of.
    pub fn len(&self) -> usize {
        self.lock().by_file.len()
    }

    /// Whether it holds no hash.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write the cache to `state` when it changed (atomically; durably with `durable`). The
    /// caller holds the state directory's lock.
    pub fn save(&self, state: &StateDir, durable: bool) -> Result<(), StoreError> {
        let mut entries = self.lock();
        if !entries.dirty {
            return Ok(());
        }
        let keep_unused = entries.by_file.len() <= MAX_ENTRIES;
        let mut kept: Vec<&Entry> = entries
            .by_file
            .values()
            .filter(|entry| keep_unused || entry.used)
            .collect();
        // In a stable order: the same entries make the same file.
        kept.sort_unstable_by_key(|entry| (entry.stamp.dev, entry.stamp.ino));
        let mut body = Vec::with_capacity(MAGIC.len() + 4 + kept.len() * ENTRY_LEN);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&FORMAT.to_le_bytes());
        for entry in kept {
            let stamp = &entry.stamp;
            body.extend_from_slice(&stamp.dev.to_le_bytes());
            body.extend_from_slice(&stamp.ino.to_le_bytes());
            body.extend_from_slice(&stamp.size.to_le_bytes());
            body.extend_from_slice(&stamp.mtime_ns.to_le_bytes());
            body.extend_from_slice(&stamp.ctime_ns.to_le_bytes());
            body.extend_from_slice(&entry.hashed_at_ns.to_le_bytes());
            body.extend_from_slice(&entry.sha256);
        }
        index_file::write(state, FILE_NAME, &body, durable)?;
        entries.dirty = false;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding it cannot leave an entry half written: each is one insert.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl FileHashCache for HashCache {
    fn get(&self, stamp: &FileStamp) -> Option<CachedHash> {
        let mut entries = self.lock();
        let entry = entries.by_file.get_mut(&(stamp.dev, stamp.ino))?;
        if entry.stamp != *stamp {
            return None;
        }
        entry.used = true;
        Some(CachedHash {
            sha256: apollo_core::hash::to_hex(&entry.sha256),
            hashed_at_ns: entry.hashed_at_ns,
        })
    }

    fn put(&self, stamp: FileStamp, hash: CachedHash) {
        // Only SHA-256s are kept (all apollo computes): anything else is not cached.
        let Some(sha256) = apollo_core::hash::sha256_from_hex(&hash.sha256) else {
            return;
        };
        let entry = Entry {
            stamp,
            sha256,
            hashed_at_ns: hash.hashed_at_ns,
            used: true,
        };
        let mut entries = self.lock();
        entries.by_file.insert((stamp.dev, stamp.ino), entry);
        entries.dirty = true;
    }
}
