//! [`JsonValue`] and [`IsDefault`] for the types a record's fields hold.

use std::collections::BTreeMap;

use super::*;
use crate::event::{ExitStatus, SkipReason};

impl JsonValue for String {
    fn encode_json(&self, out: &mut Vec<u8>) {
        push_json_str(self, out);
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        let content = cursor.string()?;
        cursor.text::<BUILD>(content)
    }
}

impl JsonValue for u64 {
    fn encode_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        cursor.unsigned()
    }
}

impl JsonValue for u32 {
    fn encode_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        u32::try_from(cursor.unsigned()?).ok()
    }
}

impl JsonValue for i32 {
    fn encode_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(*self).as_bytes());
    }

    /// serde_json writes zero as `0`, never `-0`.
    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        let negative = cursor.try_literal(b"-");
        let magnitude = i64::from(u32::walk_json::<BUILD>(cursor)?);
        if negative && magnitude == 0 {
            return None;
        }
        i32::try_from(if negative { -magnitude } else { magnitude }).ok()
    }
}

impl JsonValue for bool {
    fn encode_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        if cursor.try_literal(b"true") {
            Some(true)
        } else if cursor.try_literal(b"false") {
            Some(false)
        } else {
            None
        }
    }
}

impl<T: JsonValue> JsonValue for Option<T> {
    fn encode_json(&self, out: &mut Vec<u8>) {
        match self {
            Some(value) => value.encode_json(out),
            None => out.extend_from_slice(b"null"),
        }
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        if cursor.try_literal(b"null") {
            Some(None)
        } else {
            T::walk_json::<BUILD>(cursor).map(Some)
        }
    }
}

// A rare field kept out of line, so that it does not grow every record (`run_started`'s
// deadlines): written and read as the value itself.
impl<T: JsonValue> JsonValue for Box<T> {
    fn encode_json(&self, out: &mut Vec<u8>) {
        (**self).encode_json(out);
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        T::walk_json::<BUILD>(cursor).map(Box::new)
    }
}

impl<T: JsonValue> JsonValue for Vec<T> {
    fn encode_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (index, item) in self.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            item.encode_json(out);
        }
        out.push(b']');
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        let mut items = Vec::new();
        cursor.literal(b"[")?;
        if cursor.try_literal(b"]") {
            return Some(items);
        }
        loop {
            let item = T::walk_json::<BUILD>(cursor)?;
            if BUILD {
                items.push(item);
            }
            if cursor.try_literal(b"]") {
                return Some(items);
            }
            cursor.literal(b",")?;
        }
    }
}

/// A run's params: few, in one record per run, of any JSON type; serde_json writes and reads
/// them, and the walk checks that they encode back to the bytes it read (it allocates, with or
/// without `BUILD`).
impl JsonValue for BTreeMap<String, serde_json::Value> {
    fn encode_json(&self, out: &mut Vec<u8>) {
        // It cannot fail: a Vec takes every write, and a map of JSON values with string keys
        // always serializes.
        let written = serde_json::to_writer(&mut *out, self);
        debug_assert!(written.is_ok(), "a map of JSON values always serializes");
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        let rest = &cursor.bytes[cursor.pos..];
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<Self>();
        let value = stream.next()?.ok()?;
        let len = stream.byte_offset();
        let mut again = Vec::with_capacity(len);
        value.encode_json(&mut again);
        if again != rest[..len] {
            return None;
        }
        cursor.pos += len;
        Some(value)
    }
}

/// `{"code":N}` or `{"signal":N}` (serde's externally tagged newtype variants).
impl JsonValue for ExitStatus {
    fn encode_json(&self, out: &mut Vec<u8>) {
        let (key, value): (&[u8], i32) = match *self {
            ExitStatus::Code(code) => (b"{\"code\":", code),
            ExitStatus::Signal(signal) => (b"{\"signal\":", signal),
        };
        out.extend_from_slice(key);
        value.encode_json(out);
        out.push(b'}');
    }

    #[inline]
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        let status: fn(i32) -> ExitStatus = if cursor.try_literal(b"{\"code\":") {
            ExitStatus::Code
        } else {
            cursor.literal(b"{\"signal\":")?;
            ExitStatus::Signal
        };
        let value = i32::walk_json::<BUILD>(cursor)?;
        cursor.literal(b"}")?;
        Some(status(value))
    }
}

/// Flattened into `unit_skipped`: `,"reason":"…"` and the variant's fields (serde's internally
/// tagged enum, `tag = "reason"`).
impl JsonFields for SkipReason {
    const FIELD_NAMES: &'static [&'static str] = &["reason", "upstream", "condition"];

    fn encode_fields(&self, out: &mut Vec<u8>) {
        let (reason, field): (&[u8], Option<(&[u8], &String)>) = match self {
            SkipReason::UpstreamFailed { upstream } => {
                (b"upstream_failed", Some((b",\"upstream\":", upstream)))
            }
            SkipReason::Interrupted => (b"interrupted", None),
            SkipReason::When { condition } => (b"when", Some((b",\"condition\":", condition))),
        };
        out.extend_from_slice(b",\"reason\":\"");
        out.extend_from_slice(reason);
        out.push(b'"');
        if let Some((key, value)) = field {
            out.extend_from_slice(key);
            value.encode_json(out);
        }
    }

    fn walk_fields<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
        cursor.key(b",\"reason\":")?;
        let reason = cursor.string()?;
        Some(match cursor.slice(reason) {
            b"upstream_failed" => {
                cursor.key(b",\"upstream\":")?;
                SkipReason::UpstreamFailed {
                    upstream: String::walk_json::<BUILD>(cursor)?,
                }
            }
            b"interrupted" => SkipReason::Interrupted,
            b"when" => {
                cursor.key(b",\"condition\":")?;
                SkipReason::When {
                    condition: String::walk_json::<BUILD>(cursor)?,
                }
            }
            _ => return None,
        })
    }
}

impl<T> IsDefault for Option<T> {
    const DEFAULT_JSON: &'static [u8] = b"null";

    fn is_default(&self) -> bool {
        self.is_none()
    }
}

impl<T> IsDefault for Vec<T> {
    const DEFAULT_JSON: &'static [u8] = b"[]";

    fn is_default(&self) -> bool {
        self.is_empty()
    }
}

impl<K, V> IsDefault for BTreeMap<K, V> {
    const DEFAULT_JSON: &'static [u8] = b"{}";

    fn is_default(&self) -> bool {
        self.is_empty()
    }
}

impl IsDefault for u64 {
    const DEFAULT_JSON: &'static [u8] = b"0";

    fn is_default(&self) -> bool {
        *self == 0
    }
}

impl IsDefault for u32 {
    const DEFAULT_JSON: &'static [u8] = b"0";

    fn is_default(&self) -> bool {
        *self == 0
    }
}
