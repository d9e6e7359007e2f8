//! The journal records' JSON without serde: one definition of each record, three codecs.
//!
//! Each event payload is declared once, with `journal_struct!`: the declaration makes the
//! struct with its serde derive (the general form every reader understands, and the format's
//! definition) **and** its fast codec, [`JsonFields`] — a writer that appends exactly the bytes
//! `serde_json` writes (compact, fields in declaration order, an optional field left out exactly
//! when serde's `skip_serializing_if` leaves it out), and a walk over those bytes that accepts
//! nothing else. The walk is apollo-store's *verbatim recogniser* (without `BUILD`: nothing
//! allocated, nothing kept) and its fast decoder (with `BUILD`: the event built as it goes).
//! Adding a field to a record is one line in one place; the three follow.
//!
//! The walk may be stricter than serde's decoder, never looser: it takes only what the encoder
//! writes (no whitespace, no escape in a string, integers in range without a leading zero, enum
//! names this build knows, an omitted field absent rather than written with its default), so
//! whatever it accepts decodes with serde to the same event and encodes back to the same bytes.
//! Anything else is `None`, and the caller decodes it the general way. apollo-store's tests hold
//! every field of every kind to that (`apollo_core::testing::every_field_of_every_kind`).
//!
//! The only serde attributes a record's field may carry are
//! `#[serde(default, skip_serializing_if = "IsDefault::is_default")]` (left out when it is its
//! type's default, see [`IsDefault`]) and `#[serde(flatten)]` (its own fields inline, see
//! [`JsonFields`]); anything else does not compile, so a field cannot take a form the fast
//! codec does not know.

use std::collections::BTreeMap;
use std::ops::Range;

use chrono::{DateTime, NaiveDate, Utc};

use crate::event::{
    AttemptStatus, Event, ExitStatus, FileSide, InputKind, RunKind, RunStatus, SkipReason, Verdict,
};
use crate::model::Phase;

/// A value of a journal record, written and read in exactly serde_json's compact form.
pub trait JsonValue: Sized {
    /// Appends the value as `serde_json::to_writer` writes it.
    fn encode_json(&self, out: &mut Vec<u8>);

    /// Reads a value in exactly the form [`JsonValue::encode_json`] writes it (see the module
    /// docs); `None` for anything else. Without `BUILD`, strings and lists are checked but
    /// left empty (nothing is allocated).
    fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self>;
}

/// The members of a JSON object, each written `,"name":value`: a record's payload after its
/// `"kind"`, a nested struct after its `{` (see [`encode_object`]), or a flattened field.
pub trait JsonFields: Sized {
    /// The fields as declared, in the order they are written (a flattened field by its own
    /// name, which is not a key of the JSON; its type's fields are).
    const FIELD_NAMES: &'static [&'static str];

    /// Appends every member that serde writes, each with a leading comma.
    fn encode_fields(&self, out: &mut Vec<u8>);

    /// Reads the members [`JsonFields::encode_fields`] writes (see [`JsonValue::walk_json`]).
    fn walk_fields<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self>;
}

/// The test of serde's `skip_serializing_if` for a record's optional fields: a field is left
/// out exactly when it is its type's default (`None`, empty, zero, an ordinary run) — what
/// `#[serde(default)]` reads back when it is absent.
pub trait IsDefault {
    /// How [`JsonValue::encode_json`] writes the default: a walk refuses a field written
    /// with it (serde would have left it out, so the bytes would not encode back to themselves).
    const DEFAULT_JSON: &'static [u8];

    /// Whether the value is its type's default (serde leaves the field out).
    fn is_default(&self) -> bool;
}

/// A field-less enum written as its name (serde's `rename_all = "snake_case"`).
pub trait JsonUnitEnum: Sized + Copy + 'static {
    /// Every variant and its name, in declaration order.
    const VARIANTS: &'static [(&'static str, Self)];
}

