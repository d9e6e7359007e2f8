use apollo_core::Event;
use apollo_core::event::UnitReused;

use super::*;

fn reused(unit: &str) -> Event {
    Event::UnitReused(UnitReused {
        unit: unit.to_owned(),
        from_run: "r1".to_owned(),
        from_attempt: 1,
        input_hash: "i".to_owned(),
        inputs: Vec::new(),
        output_hash: "o".to_owned(),
        restored: Vec::new(),
    })
}

#[test]
fn an_unsynced_append_is_written_at_once_and_synced_by_the_next_durable_append_even_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = JournalWriter::create(dir.path(), "r", WriterOptions::default()).unwrap();
    let (writes, before) = writer.faults.counts();
    assert_eq!(
        writer
            .append_batch_unsynced(&[reused("a"), reused("b")])
            .unwrap(),
        2
    );
    assert_eq!(
        writer.faults.counts(),
        (writes + 1, before),
        "written, not synced"
    );
    // In the file already: a reader sees the records.
    let read: Vec<_> = crate::JournalReader::open(dir.path(), crate::ReadOptions::default())
        .unwrap()
        .map(|record| record.unwrap().seq)
        .collect();
    assert_eq!(read, [1, 2]);
    // An empty durable append syncs them; a second has nothing to sync.
    assert_eq!(writer.append_batch(&[]).unwrap(), 2);
    assert_eq!(writer.faults.counts(), (writes + 1, before + 1));
    writer.append_batch(&[]).unwrap();
    assert_eq!(writer.faults.counts().1, before + 1);
    // A durable append with records syncs once, whatever was unsynced before it.
    writer.append_batch_unsynced(&[reused("c")]).unwrap();
    assert_eq!(writer.append_batch(&[reused("d")]).unwrap(), 4);
    assert_eq!(writer.faults.counts(), (writes + 3, before + 2));
}

mod batched {
    use std::sync::Mutex;
    use std::time::Duration;

    use apollo_core::event::{RunFinished, RunStatus};

    use super::*;
    use crate::testing::{FaultErrno, FaultOp};

    /// A batched writer whose sync thread would wait an hour: only strict appends sync.
    fn lazy_writer(dir: &Path) -> (JournalWriter, Arc<Mutex<Vec<SyncedPosition>>>) {
        let syncs = Arc::new(Mutex::new(Vec::new()));
        let options = WriterOptions::default()
            .durability(Durability::Batched)
            .sync_interval(Duration::from_secs(3600))
            .on_sync({
                let syncs = Arc::clone(&syncs);
                Arc::new(move |position| syncs.lock().unwrap().push(position))
            });
        (JournalWriter::create(dir, "r", options).unwrap(), syncs)
    }

    fn finished() -> Event {
        Event::RunFinished(RunFinished {
            status: RunStatus::Succeeded,
            succeeded: 0,
            failed: 0,
            skipped: 0,
            reused: 0,
        })
    }

    #[test]
    fn a_batched_append_is_written_at_once_and_not_synced_until_a_strict_one() {
        let dir = tempfile::tempdir().unwrap();
        let (mut writer, syncs) = lazy_writer(dir.path());
        let header = writer.synced_position();
        let (writes, before) = writer.faults.counts();
        writer.append_batch(&[reused("a"), reused("b")]).unwrap();
        writer.append_batch(&[reused("c")]).unwrap();
        assert_eq!(
            writer.faults.counts(),
            (writes + 2, before),
            "written, not synced"
        );
        assert_eq!(writer.synced_position(), header);
        let read = crate::JournalReader::open(dir.path(), crate::ReadOptions::default())
            .unwrap()
            .count();
        assert_eq!(read, 3, "a reader sees the records at once");
        // The start of a unit that must not run twice: synced with everything before it.
        writer.append_batch_strict(&[reused("d")]).unwrap();
        assert_eq!(writer.faults.counts().1, before + 1);
        let end = SyncedPosition {
            segment: 1,
            offset: writer.segment_len,
        };
        assert_eq!(writer.synced_position(), end);
        assert_eq!(*syncs.lock().unwrap(), [end]);
        // Records that must be durable at once are, through the plain append.
        writer.append_batch(&[reused("e")]).unwrap();
        writer.append_batch(&[finished()]).unwrap();
        assert_eq!(writer.faults.counts().1, before + 2);
        assert_eq!(writer.synced_position().offset, writer.segment_len);
        // An empty append syncs what is written (the engine's last append), once.
        writer.append_batch(&[reused("f")]).unwrap();
        writer.append_batch(&[]).unwrap();
        writer.append_batch(&[]).unwrap();
        assert_eq!(writer.faults.counts().1, before + 3);
    }

