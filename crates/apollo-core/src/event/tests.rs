use super::*;

#[test]
fn events_serialize_with_a_snake_case_kind_tag() {
    let event = Event::UnitSkipped(UnitSkipped {
        unit: "clean".into(),
        reason: SkipReason::UpstreamFailed {
            upstream: "fetch".into(),
        },
    });
    let json = serde_json::to_string(&event).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"unit_skipped","unit":"clean","reason":"upstream_failed","upstream":"fetch"}"#
    );
    let back: Event = serde_json::from_str(&json).unwrap();
    assert_eq!(back, event);
    assert_eq!(back.kind(), "unit_skipped");
}

#[test]
fn a_reattached_attempt_names_the_attempt_that_submitted_the_job() {
    let event = Event::UnitSubmitted(UnitSubmitted {
        unit: "align".into(),
        attempt: 3,
        executor: "slurm".into(),
        job_id: "4242".into(),
        reattached_from: Some(2),
        partition: None,
        nodes: None,
        mem_mib: None,
    });
    let json = serde_json::to_string(&event).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"unit_submitted","unit":"align","attempt":3,"executor":"slurm","job_id":"4242","reattached_from":2}"#
    );
    let back: Event = serde_json::from_str(&json).unwrap();
    assert_eq!(back, event);
}

#[test]
fn a_submitted_attempt_serializes_as_unit_submitted() {
    let event = Event::UnitSubmitted(UnitSubmitted {
        unit: "align".into(),
        attempt: 2,
        executor: "slurm".into(),
        job_id: "4242".into(),
        reattached_from: None,
        partition: None,
        nodes: None,
        mem_mib: None,
    });
    let json = serde_json::to_string(&event).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"unit_submitted","unit":"align","attempt":2,"executor":"slurm","job_id":"4242"}"#
    );
    let back: Event = serde_json::from_str(&json).unwrap();
    assert_eq!(back, event);
    assert_eq!(
        (back.kind(), back.unit()),
        ("unit_submitted", Some("align"))
    );
}