/// Appends `value` as a JSON object: its fields' leading comma becomes the `{`.
pub fn encode_object<T: JsonFields>(value: &T, out: &mut Vec<u8>) {
    let start = out.len();
    value.encode_fields(out);
    if out.len() == start {
        out.extend_from_slice(b"{}");
    } else {
        out[start] = b'{';
        out.push(b'}');
    }
}

/// Reads a JSON object written by [`encode_object`].
#[inline]
pub fn walk_object<const BUILD: bool, T: JsonFields>(cursor: &mut Cursor<'_>) -> Option<T> {
    cursor.literal(b"{")?;
    let outer = std::mem::replace(&mut cursor.object_opened, true);
    let value = T::walk_fields::<BUILD>(cursor);
    cursor.object_opened = outer;
    let value = value?;
    cursor.literal(b"}")?;
    Some(value)
}

/// Declares a journal record's struct, and derives its [`JsonFields`] and [`JsonValue`] (see
/// the module docs): one list of fields for serde and the fast codec.
macro_rules! journal_struct {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])?
                pub $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                pub $field: $ty,
            )*
        }

        impl $crate::codec::JsonFields for $name {
            const FIELD_NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            fn encode_fields(&self, out: &mut Vec<u8>) {
                $(
                    $crate::codec::journal_struct!(
                        @encode [$($($serde)*)?] self, $field, $ty, out
                    );
                )*
            }

            fn walk_fields<const BUILD: bool>(
                cursor: &mut $crate::codec::Cursor<'_>,
            ) -> Option<Self> {
                $(
                    let $field = $crate::codec::journal_struct!(
                        @walk [$($($serde)*)?] $field, $ty, cursor, BUILD
                    );
                )*
                Some(Self { $($field),* })
            }
        }

        impl $crate::codec::JsonValue for $name {
            fn encode_json(&self, out: &mut Vec<u8>) {
                $crate::codec::encode_object(self, out);
            }

            fn walk_json<const BUILD: bool>(
                cursor: &mut $crate::codec::Cursor<'_>,
            ) -> Option<Self> {
                $crate::codec::walk_object::<BUILD, Self>(cursor)
            }
        }
    };

    // A field serde always writes.
    (@encode [] $self:ident, $field:ident, $ty:ty, $out:ident) => {
        $out.extend_from_slice(concat!(",\"", stringify!($field), "\":").as_bytes());
        <$ty as $crate::codec::JsonValue>::encode_json(&$self.$field, $out);
    };
    (@walk [] $field:ident, $ty:ty, $cursor:ident, $build:ident) => {{
        $cursor.key(concat!(",\"", stringify!($field), "\":").as_bytes())?;
        <$ty as $crate::codec::JsonValue>::walk_json::<$build>($cursor)?
    }};

    // A field serde leaves out when it is its type's default.
    (@encode [default, skip_serializing_if = "IsDefault::is_default"]
        $self:ident, $field:ident, $ty:ty, $out:ident) => {
        if !<$ty as $crate::codec::IsDefault>::is_default(&$self.$field) {
            $crate::codec::journal_struct!(@encode [] $self, $field, $ty, $out);
        }
    };
    (@walk [default, skip_serializing_if = "IsDefault::is_default"]
        $field:ident, $ty:ty, $cursor:ident, $build:ident) => {{
        if $cursor.key(concat!(",\"", stringify!($field), "\":").as_bytes()).is_some() {
            let start = $cursor.pos();
            let value = <$ty as $crate::codec::JsonValue>::walk_json::<$build>($cursor)?;
            if $cursor.since(start) == <$ty as $crate::codec::IsDefault>::DEFAULT_JSON {
                // serde would have left it out: these bytes are not the writer's.
                return None;
            }
            value
        } else {
            <$ty as Default>::default()
        }
    }};

    // A field whose own fields are written inline.
    (@encode [flatten] $self:ident, $field:ident, $ty:ty, $out:ident) => {
        <$ty as $crate::codec::JsonFields>::encode_fields(&$self.$field, $out);
    };
    (@walk [flatten] $field:ident, $ty:ty, $cursor:ident, $build:ident) => {
        <$ty as $crate::codec::JsonFields>::walk_fields::<$build>($cursor)?
    };

    (@encode [$($other:tt)*] $($rest:tt)*) => {
        compile_error!(concat!(
            "a journal record's field takes no #[serde(", stringify!($($other)*), ")]: only ",
            "#[serde(default, skip_serializing_if = \"IsDefault::is_default\")] or ",
            "#[serde(flatten)], which the fast codec knows (see apollo_core::codec)"
        ));
    };
    (@walk [$($other:tt)*] $($rest:tt)*) => {
        compile_error!("a journal record's field takes an attribute the fast codec does not know")
    };
}
pub(crate) use journal_struct;

