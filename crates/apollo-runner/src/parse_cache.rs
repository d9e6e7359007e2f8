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

/// The version of an entry's layout; another is a miss. (4: units as lines of JSON.)
/// (6: units carry the names and sources of the secrets they receive.) (8: the pipeline's
/// `durability` and `sync_interval`.) (9: units' `log_limit` and `queue_timeout`.) (10: units'
/// `retry_on_exit`, `retry_max_delay` and `cleanup_timeout`.) (11: units' `deadline`.) (12: the
/// `on_late` hook.) (13: units' `when_command`.)
const FORMAT: u32 = 13;

/// An entry's units are kept in up to this many chunks, decoded in parallel on a hit.
const MAX_CHUNKS: usize = 4;

/// Fewer units than this are kept in one chunk (threads would cost more than they save).
const UNITS_PER_CHUNK_AT_LEAST: usize = 1_000;

/// One entry: what it was made from (`key`), and the load it stands for. On disk: this, as
/// one line of JSON with the pipeline's `units` empty, then `chunks` chunks, each its length
/// (8 bytes, little-endian) and the next units in order, one [`CachedUnit`] after another in
/// postcard: decoding 10,000 units was most of a hit's time, and chunks decode on threads of
/// their own, each into its place in one vector ([`decode_units`]). (JSON was five times the
/// size and slow to decode: `docs/design/2026-12-02-noop-footprint.md`.)
#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    key: String,
    /// How many chunks of units follow (at most [`MAX_CHUNKS`], each decoded on a thread)...
    chunks: usize,
    /// ... and how many units each holds (the last may hold fewer): the vector they are decoded
    /// into is sized once, not grown (and copied to fresh pages) as they are read.
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
    let Ok(bytes) = config::read_config_file(config) else {
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
    // No state directory yet (a first run creates it): nowhere to keep the entry, and the run
    // hashes the definition snapshot as it writes it.
    if let Some(key) = key
        && state_dir.join("runs").is_dir()
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
    out.write_all(b"\n")?;
    let mut bytes = Vec::new();
    for chunk in loaded.pipeline.units.chunks(per_chunk) {
        bytes.clear();
        for unit in chunk {
            bytes = postcard::to_extend(&CachedUnit::from(unit), bytes)
                .map_err(std::io::Error::other)?;
        }
        out.write_all(&(bytes.len() as u64).to_le_bytes())?;
        out.write_all(&bytes)?;
    }
    Ok(())
}

/// A [`Unit`] as the parse cache keeps it: every field, in this order, whatever its value
/// (postcard is not self-describing: a unit's own serde form leaves `reuse` out when it is
/// false). Built from and into a unit by `every_field!`, with no `..`: a field added to `Unit`
/// does not compile until it is kept here too.
#[derive(Serialize, Deserialize)]
struct CachedUnit {
    name: String,
    deps: Vec<String>,
    timeout: Option<std::time::Duration>,
    retries: u32,
    retry_delay: std::time::Duration,
    retry_on_exit: Vec<i32>,
    retry_max_delay: Option<std::time::Duration>,
    kill_grace: std::time::Duration,
    prepare: Option<apollo_core::model::Command>,
    execute: apollo_core::model::Command,
    cleanup: Option<apollo_core::model::Command>,
    cleanup_timeout: std::time::Duration,
    inputs: Vec<String>,
    outputs: Vec<String>,
    env: std::collections::BTreeMap<String, String>,
    workdir: PathBuf,
    idempotent: bool,
    capture: apollo_core::capture::CapturePolicy,
    reuse: bool,
    executor: apollo_core::model::ExecutorKind,
    resources: apollo_core::model::Resources,
    /// Names and sources only: a secret's value is read when a run starts, never loaded.
    secrets: std::collections::BTreeMap<String, apollo_core::model::SecretSource>,
    skip_when: Option<String>,
    when_command: Option<apollo_core::model::Command>,
    log_limit: Option<u64>,
    queue_timeout: Option<std::time::Duration>,
    deadline: Option<apollo_core::deadline::Deadline>,
}

/// `$value` (a `$from`) as a `$to`, field by field: the list is written once, and naming no
/// `..`, it does not compile until a field added to either struct is added here.
macro_rules! every_field {
    ($value:expr, $from:ident => $to:ident) => {
        every_field!(
            $value, $from => $to;
            name, deps, timeout, retries, retry_delay, retry_on_exit, retry_max_delay, kill_grace,
            prepare, execute, cleanup, cleanup_timeout, inputs, outputs, env, workdir, idempotent,
            capture, reuse, executor, resources, secrets, skip_when, when_command, log_limit,
            queue_timeout, deadline
        )
    };
    ($value:expr, $from:ident => $to:ident; $($field:ident),*) => {{
        let $from { $($field),* } = $value;
        $to { $($field),* }
    }};
}

impl From<&Unit> for CachedUnit {
    fn from(unit: &Unit) -> Self {
        every_field!(unit.clone(), Unit => CachedUnit)
    }
}

impl From<CachedUnit> for Unit {
    fn from(unit: CachedUnit) -> Self {
        every_field!(unit, CachedUnit => Unit)
    }
}

/// An entry read back, if `wanted` (checked before its units are decoded, in parallel).
/// `None` if it is not wanted or anything is amiss.
fn decode(body: &[u8], wanted: impl Fn(&Entry) -> bool) -> Option<Entry> {
    let newline = body.iter().position(|&byte| byte == b'\n')?;
    let mut entry: Entry = serde_json::from_slice(&body[..newline]).ok()?;
    // More chunks than apollo writes would be more threads than it starts: a forged entry.
    if entry.format != FORMAT || entry.chunks > MAX_CHUNKS || !wanted(&entry) {
        return None;
    }
    let mut chunks = Vec::with_capacity(entry.chunks);
    let mut rest = &body[newline + 1..];
    while let Some((len, after)) = rest.split_first_chunk::<8>() {
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        let (chunk, after) = after.split_at_checked(len)?;
        chunks.push(chunk);
        rest = after;
    }
    if !rest.is_empty() || chunks.len() != entry.chunks {
        return None;
    }
    entry.pipeline.units = decode_units(&chunks, entry.units_per_chunk)?;
    Some(entry)
}

