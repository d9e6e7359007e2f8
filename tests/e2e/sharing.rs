//! A state directory shared with a group (issue 36 item 12, DESIGN §18 "Permissions"):
//! `--state-dir-mode group` makes it 2770/0660 and records it; a teammate in the group finds it
//! by the upward search, resumes its runs and reuses its blobs, except a blob whose source was
//! private, which is a reuse miss. A private state directory of another user is refused with
//! a clear error. Run as root, the teammate being uid 65534 with a supplementary group.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::support::Apollo;

/// The teammates' group: any gid will do, `setpriv --groups` needs no `/etc/group` entry.
const TEAM_GID: u32 = 4242;

const PIPELINE: &str = "defaults:
  capture: all
units:
  - name: public
    inputs: [shared.txt]
    outputs: [out/public.txt]
    reuse: true
    execute: bin/count public && cp shared.txt out/public.txt
  - name: secret
    inputs: [creds.json]
    outputs: [out/secret.txt]
    reuse: true
    execute: bin/count secret && cp creds.json out/secret.txt && chmod 600 out/secret.txt
  - name: gate
    deps: [public, secret]
    execute: test -f go
";

fn is_root() -> bool {
    apollo_core::testing::require(
        rustix::process::geteuid().is_root(),
        "root (to run apollo as a teammate with setpriv)",
        "run the tests as root",
    )
}

/// The teammate: uid 65534 in the team's group, running apollo in `folder` of the project.
fn teammate(folder: &str) -> Vec<String> {
    [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        &format!("--groups={TEAM_GID}"),
        "--",
        "sh",
        "-c",
        &format!("cd {folder} && exec \"$0\" \"$@\""),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// Every file and folder under `dir` with its mode.
fn all_modes(dir: &Path) -> Vec<(std::path::PathBuf, u32, bool)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        found.push((path.clone(), mode(&path), metadata.is_dir()));
        if metadata.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                stack.push(entry.path());
            }
        }
    }
    found
}

/// Folders 2770 of the team's group, files group-readable (blobs) or 0660, nothing for others.
fn assert_shared(state: &Path) {
    for (path, mode, is_dir) in all_modes(state) {
        let gid = std::fs::symlink_metadata(&path).unwrap().gid();
        assert_eq!(gid, TEAM_GID, "{} is not the team's", path.display());
        if is_dir {
            assert_eq!(mode, 0o2770, "{} {mode:o}", path.display());
        } else if path.starts_with(state.join("blobs/sha256")) {
            assert!(
                mode == 0o440 || mode == 0o400,
                "{} {mode:o}",
                path.display()
            );
        } else {
            assert_eq!(mode, 0o660, "{} {mode:o}", path.display());
        }
    }
}

/// `chmod -R g+rwX` of the project's own files (not the state directory): a team's project.
fn group_writable(path: &Path) {
    if path.file_name().is_some_and(|name| name == ".apollo") {
        return;
    }
    let metadata = std::fs::symlink_metadata(path).unwrap();
    let extra = if metadata.is_dir() { 0o2070 } else { 0o060 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode(path) | extra)).unwrap();
    rustix::fs::chown(path, None, Some(rustix::fs::Gid::from_raw(TEAM_GID))).unwrap();
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            group_writable(&entry.path());
        }
    }
}

