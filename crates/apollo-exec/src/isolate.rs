//! A read-only project for `apollo reproduce` (issue 36, item 13): the process enters a user
//! and a mount namespace of its own, and then sees the project through a read-only bind
//! mount, with the folders it must write (the scratch directory, the state directory) bound
//! writable on top. What the unit it runs writes into the project by accident — a `cd ..`, an
//! absolute path — fails with "Read-only file system" instead of changing a real file. Every
//! other process on the machine keeps seeing the project as it is.
//!
//! Unprivileged: a user namespace maps the caller's own uid and gid to themselves, so files
//! keep their owners; where the kernel does not allow unprivileged user namespaces (a sysctl,
//! an AppArmor or SELinux policy, a container's seccomp filter) [`PrivateMounts::enter`] or
//! [`PrivateMounts::read_only`] fails and the caller says so. Inside, `setgroups` is denied
//! (the kernel's rule for an unprivileged gid map) and set-user-id programs do not gain
//! privileges.
//!
//! ```no_run
//! use std::path::Path;
//!
//! // First thing in the process: a user namespace needs a process with one thread.
//! let mounts = apollo_exec::PrivateMounts::enter()?;
//! mounts.read_only(Path::new("/home/me/etl"), &[Path::new("/home/me/etl/.apollo")])?;
//! // From here on, this process and its children cannot write under /home/me/etl except
//! // into .apollo.
//! # Ok::<(), apollo_exec::IsolationError>(())
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::sys::namespaces;

/// Why a project could not be made read-only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IsolationError {
    /// A user namespace is entered by a process with one thread only.
    #[error(
        "the process runs {threads} threads, and only a process with one may enter a user namespace"
    )]
    Threads {
        /// The process's threads when it tried.
        threads: usize,
    },
    /// The kernel refused the namespaces.
    #[error("the kernel refused a user and mount namespace: {error}")]
    Unshare {
        /// What `unshare` said.
        error: io::Error,
    },
    /// Writing the namespace's uid or gid map failed.
    #[error("cannot write {file}: {error}")]
    IdMap {
        /// The file under `/proc/self`.
        file: &'static str,
        /// What the write said.
        error: io::Error,
    },
    /// A mount call failed.
    #[error("cannot {what} {}: {error}", path.display())]
    Mount {
        /// What was being done.
        what: &'static str,
        /// The folder.
        path: PathBuf,
        /// What `mount` said.
        error: io::Error,
    },
}

/// The process inside a user and mount namespace of its own (see the module docs).
#[derive(Debug)]
pub struct PrivateMounts {
    _entered: (),
}

impl PrivateMounts {
    /// Moves this process into a new user namespace (the caller's uid and gid mapped to
    /// themselves) and a new mount namespace whose mounts do not propagate back. Call it
    /// before the process starts any thread.
    ///
    /// # Errors
    ///
    /// [`IsolationError`]: the process has threads already, or the kernel refuses.
    pub fn enter() -> Result<Self, IsolationError> {
        let threads = fs::read_dir("/proc/self/task").map_or(1, Iterator::count);
        if threads > 1 {
            return Err(IsolationError::Threads { threads });
        }
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        namespaces::unshare_user_and_mounts().map_err(|error| IsolationError::Unshare { error })?;
        let write = |file: &'static str, text: String| {
            fs::write(file, text).map_err(|error| IsolationError::IdMap { file, error })
        };
        // Without `deny`, an unprivileged process may not write a gid map (user_namespaces(7)).
        match write("/proc/self/setgroups", "deny".to_owned()) {
            Err(IsolationError::IdMap { error, .. }) if error.kind() == io::ErrorKind::NotFound => {
            }
            other => other?,
        }
        write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
        rustix::mount::mount_change(
            "/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )
        .map_err(|error| IsolationError::Mount {
            what: "make private the mounts under",
            path: PathBuf::from("/"),
            error: error.into(),
        })?;
        Ok(Self { _entered: () })
    }

    /// Makes `root` read-only for this process and the processes it starts from now on,
    /// except each of `writable` that lies under it (the others are left as they are).
    /// Mounts below `root` keep their own flags.
    ///
    /// # Errors
    ///
    /// [`IsolationError::Mount`]: a bind mount or the remount failed; `root` may then be left
    /// bound writable, as it was.
    pub fn read_only(&self, root: &Path, writable: &[&Path]) -> Result<(), IsolationError> {
        let mount_error = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |error: rustix::io::Errno| IsolationError::Mount {
                what,
                path,
                error: error.into(),
            }
        };
        // The flags the kernel locks on a mount inherited from a more privileged namespace
        // must be kept when it is remounted (mount_namespaces(7)).
        let kept = rustix::fs::statvfs(root)
            .map_err(mount_error("look at the mount of", root))?
            .f_flag;
        rustix::mount::mount_bind_recursive(root, root).map_err(mount_error("bind-mount", root))?;
        for folder in writable {
            if folder.starts_with(root) && *folder != root {
                rustix::mount::mount_bind_recursive(*folder, *folder)
                    .map_err(mount_error("bind-mount", folder))?;
            }
        }
        rustix::mount::mount_remount(root, MountFlags::BIND | locked_flags(kept), "")
            .map_err(mount_error("remount read-only", root))
    }
}

/// The remount flags for a mount whose `statvfs` flags are `kept`: read-only, and every flag
/// of the mount the kernel would refuse to drop.
fn locked_flags(kept: StatVfsMountFlags) -> MountFlags {
    let mut flags = MountFlags::RDONLY;
    for (statvfs, mount) in [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ] {
        if kept.contains(statvfs) {
            flags |= mount;
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remount_keeps_the_flags_the_kernel_locks() {
        let kept = StatVfsMountFlags::NOSUID | StatVfsMountFlags::RELATIME;
        assert_eq!(
            locked_flags(kept),
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::RELATIME
        );
        assert_eq!(locked_flags(StatVfsMountFlags::empty()), MountFlags::RDONLY);
    }

    #[test]
    fn a_process_with_threads_is_refused_before_anything_changes() {
        // The test harness runs tests on threads of their own.
        let other = std::thread::spawn(std::thread::park);
        let error = PrivateMounts::enter().unwrap_err();
        assert!(
            matches!(error, IsolationError::Threads { threads } if threads > 1),
            "{error}"
        );
        other.thread().unpark();
        other.join().unwrap();
    }
}
