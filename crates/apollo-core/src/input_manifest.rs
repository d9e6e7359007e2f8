//! Input manifests: a unit's input components kept outside the journal.
//!
//! A record is at most [`MAX_RECORD_BYTES`]. A unit whose input list would make its
//! `unit_started` larger (an input glob matching 100,000 files) keeps the list in a manifest
//! instead, and the record carries only the manifest's SHA-256 and the number of components
//! ([`InputManifestRef`]). The journal stores the manifest durably before the record that
//! names it ([`Journal::store_input_manifest`](crate::Journal::store_input_manifest)); apollo-store
//! keeps it as `runs/<run-id>/manifests/<sha256>.json`.
//!
//! A manifest is the JSON object `{"inputs":[…]}`, each component in the shape the record's
//! `inputs` has. Its name is the SHA-256 of its bytes, so a reader checks what it reads
//! ([`decode`]): a manifest never lies about its content.

use std::io::{self, Write};

use crate::capture::FileEntry;
use crate::event::{Event, InputComponent, InputManifestRef, UnitFiles, UnitStarted};
use crate::hash::sha256_hex;
use crate::journal::MAX_RECORD_BYTES;

/// A manifest ready to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedManifest {
    /// What the record carries in its place.
    pub reference: InputManifestRef,
    /// The manifest's bytes.
    pub bytes: Vec<u8>,
}

/// A manifest that cannot be encoded or read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The components could not be serialized.
    #[error("cannot encode an input manifest of {count} components: {message}")]
    Encode {
        /// How many components.
        count: usize,
        /// serde_json's message.
        message: String,
    },
    /// A manifest's name is not a SHA-256 in hex (a damaged record): it names no file.
    #[error("input manifest name {name:?} is not a SHA-256")]
    BadName {
        /// The name as recorded.
        name: String,
    },
    /// The bytes read do not hash to the manifest's name.
    #[error("input manifest {expected} is damaged: its content hashes to {actual}")]
    HashMismatch {
        /// The name (the hash recorded).
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// The bytes hash right but do not decode, or hold another number of components than
    /// the record says.
    #[error("input manifest {sha256} does not decode: {message}")]
    Decode {
        /// The manifest.
        sha256: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(serde::Serialize)]
struct ManifestOut<'a> {
    inputs: &'a [InputComponent],
    /// A file manifest (format 1.3): `{"inputs":[],"files":[…]}`.
    #[serde(skip_serializing_if = "<[FileEntry]>::is_empty")]
    files: &'a [FileEntry],
}

#[derive(serde::Deserialize)]
struct ManifestIn {
    inputs: Vec<InputComponent>,
    #[serde(default)]
    files: Vec<FileEntry>,
}

/// The manifest of `inputs`.
pub fn encode(inputs: &[InputComponent]) -> Result<EncodedManifest, ManifestError> {
    let bytes = serde_json::to_vec(&ManifestOut { inputs, files: &[] }).map_err(|error| {
        ManifestError::Encode {
            count: inputs.len(),
            message: error.to_string(),
        }
    })?;
    Ok(EncodedManifest {
        reference: InputManifestRef {
            sha256: sha256_hex(&bytes),
            count: inputs.len() as u64,
        },
        bytes,
    })
}

/// The file manifest of `files` (a `unit_files` record's list, format 1.3): its reference's
/// `count` is the number of files.
pub fn encode_files(files: &[FileEntry]) -> Result<EncodedManifest, ManifestError> {
    let bytes = serde_json::to_vec(&ManifestOut { inputs: &[], files }).map_err(|error| {
        ManifestError::Encode {
            count: files.len(),
            message: error.to_string(),
        }
    })?;
    Ok(EncodedManifest {
        reference: InputManifestRef {
            sha256: sha256_hex(&bytes),
            count: files.len() as u64,
        },
        bytes,
    })
}

/// The files of the file manifest `reference` names, from its `bytes`: checked against its
/// hash and its count.
pub fn decode_files(
    reference: &InputManifestRef,
    bytes: &[u8],
) -> Result<Vec<FileEntry>, ManifestError> {
    let manifest = decode_checked(reference, bytes)?;
    if manifest.files.len() as u64 != reference.count {
        return Err(ManifestError::Decode {
            sha256: reference.sha256.clone(),
            message: format!(
                "it holds {} files, its record says {}",
                manifest.files.len(),
                reference.count
            ),
        });
    }
    Ok(manifest.files)
}

/// Whether `files` fits in a record of at most [`MAX_RECORD_BYTES`] as it is; measured only
/// when its strings could add up to half the bound.
pub fn files_fit_in_record(files: &UnitFiles) -> bool {
    const ENTRY_OVERHEAD: usize = 128;
    const RECORD_OVERHEAD: usize = 256;
    let worst_case = RECORD_OVERHEAD
        + 6 * files.unit.len()
        + (files.files.iter())
            .map(|entry| {
                ENTRY_OVERHEAD
                    + 6 * (entry.path.len()
                        + entry.sha256.len()
                        + entry.not_captured.as_ref().map_or(0, String::len))
            })
            .sum::<usize>();
    worst_case <= MAX_RECORD_BYTES / 2
        || encoded_len(&Event::UnitFiles(files.clone()))
            .is_some_and(|len| len + RECORD_OVERHEAD <= MAX_RECORD_BYTES)
}