fn project() -> Apollo {
    let apollo = Apollo::new();
    apollo.file("shared.txt", "for the team\n");
    apollo.file("creds.json", "{\"password\": \"mine\"}\n");
    std::fs::set_permissions(
        apollo.path("creds.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::create_dir_all(apollo.path("out")).unwrap();
    std::fs::create_dir_all(apollo.path("sub")).unwrap();
    apollo.config(PIPELINE);
    group_writable(apollo.root());
    apollo
}

#[test]
fn a_teammate_finds_resumes_and_reuses_a_shared_state_directory_but_not_a_private_blob() {
    if !is_root() {
        return;
    }
    let mut apollo = project();
    // The owner's run stops at `gate` (no `go` yet).
    apollo
        .args(&["run", "--state-dir-mode", "group"])
        .run()
        .code(1);
    let state = apollo.path(".apollo");
    assert_eq!(
        std::fs::read_to_string(state.join("sharing")).unwrap(),
        "group\n"
    );
    assert_shared(&state);
    // The blob of the private output is the owner's only; the public one the group's too.
    let secret = apollo.find_blob(b"{\"password\": \"mine\"}\n").unwrap();
    assert_eq!(mode(&secret), 0o400);
    let public = apollo.find_blob(b"for the team\n").unwrap();
    assert_eq!(mode(&public), 0o440);

    // The teammate finds it from a subfolder (the upward search), and resumes the run.
    let teammate_in_sub = teammate("sub");
    let prefix: Vec<&str> = teammate_in_sub.iter().map(String::as_str).collect();
    let runs = apollo.args(&["runs"]).run_under(&prefix);
    runs.code(0);
    // The project's files are the team's (the owner's outputs and counts too); the blobs
    // keep the modes they were captured with.
    apollo.file("go", "");
    group_writable(apollo.root());
    let teammate_at_top = teammate(".");
    let prefix: Vec<&str> = teammate_at_top.iter().map(String::as_str).collect();
    apollo.args(&["resume"]).run_under(&prefix).code(0);
    assert_eq!(apollo.count("public"), 1);
    assert_eq!(apollo.count("secret"), 1);

    // A new run by the teammate: the public output comes back from its blob, the private
    // one's blob cannot be read: a reuse miss, and the unit runs again.
    std::fs::remove_file(apollo.path("out/public.txt")).unwrap();
    std::fs::remove_file(apollo.path("out/secret.txt")).unwrap();
    let fresh = apollo.args(&["run", "--fresh"]).run_under(&prefix);
    fresh.code(0);
    assert_eq!(apollo.count("public"), 1, "{fresh:?}");
    assert_eq!(apollo.count("secret"), 2, "{fresh:?}");
    assert!(fresh.stdout.contains("1 reused"), "{fresh:?}");
    assert_eq!(
        std::fs::read_to_string(apollo.path("out/public.txt")).unwrap(),
        "for the team\n"
    );
    assert_shared(&state);
    apollo.args(&["verify"]).run().code(0);
}

#[test]
fn a_private_state_directory_of_another_user_is_refused_by_the_upward_search() {
    if !is_root() {
        return;
    }
    let mut apollo = project();
    apollo.args(&["run"]).run().code(1);
    // Even if the teammate could look inside, a private one is not theirs to use.
    std::fs::set_permissions(
        apollo.path(".apollo"),
        std::fs::Permissions::from_mode(0o750),
    )
    .unwrap();
    let teammate_in_sub = teammate("sub");
    let prefix: Vec<&str> = teammate_in_sub.iter().map(String::as_str).collect();
    let runs = apollo.args(&["runs"]).run_under(&prefix);
    runs.code(2);
    let state = apollo.path(".apollo");
    assert!(
        runs.stderr.contains(&state.display().to_string())
            && runs.stderr.contains("another user")
            && runs.stderr.contains("--state-dir-mode group"),
        "{}",
        runs.stderr
    );
}

#[test]
fn an_existing_state_directory_keeps_its_sharing() {
    let mut apollo = project_without_group();
    apollo.args(&["run"]).run().code(1);
    let asked = apollo.args(&["run", "--state-dir-mode", "group"]).run();
    asked.code(2);
    assert!(
        asked.stderr.contains("private") && asked.stderr.contains("when it was made"),
        "{}",
        asked.stderr
    );
}

/// The project, without the team's group (no root needed).
fn project_without_group() -> Apollo {
    let apollo = Apollo::new();
    apollo.file("shared.txt", "for the team\n");
    apollo.file("creds.json", "{}\n");
    std::fs::create_dir_all(apollo.path("out")).unwrap();
    apollo.config(PIPELINE);
    apollo
}

#[test]
fn verify_warns_about_modes_a_shared_state_directory_should_not_have_and_repairs_them() {
    let mut apollo = project_without_group();
    apollo
        .args(&["run", "--state-dir-mode", "group"])
        .run()
        .code(1);
    let state = apollo.path(".apollo");
    std::fs::set_permissions(state.join("runs"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(state.join("lock"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let verify = apollo.args(&["verify"]).run();
    assert!(
        verify.stderr.contains("shared with its group")
            && verify.stderr.contains("--fix-permissions"),
        "{}",
        verify.stderr
    );
    apollo.args(&["verify", "--fix-permissions"]).run().code(0);
    assert_eq!(mode(&state.join("runs")), 0o2770);
    assert_eq!(mode(&state.join("lock")), 0o660);
    let verify = apollo.args(&["verify"]).run();
    verify.code(0);
    assert!(
        !verify.stderr.contains("--fix-permissions"),
        "{}",
        verify.stderr
    );
}

#[test]
fn a_backup_keeps_the_shared_modes() {
    let mut apollo = project_without_group();
    apollo
        .args(&["run", "--state-dir-mode", "group"])
        .run()
        .code(1);
    let dest = apollo.path("backup");
    apollo
        .args(&["backup", dest.to_str().unwrap()])
        .run()
        .code(0);
    assert_eq!(
        std::fs::read_to_string(dest.join("sharing")).unwrap(),
        "group\n"
    );
    for (path, mode, is_dir) in all_modes(&dest) {
        assert_eq!(mode & 0o007, 0, "{} {mode:o}", path.display());
        if is_dir {
            assert_eq!(mode, 0o2770, "{} {mode:o}", path.display());
        }
    }
}

/// A stray process of the run that apollo may not signal (another user's: here apollo runs as
/// root without `CAP_KILL`, the stray as uid 65534) is named in a warning; the run goes on.
#[test]
#[allow(unsafe_code)] // kill(2) of the stray the test made.
fn a_stray_process_apollo_may_not_signal_is_named_not_fatal() {
    if !is_root() {
        return;
    }
    let mut apollo = Apollo::new();
    for (path, mode) in [
        (apollo.root().to_path_buf(), 0o711),
        (apollo.path("markers"), 0o777),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    apollo.config(
        "units:
  - name: leaves
    execute: >-
      setsid setpriv --reuid=65534 --regid=65534 --clear-groups
      sh -c 'touch markers/stray.started; sleep 1000' \"$PWD/stray\"
      </dev/null >/dev/null 2>&1 &
      until [ -e markers/stray.started ]; do sleep 0.01; done
",
    );
    let run = apollo
        .args(&["run"])
        .run_under(&["setpriv", "--bounding-set=-kill", "--"]);
    let strays =
        crate::support::processes_mentioning(&format!("{}/stray", apollo.root().display()));
    for (pid, _) in &strays {
        // SAFETY: kill(2) of the stray's process group and of the stray.
        unsafe {
            libc::kill(-(*pid as libc::pid_t), libc::SIGKILL);
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    run.code(0);
    assert!(!strays.is_empty(), "the stray was signalled: {run:?}");
    assert!(
        run.stderr.contains("uid 65534")
            && run.stderr.contains("another user")
            && run.stderr.contains("may not signal"),
        "{}",
        run.stderr
    );
}
