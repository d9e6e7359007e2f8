use super::*;
use crate::event::{UnitFinished, UnitMarked, UnitStarted};

fn started(unit: &str, attempt: u32) -> Event {
    Event::UnitStarted(UnitStarted {
        unit: unit.into(),
        attempt,
        input_hash: format!("in{attempt}"),
        inputs: vec![],
        inputs_manifest: None,
    })
}

fn finished(unit: &str, attempt: u32, status: AttemptStatus) -> Event {
    Event::UnitFinished(UnitFinished {
        unit: unit.into(),
        attempt,
        status,
        exit: None,
        failed_phase: None,
        timed_out: false,
        duration_ms: 1,
        queued_ms: 0,
        output_hash: Some("out".into()),
        stdout_bytes: 0,
        stderr_bytes: 0,
        user_cpu_ms: 0,
        sys_cpu_ms: 0,
        max_rss_kib: 0,
        leftovers_killed: 0,
        phases: vec![],
        error: None,
    })
}

#[test]
fn latest_record_decides() {
    let events = vec![
        started("a", 1),
        finished("a", 1, AttemptStatus::Failed),
        started("a", 2),
        finished("a", 2, AttemptStatus::Succeeded),
        started("b", 1),
    ];
    let state = PriorState::from_events(&events);
    let a = state.unit("a").unwrap();
    assert_eq!(a.last_attempt, 2);
    assert!(matches!(&a.state, PriorUnitState::Done { input_hash, .. } if input_hash == "in2"));
    assert_eq!(
        state.unit("b").unwrap().state,
        PriorUnitState::InFlight { attempt: 1 }
    );
    assert_eq!(state.count_done(["a", "b", "c"]), 1);
}

#[test]
fn a_human_verdict_settles_an_in_flight_unit() {
    let mut state = PriorState::from_events(&[started("b", 3)]);
    state.apply(&Event::UnitMarked(UnitMarked {
        unit: "b".into(),
        attempt: 3,
        verdict: Verdict::Succeeded,
        by: "ops".into(),
        note: None,
    }));
    assert!(matches!(
        state.unit("b").unwrap().state,
        PriorUnitState::Done { marked: true, .. }
    ));
}

fn with_phase(event: Event) -> Event {
    let Event::UnitFinished(mut finished) = event else {
        return event;
    };
    finished.phases.push(crate::event::PhaseRecord {
        phase: crate::model::Phase::Execute,
        offset_ms: 0,
        duration_ms: 5,
        exit: None,
        timed_out: finished.status == AttemptStatus::TimedOut,
    });
    Event::UnitFinished(finished)
}

#[test]
fn an_attempt_cut_off_after_its_processes_started_is_cut_off_not_merely_not_done() {
    for status in [AttemptStatus::Interrupted, AttemptStatus::TimedOut] {
        let state =
            PriorState::from_events(&[started("a", 1), with_phase(finished("a", 1, status))]);
        assert_eq!(
            state.unit("a").unwrap().state,
            PriorUnitState::CutOff { attempt: 1, status }
        );
    }
    // Halted before its turn: no phase, no submission — nothing of it ran.
    let state = PriorState::from_events(&[
        started("a", 1),
        finished("a", 1, AttemptStatus::Interrupted),
    ]);
    assert_eq!(state.unit("a").unwrap().state, PriorUnitState::NotDone);
    // Handed to a cluster: it may have run even with no phase recorded.
    let state = PriorState::from_events(&[
        started("a", 1),
        Event::UnitSubmitted(crate::event::UnitSubmitted {
            unit: "a".into(),
            attempt: 1,
            executor: "slurm".into(),
            job_id: "7".into(),
            reattached_from: None,
            partition: None,
            nodes: None,
            mem_mib: None,
        }),
        finished("a", 1, AttemptStatus::Interrupted),
    ]);
    assert!(matches!(
        state.unit("a").unwrap().state,
        PriorUnitState::CutOff { attempt: 1, .. }
    ));
    // A failure is the unit's own verdict: it is not a cut-off.
    let state = PriorState::from_events(&[
        started("a", 1),
        with_phase(finished("a", 1, AttemptStatus::Failed)),
    ]);
    assert_eq!(state.unit("a").unwrap().state, PriorUnitState::NotDone);
}

