//! A pipeline's stable identity in its state directory (DESIGN §17 "Pipeline identity"), and
//! whether the apollo that last recorded a run's start or resume is still running it.

use std::os::unix::fs::MetadataExt;
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

/// This machine's name, recorded in `run_started`/`run_resumed`.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Whether `pid` (on this host) is another live apollo that may have written a record at
/// `recorded_at` (Unix seconds): a process other than this one, not a zombie, whose executable
/// is this process's executable or whose command name is `apollo`, and that did not start
/// after that record was written (then the pid was reused, by a later apollo).
pub(crate) fn is_live_apollo(pid: u32, recorded_at: i64) -> bool {
    if pid == std::process::id() || pid == 0 {
        return false;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // `pid (comm) S …`: the state follows the last `)` (a command name may hold one).
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if matches!(state, None | Some('Z' | 'X' | 'x')) {
        return false;
    }
    // Field 22, the start time in clock ticks after boot (USER_HZ, 100 on Linux).
    let started = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|ticks| ticks.parse::<i64>().ok());
    if let (Some(ticks), Some(boot)) = (started, boot_time())
        && boot + ticks / 100 > recorded_at + 2
    {
        return false;
    }
    let same_executable = match (
        std::fs::metadata(proc_dir.join("exe")),
        std::fs::metadata("/proc/self/exe"),
    ) {
        (Ok(theirs), Ok(ours)) => theirs.dev() == ours.dev() && theirs.ino() == ours.ino(),
        _ => false,
    };
    same_executable
        || std::fs::read_to_string(proc_dir.join("comm"))
            .is_ok_and(|comm| comm.trim_end() == "apollo")
}

/// When this machine booted (Unix seconds), from `/proc/stat`.
fn boot_time() -> Option<i64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
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

    #[test]
    fn this_process_and_a_missing_one_are_not_another_live_apollo() {
        assert!(!is_live_apollo(std::process::id(), i64::MAX / 2));
        assert!(!is_live_apollo(u32::MAX, i64::MAX / 2));
        assert!(!is_live_apollo(0, i64::MAX / 2));
        assert!(boot_time().is_some_and(|boot| boot > 0));
    }
}
