//! The parse cache (DESIGN §17): the resolved pipeline of a config, kept in the state
//! directory so that a run of an unchanged config does not parse and validate its YAML again
//! (for 10,000 units that was a quarter of a no-op run's time).
//!
//! **When it is used.** An entry stands for a new load only when all of these are the same as
//! when it was made: the apollo binary (its file's device, inode, size and mtime: another
//! build may resolve differently), the config's absolute path and its bytes, the param values
//! given and every other [`LoadOptions`] field, and what the load read besides the file
//! ([`LoadReads::unchanged`]: included files' texts, environment variables looked up, what each
//! `foreach` glob matches, the date `today` stands for, the machine's CPUs and memory). Only a
//! load without warnings is kept (warnings are shown on every run, from a real load). Anything
//! else is a miss, and a miss is an ordinary load.
//!
//! **Never trusted more than that.** One file per config path (`index/parsed-<hash of the
//! path>`), checksummed and replaced atomically (`apollo_store::cache_file`): a torn, damaged
//! or foreign file is a miss. It is written without the state directory's lock (a cache
//! entry is whole or absent, and two writers of the same config write the same thing).
//! Nothing is written where there is no state directory yet.

use std::path::{Path, PathBuf};

use apollo_core::config::{self, LoadError, LoadOptions, LoadReads, Loaded, Params};
use apollo_core::hash::sha256_hex;
use apollo_core::model::{Pipeline, Unit};
use serde::{Deserialize, Serialize};

/// The version of an entry's layout; another is a miss.
const FORMAT: u32 = 4;

/// An entry's units are kept in up to this many chunks (lines).
const MAX_CHUNKS: usize = 4;

/// Fewer units than this are kept in one chunk.
const UNITS_PER_CHUNK_AT_LEAST: usize = 1_000;

/// One entry: what it was made from (`key`), and the load it stands for. On disk: this, as
/// one line of JSON with the pipeline's `units` empty, then `chunks` lines, each a JSON array
/// of the next units in order (compact JSON has no raw newline, so the lines split cleanly):
/// chunks were decoded on threads of their own (format 4); they are now decoded one after the
/// other into one vector, which costs the same time on two cores and a third fewer fresh pages.
#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: String,
    /// How many lines of units follow...
    chunks: usize,
    /// ... and how many units each holds (the last may hold fewer): a chunk is decoded into
    /// a vector of that size, not one grown (and copied to fresh pages) as it is read.
    units_per_chunk: usize,
    pipeline: Pipeline,
    id: Option<String>,
    params: Params,
    reads: LoadReads,
    /// The hash of the pipeline's definition snapshot ([`Loaded::definition_hash`]).
    definition_hash: String,
}

/// Loads the pipeline at `config` with `options` — from the state directory's parse cache
/// when an entry for exactly this load is there (see the module docs), else by
/// [`config::load_with`], keeping the result for next time when `state_dir` exists.
///
/// The result is the same as [`config::load_with`]'s: a cached pipeline, its id, params and
/// reads equal those of a fresh load (the cache's tests check it), `source` is the config's
/// text as read now, and `warnings` is empty (a load with warnings is never cached).
pub fn load_cached(
    state_dir: &Path,
    config: &Path,
    options: &LoadOptions,
) -> Result<Loaded, LoadError> {
    load_cached_parsing_with(state_dir, config, options, &config::load_with)
}

/// [`load_cached`], loading with `load` (given the config and the options) when nothing is
/// cached: [`config::load_with`], or a caller's wrapping of it (the `apollo` binary loads
/// with its allocator set for the parse, see its `memory.rs`).
pub fn load_cached_parsing_with(
    state_dir: &Path,
    config: &Path,
    options: &LoadOptions,
    load: &dyn Fn(&Path, &LoadOptions) -> Result<Loaded, LoadError>,
) -> Result<Loaded, LoadError> {
    let Ok(bytes) = std::fs::read(config) else {
        // The load says what is wrong, in its words.
        return load(config, options);
    };
    let key = key(config, &bytes, options);
    let name = file_name(config);
    if let Some(loaded) = key
        .as_deref()
        .and_then(|key| lookup(state_dir, &name, key, bytes, options))
    {
        return Ok(loaded);
    }
    let mut loaded = load(config, options)?;
    if let Some(key) = key
        && loaded.warnings.is_empty()
        && let Ok(definition_hash) = crate::session::definition_snapshot_hash(&loaded.pipeline)
    {
        loaded.definition_hash = Some(definition_hash.clone());
        // A cache: a failure to keep it costs the next run a parse, nothing more. Streamed
        // to the file (100,000 units are ~50 MB of JSON).
        let _ = apollo_store::cache_file::write_with(state_dir, &name, |out| {
            encode(&mut loaded, key, definition_hash, out)
        });
    }
    Ok(loaded)
}

