//! [`Cursor`]: the walk's primitives over a record's bytes.

use std::ops::Range;

use chrono::{DateTime, NaiveDate, Utc};

use super::*;

/// A position in bytes being walked, and the walk's primitives: each reads one token in the
/// one form serde_json writes it, or returns `None`/`false` having read nothing that matters
/// (a failed walk is abandoned whole).
#[derive(Debug)]
pub struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    /// Just after an object's `{`: its first member has no leading comma.
    pub(super) object_opened: bool,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            object_opened: false,
        }
    }

    /// How far the walk has read.
    #[inline(always)]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether every byte has been read.
    #[inline(always)]
    pub fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// The bytes in `range` (one the cursor returned).
    #[inline(always)]
    pub fn slice(&self, range: Range<usize>) -> &'a [u8] {
        &self.bytes[range]
    }

    /// The bytes read since `start`.
    #[inline(always)]
    pub fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.pos]
    }

    /// Reads `literal` if the bytes go on with it.
    #[inline(always)]
    pub fn try_literal(&mut self, literal: &[u8]) -> bool {
        if self.bytes[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    /// Reads `literal`, or `None`.
    #[inline(always)]
    pub fn literal(&mut self, literal: &[u8]) -> Option<()> {
        self.try_literal(literal).then_some(())
    }

    /// Reads an object member's key, `key` being `,"name":` — without its comma when it is
    /// the object's first member.
    #[inline(always)]
    pub fn key(&mut self, key: &[u8]) -> Option<()> {
        if self.object_opened {
            let found = self.try_literal(&key[1..]);
            self.object_opened = !found;
            found.then_some(())
        } else {
            self.literal(key)
        }
    }

    /// A u64 as serde_json writes it: `0`, or digits without a leading zero, in range.
    #[inline]
    pub fn unsigned(&mut self) -> Option<u64> {
        let digits = &self.bytes[self.pos..];
        let n_digits = digits
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if n_digits == 0 || (n_digits > 1 && digits[0] == b'0') {
            return None;
        }
        let mut value: u64 = 0;
        for &digit in &digits[..n_digits] {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        self.pos += n_digits;
        Some(value)
    }

    /// A string serde_json wrote without escapes: no `\`, no control character, valid UTF-8
    /// (anything with an escape is left to the general decoder). The range of its content.
    #[inline]
    pub fn string(&mut self) -> Option<Range<usize>> {
        self.literal(b"\"")?;
        let start = self.pos;
        let bytes = self.bytes;
        let mut ascii = true;
        let mut at = start;
        loop {
            // Eight bytes at a time while none of them is a quote, a backslash, a control
            // character or non-ASCII (most strings here are hex hashes and unit names).
            if let Some(chunk) = bytes.get(at..at + 8) {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                if !needs_a_look(u64::from_le_bytes(word)) {
                    at += 8;
                    continue;
                }
            }
            // Then byte by byte through the eight that need a look (or the last few).
            let end = (at + 8).min(bytes.len());
            if at == end {
                return None;
            }
            for (index, &byte) in bytes[at..end].iter().enumerate() {
                match byte {
                    b'"' => {
                        let close = at + index;
                        if !ascii {
                            std::str::from_utf8(&bytes[start..close]).ok()?;
                        }
                        self.pos = close + 1;
                        return Some(start..close);
                    }
                    b'\\' | 0..0x20 => return None,
                    0x80.. => ascii = false,
                    _ => {}
                }
            }
            at = end;
        }
    }

    /// With `BUILD`, the content of a string [`Cursor::string`] accepted, owned; without,
    /// an empty string (nothing allocated).
    #[inline]
    pub(super) fn text<const BUILD: bool>(&self, content: Range<usize>) -> Option<String> {
        if BUILD {
            // `string` accepted only UTF-8 here; checked again rather than assumed.
            std::str::from_utf8(&self.bytes[content])
                .ok()
                .map(str::to_owned)
        } else {
            Some(String::new())
        }
    }

    /// A unit enum variant: one of `names`, as a string; its value.
    #[inline]
    pub(super) fn one_of<T: Copy>(&mut self, names: &[(&str, T)]) -> Option<T> {
        let content = self.string()?;
        let name = &self.bytes[content];
        names
            .iter()
            .find(|(candidate, _)| candidate.as_bytes() == name)
            .map(|&(_, value)| value)
    }

    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, the writer's form (chrono's RFC 3339 with microseconds),
    /// with a real date and time (no leap second: chrono writes that as `:60`, left to the
    /// general decoder).
    #[inline]
    pub fn timestamp(&mut self) -> Option<DateTime<Utc>> {
        let text = self.bytes.get(self.pos..self.pos + 27)?;
        let number = |range: Range<usize>| -> Option<u32> {
            let digits = &text[range];
            digits.iter().try_fold(0u32, |acc, &digit| {
                digit
                    .is_ascii_digit()
                    .then(|| acc * 10 + u32::from(digit - b'0'))
            })
        };
        let separators = [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
        ];
        if separators.iter().any(|&(at, byte)| text[at] != byte) || text[26] != b'Z' {
            return None;
        }
        let year = i32::try_from(number(0..4)?).ok()?;
        let date = NaiveDate::from_ymd_opt(year, number(5..7)?, number(8..10)?)?;
        let time = date.and_hms_micro_opt(
            number(11..13)?,
            number(14..16)?,
            number(17..19)?,
            number(20..26)?,
        )?;
        self.pos += 27;
        Some(time.and_utc())
    }
}
