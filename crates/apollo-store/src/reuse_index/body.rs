//! The reuse index file's body (format 3): binary, because a no-op run of 10,000 reusable
//! units reads it whole. As JSON with hashes in hex (format 2) it was decoded into ten
//! strings per unit; here a hash is its 32 bytes and a unit name or run id is written once
//! and then named by number.
//!
//! ```text
//! body      = "apollo reuse index\n" u32:format covered* pipeline*   (each list: u32 count, then items)
//! covered   = str:run u64:segments u64:last_len
//! pipeline  = str:identity str*:runs str*:units success* latest*
//! success   = u32:unit digest:input u32:run u32:attempt digest:output
//! latest    = u32:unit digest:input          (that unit's latest success is the one with it)
//! digest    = 0x00 32 bytes (a SHA-256) | 0x01 str (anything else a journal held)
//! str       = u32:length bytes (UTF-8)
//! ```
//!
//! Integers are little-endian. A body that does not decode — cut short, a number naming no
//! unit or run, a name given twice — is "cannot be parsed", and the index is rebuilt.

use foldhash::{HashMap, HashMapExt};

use super::{Covered, Digest, Latest, Names, Pipeline, Success};

/// The body's first bytes: what the file is, for a human who looks at it.
const MAGIC: &[u8] = b"apollo reuse index\n";

/// The body of an index covering `covered`, with `pipelines`' successes.
pub(super) fn encode(
    format: u32,
    covered: &[Covered],
    pipelines: &HashMap<String, Pipeline>,
) -> Vec<u8> {
    let entries: usize = pipelines.values().map(|p| p.by_input.len()).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 64 + entries * 80);
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, format);
    put_len(&mut out, covered.len());
    for covered in covered {
        put_str(&mut out, &covered.run);
        out.extend_from_slice(&covered.segments.to_le_bytes());
        out.extend_from_slice(&covered.last_len.to_le_bytes());
    }
    put_len(&mut out, pipelines.len());
    for (identity, pipeline) in pipelines {
        put_str(&mut out, identity);
        for names in [&pipeline.runs, &pipeline.units] {
            put_len(&mut out, names.list.len());
            for name in &names.list {
                put_str(&mut out, name);
            }
        }
        put_len(&mut out, pipeline.by_input.len());
        for ((unit, input), success) in &pipeline.by_input {
            put_u32(&mut out, *unit);
            put_digest(&mut out, input);
            put_u32(&mut out, success.run);
            put_u32(&mut out, success.attempt);
            put_digest(&mut out, &success.output);
        }
        let latest = pipeline.latest.iter().enumerate();
        let latest: Vec<_> = latest
            .filter_map(|(unit, latest)| Some((unit, &latest.as_ref()?.input)))
            .collect();
        put_len(&mut out, latest.len());
        for (unit, input) in latest {
            put_len(&mut out, unit);
            put_digest(&mut out, input);
        }
    }
    out
}

/// The format of `bytes`, if it is an index body at all: this one's, or an older JSON one's
/// (`{"format":2,…}`).
pub(super) fn format_of(bytes: &[u8]) -> Option<u32> {
    if let Some(rest) = bytes.strip_prefix(MAGIC) {
        return Some(u32::from_le_bytes(rest.get(..4)?.try_into().ok()?));
    }
    #[derive(serde::Deserialize)]
    struct Probe {
        format: u32,
    }
    serde_json::from_slice::<Probe>(bytes)
        .ok()
        .map(|probe| probe.format)
}

/// The covered runs and pipelines of a body of `format`; why not, as a phrase completing
/// "the reuse index …".
pub(super) fn decode(
    format: u32,
    bytes: &[u8],
) -> Result<(Vec<Covered>, HashMap<String, Pipeline>), String> {
    match format_of(bytes) {
        Some(found) if found != format => {
            return Err(format!("is of format {found}, not {format}"));
        }
        Some(_) if bytes.starts_with(MAGIC) => {}
        _ => return Err("cannot be parsed: it is not a reuse index".to_owned()),
    }
    let mut cursor = Cursor {
        bytes,
        at: MAGIC.len() + 4,
    };
    decode_from(&mut cursor)
        .map_err(|what| format!("cannot be parsed: {what} at byte {}", cursor.at))
}