/// The entry for `loaded`, as it is kept on disk (see [`Entry`]).
fn encode(
    loaded: &mut Loaded,
    key: String,
    definition_hash: String,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let units = std::mem::take(&mut loaded.pipeline.units);
    let per_chunk = units
        .len()
        .div_ceil(MAX_CHUNKS)
        .max(UNITS_PER_CHUNK_AT_LEAST);
    let entry = Entry {
        format: FORMAT,
        key,
        chunks: units.chunks(per_chunk).count(),
        units_per_chunk: per_chunk,
        pipeline: loaded.pipeline.clone(),
        id: loaded.id.clone(),
        params: loaded.params.clone(),
        reads: loaded.reads.clone(),
        definition_hash,
    };
    let head = serde_json::to_writer(&mut *out, &entry);
    loaded.pipeline.units = units;
    head?;
    for chunk in loaded.pipeline.units.chunks(per_chunk) {
        out.write_all(b"\n")?;
        serde_json::to_writer(&mut *out, chunk)?;
    }
    Ok(())
}

/// An entry read back from `body` (of `body_len` bytes), if `wanted` (checked before its
/// units are decoded). `None` if it is not wanted or anything is amiss. Read a line at a time:
/// the whole body is never held (see [`apollo_store::cache_file::read_with`], which checks it
/// once it is read).
fn decode(
    body: &mut dyn std::io::BufRead,
    body_len: u64,
    wanted: impl Fn(&Entry) -> bool,
) -> Option<Entry> {
    let mut line = Vec::new();
    let mut next_line = |line: &mut Vec<u8>| {
        line.clear();
        let read = body.read_until(b'\n', line).ok()?;
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        (read > 0).then_some(())
    };
    next_line(&mut line)?;
    let mut entry: Entry = serde_json::from_slice(&line).ok()?;
    if entry.format != FORMAT || !wanted(&entry) {
        return None;
    }
    // Into one vector, sized once, chunk after chunk: decoded on threads of their own, the
    // chunks' vectors and their concatenation were a third of a no-op run's fresh pages (a
    // unit is 448 bytes before its strings), for no time saved on two cores.
    let total = entry.units_per_chunk.saturating_mul(entry.chunks);
    // Never more than the body could hold: a damaged count must not make apollo reserve
    // gigabytes (a unit's JSON is hundreds of bytes; its fields are all written).
    let at_most = usize::try_from(body_len).unwrap_or(usize::MAX) / MIN_UNIT_JSON_BYTES;
    let mut units = Vec::with_capacity(total.min(at_most));
    for _ in 0..entry.chunks {
        next_line(&mut line)?;
        let mut deserializer = serde_json::Deserializer::from_slice(&line);
        serde::de::DeserializeSeed::deserialize(UnitsSeed(&mut units), &mut deserializer).ok()?;
        deserializer.end().ok()?;
    }
    // Nothing after the last chunk.
    if next_line(&mut line).is_some() {
        return None;
    }
    entry.pipeline.units = units;
    Some(entry)
}

/// Fewer bytes than any unit's JSON in an entry: a chunk's vector is sized for at most its
/// length over this before it is read (a larger count still decodes, growing as it goes).
const MIN_UNIT_JSON_BYTES: usize = 64;

/// A JSON array of units, read onto the end of `.0`.
struct UnitsSeed<'u>(&'u mut Vec<Unit>);

impl<'de> serde::de::DeserializeSeed<'de> for UnitsSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for UnitsSeed<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("an array of units")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while let Some(unit) = seq.next_element()? {
            self.0.push(unit);
        }
        Ok(())
    }
}

/// The cached load for `key`, if the entry is there, whole, made from the same inputs, and
/// what it read is unchanged.
fn lookup(
    state_dir: &Path,
    name: &str,
    key: &str,
    bytes: Vec<u8>,
    options: &LoadOptions,
) -> Option<Loaded> {
    let entry = apollo_store::cache_file::read_with(state_dir, name, |body, body_len| {
        decode(body, body_len, |entry| {
            entry.key == key && entry.reads.unchanged(options)
        })
    })?;
    Some(Loaded {
        pipeline: entry.pipeline,
        id: entry.id,
        warnings: Vec::new(),
        source: String::from_utf8(bytes).ok()?,
        params: entry.params,
        reads: entry.reads,
        definition_hash: Some(entry.definition_hash),
    })
}

/// The entry's file name: one per config path.
fn file_name(config: &Path) -> String {
    let absolute = std::path::absolute(config).unwrap_or_else(|_| config.to_owned());
    format!(
        "parsed-{}",
        &sha256_hex(absolute.as_os_str().as_encoded_bytes())[..32]
    )
}

/// What an entry must have been made from to stand for this load: `None` when the binary
/// cannot be identified (then nothing is cached).
fn key(config: &Path, bytes: &[u8], options: &LoadOptions) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let absolute: PathBuf = std::path::absolute(config).ok()?;
    let params: Vec<(String, String, String)> = options
        .params
        .iter()
        .map(|param| {
            (
                param.name.clone(),
                format!("{:?}", param.value),
                param.origin.clone(),
            )
        })
        .collect();
    let described = serde_json::json!({
        "format": FORMAT,
        "version": env!("CARGO_PKG_VERSION"),
        "exe": [exe.dev(), exe.ino(), exe.size(), exe.mtime(), exe.mtime_nsec()],
        "config": absolute,
        "bytes": sha256_hex(bytes),
        "params": params,
        // The variables a load looks up are in its reads, checked against the environment
        // the next load is given (or apollo's own).
        "env_given": options.env.is_some(),
        "today": options.today,
        "placeholders": options.placeholders,
    });
    Some(sha256_hex(described.to_string().as_bytes()))
}

#[cfg(test)]
#[path = "parse_cache_tests.rs"]
mod tests;