    #[test]
    fn the_sync_thread_syncs_what_is_written_within_the_interval() {
        let dir = tempfile::tempdir().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let sender = Mutex::new(sender);
        let options = WriterOptions::default()
            .durability(Durability::Batched)
            .sync_interval(Duration::from_millis(1))
            .on_sync(Arc::new(move |position| {
                let _ = sender.lock().unwrap().send(position);
            }));
        let mut writer = JournalWriter::create(dir.path(), "r", options).unwrap();
        let (_, before) = writer.faults.counts();
        writer.append_batch(&[reused("a")]).unwrap();
        let end = writer.segment_len;
        // Waits for the thread's report (bounded: a thread that never syncs fails here).
        let synced = receiver.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(
            synced,
            SyncedPosition {
                segment: 1,
                offset: end
            }
        );
        assert_eq!(writer.synced_position().offset, end);
        assert_eq!(
            writer.faults.counts().1,
            before + 1,
            "one sync, on the thread"
        );
        // Nothing written, nothing synced: the thread sleeps.
        assert!(receiver.try_recv().is_err());
    }

    #[test]
    fn a_sync_failing_on_the_sync_thread_fails_the_next_append_and_poisons_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel::<()>();
        let sender = Mutex::new(sender);
        // Segment creation syncs the file and its folder; the third sync is the thread's.
        let options = WriterOptions::default()
            .durability(Durability::Batched)
            .sync_interval(Duration::from_millis(1))
            .faults(crate::testing::FaultPlan::fail(
                FaultOp::Fsync,
                3,
                FaultErrno::Eio,
            ))
            .on_sync(Arc::new(move |_| {
                let _ = sender.lock().unwrap().send(());
            }));
        let mut writer = JournalWriter::create(dir.path(), "r", options).unwrap();
        writer.append_batch(&[reused("a")]).unwrap();
        // The failed sync reports nothing; wait until the thread has tried.
        while writer.faults.counts().1 < 3 {
            std::thread::yield_now();
        }
        assert!(receiver.try_recv().is_err());
        let error = loop {
            // The failure is recorded just after the count: the append sees it at once
            // or at its next try.
            match writer.append_batch(&[reused("b")]) {
                Err(error) => break error,
                Ok(_) => continue,
            }
        };
        assert!(error.to_string().contains("fdatasync"), "{error}");
        assert!(matches!(
            writer.append_batch(&[reused("c")]),
            Err(StoreError::Poisoned { .. })
        ));
    }

    #[test]
    fn a_rotation_seals_the_old_segment_synced_and_the_new_one_starts_synced() {
        let dir = tempfile::tempdir().unwrap();
        let syncs = Arc::new(Mutex::new(Vec::new()));
        let options = WriterOptions::default()
            .durability(Durability::Batched)
            .sync_interval(Duration::from_secs(3600))
            .segment_max_bytes(600)
            .on_sync({
                let syncs = Arc::clone(&syncs);
                Arc::new(move |position| syncs.lock().unwrap().push(position))
            });
        let mut writer = JournalWriter::create(dir.path(), "r", options).unwrap();
        for unit in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            writer.append_batch(&[reused(unit)]).unwrap();
        }
        assert!(writer.segment_number > 1, "rotated");
        let segment = writer.segment_number;
        // Every segment but the last was synced whole before the next existed.
        let syncs = syncs.lock().unwrap().clone();
        for sealed in 1..segment {
            let len = std::fs::metadata(
                dir.path()
                    .join("journal")
                    .join(crate::segment::segment_file_name(sealed)),
            )
            .unwrap()
            .len();
            assert!(
                syncs.contains(&SyncedPosition {
                    segment: sealed,
                    offset: len
                }),
                "{sealed}: {syncs:?}"
            );
        }
        assert_eq!(writer.synced_position().segment, segment);
        assert!(writer.synced_position().offset < writer.segment_len);
    }
}
