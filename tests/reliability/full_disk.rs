//! A real full disk: the state directory on a 1 MiB tmpfs, filled by a unit mid-run. apollo
//! must stop with exit 6 (nothing acknowledged lost), and resume once space is freed.
//!
//! Mounting needs root: elsewhere the test says it skipped and passes, except under `CI=true`
//! (`apollo_core::testing::require`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::support::{Project, assert_nothing_acknowledged_lost};

/// A tmpfs mounted for the test, unmounted (lazily, so a failing test cannot leave it
/// mounted) when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

#[allow(unsafe_code)] // mount(2).
impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("apollo-full-disk-")
            .tempdir()
            .expect("temp dir");
        let target = CString::new(dir.path().as_os_str().as_bytes()).expect("path without NUL");
        let options = CString::new(format!("size={size},mode=0755")).expect("options");
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let result = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        assert_eq!(
            result,
            0,
            "mount -t tmpfs -o size={size} on {} failed although running as root: {}",
            dir.path().display(),
            std::io::Error::last_os_error()
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[allow(unsafe_code)] // umount2(2).
impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.dir.path().as_os_str().as_bytes()) {
            // SAFETY: umount2(2) of the mount this guard made.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// The chain's length: its records take more than 64 KiB.
const N_UNITS: usize = 400;

/// `bin/fill MNT`: the first time only, fill the filesystem at MNT with `MNT/filler`.
const FILL_SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")/..
if [ ! -e "$dir/filled" ]; then
  : > "$dir/filled"
  dd if=/dev/zero of="$1/filler" bs=4096 2>/dev/null
  [ -s "$1/filler" ] || exit 1
fi
echo "${APOLLO_ATTEMPT:-0}" >> "$dir/counts/fill"
"#;

#[test]
#[allow(unsafe_code)] // geteuid(2).
fn state_dir_filled_up_mid_run() {
    // SAFETY: geteuid(2) cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !apollo_core::testing::require(euid == 0, "root", "mounting a tmpfs; CI runs as root") {
        return;
    }
    let tmpfs = Tmpfs::mount("1m");
    let mount: PathBuf = tmpfs.path().to_path_buf();

    // Two units, the filler, then a chain long enough that its records need more than the
    // journal's space allocated ahead (64 KiB when the segment was created: records written
    // into it need no new blocks, so the disk fills only when the writer asks for more).
    let mut yaml = String::from("name: full-disk\nmax_parallel: 1\nunits:\n");
    yaml.push_str("  - name: u000\n    execute: ./bin/count u000\n");
    yaml.push_str("  - name: u001\n    deps: [u000]\n    execute: ./bin/count u001\n");
    yaml.push_str(&format!(
        "  - name: fill\n    deps: [u001]\n    execute: ./bin/fill {}\n",
        mount.display()
    ));
    let mut names = vec!["u000".to_owned(), "u001".to_owned(), "fill".to_owned()];
    for i in 2..N_UNITS {
        let name = format!("u{i:03}");
        let dep = names.last().cloned().unwrap_or_default();
        yaml.push_str(&format!(
            "  - name: {name}\n    deps: [{dep}]\n    execute: ./bin/count {name}\n"
        ));
        names.push(name);
    }
    let project = Project::new(&yaml).with_state_dir(mount.join("state"));
    project.script("bin/fill", FILL_SCRIPT);

    let failed = project.apollo(&["run"], None);
    assert_eq!(
        failed.code,
        Some(6),
        "expected exit 6 on a full disk\n--- stdout\n{}\n--- stderr\n{}",
        failed.stdout,
        failed.stderr
    );
    for needle in [
        "No space left on device",
        "`apollo run` carries on from what was recorded",
    ] {
        assert!(
            failed.stderr.contains(needle),
            "the message does not mention {needle:?}:\n{}",
            failed.stderr
        );
    }
    let after_failure = project.journal();
    assert!(
        after_failure.succeeded.contains_key("u001"),
        "the disk filled before u001's success was recorded: {after_failure:?}"
    );
    assert!(
        !after_failure
            .succeeded
            .contains_key(names.last().map(String::as_str).unwrap_or_default()),
        "the run completed on a full disk: {after_failure:?}"
    );
    println!(
        "full tmpfs: exit 6 with {} of {} units' successes recorded: {}",
        after_failure.succeeded.len(),
        names.len(),
        failed.stderr.lines().next().unwrap_or_default()
    );
    let verify = project.apollo(&["verify"], None);
    assert_eq!(
        verify.code,
        Some(0),
        "apollo verify on the full disk\n--- stdout\n{}\n--- stderr\n{}",
        verify.stdout,
        verify.stderr
    );

    // Free the space, and resume.
    std::fs::remove_file(mount.join("filler")).expect("remove the filler");
    let resumed = project.apollo(&["run"], None);
    assert_eq!(
        resumed.code,
        Some(0),
        "the run after space was freed\n--- stdout\n{}\n--- stderr\n{}",
        resumed.stdout,
        resumed.stderr
    );
    assert!(
        resumed.stdout.contains("resuming") || resumed.stderr.contains("resuming"),
        "the run was not resumed:\n{}\n{}",
        resumed.stdout,
        resumed.stderr
    );
    assert_nothing_acknowledged_lost(&project, &names, &after_failure, "full tmpfs");
    assert_eq!(project.runs().len(), 1, "the failed run was resumed");
    let verify = project.apollo(&["verify"], None);
    assert_eq!(
        verify.code,
        Some(0),
        "verify after the resume: {}",
        verify.stderr
    );
    drop(project);
}
