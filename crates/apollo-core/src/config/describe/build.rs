//! The constructors of the format's tables.

use super::{Key, Shape};

pub(super) const fn key(name: &'static str, shape: Shape, doc: &'static str) -> Key {
    Key {
        name,
        shape,
        required: false,
        doc,
    }
}

pub(super) const fn required(name: &'static str, shape: Shape, doc: &'static str) -> Key {
    Key {
        name,
        shape,
        required: true,
        doc,
    }
}

/// The names of `keys`, for the walk's "unknown key" checks.
pub(crate) const fn names<const N: usize>(keys: &[Key; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut index = 0;
    while index < N {
        names[index] = keys[index].name;
        index += 1;
    }
    names
}
