//! A pipeline's stable identity in its state directory (DESIGN §17 "Pipeline identity").

use std::path::{Component, Path, PathBuf};

use apollo_core::Loaded;

/// The identity of the pipeline `loaded`, read from `config_path`, in the state directory
/// `state_dir`: `id:<id>` when the config sets `id:`, else `<name>@<path>`, the path being the
/// config file's path relative to the state directory (`../pipeline.yaml`), so that a project
/// moved together with its state directory keeps its identity, and two config files sharing a
/// state directory never share one, whatever their names.
///
/// Recorded in `run_started`; a run recorded without one (journal format 1.0 and 1.1) is
/// identified by its pipeline name alone.
pub fn pipeline_identity(state_dir: &Path, config_path: &Path, loaded: &Loaded) -> String {
    if let Some(id) = &loaded.id {
        return format!("id:{id}");
    }
    let relative = relative_path(&resolved(state_dir), &resolved(config_path));
    let relative: Vec<String> = relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy().into_owned())
        .collect();
    format!("{}@{}", loaded.pipeline.name, relative.join("/"))
}

/// `path` with symbolic links and `..` resolved when it exists, else made absolute.
fn resolved(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let mut normal = PathBuf::new();
        for component in absolute.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    normal.pop();
                }
                other => normal.push(other),
            }
        }
        normal
    })
}

/// `to` relative to the folder `from` (both absolute and normalized).
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..from.len() {
        relative.push("..");
    }
    for component in &to[common..] {
        relative.push(component);
    }
    relative
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_out_of_the_state_directory() {
        assert_eq!(
            relative_path(Path::new("/p/.apollo"), Path::new("/p/pipeline.yaml")),
            Path::new("../pipeline.yaml")
        );
        assert_eq!(
            relative_path(Path::new("/p/.apollo"), Path::new("/p/a/pipeline.yaml")),
            Path::new("../a/pipeline.yaml")
        );
        assert_eq!(
            relative_path(Path::new("/s"), Path::new("/p/x.yaml")),
            Path::new("../p/x.yaml")
        );
    }
}
