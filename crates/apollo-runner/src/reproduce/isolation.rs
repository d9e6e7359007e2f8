//! The seam through which the caller keeps a reproduced unit's writes out of the real project
//! (issue 36, item 13). apollo-runner spawns nothing and enters no namespace itself: the
//! `apollo` binary passes apollo-exec's `PrivateMounts`, entered before it started a thread.

use std::path::Path;

/// Makes the project read-only for the reproduction's unit.
pub trait Isolation {
    /// Makes `project` read-only for this process and the units it runs from now on, except
    /// each of `writable` that lies under it (the scratch directory, the state directory).
    ///
    /// # Errors
    ///
    /// Why it could not: the reproduction then runs with the project writable, and
    /// [`Reproduction::not_isolated`](super::Reproduction::not_isolated) says why.
    fn read_only(&self, project: &Path, writable: &[&Path]) -> Result<(), String>;
}

/// No isolation: what [`reproduce`](super::reproduce) runs with.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoIsolation;

impl Isolation for NoIsolation {
    fn read_only(&self, _project: &Path, _writable: &[&Path]) -> Result<(), String> {
        Err("the program that ran it offered no isolation".to_owned())
    }
}