/// Derives [`JsonUnitEnum`] and [`JsonValue`] for a field-less enum from its variants' names
/// (the match is exhaustive: a new variant does not compile until it is named here).
macro_rules! json_unit_enum {
    ($ty:ident { $($variant:ident = $name:literal),* $(,)? }) => {
        impl JsonUnitEnum for $ty {
            const VARIANTS: &'static [(&'static str, Self)] = &[$(($name, $ty::$variant)),*];
        }

        impl JsonValue for $ty {
            fn encode_json(&self, out: &mut Vec<u8>) {
                let name: &str = match self {
                    $($ty::$variant => $name,)*
                };
                out.push(b'"');
                out.extend_from_slice(name.as_bytes());
                out.push(b'"');
            }

            fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
                cursor.one_of(Self::VARIANTS)
            }
        }
    };
}

json_unit_enum!(InputKind {
    Command = "command",
    Env = "env",
    File = "file",
    Upstream = "upstream",
});
json_unit_enum!(FileSide {
    Inputs = "inputs",
    Outputs = "outputs",
});
json_unit_enum!(AttemptStatus {
    Succeeded = "succeeded",
    Failed = "failed",
    TimedOut = "timed_out",
    Interrupted = "interrupted",
    Skipped = "skipped",
});
json_unit_enum!(Phase {
    Prepare = "prepare",
    Execute = "execute",
    Cleanup = "cleanup",
});
json_unit_enum!(Verdict {
    Succeeded = "succeeded",
    Failed = "failed",
    Rerun = "rerun",
});
json_unit_enum!(RunStatus {
    Succeeded = "succeeded",
    Failed = "failed",
    Interrupted = "interrupted",
});
json_unit_enum!(RunKind {
    Run = "run",
    Reproduction = "reproduction",
});

impl IsDefault for RunKind {
    const DEFAULT_JSON: &'static [u8] = b"\"run\"";

    fn is_default(&self) -> bool {
        self.is_run()
    }
}

/// Derives [`Event::kind`] and the event's codec from one list of its kinds (serde's
/// internally tagged form: `{"kind":"…",…the payload's fields…}`).
macro_rules! json_events {
    ($($variant:ident = $kind:literal),* $(,)?) => {
        impl Event {
            /// Every `kind` tag, in the order of [`Event`]'s variants.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];

            /// The `kind` tag of the event, as written in the journal.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Event::$variant(_) => $kind,)*
                }
            }

            /// Reads `"kind":"…"` and the payload's fields as [`Event::encode_json`] writes
            /// them after its `{`, up to (not including) the closing `}`.
            pub fn walk_tagged<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
                cursor.literal(b"\"kind\":")?;
                let kind = cursor.string()?;
                Some(match cursor.slice(kind) {
                    $(kind if kind == $kind.as_bytes() => {
                        Event::$variant(JsonFields::walk_fields::<BUILD>(cursor)?)
                    })*
                    _ => return None,
                })
            }
        }

        impl JsonValue for Event {
            fn encode_json(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(b"{\"kind\":\"");
                out.extend_from_slice(self.kind().as_bytes());
                out.push(b'"');
                match self {
                    $(Event::$variant(payload) => payload.encode_fields(out),)*
                }
                out.push(b'}');
            }

            fn walk_json<const BUILD: bool>(cursor: &mut Cursor<'_>) -> Option<Self> {
                cursor.literal(b"{")?;
                let event = Event::walk_tagged::<BUILD>(cursor)?;
                cursor.literal(b"}")?;
                Some(event)
            }
        }
    };
}

