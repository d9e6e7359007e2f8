//! The definition snapshot: the resolved pipeline a run keeps in the blob store (`run_started`
//! records its hash; `apollo show --definition` prints it).

/// The definition snapshot of `pipeline`, in memory (tests compare with it).
#[cfg(test)]
pub(crate) fn definition_snapshot(pipeline: &apollo_core::Pipeline) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec_pretty(pipeline)
}

/// Writes the definition snapshot of `pipeline` to `out`, a piece at a time: its
/// pretty-printed JSON, which a run keeps in the blob store (`run_started` records its hash)
/// and `apollo show --definition` prints.
pub(crate) fn write_definition_snapshot(
    pipeline: &apollo_core::Pipeline,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    serde_json::to_writer_pretty(out, pipeline).map_err(std::io::Error::from)
}

/// The hash of the definition snapshot of `pipeline` (what its blob is named), made
/// without holding the snapshot in memory.
pub(crate) fn definition_snapshot_hash(
    pipeline: &apollo_core::Pipeline,
) -> std::io::Result<String> {
    apollo_core::hash::sha256_of_written(std::io::sink(), |out| {
        write_definition_snapshot(pipeline, out)
    })
}