fn decode_checked(reference: &InputManifestRef, bytes: &[u8]) -> Result<ManifestIn, ManifestError> {
    check_name(&reference.sha256)?;
    let actual = sha256_hex(bytes);
    if actual != reference.sha256 {
        return Err(ManifestError::HashMismatch {
            expected: reference.sha256.clone(),
            actual,
        });
    }
    serde_json::from_slice(bytes).map_err(|error| ManifestError::Decode {
        sha256: reference.sha256.clone(),
        message: error.to_string(),
    })
}

/// The components of the manifest `reference` names, from its `bytes`: checked against its
/// hash and its count.
pub fn decode(
    reference: &InputManifestRef,
    bytes: &[u8],
) -> Result<Vec<InputComponent>, ManifestError> {
    let manifest = decode_checked(reference, bytes)?;
    if manifest.inputs.len() as u64 != reference.count {
        return Err(ManifestError::Decode {
            sha256: reference.sha256.clone(),
            message: format!(
                "it holds {} components, its record says {}",
                manifest.inputs.len(),
                reference.count
            ),
        });
    }
    Ok(manifest.inputs)
}

/// The file name of manifest `sha256` in the run's `manifests/` folder, once the name is
/// known to be a SHA-256 in lowercase hex (so a damaged record cannot name `../x`).
pub fn file_name(sha256: &str) -> Result<String, ManifestError> {
    check_name(sha256)?;
    Ok(format!("{sha256}.json"))
}

fn check_name(sha256: &str) -> Result<(), ManifestError> {
    let is_hex = sha256.len() == 64
        && sha256
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
    if is_hex {
        Ok(())
    } else {
        Err(ManifestError::BadName {
            name: sha256.to_owned(),
        })
    }
}

/// Whether `started` fits in a record of at most [`MAX_RECORD_BYTES`] as it is. Cheap for the
/// usual record: only one whose strings could add up to half the bound is serialized to
/// measure it.
pub fn fits_in_record(started: &UnitStarted) -> bool {
    // JSON escapes a byte in at most 6 (`\u00XX`); each component adds its keys and kind.
    const COMPONENT_OVERHEAD: usize = 64;
    const RECORD_OVERHEAD: usize = 256;
    let worst_case = RECORD_OVERHEAD
        + 6 * (started.unit.len() + started.input_hash.len())
        + (started.inputs.iter())
            .map(|component| COMPONENT_OVERHEAD + 6 * (component.name.len() + component.hash.len()))
            .sum::<usize>();
    worst_case <= MAX_RECORD_BYTES / 2
        || encoded_len(&Event::UnitStarted(started.clone())).is_some_and(|len| {
            // Room for the `seq` and `ts` the store adds.
            len + RECORD_OVERHEAD <= MAX_RECORD_BYTES
        })
}

/// The length of `event`'s JSON, without building it; `None` when it does not serialize.
pub fn encoded_len(event: &Event) -> Option<usize> {
    struct Counter(usize);
    impl Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, event).ok()?;
    Some(counter.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::InputKind;

    fn components(n: usize) -> Vec<InputComponent> {
        (0..n)
            .map(|i| InputComponent {
                kind: InputKind::File,
                name: format!("data/part-{i:06}.csv"),
                hash: sha256_hex(i.to_string().as_bytes()),
            })
            .collect()
    }

    fn started(inputs: Vec<InputComponent>) -> UnitStarted {
        UnitStarted {
            unit: "load".into(),
            attempt: 1,
            input_hash: crate::hash::combine_components(&inputs),
            inputs,
            inputs_manifest: None,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_is_named_by_its_hash() {
        let inputs = components(3);
        let manifest = encode(&inputs).unwrap();
        assert_eq!(manifest.reference.sha256, sha256_hex(&manifest.bytes));
        assert_eq!(manifest.reference.count, 3);
        assert_eq!(
            decode(&manifest.reference, &manifest.bytes).unwrap(),
            inputs
        );
        assert_eq!(
            file_name(&manifest.reference.sha256).unwrap(),
            format!("{}.json", manifest.reference.sha256)
        );
    }

    #[test]
    fn a_damaged_or_misnamed_manifest_is_an_error_not_a_panic() {
        let manifest = encode(&components(2)).unwrap();
        let mut damaged = manifest.bytes.clone();
        damaged[5] ^= 1;
        assert!(matches!(
            decode(&manifest.reference, &damaged),
            Err(ManifestError::HashMismatch { .. })
        ));
        let mut wrong_count = manifest.reference.clone();
        wrong_count.count = 5;
        let error = decode(&wrong_count, &manifest.bytes).unwrap_err();
        assert!(error.to_string().contains("its record says 5"), "{error}");
        for name in ["../../etc/passwd", "", &"A".repeat(64)] {
            assert!(matches!(
                file_name(name),
                Err(ManifestError::BadName { .. })
            ));
        }
        let not_json = b"not json";
        let reference = InputManifestRef {
            sha256: sha256_hex(not_json),
            count: 0,
        };
        assert!(matches!(
            decode(&reference, not_json),
            Err(ManifestError::Decode { .. })
        ));
    }

    #[test]
    fn fits_in_record_measures_the_record_at_the_bound() {
        assert!(fits_in_record(&started(components(10))));
        // Each component is about 120 bytes of JSON: 8,000 of them stay under 1 MiB, 10,000
        // do not.
        let below = started(components(8_000));
        let len = encoded_len(&Event::UnitStarted(below.clone())).unwrap();
        assert!(len < MAX_RECORD_BYTES - 256, "{len}");
        assert!(fits_in_record(&below));
        let above = started(components(10_000));
        assert!(encoded_len(&Event::UnitStarted(above.clone())).unwrap() > MAX_RECORD_BYTES);
        assert!(!fits_in_record(&above));
    }
}
