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

use crate::event::{AttemptStatus, Event, FileSide, InputKind, RunKind, RunStatus, Verdict};
use crate::journal::Durability;
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

    // The same, read also under an older key (serde's `alias`): the fast walk takes only the
    // key written today, an older record goes the general way.
    (@encode [default, skip_serializing_if = "IsDefault::is_default", alias = $alias:literal]
        $self:ident, $field:ident, $ty:ty, $out:ident) => {
        $crate::codec::journal_struct!(
            @encode [default, skip_serializing_if = "IsDefault::is_default"] $self, $field, $ty, $out
        );
    };
    (@walk [default, skip_serializing_if = "IsDefault::is_default", alias = $alias:literal]
        $field:ident, $ty:ty, $cursor:ident, $build:ident) => {
        $crate::codec::journal_struct!(
            @walk [default, skip_serializing_if = "IsDefault::is_default"] $field, $ty, $cursor, $build
        )
    };

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
    When = "when",
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
    Bisect = "bisect",
});

json_unit_enum!(Durability {
    Fsync = "fsync",
    Batched = "batched",
    None = "none",
});

impl IsDefault for Durability {
    const DEFAULT_JSON: &'static [u8] = b"\"fsync\"";

    fn is_default(&self) -> bool {
        self.is_fsync()
    }
}

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
    RunLate = "run_late",
    ReproductionCompared = "reproduction_compared",
}

/// `value` as a JSON string the way serde_json writes one: quoted, `"` and `\` escaped,
/// control characters as `\b \t \n \f \r` or `\u00xx`, everything else as it is.
pub fn push_json_str(value: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = value.as_bytes();
    // Names, run ids and hashes have nothing to escape: one pass over all the bytes, without
    // a branch per byte (it vectorises), then one copy; the escaping loop below is the slow
    // path.
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

mod cursor;
mod values;

pub use cursor::Cursor;

#[cfg(test)]
mod tests;
