//! A run's input manifests: `runs/<run-id>/manifests/<sha256>.json`, the input lists too large
//! for a journal record (see [`apollo_core::input_manifest`]).
//!
//! One small function writes and one reads, so the blob store can take their place later.
//! A manifest is written under a temporary name, fsynced, renamed to its hash, and its folder
//! fsynced: once [`write_input_manifest`] returns, the file is durable and its name never lies
//! (the reader checks the hash too).

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use apollo_core::capture::FileEntry;
use apollo_core::event::{InputComponent, InputManifestRef};
use apollo_core::input_manifest;

use crate::error::StoreError;
use rustix::fs::FileType;

use crate::safe_dir::Dir;
use crate::writer::Durability;

/// The folder of a run's input manifests, under the run's folder.
pub const MANIFESTS_DIR: &str = "manifests";

/// The largest manifest read (as the largest index file, `index_file`): about eight million
/// files. A bigger file is taken for damage (a sparse file of a terabyte, say), refused before
/// a buffer of its size is asked for, which would abort the process. Writing one is not
/// refused: a unit's files are recorded whatever their number.
const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// The file of manifest `sha256` of the run in `run_dir`; an error when the name is not a
/// SHA-256 (a damaged record must not name a path outside the folder).
pub fn input_manifest_path(run_dir: &Path, sha256: &str) -> Result<PathBuf, StoreError> {
    let file_name = input_manifest::file_name(sha256)
        .map_err(|error| StoreError::invalid(error.to_string()))?;
    Ok(run_dir.join(MANIFESTS_DIR).join(file_name))
}

/// Stores `bytes`, whose SHA-256 is `sha256`, as a manifest of the run in `run_dir`: temp
/// file, write, fsync, rename, fsync the folder (no fsync under [`Durability::None`]). A
/// manifest already there (the same name is the same content) is kept.
pub(crate) fn write_input_manifest(
    run_dir: &Path,
    sha256: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), StoreError> {
    let file_name = input_manifest::file_name(sha256)
        .map_err(|error| StoreError::invalid(error.to_string()))?;
    let durable = durability.syncs();
    // Under the run folder's descriptor, never through a symbolic link (see `safe_dir`): a
    // planted `manifests` link or file is refused, and the rename replaces a link at the
    // manifest's name rather than writing through it.
    let dir = Dir::open(run_dir)?.create_subdir(MANIFESTS_DIR, durable)?;
    if dir.entry_type(&file_name)? == Some(FileType::RegularFile)
        && fs::symlink_metadata(dir.path().join(&file_name))
            .is_ok_and(|meta| meta.len() == bytes.len() as u64)
    {
        // The same name is the same content.
        return Ok(());
    }
    dir.write_file_atomic(&file_name, bytes, durable)
}

/// The components of the manifest `reference` names, read from the run in `run_dir` and
/// checked against its hash and count. A missing file is [`StoreError::NotFound`]; one that is
/// not a regular file, or whose content does not match its name, is
/// [`StoreError::Corruption`].
pub fn read_input_manifest(
    run_dir: &Path,
    reference: &InputManifestRef,
) -> Result<Vec<InputComponent>, StoreError> {
    read_manifest(run_dir, reference, "components", input_manifest::decode)
}

/// The files of the file manifest `reference` names (a `unit_files` record's list kept
/// outside the journal, format 1.3), read from the run in `run_dir` and checked like
/// [`read_input_manifest`].
pub fn read_files_manifest(
    run_dir: &Path,
    reference: &InputManifestRef,
) -> Result<Vec<FileEntry>, StoreError> {
    read_manifest(run_dir, reference, "files", input_manifest::decode_files)
}

