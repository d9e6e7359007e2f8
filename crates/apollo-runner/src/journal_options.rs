//! The journal writer's options a pipeline's config asks for.

use apollo_store::WriterOptions;

/// The journal's options a pipeline asks for: its `durability:` (default `fsync`),
/// `sync_interval:` (default [`apollo_store::DEFAULT_SYNC_INTERVAL`]) and
/// `journal_segment_size:` (default [`apollo_core::journal::DEFAULT_SEGMENT_SIZE`]).
pub fn pipeline_writer_options(pipeline: &apollo_core::Pipeline) -> WriterOptions {
    WriterOptions::default()
        .durability(pipeline.durability.unwrap_or_default())
        .segment_max_bytes(
            pipeline
                .journal_segment_size
                .unwrap_or(apollo_core::journal::DEFAULT_SEGMENT_SIZE),
        )
        .sync_interval(
            pipeline
                .sync_interval
                .unwrap_or(apollo_store::DEFAULT_SYNC_INTERVAL),
        )
}
