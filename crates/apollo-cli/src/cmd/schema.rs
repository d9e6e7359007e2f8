//! `apollo schema`: print the JSON Schema of pipeline files (generated from the loader's own
//! description of the format, `apollo_core::config::json_schema`), for editors and tools.

use std::io::Write;

use crate::error::{CliError, output};
use crate::exit::Exit;

/// Arguments of `apollo schema`.
#[derive(Debug, clap::Args)]
#[command(
    after_long_help = "The repository keeps a copy as schema/pipeline.schema.json. For completion and checks in VS Code (YAML extension) or any editor using yaml-language-server, start a pipeline file with:\n  # yaml-language-server: $schema=path/to/pipeline.schema.json"
)]
pub(crate) struct SchemaArgs {}

/// Writes the schema, pretty-printed, to `stdout`.
pub(crate) fn run(_args: &SchemaArgs, stdout: &mut dyn Write) -> Result<Exit, CliError> {
    let schema = apollo_core::config::json_schema();
    let text = serde_json::to_string_pretty(&schema).map_err(|error| output(error.into()))?;
    writeln!(stdout, "{text}").map_err(output)?;
    stdout.flush().map_err(output)?;
    Ok(Exit::Success)
}
