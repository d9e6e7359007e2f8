//! The error renderers return.

use std::io;

/// Why rendering a run's records failed: reading them, or writing the output.
///
/// `E` is the record source's error (apollo-store's reader error for a real journal). The two
/// cases are kept apart because callers treat them differently: a journal error is a
/// corruption or I/O problem to report, while a write error is often just a closed pipe
/// (`apollo replay | head`), which is not a failure at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError<E> {
    /// Reading the next record failed.
    #[error("failed to read the run's records")]
    Read(#[source] E),
    /// Writing the rendered output failed.
    #[error("failed to write the replay output")]
    Write(#[source] io::Error),
}

impl<E> ReplayError<E> {
    /// Whether the output's reader went away (`apollo replay | head`): not a real failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, ReplayError::Write(error) if error.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl<E> From<io::Error> for ReplayError<E> {
    fn from(error: io::Error) -> Self {
        ReplayError::Write(error)
    }
}