fn read_manifest<T>(
    run_dir: &Path,
    reference: &InputManifestRef,
    what: &str,
    decode: impl FnOnce(&InputManifestRef, &[u8]) -> Result<Vec<T>, input_manifest::ManifestError>,
) -> Result<Vec<T>, StoreError> {
    let path = input_manifest_path(run_dir, &reference.sha256)?;
    let corrupt = |what: String| StoreError::Corruption {
        path: path.clone(),
        offset: 0,
        seq: None,
        what,
    };
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound {
                what: format!(
                    "input manifest {} ({} {what}; no file {})",
                    reference.sha256,
                    reference.count,
                    path.display()
                ),
            });
        }
        Err(source) => return Err(StoreError::io("stat", &path, source)),
    };
    // Never open a FIFO or a device: reading it could block or never end.
    if !meta.is_file() {
        return Err(corrupt(
            "the input manifest is not a regular file".to_owned(),
        ));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(corrupt(format!(
            "the input manifest is {} bytes, larger than the {MAX_MANIFEST_BYTES} bytes a manifest may be",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Bounded again while reading: the file may have grown since its size was looked at.
    File::open(&path)
        .and_then(|file| file.take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes))
        .map_err(|source| StoreError::io("read", &path, source))?;
    decode(reference, &bytes).map_err(|error| corrupt(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo_core::event::InputKind;

    fn components(n: usize) -> Vec<InputComponent> {
        (0..n)
            .map(|i| InputComponent {
                kind: InputKind::File,
                name: format!("f{i}"),
                hash: apollo_core::hash::sha256_hex(&[i as u8]),
            })
            .collect()
    }

    #[test]
    fn a_manifest_is_written_once_and_read_back_checked() {
        let run_dir = tempfile::tempdir().unwrap();
        let manifest = input_manifest::encode(&components(3)).unwrap();
        let sha = &manifest.reference.sha256;
        for _ in 0..2 {
            write_input_manifest(run_dir.path(), sha, &manifest.bytes, Durability::Fsync).unwrap();
        }
        let names: Vec<_> = fs::read_dir(run_dir.path().join(MANIFESTS_DIR))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, [format!("{sha}.json")], "no temp file left behind");
        assert_eq!(
            read_input_manifest(run_dir.path(), &manifest.reference).unwrap(),
            components(3)
        );
    }

    #[test]
    fn a_missing_damaged_or_strange_manifest_is_a_clear_error() {
        let run_dir = tempfile::tempdir().unwrap();
        let manifest = input_manifest::encode(&components(2)).unwrap();
        let error = read_input_manifest(run_dir.path(), &manifest.reference).unwrap_err();
        assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
        assert!(
            error.to_string().contains("2 components; no file"),
            "{error}"
        );

        let path = input_manifest_path(run_dir.path(), &manifest.reference.sha256).unwrap();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"{\"inputs\":[]}").unwrap();
        let error = read_input_manifest(run_dir.path(), &manifest.reference).unwrap_err();
        assert!(error.to_string().contains("is damaged"), "{error}");

        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        let error = read_input_manifest(run_dir.path(), &manifest.reference).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");

        let bad = InputManifestRef {
            sha256: "../../../etc/passwd".into(),
            count: 1,
        };
        assert!(read_input_manifest(run_dir.path(), &bad).is_err());
    }

    #[test]
    fn a_huge_sparse_manifest_is_a_clear_error_not_an_allocation_abort() {
        let run_dir = tempfile::tempdir().unwrap();
        let manifest = input_manifest::encode(&components(2)).unwrap();
        let path = input_manifest_path(run_dir.path(), &manifest.reference.sha256).unwrap();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        // 1 TiB that takes no disk: reserving a buffer of its size aborts the process.
        File::create(&path).unwrap().set_len(1 << 40).unwrap();
        let error = read_input_manifest(run_dir.path(), &manifest.reference).unwrap_err();
        assert!(matches!(error, StoreError::Corruption { .. }), "{error}");
        let message = error.to_string();
        assert!(
            message.contains(&path.display().to_string()) && message.contains("larger than"),
            "{message}"
        );
    }
}