json_events! {
    RunStarted = "run_started",
    RunResumed = "run_resumed",
    UnitStarted = "unit_started",
    UnitSubmitted = "unit_submitted",
    UnitFinished = "unit_finished",
    UnitSkipped = "unit_skipped",
    UnitMarked = "unit_marked",
    RunFinished = "run_finished",
    UnitFiles = "unit_files",
    RunReproduces = "run_reproduces",
    HookFinished = "hook_finished",
    UnitReused = "unit_reused",
}

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

/// `value` as a JSON string the way serde_json writes one: quoted, `"` and `\` escaped,
/// control characters as `\b \t \n \f \r` or `\u00xx`, everything else as it is.
pub fn push_json_str(value: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = value.as_bytes();
    // Names, run ids and hashes have nothing to escape: one pass over all the bytes, without
    // a branch per byte (it vectorises), then one copy. The loop below was 4% of a no-op run.
    let plain = bytes.iter().fold(true, |plain, &byte| {
        plain & (byte >= 0x20) & (byte != b'"') & (byte != b'\\')
    });
    if plain {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut plain_from = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let short: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[plain_from..at]);
        plain_from = at + 1;
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
    }
    out.extend_from_slice(&bytes[plain_from..]);
    out.push(b'"');
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `word` is zero (exact: no false negatives, no false positives).
#[inline]
fn has_zero_byte(word: u64) -> bool {
    word.wrapping_sub(ONES) & !word & HIGH_BITS != 0
}

/// Whether some byte of `word` (eight bytes of a string) may end it or need checking: a
/// quote, a backslash, a control character, or a non-ASCII byte. Never a false negative.
#[inline]
fn needs_a_look(word: u64) -> bool {
    let non_ascii = word & HIGH_BITS != 0;
    // Some byte below 0x20 (exact for bytes below 0x80, which is all that is left).
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS != 0;
    non_ascii
        || control
        || has_zero_byte(word ^ (ONES * u64::from(b'"')))
        || has_zero_byte(word ^ (ONES * u64::from(b'\\')))
}

