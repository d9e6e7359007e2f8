//! Unnamed log files (`O_TMPFILE`): making one in the nearest existing folder, opening it a
//! second time for the children (through `/proc/self/fd`), asking whether anything else holds
//! it (a write lease), and giving it its name (`linkat`, or a copy when no link is possible).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{AtFlags, Mode, OFlags};

use super::CHUNK;
use super::spares::Availability;
use crate::sys::lease;

/// A new unnamed file in the nearest existing folder at or above `log_dir`, and that folder.
pub(super) fn create_unnamed(log_dir: &Path) -> io::Result<(File, PathBuf)> {
    for dir in log_dir.ancestors().take(8) {
        // The owner's only, as everything in the state directory, unless it is shared with
        // its group (DESIGN §18).
        let sharing = super::sharing_of(dir);
        let opened = OpenOptions::new()
            .read(true)
            .append(true)
            .mode(sharing.file_mode())
            .custom_flags(libc::O_TMPFILE)
            .open(dir);
        match opened {
            Ok(file) => {
                sharing.apply(&file, false)?;
                return Ok((file, dir.to_owned()));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no folder above {} exists", log_dir.display()),
    ))
}

/// `/proc/self/fd`, opened once (`O_PATH`), so reaching a descriptor's entry is a one-name
/// lookup; `None` without `/proc`.
fn proc_fd_dir() -> Option<&'static OwnedFd> {
    static DIR: OnceLock<Option<OwnedFd>> = OnceLock::new();
    DIR.get_or_init(|| {
        rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()
    })
    .as_ref()
}

/// `file`'s entry name in `/proc/self/fd`: its number, in a stack buffer (no allocation).
fn fd_entry(file: &File) -> rustix::path::DecInt {
    rustix::path::DecInt::from_fd(file)
}

/// A second, separate open of `file` (write-only, appending) for the children.
pub(super) fn reopen_for_appending(file: &File) -> io::Result<File> {
    let unsupported = |detail: String| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("cannot reopen an unnamed file through /proc/self/fd: {detail}"),
        )
    };
    let dir = proc_fd_dir().ok_or_else(|| unsupported("no /proc".to_owned()))?;
    let fd = rustix::fs::openat(
        dir,
        fd_entry(file).as_c_str(),
        OFlags::WRONLY | OFlags::APPEND | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|error| unsupported(io::Error::from(error).to_string()))?;
    Ok(File::from(fd))
}

/// Whether `file` is open elsewhere: the kernel grants a write lease only when it is open
/// nowhere but here (open descriptions, not descriptors: a `dup` of this very open does not
/// count).
pub(super) fn held_elsewhere(file: &File) -> Availability {
    match lease::write_lease_available(file) {
        Ok(()) => Availability::Free,
        Err(error) if matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) => {
            Availability::Held
        }
        Err(_) => Availability::Unknown,
    }
}

/// Link the unnamed `file` to `path` (creating its folder, see [`super::create_log_dir`]).
/// Only a link keeps a running attempt's later output in the named file.
pub(super) fn link(file: &File, path: &Path) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        super::create_log_dir(parent)?;
    }
    let dir = proc_fd_dir().ok_or_else(|| io::Error::other("no /proc to link through"))?;
    // Linking an `O_TMPFILE` file through its `/proc/self/fd` entry needs no privilege (see
    // open(2)).
    rustix::fs::linkat(
        dir,
        fd_entry(file).as_c_str(),
        rustix::fs::CWD,
        path,
        AtFlags::SYMLINK_FOLLOW,
    )?;
    Ok(())
}

/// Give the finished, unnamed `file` the name `path`: a link, or, when that is impossible
/// (`path` exists, a filesystem that refuses), a copy appended to `path`. The copy goes
/// only into real folders: `open_named` refuses a link as the file's last component only,
/// and a folder planted as a link (the very reason the link may have failed) would send the
/// copy outside the state directory.
pub(super) fn give_name(file: &File, path: &Path) -> io::Result<()> {
    if link(file, path).is_ok() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        super::create_log_dir(parent)?;
    }
    let target = super::open_named(path)?;
    let mut buffer = vec![0_u8; CHUNK];
    let mut offset = 0;
    loop {
        let read = file.read_at(&mut buffer, offset)?;
        if read == 0 {
            return Ok(());
        }
        io::Write::write_all(&mut &target, &buffer[..read])?;
        offset += read as u64;
    }
}