fn decode_from(
    cursor: &mut Cursor<'_>,
) -> Result<(Vec<Covered>, HashMap<String, Pipeline>), &'static str> {
    let count = cursor.count(4 + 8 + 8)?;
    let mut covered = Vec::new();
    covered.try_reserve_exact(count).map_err(|_| TOO_MANY)?;
    for _ in 0..count {
        covered.push(Covered {
            run: cursor.str()?.to_owned(),
            segments: cursor.u64()?,
            last_len: cursor.u64()?,
        });
    }
    let count = cursor.count(4 * 5)?;
    let mut pipelines = HashMap::new();
    pipelines.try_reserve(count).map_err(|_| TOO_MANY)?;
    for _ in 0..count {
        let identity = cursor.str()?.to_owned();
        let mut pipeline = Pipeline {
            runs: names(cursor)?,
            units: names(cursor)?,
            ..Pipeline::default()
        };
        let count = cursor.count(4 + 5 + 4 + 4 + 5)?;
        pipeline.by_input.try_reserve(count).map_err(|_| TOO_MANY)?;
        for _ in 0..count {
            let unit = cursor.number(pipeline.units.list.len())?;
            let input = cursor.digest()?;
            let run = cursor.number(pipeline.runs.list.len())?;
            let attempt = cursor.u32()?;
            let output = cursor.digest()?;
            let success = Success {
                run,
                attempt,
                output,
            };
            pipeline.by_input.insert((unit, input), success);
        }
        let count = cursor.count(4 + 5)?;
        let units = pipeline.units.list.len();
        pipeline
            .latest
            .try_reserve_exact(units)
            .map_err(|_| TOO_MANY)?;
        pipeline.latest.resize(units, None);
        for _ in 0..count {
            let unit = cursor.number(pipeline.units.list.len())?;
            let input = cursor.digest()?;
            let key = (unit, input);
            if let Some(success) = pipeline.by_input.get(&key) {
                pipeline.latest[unit as usize] = Some(Latest {
                    success: success.clone(),
                    input: key.1,
                    inputs: Vec::new(),
                });
            }
        }
        if pipelines.insert(identity, pipeline).is_some() {
            return Err("a pipeline given twice");
        }
    }
    if cursor.at != cursor.bytes.len() {
        return Err("bytes after the end");
    }
    Ok((covered, pipelines))
}

/// A count the memory cannot hold (the counts are bounded by the body's length, but an item
/// takes more room in memory than in the file): "cannot be parsed", not an abort.
const TOO_MANY: &str = "a count too large to hold";

