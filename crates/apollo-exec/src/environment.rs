//! Apollo's own environment, captured once per executor, which every child's environment is
//! built on.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Apollo's environment, as `KEY=VALUE` C strings ready for a child's `envp`.
#[derive(Debug)]
pub(crate) struct Environment {
    /// `(KEY, "KEY=VALUE")`.
    pub(crate) entries: Vec<(OsString, CString)>,
}

impl Environment {
    /// The current process environment. (A variable whose name or value holds a NUL byte
    /// cannot be passed on and is left out, as the C library would never have produced it.)
    pub(crate) fn capture() -> Environment {
        let entries = std::env::vars_os()
            .filter_map(|(key, value)| {
                let mut entry = key.clone().into_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                CString::new(entry).ok().map(|entry| (key, entry))
            })
            .collect();
        Environment { entries }
    }

    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: &str) -> Option<&OsStr> {
        self.entries.iter().find_map(|(name, entry)| {
            (name.as_bytes() == key.as_bytes())
                .then(|| OsStr::from_bytes(&entry.as_bytes()[key.len() + 1..]))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_lookup_reads_the_value_after_the_first_equals_sign() {
        let environment = Environment {
            entries: vec![(OsString::from("A"), CString::new("A=b=c").unwrap())],
        };
        assert_eq!(environment.get("A"), Some(OsStr::new("b=c")));
        assert_eq!(environment.get("B"), None);
    }
}
