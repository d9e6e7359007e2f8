//! `apollo graph [CONFIG] --format dot|mermaid`: print the dependency graph.

use std::fmt::Write as _;
use std::io::Write;

use apollo_core::{Pipeline, config};

use super::ConfigArg;
use crate::error::{CliError, output};
use crate::exit::Exit;

/// Graph output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    /// Graphviz: `apollo graph | dot -Tsvg > graph.svg`
    Dot,
    /// Mermaid flowchart, for Markdown that renders it (GitHub, GitLab)
    Mermaid,
}

/// Arguments of `apollo graph`.
#[derive(Debug, clap::Args)]
pub(crate) struct GraphArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArg,
    /// Output format
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub(crate) format: GraphFormat,
}

/// Prints the graph of a valid config; an invalid one is reported like `check` does (exit 2).
pub(crate) fn run(
    args: &GraphArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<Exit, CliError> {
    let path = args.config.resolve()?;
    let loaded = config::load(&path)?;
    let _ = stderr.write_all(apollo_core::diagnostic::render_all(&loaded.warnings).as_bytes());
    let text = match args.format {
        GraphFormat::Dot => dot(&loaded.pipeline),
        GraphFormat::Mermaid => mermaid(&loaded.pipeline),
    };
    stdout.write_all(text.as_bytes()).map_err(output)?;
    stdout.flush().map_err(output)?;
    Ok(Exit::Success)
}

/// Graphviz dot: an edge points from a dependency to the unit that needs it (the data flow).
pub(crate) fn dot(pipeline: &Pipeline) -> String {
    let mut text = format!(
        "digraph {} {{\n  rankdir=LR;\n  node [shape=box];\n",
        dot_quote(&pipeline.name)
    );
    for unit in &pipeline.units {
        let _ = writeln!(text, "  {};", dot_quote(&unit.name));
    }
    for unit in &pipeline.units {
        for dep in &unit.deps {
            let _ = writeln!(text, "  {} -> {};", dot_quote(dep), dot_quote(&unit.name));
        }
    }
    text.push_str("}\n");
    text
}

fn dot_quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A Mermaid flowchart. Nodes get positional ids (`n0`, `n1`, …) because Mermaid ids cannot
/// hold every character a unit name may (`.`, `-`); the name is the label.
pub(crate) fn mermaid(pipeline: &Pipeline) -> String {
    let mut text = String::from("flowchart LR\n");
    for (unit_idx, unit) in pipeline.units.iter().enumerate() {
        let _ = writeln!(text, "  n{unit_idx}[\"{}\"]", unit.name);
    }
    let dag = super::dag_of(pipeline);
    for unit_idx in 0..pipeline.units.len() {
        for &dep_idx in dag.deps(unit_idx) {
            let _ = writeln!(text, "  n{dep_idx} --> n{unit_idx}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn pipeline() -> Pipeline {
        let yaml = "name: etl\nunits:\n  - name: fetch\n    execute: f\n  - name: clean.v2\n    deps: [fetch]\n    execute: c\n  - name: save\n    deps: [clean.v2, fetch]\n    execute: s\n";
        config::load_str(yaml, Path::new("/p/etl.yaml"))
            .unwrap()
            .pipeline
    }

    #[test]
    fn dot_edges_follow_the_data_flow() {
        insta::assert_snapshot!(dot(&pipeline()));
    }

    #[test]
    fn mermaid_uses_positional_ids_and_name_labels() {
        insta::assert_snapshot!(mermaid(&pipeline()));
    }
}
