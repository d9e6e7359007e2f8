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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use apollo_core::hash_cache::{CachedHash, FileHashCache, FileStamp};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::index_file;
use crate::state_dir::StateDir;

const FILE_NAME: &str = "hashes";
const FORMAT: u32 = 1;
/// The most entries kept across runs.
const MAX_ENTRIES: usize = 200_000;

/// One entry as stored: dev, ino, size, mtime ns, ctime ns, hashed-at ns, sha256.
type StoredEntry = (u64, u64, u64, i64, i64, i64, String);

#[derive(Debug, Default, Serialize, Deserialize)]
struct Body {
    format: u32,
    entries: Vec<StoredEntry>,
}

#[derive(Debug, Default)]
struct Entries {
    by_file: HashMap<(u64, u64), (FileStamp, CachedHash, bool)>,
    dirty: bool,
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
        let body = index_file::read(state, FILE_NAME)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Body>(&bytes).ok())
            .filter(|body| body.format == FORMAT)
            .unwrap_or_default();
        let by_file = body
            .entries
            .into_iter()
            .map(
                |(dev, ino, size, mtime_ns, ctime_ns, hashed_at_ns, sha256)| {
                    let stamp = FileStamp {
                        dev,
                        ino,
                        size,
                        mtime_ns,
                        ctime_ns,
                    };
                    (
                        (dev, ino),
                        (
                            stamp,
                            CachedHash {
                                sha256,
                                hashed_at_ns,
                            },
                            false,
                        ),
                    )
                },
            )
            .collect();
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
        let mut stored: Vec<StoredEntry> = entries
            .by_file
            .values()
            .filter(|(_, _, used)| keep_unused || *used)
            .map(|(stamp, cached, _)| {
                (
                    stamp.dev,
                    stamp.ino,
                    stamp.size,
                    stamp.mtime_ns,
                    stamp.ctime_ns,
                    cached.hashed_at_ns,
                    cached.sha256.clone(),
                )
            })
            .collect();
        stored.sort_unstable();
        let body = serde_json::to_vec(&Body {
            format: FORMAT,
            entries: stored,
        })
        .map_err(|error| StoreError::invalid(format!("cannot encode the hash cache: {error}")))?;
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
        let (known, cached, used) = entries.by_file.get_mut(&(stamp.dev, stamp.ino))?;
        if known != stamp {
            return None;
        }
        *used = true;
        Some(cached.clone())
    }

    fn put(&self, stamp: FileStamp, hash: CachedHash) {
        let mut entries = self.lock();
        entries
            .by_file
            .insert((stamp.dev, stamp.ino), (stamp, hash, true));
        entries.dirty = true;
    }
}
