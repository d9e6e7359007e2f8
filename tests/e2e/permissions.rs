//! A private state directory (issue 36 item 12, DESIGN §18 "Permissions"): a new `.apollo` is
//! 0700 and nothing below it has group or other bits, whatever the captured files' modes; an
//! existing one keeps its modes, `verify` warns about readable blobs and caches and
//! `verify --fix-permissions` repairs them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::Apollo;

/// Every path under `dir` (itself included) with a group or other permission bit, with its mode.
fn readable_by_others(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        if metadata.file_type().is_symlink() {
            continue;
        }
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            found.push(format!("{:o} {}", mode, path.display()));
        }
        if metadata.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                stack.push(entry.path());
            }
        }
    }
    found
}

const PIPELINE: &str = "defaults:
  capture: all
units:
  - name: login
    inputs: [creds.json]
    outputs: [out/session.txt]
    reuse: true
    execute: mkdir -p out && echo session > out/session.txt && echo logged in
on_finish: \"true\"
";

fn project() -> Apollo {
    let apollo = Apollo::new();
    apollo.file("creds.json", "{\"password\": \"private\"}\n");
    std::fs::set_permissions(
        apollo.path("creds.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    apollo.config(PIPELINE);
    apollo
}

#[test]
fn a_new_state_directory_is_private_all_the_way_down() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    let state = apollo.path(".apollo");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "{mode:o}");
    assert_eq!(readable_by_others(&state), Vec::<String>::new());
    // A second run (reuse, restore, caches) keeps it so.
    std::fs::remove_file(apollo.path("out/session.txt")).unwrap();
    apollo.args(&["run", "--fresh"]).run().code(0);
    assert_eq!(readable_by_others(&state), Vec::<String>::new());
    // The project's own files are not made private: the restored output has the mode it
    // was recorded with.
    let restored = std::fs::metadata(apollo.path("out/session.txt")).unwrap();
    assert_ne!(
        restored.permissions().mode() & 0o044,
        0,
        "{:o}",
        restored.permissions().mode()
    );
}

#[test]
fn a_backup_keeps_the_private_modes() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    let dest = apollo.path("backup");
    apollo
        .args(&["backup", dest.to_str().unwrap()])
        .run()
        .code(0);
    assert_eq!(readable_by_others(&dest), Vec::<String>::new());
}

#[test]
fn verify_warns_about_an_existing_readable_state_directory_and_fix_permissions_repairs_it() {
    let mut apollo = project();
    apollo.args(&["run"]).run().code(0);
    let state = apollo.path(".apollo");
    // As an older apollo left it: 0755 folders, 0444 blobs, 0644 files.
    let mut stack = vec![state.clone()];
    while let Some(path) = stack.pop() {
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        let mode = if metadata.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                stack.push(entry.path());
            }
            0o755
        } else if path.starts_with(state.join("blobs/sha256")) {
            0o444
        } else {
            0o644
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // A run keeps the modes it found (only what it creates is private).
    apollo.args(&["run", "--fresh"]).run().code(0);
    assert_eq!(
        std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let verify = apollo.args(&["verify"]).run();
    let said = format!("{}{}", verify.stdout, verify.stderr);
    assert!(said.contains("--fix-permissions"), "{said}");
    assert!(said.contains("readable"), "{said}");
    apollo.args(&["verify", "--fix-permissions"]).run().code(0);
    assert_eq!(readable_by_others(&state), Vec::<String>::new());
    let verify = apollo.args(&["verify"]).run();
    verify.code(0);
    assert!(
        !format!("{}{}", verify.stdout, verify.stderr).contains("--fix-permissions"),
        "{verify:?}"
    );
}
