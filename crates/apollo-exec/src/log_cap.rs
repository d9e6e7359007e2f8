//! The size cap of an attempt's `stdout` and `stderr` files (`log_limit:`, issue 36 item 18).
//! Past the limit a log keeps its head and its last part, with a marker line where it was
//! cut — `[apollo: N bytes cut: log_limit 256 MiB]` — so the failure tail still shows the
//! last lines. The unit is never stopped or slowed by it: its output is read as fast as it
//! comes and what falls between the head and the last part is counted and dropped.
//!
//! Two ways to the same file: [`Cap`], in the relay a local unit with a limit writes through
//! (the log never grows past the limit, plus the last part of each later phase); and
//! [`cut_in_place`], for a Slurm job's logs, which the job writes on the shared filesystem
//! without apollo in the way: cut when apollo collects the job. Either notes the cut in the
//! attempt folder's `logs_capped` file, which `apollo logs` reads ([`read_capped`]).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The attempt folder's file noting each capped stream: `<stream> <bytes cut> <limit>` lines.
pub const CAPPED_FILE: &str = "logs_capped";

/// The last part a capped log keeps: a quarter of the limit, at most 1 MiB (the failure tail
/// shows the last lines; a tail larger than that helps nobody and costs memory per stream).
pub fn tail_len(limit: u64) -> u64 {
    (limit / 4).min(1 << 20)
}

/// The marker line written where a log was cut.
pub fn marker(cut: u64, limit: u64) -> String {
    format!(
        "[apollo: {cut} bytes cut: log_limit {}]\n",
        apollo_core::capture::human_size(limit)
    )
}

/// A stream's cap in a relay: bytes go to the log until the head is full, then into a ring
/// of the last [`tail_len`] bytes; [`Cap::finish`] writes the marker and the ring.
#[derive(Debug)]
pub(crate) struct Cap {
    limit: u64,
    head: u64,
    tail: usize,
    /// The log's length so far.
    len: u64,
    ring: VecDeque<u8>,
    cut: u64,
    /// Whether the last byte written to the log was a newline (or nothing was).
    at_line_start: bool,
}

impl Cap {
    /// A cap of `limit` bytes over a log already `len` bytes long.
    pub(crate) fn new(limit: u64, len: u64) -> Cap {
        let tail = tail_len(limit);
        Cap {
            limit,
            head: limit - tail,
            tail: usize::try_from(tail).unwrap_or(usize::MAX),
            len,
            ring: VecDeque::new(),
            cut: 0,
            at_line_start: true,
        }
    }

    /// Writes what fits of `data` to `log`, keeps the rest's last part.
    pub(crate) fn push(&mut self, data: &[u8], log: &mut impl Write) {
        let room = usize::try_from(self.head.saturating_sub(self.len)).unwrap_or(usize::MAX);
        let (now, later) = data.split_at(room.min(data.len()));
        if !now.is_empty() {
            if log.write_all(now).is_ok() {
                self.len += now.len() as u64;
            }
            self.at_line_start = now.last() == Some(&b'\n');
        }
        if later.is_empty() {
            return;
        }
        let later = if later.len() > self.tail {
            self.cut += (later.len() - self.tail) as u64;
            &later[later.len() - self.tail..]
        } else {
            later
        };
        let overflow = (self.ring.len() + later.len()).saturating_sub(self.tail);
        self.ring.drain(..overflow);
        self.cut += overflow as u64;
        self.ring.extend(later);
    }

    /// Writes the marker (if anything was cut) and the kept last part; the bytes cut.
    pub(crate) fn finish(mut self, log: &mut impl Write) -> u64 {
        if self.cut > 0 {
            let mut line = String::new();
            if !self.at_line_start {
                line.push('\n');
            }
            line.push_str(&marker(self.cut, self.limit));
            let _ = log.write_all(line.as_bytes());
        }
        let (first, second) = self.ring.as_slices();
        let _ = log.write_all(first);
        let _ = log.write_all(second);
        self.ring.clear();
        self.cut
    }
}

