//! Content apollo makes (a run's definition snapshot) stored as a blob, through the same
//! writer as captured files ([`Pending`]): one way into the store, one temporary folder
//! (`blobs/tmp/`, swept under the state directory's lock), one rule for modes.

use std::io::{self, Write};

use apollo_core::capture::PendingBlob;
use apollo_core::hash::sha256_of_written;

use super::{BlobStore, Pending, check_name};
use crate::error::StoreError;

impl BlobStore {
    /// Stores what `write` writes under its SHA-256 (hex), which it returns. When `known`
    /// names a blob the store has, nothing is written (the blob is trusted to hold the
    /// content); otherwise the content is written once, hashed on the way (in memory while
    /// small, else into `blobs/tmp/`), and stored under the hash it has — whatever `known`
    /// said. Storing the same content again keeps the one blob. Its mode is that of a file
    /// apollo makes in the state directory, read-only.
    pub fn put_written(
        &self,
        known: Option<&str>,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<String, StoreError> {
        if let Some(known) = known
            && check_name(known).is_ok()
            && self.contains(known)
        {
            return Ok(known.to_owned());
        }
        let temp_path = self.root.join("tmp");
        let mode = self.folder("sha256")?.sharing().file_mode();
        let mut pending = self.begin_made(mode);
        let sha256 = sha256_of_written(Sink(&mut pending), write).map_err(|source| {
            StoreError::io(
                "write a blob in",
                &temp_path,
                crate::safe_dir::explain_efbig(source),
            )
        })?;
        Box::new(pending).commit(&sha256).map_err(|source| {
            let source = crate::safe_dir::explain_efbig(source);
            StoreError::io("store a blob in", &self.root, source)
        })?;
        Ok(sha256)
    }
}

impl BlobStore {
    /// A blob apollo makes, of mode `mode` before it is made read-only (see
    /// [`Sharing::blob_mode`](apollo_core::sharing::Sharing::blob_mode)).
    fn begin_made(&self, mode: u32) -> Pending {
        Pending {
            source_mode: mode,
            store: self.clone(),
            temp: None,
            temp_path: (self.root.join("tmp"))
                .join(format!("made-{}", crate::fsutil::random_hex(8))),
            tmp_dir: None,
            buffer: Vec::new(),
            copy: None,
        }
    }
}

/// The pending blob as an [`io::Write`].
struct Sink<'a>(&'a mut Pending);

impl Write for Sink<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