fn names(cursor: &mut Cursor<'_>) -> Result<Names, &'static str> {
    let count = cursor.count(4)?;
    let mut names = Names::default();
    names.list.try_reserve_exact(count).map_err(|_| TOO_MANY)?;
    names.numbers.try_reserve(count).map_err(|_| TOO_MANY)?;
    for _ in 0..count {
        let name = cursor.str()?;
        if names.find(name).is_some() {
            return Err("a name given twice");
        }
        names.number(name);
    }
    Ok(names)
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// A count or a number: the index never holds 2³² of anything (a unit name is at least a
/// byte, and the file is read only up to 1 GiB).
fn put_len(out: &mut Vec<u8>, len: usize) {
    put_u32(out, u32::try_from(len).unwrap_or(u32::MAX));
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    put_len(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

fn put_digest(out: &mut Vec<u8>, digest: &Digest) {
    match digest {
        Digest::Sha256(bytes) => {
            out.push(0);
            out.extend_from_slice(bytes);
        }
        Digest::Other(text) => {
            out.push(1);
            put_str(out, text);
        }
    }
}

/// Reads a body front to back; every read checks that the bytes are there.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(len).ok_or("a length past the end")?;
        let taken = self.bytes.get(self.at..end).ok_or("cut short")?;
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(bytes))
    }

    /// A count of items of at least `min_len` bytes each: one the rest of the body cannot
    /// hold is refused before anything is reserved for it.
    fn count(&mut self, min_len: usize) -> Result<usize, &'static str> {
        let count = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if count.saturating_mul(min_len) > left {
            return Err("a count past the end");
        }
        Ok(count)
    }

    /// A number naming one of `of` things.
    fn number(&mut self, of: usize) -> Result<u32, &'static str> {
        let number = self.u32()?;
        if number as usize >= of {
            return Err("a number naming nothing");
        }
        Ok(number)
    }

    fn str(&mut self) -> Result<&'a str, &'static str> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.take(len)?).map_err(|_| "a name that is not UTF-8")
    }

    fn digest(&mut self) -> Result<Digest, &'static str> {
        match self.take(1)?[0] {
            0 => {
                let mut bytes = [0; 32];
                bytes.copy_from_slice(self.take(32)?);
                Ok(Digest::Sha256(bytes))
            }
            // As the index was built: text that is a SHA-256 is kept as one.
            1 => Ok(Digest::new(self.str()?)),
            _ => Err("a hash of no known kind"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline() -> Pipeline {
        let mut pipeline = Pipeline::default();
        let sha = |byte: u8| format!("{byte:02x}").repeat(32);
        pipeline.merge("fetch", ("r1", 1), &sha(1), &sha(2), Vec::new());
        pipeline.merge("fetch", ("r2", 2), &sha(3), "not a sha", Vec::new());
        pipeline.merge("join", ("r2", 1), "h1", &sha(4), Vec::new());
        pipeline
    }

    fn body() -> Vec<u8> {
        let covered = vec![Covered {
            run: "r1".into(),
            segments: 1,
            last_len: 4096,
        }];
        let pipelines = HashMap::from_iter([("etl@../p.yaml".to_owned(), pipeline())]);
        encode(3, &covered, &pipelines)
    }

    #[test]
    fn a_body_decodes_to_what_was_encoded() {
        let (covered, pipelines) = decode(3, &body()).unwrap();
        assert_eq!(covered[0].run, "r1");
        assert_eq!((covered[0].segments, covered[0].last_len), (1, 4096));
        let decoded = &pipelines["etl@../p.yaml"];
        let original = pipeline();
        assert_eq!(decoded.by_input, original.by_input);
        assert_eq!(decoded.units.list, original.units.list);
        assert_eq!(decoded.runs.list, original.runs.list);
        let inputs = |pipeline: &Pipeline| -> Vec<_> {
            let latest = pipeline.latest.iter().flatten();
            latest
                .map(|latest| (latest.input.text(), latest.success.clone()))
                .collect()
        };
        assert_eq!(inputs(decoded), inputs(&original));
        assert_eq!(inputs(decoded)[0].0, "03".repeat(32));
    }

    #[test]
    fn a_cut_or_flipped_body_is_an_error_never_a_panic() {
        let body = body();
        for len in 0..body.len() {
            assert!(decode(3, &body[..len]).is_err(), "cut at {len}");
        }
        // A flipped bit decodes to something or is refused; either way, no panic and no
        // number naming nothing (the checksum line catches what decodes).
        for bit in 0..body.len() * 8 {
            let mut flipped = body.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Ok((_, pipelines)) = decode(3, &flipped) {
                for pipeline in pipelines.values() {
                    for ((unit, _), success) in &pipeline.by_input {
                        assert!((*unit as usize) < pipeline.units.list.len());
                        assert!((success.run as usize) < pipeline.runs.list.len());
                    }
                }
            }
        }
    }

    #[test]
    fn a_sha256_written_as_text_reads_back_as_one() {
        let sha = "ab".repeat(32);
        let mut out = Vec::new();
        put_digest(&mut out, &Digest::Other(sha.as_str().into()));
        let mut cursor = Cursor { bytes: &out, at: 0 };
        let digest = cursor.digest().unwrap();
        assert!(matches!(digest, Digest::Sha256(_)));
        assert_eq!(digest, Digest::new(&sha));
    }

    #[test]
    fn another_format_is_named_and_json_is_the_older_one() {
        let mut body = body();
        body[MAGIC.len()] = 4;
        assert_eq!(decode(3, &body).unwrap_err(), "is of format 4, not 3");
        let older = br#"{"format":2,"covered":[],"pipelines":[]}"#;
        assert_eq!(decode(3, older).unwrap_err(), "is of format 2, not 3");
        assert!(
            decode(3, b"garbage")
                .unwrap_err()
                .starts_with("cannot be parsed")
        );
    }
}