/// Cuts the log at `path` in place when it is over `limit`: its head, the marker, its last
/// part. The bytes cut (0 when it was within the limit). For a file nobody writes any more.
pub fn cut_in_place(path: &Path, limit: u64) -> std::io::Result<u64> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags_nofollow()
        .open(path)?;
    let len = file.metadata()?.len();
    if len <= limit {
        return Ok(0);
    }
    let tail = tail_len(limit);
    let head = limit - tail;
    let mut last = Vec::with_capacity(usize::try_from(tail).unwrap_or(0));
    file.seek(SeekFrom::Start(len - tail))?;
    (&mut file).take(tail).read_to_end(&mut last)?;
    let mut at_line_start = true;
    if head > 0 {
        let mut byte = [0_u8];
        file.seek(SeekFrom::Start(head - 1))?;
        file.read_exact(&mut byte)?;
        at_line_start = byte[0] == b'\n';
    }
    let cut = len - head - last.len() as u64;
    file.set_len(head)?;
    file.seek(SeekFrom::Start(head))?;
    let mut text = if at_line_start {
        String::new()
    } else {
        "\n".to_owned()
    };
    text.push_str(&marker(cut, limit));
    file.write_all(text.as_bytes())?;
    file.write_all(&last)?;
    Ok(cut)
}

/// Not `apollo_core::safe_file`: that door opens for reading only, and [`cut_in_place`] must
/// write the file it opens (the same guards: no symbolic link followed, no blocking).
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
    }
}

/// Adds `cut` bytes of `stream` to the attempt folder's [`CAPPED_FILE`].
pub fn note_capped(dir: &Path, stream: &str, cut: u64, limit: u64) -> std::io::Result<()> {
    let mut text = read_note(dir).unwrap_or_default();
    text.push_str(&format!("{stream} {cut} {limit}\n"));
    crate::write_attempt_file(&dir.join(CAPPED_FILE), text.as_bytes())
}

fn read_note(dir: &Path) -> Option<String> {
    let bytes = crate::read_attempt_file(&dir.join(CAPPED_FILE), 64 * 1024).ok()??;
    String::from_utf8(bytes).ok()
}

/// What the attempt folder's [`CAPPED_FILE`] says of `stream`: the bytes cut in all and the
/// limit, if it was capped.
pub fn read_capped(dir: &Path, stream: &str) -> Option<(u64, u64)> {
    let text = read_note(dir)?;
    let mut found = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some(stream) {
            continue;
        }
        let (Some(cut), Some(limit)) = (words.next(), words.next()) else {
            continue;
        };
        let (Ok(cut), Ok(limit)) = (cut.parse::<u64>(), limit.parse::<u64>()) else {
            continue;
        };
        let (total, _) = found.unwrap_or((0, limit));
        found = Some((total + cut, limit));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(limit: u64, pieces: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut log = Vec::new();
        let mut cap = Cap::new(limit, 0);
        for piece in pieces {
            cap.push(piece, &mut log);
        }
        let cut = cap.finish(&mut log);
        (log, cut)
    }

    #[test]
    fn a_log_within_its_limit_is_kept_whole() {
        let text = b"line 1\nline 2\n".repeat(100);
        let (log, cut) = capped(4096, &[&text]);
        assert_eq!((log, cut), (text.clone(), 0));
    }

    #[test]
    fn a_log_over_its_limit_keeps_its_head_a_marker_and_its_last_part() {
        let lines: Vec<String> = (0..2000).map(|i| format!("line {i:05}\n")).collect();
        let text = lines.concat();
        // However the stream is cut into pieces.
        for piece in [1, 7, 4096, text.len()] {
            let pieces: Vec<&[u8]> = text.as_bytes().chunks(piece).collect();
            let (log, cut) = capped(8192, &pieces);
            let log = String::from_utf8(log).unwrap();
            assert!(log.starts_with("line 00000\n"), "{piece}");
            assert!(log.ends_with("line 01999\n"), "{piece}");
            assert_eq!(cut, text.len() as u64 - 8192, "{piece}");
            let marker = format!("\n[apollo: {cut} bytes cut: log_limit 8 KiB]\n");
            assert!(log.contains(&marker), "{piece}: {log}");
            assert_eq!(log.len(), 8192 + marker.len(), "{piece}");
        }
    }

    #[test]
    fn cutting_a_file_in_place_gives_what_the_relay_gives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stdout");
        let lines: Vec<String> = (0..3000).map(|i| format!("row {i}\n")).collect();
        let text = lines.concat();
        std::fs::write(&path, &text).unwrap();
        let cut = cut_in_place(&path, 10_000).unwrap();
        let (relayed, relay_cut) = capped(10_000, &[text.as_bytes()]);
        assert_eq!(cut, relay_cut);
        assert_eq!(std::fs::read(&path).unwrap(), relayed);
        // Within the limit: left alone.
        assert_eq!(cut_in_place(&path, 1 << 20).unwrap(), 0);
        note_capped(dir.path(), "stdout", cut, 10_000).unwrap();
        note_capped(dir.path(), "stdout", 5, 10_000).unwrap();
        assert_eq!(read_capped(dir.path(), "stdout"), Some((cut + 5, 10_000)));
        assert_eq!(read_capped(dir.path(), "stderr"), None);
    }
}
