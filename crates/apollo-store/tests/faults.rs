//! The fault-injection sweep: fail every write and every fsync of a short workload in turn.

use apollo_store::testing::{FaultErrno, FaultOp, FaultPlan};
use apollo_store::{
    Durability, ErrorKind, JournalWriter, ReadOptions, StoreError, WriterOptions, verify,
};

use crate::support::*;

/// The shape of a workload's records.
#[derive(Clone, Copy)]
enum Records {
    /// Small records in small segments, so that rotations happen.
    Rotating,
    /// 20 KB records in one segment, so that the writer allocates space ahead several times.
    Allocating,
}

/// A record of about 20 KB.
fn big_event(n: u64) -> apollo_core::Event {
    use apollo_core::event::{SkipReason, UnitSkipped};
    apollo_core::Event::UnitSkipped(UnitSkipped {
        unit: format!("unit_{n}"),
        reason: SkipReason::UpstreamFailed {
            upstream: "u".repeat(20_000),
        },
    })
}

/// A workload: 12 batches of 1–3 events; every fourth batch and the last are appended unsynced
/// (acknowledged only by the next durable append), and a last, empty append syncs them.
/// Returns the events acknowledged (in order) and the first error, if any.
fn workload(
    run_dir: &std::path::Path,
    faults: FaultPlan,
    records: Records,
) -> (Vec<apollo_core::Event>, Option<StoreError>) {
    let (segment_max_bytes, make): (u64, fn(u64) -> apollo_core::Event) = match records {
        Records::Rotating => (400, event),
        Records::Allocating => (64 << 20, big_event),
    };
    let options = WriterOptions::default()
        .durability(Durability::Fsync)
        .segment_max_bytes(segment_max_bytes)
        .faults(faults);
    let mut writer = match JournalWriter::create(run_dir, "20261130T021507Z-3f9a", options) {
        Ok(writer) => writer,
        Err(error) => return (Vec::new(), Some(error)),
    };
    let mut acked = Vec::new();
    let mut pending = Vec::new();
    let mut n = 0;
    for batch in 0..13u64 {
        let events: Vec<_> = (0..=batch % 3)
            .filter(|_| batch < 12)
            .map(|_| {
                n += 1;
                make(n)
            })
            .collect();
        let unsynced = batch % 4 == 1 || batch == 11;
        let result = if unsynced {
            writer.append_batch_unsynced(&events)
        } else {
            writer.append_batch(&events)
        };
        match result {
            Ok(seq) => {
                let written = acked.len() + pending.len() + events.len();
                assert_eq!(seq, written as u64);
                pending.extend(events);
                if !unsynced {
                    acked.append(&mut pending);
                }
            }
            Err(error) => {
                // Poisoned from now on: nothing more is accepted, nothing retried.
                let again = writer.append_batch(&[event(999)]).unwrap_err();
                assert!(matches!(again, StoreError::Poisoned { .. }), "{again}");
                assert_eq!(again.kind(), ErrorKind::Io);
                return (acked, Some(error));
            }
        }
    }
    (acked, None)
}

fn sweep(op: FaultOp, errno: FaultErrno, records: Records) -> usize {
    let mut n_failures = 0;
    for nth in 1.. {
        assert!(nth < 500, "the workload never ran clean");
        let dir = tempfile::tempdir().unwrap();
        let (acked, error) = workload(dir.path(), FaultPlan::fail(op, nth, errno), records);
        let Some(error) = error else {
            // Past the workload's last operation of this kind: done.
            break;
        };
        n_failures += 1;
        assert_eq!(error.kind(), ErrorKind::Io, "{op:?} #{nth}: {error}");
        assert!(
            matches!(error, StoreError::Io { .. }),
            "{op:?} #{nth}: {error}"
        );
        if !dir.path().join("journal").exists() {
            continue;
        }
        // Reopening recovers; every acknowledged record is there, in order.
        let (mut writer, _report) = JournalWriter::open_for_append(dir.path(), fast())
            .unwrap_or_else(|e| panic!("{op:?} #{nth}: reopening failed: {e}"));
        let records = read_all(dir.path(), ReadOptions::default())
            .0
            .unwrap_or_else(|e| panic!("{op:?} #{nth}: reading failed: {e}"));
        assert!(
            records.len() >= acked.len(),
            "{op:?} #{nth}: acknowledged records lost"
        );
        for (record, event) in records.iter().zip(&acked) {
            assert_eq!(&record.event, event, "{op:?} #{nth}");
        }
        // Unacknowledged records may survive (written, then the fsync failed), but only whole
        // batches in order, never garbage.
        assert!(
            records
                .iter()
                .enumerate()
                .all(|(i, r)| r.seq == i as u64 + 1)
        );
        let next = writer.append_batch(&[event(777)]).unwrap();
        assert_eq!(next, records.len() as u64 + 1);
        drop(writer);
        let report = verify(dir.path()).unwrap();
        assert!(
            report.is_clean() && report.torn_tail.is_none(),
            "{op:?} #{nth}: {report:?}"
        );
    }
    n_failures
}

#[test]
fn failing_every_write_in_turn_loses_no_acknowledged_record() {
    let n = sweep(FaultOp::Write, FaultErrno::Enospc, Records::Rotating);
    assert!(n >= 12, "only {n} writes swept");
}

#[test]
fn failing_every_fsync_in_turn_loses_no_acknowledged_record() {
    let n = sweep(FaultOp::Fsync, FaultErrno::Eio, Records::Rotating);
    assert!(n >= 12, "only {n} fsyncs swept");
}

#[test]
fn failing_every_write_or_fsync_while_space_is_allocated_ahead_loses_no_acknowledged_record() {
    // The writes include those of the zeros allocated ahead (64 KiB, then doubling): 24
    // records of 20 KB cross three chunk boundaries.
    let n = sweep(FaultOp::Write, FaultErrno::Enospc, Records::Allocating);
    assert!(n >= 15, "only {n} writes swept");
    let n = sweep(FaultOp::Fsync, FaultErrno::Eio, Records::Allocating);
    assert!(n >= 10, "only {n} fsyncs swept");
}

#[test]
fn a_failed_fsync_poisons_every_appender_of_a_shared_writer() {
    let dir = tempfile::tempdir().unwrap();
    let writer = JournalWriter::create(
        dir.path(),
        "r",
        WriterOptions::default().faults("fsync:4:EIO".parse().unwrap()),
    )
    .unwrap();
    let shared = writer.into_shared();
    // fsyncs 1 and 2 were the header and the folder; 3 is the first append's.
    assert_eq!(shared.append(&event(1)).unwrap(), 1);
    let error = shared.append(&event(2)).unwrap_err();
    assert!(error.to_string().contains("fdatasync"), "{error}");
    assert!(error.to_string().contains("Input/output error"), "{error}");
    let later = shared.append(&event(3)).unwrap_err();
    assert!(matches!(later, StoreError::Poisoned { .. }), "{later}");
    assert!(
        later
            .to_string()
            .contains("nothing after the last acknowledged record"),
        "{later}"
    );
}