/// Fewer bytes than any unit takes in an entry (each of its 18 fields takes one at least): a
/// count of units the chunks' bytes cannot hold is a damaged entry, refused before anything
/// is reserved for it.
const MIN_UNIT_BYTES: usize = 18;

/// The units of `chunks` (`per_chunk` of them in every chunk but the last, which holds at most
/// that many), in order, or `None` if they are not that.
///
/// Each chunk is decoded on a thread of its own (the first on this one) **straight into its
/// place in one vector**, sized once: decoded into vectors of their own and concatenated, the
/// units were two copies of fresh pages; decoded one after the other, the decision to resume
/// waited for them (`docs/design/2026-12-02-noop-footprint.md`).
#[allow(unsafe_code)] // Decoded in place: see the SAFETY comments.
fn decode_units(chunks: &[&[u8]], per_chunk: usize) -> Option<Vec<Unit>> {
    let (last, full) = chunks.split_last()?;
    let holds = |chunk: &&[u8]| chunk.len() / MIN_UNIT_BYTES;
    if per_chunk == 0 || full.iter().any(|chunk| holds(chunk) < per_chunk) {
        return None;
    }
    // No overflow: each full chunk holds `per_chunk` units of at least a byte.
    let lens: Vec<usize> = (full.iter().map(|_| per_chunk))
        .chain([per_chunk.min(holds(last))])
        .collect();
    let capacity = lens.iter().sum();
    // What a forged count asks for may not be there: a miss, not an abort.
    let mut units: Vec<Unit> = Vec::new();
    units.try_reserve_exact(capacity).ok()?;
    let counts: Vec<Option<usize>> = {
        let mut slots = &mut units.spare_capacity_mut()[..capacity];
        let mut parts = Vec::with_capacity(lens.len());
        for &len in &lens {
            let (part, rest) = slots.split_at_mut(len);
            parts.push(part);
            slots = rest;
        }
        std::thread::scope(|scope| {
            let mut parts = chunks.iter().zip(parts);
            let (first_chunk, first_part) = parts.next()?;
            // A chunk whose thread cannot be started is not decoded: a miss.
            let others: Vec<_> = parts
                .map(|(&chunk, part)| {
                    std::thread::Builder::new()
                        .spawn_scoped(scope, move || decode_into(chunk, part))
                        .ok()
                })
                .collect();
            let mut counts = vec![decode_into(first_chunk, first_part)];
            counts.extend(others.into_iter().map(|other| other?.join().ok()?));
            Some(counts)
        })?
    };
    let whole = counts
        .iter()
        .zip(&lens)
        .enumerate()
        .all(|(at, (count, &len))| {
            count.is_some_and(|count| count == len || (at == lens.len() - 1 && count <= len))
        });
    if whole {
        let len = capacity - lens[lens.len() - 1] + counts[counts.len() - 1].unwrap_or(0);
        // SAFETY: every part but the last is full (`whole`): `decode_into` wrote each of its
        // slots, and the last part's first `count` slots; the parts are the vector's first
        // `capacity` slots, one after the other. So its first `len` elements are initialized.
        unsafe { units.set_len(len) };
        return Some(units);
    }
    // Not whole: the units the parts that were decoded hold are dropped.
    let mut start = 0;
    let slots = units.spare_capacity_mut();
    for (count, len) in counts.into_iter().zip(lens) {
        for slot in &mut slots[start..start + count.unwrap_or(0)] {
            // SAFETY: `decode_into` returned `count`: it wrote the part's first `count` slots,
            // and nothing has read or dropped them since.
            unsafe { slot.assume_init_drop() };
        }
        start += len;
    }
    None
}

/// Decodes `chunk`, units one after another, into the first slots of `part`: how many, or
/// `None` (then every unit it wrote was dropped again) when it is not such units or holds more
/// than `part` has slots.
#[allow(unsafe_code)] // Decoded in place: see the SAFETY comments.
fn decode_into(chunk: &[u8], part: &mut [std::mem::MaybeUninit<Unit>]) -> Option<usize> {
    let mut written = 0;
    let mut rest = chunk;
    let whole = loop {
        if rest.is_empty() {
            break true;
        }
        let Ok((unit, after)) = postcard::take_from_bytes::<CachedUnit>(rest) else {
            break false;
        };
        let Some(slot) = part.get_mut(written) else {
            break false;
        };
        slot.write(Unit::from(unit));
        written += 1;
        rest = after;
    };
    if whole {
        return Some(written);
    }
    for slot in &mut part[..written] {
        // SAFETY: the loop wrote the first `written` slots, and nothing read them since.
        unsafe { slot.assume_init_drop() };
    }
    None
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
    let body = apollo_store::cache_file::read(state_dir, name)?;
    let entry = decode(&body, |entry| {
        entry.key == key && entry.reads.unchanged(options)
    })?;
    Some(Loaded {
        pipeline: entry.pipeline,
        id: entry.id,
        warnings: Vec::new(),
        // The config's bytes, moved: copied, they were another megabyte of fresh pages.
        source: String::from_utf8(bytes).ok()?,
        source_sha256: None,
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
        "check_notes": options.check_notes,
    });
    Some(sha256_hex(described.to_string().as_bytes()))
}

#[cfg(test)]
#[path = "parse_cache_tests.rs"]
mod tests;