#[test]
fn a_rerun_verdict_keeps_a_done_unit_done_until_its_next_attempt() {
    let rerun = |attempt| {
        Event::UnitMarked(UnitMarked {
            unit: "a".into(),
            attempt,
            verdict: Verdict::Rerun,
            by: "ops".into(),
            note: None,
        })
    };
    let mut state = PriorState::from_events(&[
        started("a", 1),
        finished("a", 1, AttemptStatus::Succeeded),
        rerun(1),
    ]);
    assert!(matches!(
        state.unit("a").unwrap().state,
        PriorUnitState::Done {
            rerun_allowed: true,
            ..
        }
    ));
    state.apply(&started("a", 2));
    state.apply(&finished("a", 2, AttemptStatus::Succeeded));
    assert!(matches!(
        state.unit("a").unwrap().state,
        PriorUnitState::Done {
            attempt: 2,
            rerun_allowed: false,
            ..
        }
    ));
    // On a cut-off attempt it means: run it again.
    let state = PriorState::from_events(&[started("b", 1), {
        let mut marked = rerun(1);
        if let Event::UnitMarked(event) = &mut marked {
            event.unit = "b".into();
        }
        marked
    }]);
    assert_eq!(state.unit("b").unwrap().state, PriorUnitState::NotDone);
}

#[test]
fn verdicts_of_format_1_1_still_read_and_rerun_is_written_as_rerun() {
    for (text, verdict) in [
        (
            r#"{"kind":"unit_marked","unit":"a","attempt":1,"verdict":"succeeded","by":"ops","note":null}"#,
            Verdict::Succeeded,
        ),
        (
            r#"{"kind":"unit_marked","unit":"a","attempt":1,"verdict":"failed","by":"ops","note":null}"#,
            Verdict::Failed,
        ),
        (
            r#"{"kind":"unit_marked","unit":"a","attempt":1,"verdict":"rerun","by":"ops","note":null}"#,
            Verdict::Rerun,
        ),
    ] {
        let event: Event = serde_json::from_str(text).unwrap();
        assert!(matches!(&event, Event::UnitMarked(marked) if marked.verdict == verdict));
        assert_eq!(serde_json::to_string(&event).unwrap(), text);
    }
}

/// Issue 36 item 5: a job reattached to after apollo's death ran under the inputs of the
/// attempt that submitted it, not under those hashed when apollo came back: its success is
/// recorded under the earlier attempt's input hash (then a changed input runs it again).
#[test]
fn a_reattached_success_is_done_under_the_inputs_its_job_started_with() {
    let submitted = |attempt, reattached_from| {
        Event::UnitSubmitted(crate::event::UnitSubmitted {
            unit: "a".into(),
            attempt,
            executor: "slurm".into(),
            job_id: "7".into(),
            reattached_from,
            partition: None,
            nodes: None,
            mem_mib: None,
        })
    };
    let state = PriorState::from_events(&[
        started("a", 1),
        submitted(1, None),
        // apollo died; the input changed; the resume reattached attempt 2 to job 7.
        started("a", 2),
        submitted(2, Some(1)),
        finished("a", 2, AttemptStatus::Succeeded),
    ]);
    assert!(
        matches!(
            &state.unit("a").unwrap().state,
            PriorUnitState::Done { attempt: 2, input_hash, .. } if input_hash == "in1"
        ),
        "{:?}",
        state.unit("a")
    );
    // A fresh submission (no reattachment) keeps its own attempt's inputs.
    let state = PriorState::from_events(&[
        started("a", 1),
        started("a", 2),
        submitted(2, None),
        finished("a", 2, AttemptStatus::Succeeded),
    ]);
    assert!(matches!(
        &state.unit("a").unwrap().state,
        PriorUnitState::Done { input_hash, .. } if input_hash == "in2"
    ));
}