/// A position in bytes being walked, and the walk's primitives: each reads one token in the
/// one form serde_json writes it, or returns `None`/`false` having read nothing that matters
/// (a failed walk is abandoned whole).
#[derive(Debug)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Just after an object's `{`: its first member has no leading comma.
    object_opened: bool,
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
    fn text<const BUILD: bool>(&self, content: Range<usize>) -> Option<String> {
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
    fn one_of<T: Copy>(&mut self, names: &[(&str, T)]) -> Option<T> {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::capture::FileEntry;
    use crate::event::{
        HookFinished, InputComponent, InputManifestRef, PhaseRecord, RunFinished, RunReproduces,
        RunResumed, RunStarted, UnitFiles, UnitFinished, UnitMarked, UnitReused, UnitSkipped,
        UnitStarted, UnitSubmitted,
    };
    use crate::testing::every_field_of_every_kind;

    /// The keys of every object in `value` whose value is not `null`.
    fn keys_set(value: &serde_json::Value, keys: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(object) => {
                for (key, value) in object {
                    if !value.is_null() {
                        keys.insert(key.clone());
                    }
                    keys_set(value, keys);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    keys_set(item, keys);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_field_of_every_kind_is_encoded_as_serde_encodes_it_and_walked_back() {
        let mut kinds = BTreeSet::new();
        let mut keys_set_somewhere = BTreeSet::new();
        for event in every_field_of_every_kind() {
            kinds.insert(event.kind());
            let by_serde = serde_json::to_vec(&event).unwrap();
            let mut fast = Vec::new();
            event.encode_json(&mut fast);
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&by_serde)
            );
            let mut cursor = Cursor::new(&fast);
            assert_eq!(Event::walk_json::<true>(&mut cursor).as_ref(), Some(&event));
            assert!(cursor.at_end());
            let mut cursor = Cursor::new(&fast);
            assert!(
                Event::walk_json::<false>(&mut cursor).is_some(),
                "{event:?}"
            );
            assert!(cursor.at_end());
            keys_set(
                &serde_json::from_slice(&by_serde).unwrap(),
                &mut keys_set_somewhere,
            );
        }
        assert_eq!(kinds, Event::KINDS.iter().copied().collect());
        // Every field of every record (and of the structs inside them) was set to something
        // other than `null` in some event, so every field's encoding and walk was compared.
        let declared = [
            RunStarted::FIELD_NAMES,
            RunResumed::FIELD_NAMES,
            UnitStarted::FIELD_NAMES,
            InputComponent::FIELD_NAMES,
            InputManifestRef::FIELD_NAMES,
            UnitSubmitted::FIELD_NAMES,
            UnitFinished::FIELD_NAMES,
            PhaseRecord::FIELD_NAMES,
            UnitSkipped::FIELD_NAMES,
            SkipReason::FIELD_NAMES,
            UnitMarked::FIELD_NAMES,
            RunFinished::FIELD_NAMES,
            UnitFiles::FIELD_NAMES,
            FileEntry::FIELD_NAMES,
            RunReproduces::FIELD_NAMES,
            HookFinished::FIELD_NAMES,
            UnitReused::FIELD_NAMES,
        ];
        for name in declared.into_iter().flatten() {
            assert!(
                keys_set_somewhere.contains(*name),
                "no event of the fixture sets {name}"
            );
        }
    }

    /// Each variant's name, as serde names it.
    fn assert_names<T: JsonUnitEnum + serde::Serialize + JsonValue>() {
        for (name, variant) in T::VARIANTS {
            let by_serde = serde_json::to_string(variant).unwrap();
            assert_eq!(by_serde, format!("\"{name}\""));
            let mut fast = Vec::new();
            variant.encode_json(&mut fast);
            assert_eq!(fast, by_serde.as_bytes());
        }
    }

    #[test]
    fn every_variant_of_every_enum_is_named_as_serde_names_it() {
        assert_names::<InputKind>();
        assert_names::<FileSide>();
        assert_names::<AttemptStatus>();
        assert_names::<Phase>();
        assert_names::<Verdict>();
        assert_names::<RunStatus>();
        assert_names::<RunKind>();
    }

    /// A field written with its default is refused: serde would have left it out.
    fn assert_default_json<T: IsDefault + JsonValue + Default>() {
        let mut written = Vec::new();
        T::default().encode_json(&mut written);
        assert_eq!(written, T::DEFAULT_JSON);
        assert!(T::default().is_default());
    }

    #[test]
    fn the_default_of_each_optional_field_type_is_written_as_it_says() {
        assert_default_json::<Option<String>>();
        assert_default_json::<Option<u32>>();
        assert_default_json::<Vec<InputComponent>>();
        assert_default_json::<BTreeMap<String, serde_json::Value>>();
        assert_default_json::<u32>();
        assert_default_json::<u64>();
        assert_default_json::<RunKind>();
    }

    #[test]
    fn a_word_with_any_byte_that_ends_or_spoils_a_string_needs_a_look() {
        for byte in 0..=u8::MAX {
            let special = byte == b'"' || byte == b'\\' || !(0x20..0x80).contains(&byte);
            for position in 0..8 {
                let mut word = *b"0123abcd";
                word[position] = byte;
                let flagged = needs_a_look(u64::from_le_bytes(word));
                assert!(flagged || !special, "{byte:#04x} at {position}");
                if !special {
                    assert!(!flagged, "{byte:#04x} at {position}: a needless look");
                }
            }
        }
    }
}
