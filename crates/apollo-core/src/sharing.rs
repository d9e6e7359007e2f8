//! Who may read and write a state directory (DESIGN §18 "Permissions"): its owner only
//! (private, the default), or its owner and a group (`--state-dir-mode group`).
//!
//! The choice is made when the state directory is created and recorded inside it, in the
//! file [`MARKER_FILE`] (a state directory without it is private). Every folder of a shared
//! state directory is 2770 — setgid, so what is created in it belongs to its group — and
//! every file 0660, set with an explicit `chmod` (the umask is never trusted). A folder's own
//! bits therefore say how to create in it ([`Sharing::of_folder_mode`]): each writer below
//! the state directory (journal segments, blobs, caches, the lock file, attempt logs, temporary
//! files) asks the folder it creates in, and never decides a mode of its own.
//!
//! A blob is never more readable than its most private source: in a shared state directory a
//! blob whose source had no group read bit stays owner-only ([`Sharing::blob_mode`]), and a
//! teammate's reuse of it misses.

use std::os::fd::AsFd;

/// The file at the root of a state directory recording its [`Sharing`]: `group` when shared.
pub const MARKER_FILE: &str = "sharing";

/// Who may use a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Sharing {
    /// The owner only: folders 0700, files 0600, blobs 0400.
    #[default]
    Private,
    /// The owner and the state directory's group: folders 2770, files 0660, blobs 0440 (0400
    /// when their source had no group read bit).
    Group,
}

impl Sharing {
    /// The mode of a folder apollo creates.
    pub fn dir_mode(self) -> u32 {
        match self {
            Self::Private => 0o700,
            Self::Group => 0o2770,
        }
    }

    /// The mode of a file apollo creates.
    pub fn file_mode(self) -> u32 {
        match self {
            Self::Private => 0o600,
            Self::Group => 0o660,
        }
    }

    /// The mode of a stored blob (read-only) whose source file had mode `source_mode`: in a
    /// shared state directory the group may read it only when it could read the source.
    pub fn blob_mode(self, source_mode: u32) -> u32 {
        match self {
            Self::Group if source_mode & 0o040 != 0 => 0o440,
            _ => 0o400,
        }
    }

    /// How to create in a folder whose mode is `mode`: shared when it is setgid and its group
    /// may read, write and enter it (2770), else private.
    pub fn of_folder_mode(mode: u32) -> Self {
        if mode & 0o2070 == 0o2070 {
            Self::Group
        } else {
            Self::Private
        }
    }

    /// [`of_folder_mode`](Self::of_folder_mode) of the open folder `dir` (private when it cannot
    /// be read).
    pub fn of_folder(dir: impl AsFd) -> Self {
        rustix::fs::fstat(dir).map_or(Self::Private, |stat| Self::of_folder_mode(stat.st_mode))
    }

    /// Gives the file or folder `fd`, just created (or found) by apollo, the mode this sharing
    /// wants, when the umask or an older apollo left it otherwise. Private mode needs nothing:
    /// files and folders are created 0600 and 0700, which a umask only narrows. Only the
    /// owner may change a mode: a teammate's file is left as it is.
    pub fn apply(self, fd: impl AsFd, is_dir: bool) -> std::io::Result<()> {
        if self == Self::Private {
            return Ok(());
        }
        let fd = fd.as_fd();
        let stat = rustix::fs::fstat(fd)?;
        let want = if is_dir {
            self.dir_mode()
        } else {
            self.file_mode()
        };
        if stat.st_mode & 0o7777 == want || stat.st_uid != rustix::process::geteuid().as_raw() {
            return Ok(());
        }
        rustix::fs::fchmod(fd, rustix::fs::Mode::from_raw_mode(want))?;
        Ok(())
    }

    /// `private` or `group`: the word of `--state-dir-mode` and of [`MARKER_FILE`].
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Group => "group",
        }
    }

    /// The sharing a [`MARKER_FILE`]'s content names; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "private" => Some(Self::Private),
            "group" => Some(Self::Group),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn modes_follow_the_sharing_and_a_blob_is_never_more_readable_than_its_source() {
        assert_eq!(Sharing::Private.dir_mode(), 0o700);
        assert_eq!(Sharing::Group.dir_mode(), 0o2770);
        assert_eq!(Sharing::Private.file_mode(), 0o600);
        assert_eq!(Sharing::Group.file_mode(), 0o660);
        assert_eq!(Sharing::Private.blob_mode(0o644), 0o400);
        assert_eq!(Sharing::Group.blob_mode(0o644), 0o440);
        assert_eq!(Sharing::Group.blob_mode(0o600), 0o400);
        assert_eq!(Sharing::Group.blob_mode(0o604), 0o400);
        assert_eq!(Sharing::of_folder_mode(0o2770), Sharing::Group);
        assert_eq!(Sharing::of_folder_mode(0o40_2770), Sharing::Group);
        assert_eq!(Sharing::of_folder_mode(0o770), Sharing::Private);
        assert_eq!(Sharing::of_folder_mode(0o2750), Sharing::Private);
        assert_eq!(Sharing::of_folder_mode(0o700), Sharing::Private);
        for sharing in [Sharing::Private, Sharing::Group] {
            assert_eq!(Sharing::parse(sharing.as_str()), Some(sharing));
        }
        assert_eq!(Sharing::parse("group\n"), Some(Sharing::Group));
        assert_eq!(Sharing::parse("world"), None);
    }

    #[test]
    fn apply_sets_the_group_modes_whatever_the_umask_left() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mode =
            |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        Sharing::Private
            .apply(std::fs::File::open(&file).unwrap(), false)
            .unwrap();
        assert_eq!(mode(&file), 0o600);
        Sharing::Group
            .apply(std::fs::File::open(&file).unwrap(), false)
            .unwrap();
        assert_eq!(mode(&file), 0o660);
        Sharing::Group
            .apply(std::fs::File::open(&sub).unwrap(), true)
            .unwrap();
        assert_eq!(mode(&sub), 0o2770);
        assert_eq!(
            Sharing::of_folder(std::fs::File::open(&sub).unwrap()),
            Sharing::Group
        );
    }
}
