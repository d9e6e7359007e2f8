//! Finding a bare program name in `PATH` the way `execvp` would, in apollo rather than in the
//! child, and remembering what was found like a shell's command hash.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The search path when neither the unit nor apollo has a `PATH` (glibc's `execvp` default).
const DEFAULT_SEARCH_PATH: &str = "/bin:/usr/bin";

/// Where `execvp` would find `program` (a name without `/`) in `search_path` (the `PATH` the
/// child gets), looking the way the kernel would: the first regular file this process may
/// execute. Relative entries (and an empty one, meaning `.`) are taken against `workdir`, the
/// child's working directory. `None` when no entry has it: the caller then reports the
/// program as not found (or, see [`in_path_but_not_executable`], as not executable).
///
/// Looking it up here, instead of in the child, spares the child one failing `execve` per
/// `PATH` entry before the right one, and searches the unit's own `PATH` when it sets one.
pub(crate) fn search_path(
    program: &OsStr,
    search_path: Option<&OsStr>,
    workdir: &Path,
) -> Option<PathBuf> {
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    let search_path = search_path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
    let mut candidate = Vec::with_capacity(128);
    for entry in search_path.as_bytes().split(|&byte| byte == b':') {
        candidate.clear();
        if !entry.starts_with(b"/") {
            candidate.extend_from_slice(workdir.as_os_str().as_bytes());
            candidate.push(b'/');
        }
        candidate.extend_from_slice(entry);
        candidate.push(b'/');
        candidate.extend_from_slice(program.as_bytes());
        candidate.push(0);
        let Ok(path) = CStr::from_bytes_with_nul(&candidate) else {
            continue;
        };
        if is_executable_file(path) {
            candidate.pop();
            return Some(PathBuf::from(OsStr::from_bytes(&candidate)));
        }
    }
    None
}

/// Programs already found in a `PATH`, like a shell's command hash (`hash` in bash): a name is
/// searched once per `PATH` (and working directory, when `PATH` has relative entries), and
/// later lookups only check that the file found is still an executable file (two syscalls
/// instead of one per `PATH` entry). As in the shell, a program installed later in an earlier
/// `PATH` entry is not noticed until the one found disappears.
#[derive(Debug, Default)]
pub(crate) struct ProgramCache {
    found: Mutex<HashMap<CacheKey, PathBuf>>,
}

/// `(program, PATH, working directory if PATH has relative entries)`.
type CacheKey = (OsString, OsString, PathBuf);

/// Beyond this many entries the cache starts over (a bound on memory, never reached by a sane
/// pipeline).
const CACHE_LIMIT: usize = 4096;

impl ProgramCache {
    /// [`search_path`], remembered.
    pub(crate) fn find(
        &self,
        program: &OsStr,
        path: Option<&OsStr>,
        workdir: &Path,
    ) -> Option<PathBuf> {
        if program.is_empty() || program.as_bytes().contains(&b'/') {
            return None;
        }
        let path_value = path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
        let relative = path_value
            .as_bytes()
            .split(|&byte| byte == b':')
            .any(|entry| !entry.starts_with(b"/"));
        let key: CacheKey = (
            program.to_owned(),
            path_value.to_owned(),
            if relative {
                workdir.to_owned()
            } else {
                PathBuf::new()
            },
        );
        let cached = self
            .found
            .lock()
            .ok()
            .and_then(|found| found.get(&key).cloned());
        if let Some(cached) = cached {
            let mut bytes = cached.as_os_str().as_bytes().to_vec();
            bytes.push(0);
            if CStr::from_bytes_with_nul(&bytes).is_ok_and(is_executable_file) {
                return Some(cached);
            }
        }
        let found = search_path(program, path, workdir);
        if let Ok(mut cache) = self.found.lock() {
            match &found {
                Some(found) => {
                    if cache.len() >= CACHE_LIMIT {
                        cache.clear();
                    }
                    cache.insert(key, found.clone());
                }
                None => {
                    cache.remove(&key);
                }
            }
        }
        found
    }
}

/// Whether some `PATH` entry holds a file named `program` that is not executable: `execvp`
/// then reports "permission denied" rather than "not found". Only asked on the error path.
pub(crate) fn in_path_but_not_executable(
    program: &OsStr,
    search_path: Option<&OsStr>,
    workdir: &Path,
) -> bool {
    let search_path = search_path.unwrap_or(OsStr::new(DEFAULT_SEARCH_PATH));
    search_path
        .as_bytes()
        .split(|&byte| byte == b':')
        .any(|entry| {
            let dir = Path::new(OsStr::from_bytes(entry));
            let dir = if dir.is_absolute() {
                dir.to_owned()
            } else {
                workdir.join(dir)
            };
            dir.join(program).is_file()
        })
}

/// Whether `path` is a regular file this process may execute (what `execve` needs): one
/// `stat`, one `access`.
fn is_executable_file(path: &CStr) -> bool {
    rustix::fs::stat(path).is_ok_and(|status| {
        rustix::fs::FileType::from_raw_mode(status.st_mode) == rustix::fs::FileType::RegularFile
    }) && rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_in_the_path_like_execvp_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for sub in [&first, &second] {
            std::fs::create_dir(sub).unwrap();
        }
        let write = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        // Not executable in `first`, a directory of that name in `first` for `dir-tool`:
        // both skipped, as execve would fail there.
        write(&first.join("tool"), 0o644);
        write(&second.join("tool"), 0o755);
        std::fs::create_dir(first.join("dir-tool")).unwrap();
        write(&second.join("dir-tool"), 0o755);
        let path = OsString::from(format!("{}:relative:{}", first.display(), second.display()));
        let find = |name: &str| search_path(OsStr::new(name), Some(&path), dir.path());
        assert_eq!(find("tool"), Some(second.join("tool")));
        assert_eq!(find("dir-tool"), Some(second.join("dir-tool")));
        assert_eq!(find("missing"), None);
        assert_eq!(
            find("first/tool"),
            None,
            "a name with a slash is not searched"
        );
        // Relative entries are relative to the child's working directory.
        std::fs::create_dir(dir.path().join("relative")).unwrap();
        write(&dir.path().join("relative").join("rel-tool"), 0o755);
        assert_eq!(
            find("rel-tool"),
            Some(dir.path().join("relative").join("rel-tool"))
        );
        assert_eq!(
            search_path(OsStr::new("sh"), None, dir.path()),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    #[test]
    fn the_cache_notices_a_program_that_went_away() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for sub in [&first, &second] {
            std::fs::create_dir(sub).unwrap();
            std::fs::write(sub.join("tool"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(sub.join("tool"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let path = OsString::from(format!("{}:{}", first.display(), second.display()));
        let cache = ProgramCache::default();
        let find = || cache.find(OsStr::new("tool"), Some(&path), dir.path());
        assert_eq!(find(), Some(first.join("tool")));
        assert_eq!(find(), Some(first.join("tool")));
        std::fs::remove_file(first.join("tool")).unwrap();
        assert_eq!(find(), Some(second.join("tool")));
        std::fs::remove_file(second.join("tool")).unwrap();
        assert_eq!(find(), None);
        assert_eq!(
            cache.find(OsStr::new("./tool"), Some(&path), dir.path()),
            None
        );
    }
}
