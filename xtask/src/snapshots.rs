//! `cargo xtask snapshots [--accept]`: review insta snapshots without cargo-insta.
//!
//! Runs `cargo test --workspace` with `INSTA_UPDATE=new` (a changed snapshot is written beside
//! the old one as `*.snap.new`) and `INSTA_FORCE_PASS=1` (so every test runs to the end),
//! then lists the pending `*.snap.new` files. `--accept` renames each over its `*.snap`.

use std::path::{Path, PathBuf};

/// Runs the tests, lists pending snapshots, accepts them if asked.
pub(crate) fn run(root: &Path, accept: bool) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    #[allow(clippy::disallowed_methods, reason = "xtask drives cargo")]
    let status = std::process::Command::new(cargo)
        .args(["test", "--workspace", "--quiet"])
        .current_dir(root)
        .env("INSTA_UPDATE", "new")
        .env("INSTA_FORCE_PASS", "1")
        .status()
        .map_err(|error| format!("cannot run cargo test: {error}"))?;
    let pending = pending_snapshots(root)?;
    if pending.is_empty() {
        println!("no pending snapshots");
    }
    for path in &pending {
        let shown = path.strip_prefix(root).unwrap_or(path);
        if accept {
            accept_snapshot(path)?;
            println!("accepted {}", shown.display());
        } else {
            println!("pending  {}", shown.display());
        }
    }
    if !pending.is_empty() && !accept {
        println!("review them, then run `cargo xtask snapshots --accept`");
    }
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo test failed ({status}) for a reason other than snapshots"
        ))
    }
}

/// Every `*.snap.new` under `root`, sorted.
pub(crate) fn pending_snapshots(root: &Path) -> Result<Vec<PathBuf>, String> {
    let is_pending = |path: &Path| path.to_string_lossy().ends_with(".snap.new");
    crate::files_under(root, &is_pending).map_err(|error| format!("cannot list snapshots: {error}"))
}

/// `x.snap.new` → `x.snap`.
pub(crate) fn accept_snapshot(pending: &Path) -> Result<(), String> {
    let text = pending.to_string_lossy();
    let accepted = PathBuf::from(text.trim_end_matches(".new"));
    std::fs::rename(pending, &accepted)
        .map_err(|error| format!("cannot rename `{}`: {error}", pending.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_snapshots_are_found_and_accepted_by_renaming() {
        let dir = std::env::temp_dir().join(format!("apollo-xtask-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("crate/src/snapshots")).unwrap();
        std::fs::create_dir_all(dir.join("target/debug")).unwrap();
        let pending = dir.join("crate/src/snapshots/a.snap.new");
        std::fs::write(&pending, "new").unwrap();
        std::fs::write(dir.join("crate/src/snapshots/a.snap"), "old").unwrap();
        std::fs::write(dir.join("target/debug/ignored.snap.new"), "build output").unwrap();
        assert_eq!(
            pending_snapshots(&dir).unwrap(),
            std::slice::from_ref(&pending)
        );
        accept_snapshot(&pending).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("crate/src/snapshots/a.snap")).unwrap(),
            "new"
        );
        assert!(pending_snapshots(&dir).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
