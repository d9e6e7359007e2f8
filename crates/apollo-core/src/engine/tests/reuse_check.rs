//! The reuse check on its own (`engine/reuse.rs`): a candidate whose outputs are on disk as
//! it left them is reused, a changed or missing one restored when it can be and hashed again,
//! and a miss explained.

use std::collections::HashMap;
use std::sync::Mutex;

use std::path::Path;
use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::engine::prefetch::OutputPrefetch;
use crate::engine::reuse::{
    OutputRestorer, Reuse, ReuseCandidate, ReuseCheck, ReuseSource, check, check_reading,
};
use crate::engine::tests::unit;
use crate::hash;
use crate::model::Unit;

#[derive(Default)]
struct Source {
    by_hash: HashMap<String, ReuseCandidate>,
    latest: Option<ReuseCandidate>,
}

impl ReuseSource for Source {
    fn find(&self, _unit: &str, input_hash: &str) -> Option<ReuseCandidate> {
        self.by_hash.get(input_hash).cloned()
    }
    fn latest(&self, _unit: &str) -> Option<ReuseCandidate> {
        self.latest.clone()
    }
}

/// Writes `content` to the output on restore, and counts calls.
struct Restorer {
    content: &'static str,
    calls: Mutex<u32>,
}

impl OutputRestorer for Restorer {
    fn restore(
        &self,
        unit: &Unit,
        base_dir: &Path,
        _: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        *self.calls.lock().unwrap() += 1;
        std::fs::write(base_dir.join(&unit.outputs[0]), self.content).map_err(|e| e.to_string())?;
        Ok(vec![unit.outputs[0].clone()])
    }

    fn can_restore(
        &self,
        unit: &Unit,
        _: &Path,
        _: &ReuseCandidate,
    ) -> Result<Vec<String>, String> {
        match self.content {
            "recorded" => Ok(vec![unit.outputs[0].clone()]),
            _ => Err("not restorable: test".to_owned()),
        }
    }
}

fn writer() -> Unit {
    Unit {
        outputs: vec!["out.txt".into()],
        reuse: true,
        ..unit("writer", &[])
    }
}

fn candidate(dir: &Path, unit: &Unit, content: &str) -> ReuseCandidate {
    std::fs::write(dir.join("out.txt"), content).unwrap();
    let output_hash = hash::output_hash(unit, dir).unwrap().unwrap();
    ReuseCandidate {
        run_id: "20261130T000000Z-0001".into(),
        attempt: 1,
        input_hash: "h1".into(),
        inputs: Vec::new(),
        output_hash,
        restored: Vec::new(),
    }
}

fn check_now(reuse: &Reuse, unit: &Unit, dir: &Path, input_hash: &str) -> ReuseCheck {
    let cancel = CancelToken::new();
    check_reading(
        reuse,
        unit,
        dir,
        input_hash,
        &[],
        &hash::Limits::new(&cancel, None, None),
    )
}

#[test]
fn a_match_with_outputs_as_recorded_is_reused_and_a_changed_output_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let unit = writer();
    let found = candidate(dir.path(), &unit, "recorded");
    let source = Source {
        by_hash: HashMap::from([("h1".to_owned(), found.clone())]),
        latest: Some(found.clone()),
    };
    let reuse = Reuse::new(Arc::new(source));
    assert_eq!(
        check_now(&reuse, &unit, dir.path(), "h1"),
        ReuseCheck::Reusable(found)
    );
    std::fs::write(dir.path().join("out.txt"), "edited").unwrap();
    assert_eq!(
        check_now(&reuse, &unit, dir.path(), "h1"),
        ReuseCheck::NotReused(
            "output out.txt differs from the recorded one (not restorable: no blob store yet)"
                .into()
        )
    );
    std::fs::remove_file(dir.path().join("out.txt")).unwrap();
    assert_eq!(
        check_now(&reuse, &unit, dir.path(), "h1"),
        ReuseCheck::NotReused(
            "output out.txt is missing (not restorable: no blob store yet)".into()
        )
    );
    assert_eq!(
        check_now(&reuse, &unit, dir.path(), "h2"),
        ReuseCheck::NotReused(
            "input hash changed since run 20261130T000000Z-0001 attempt 1".into()
        )
    );
    let empty = Reuse::new(Arc::new(Source::default()));
    assert_eq!(
        check_now(&empty, &unit, dir.path(), "h1"),
        ReuseCheck::NotReused("no earlier success".into())
    );
}

#[test]
fn a_restored_output_is_hashed_again_before_it_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let unit = writer();
    let found = candidate(dir.path(), &unit, "recorded");
    std::fs::remove_file(dir.path().join("out.txt")).unwrap();
    let source = Arc::new(Source {
        by_hash: HashMap::from([("h1".to_owned(), found.clone())]),
        latest: None,
    });
    let good = Arc::new(Restorer {
        content: "recorded",
        calls: Mutex::new(0),
    });
    // A plan restores nothing: it counts the unit reused, as a run that restores it would,
    // naming what the restorer says it would put back.
    let planning = Reuse::new(source.clone())
        .with_restorer(good.clone())
        .without_writing();
    let restored = ReuseCandidate {
        restored: vec!["out.txt".into()],
        ..found.clone()
    };
    assert_eq!(
        check_now(&planning, &unit, dir.path(), "h1"),
        ReuseCheck::Reusable(restored.clone())
    );
    assert_eq!(*good.calls.lock().unwrap(), 0);
    assert!(
        !dir.path().join("out.txt").exists(),
        "a plan wrote an output"
    );
    let reuse = Reuse::new(source.clone()).with_restorer(good.clone());
    // The candidate reused names the files the restorer put back (its `unit_reused` does).
    assert_eq!(
        check_now(&reuse, &unit, dir.path(), "h1"),
        ReuseCheck::Reusable(restored.clone())
    );
    assert_eq!(*good.calls.lock().unwrap(), 1);
    // Restoring writes in the workspace: nothing hashed ahead is used after it.
    std::fs::remove_file(dir.path().join("out.txt")).unwrap();
    let prefetch = OutputPrefetch::new(1);
    let cancel = CancelToken::new();
    assert_eq!(
        check(
            &reuse,
            &unit,
            dir.path(),
            ("h1", &[]),
            &hash::Limits::new(&cancel, None, None),
            Some((&prefetch, 0)),
        ),
        Some(ReuseCheck::Reusable(restored))
    );
    assert!(!prefetch.is_open());
    // A restorer that writes the wrong bytes costs a rerun, never a wrong reuse.
    std::fs::remove_file(dir.path().join("out.txt")).unwrap();
    let wrong = Reuse::new(source).with_restorer(Arc::new(Restorer {
        content: "wrong",
        calls: Mutex::new(0),
    }));
    assert_eq!(
        check_now(&wrong, &unit, dir.path(), "h1"),
        ReuseCheck::NotReused(
            "output out.txt is missing, and after restoring it output out.txt differs from the recorded one"
                .into()
        )
    );
}
