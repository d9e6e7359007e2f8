//! Opening a run's journal for append: recovering its torn tail, checking its segments, and
//! picking up where the last writer stopped.

use std::path::Path;

use super::*;

impl JournalWriter {
    #[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
    pub(super) fn recover(
        run_dir: &Path,
        options: WriterOptions,
        mut read: Option<JournalReader>,
    ) -> Result<(Self, RecoveryReport), StoreError> {
        let mut report = RecoveryReport::default();
        loop {
            let (mut reader, last_seq, seen) = match read.take() {
                Some(read) if read.journal_dir() == run_dir.join("journal") => {
                    match read.whole_read_of_last_segment() {
                        Some(seen) => {
                            let last_seq = read.last_seq();
                            (read, last_seq, Some(seen))
                        }
                        // It read less than all: read the last segment here.
                        None => continue,
                    }
                }
                _ => {
                    let mut reader = JournalReader::open_last_segment(run_dir)?;
                    let mut last_seq = None;
                    // Every record is checked (checksum, sequence, decodability); the ones in
                    // the writer's exact form without building their events.
                    while let Some(stored) = reader.next_stored() {
                        last_seq = Some(stored?.seq());
                    }
                    (reader, last_seq, None)
                }
            };
            let warnings = reader.take_warnings();
            let journal_dir = reader.journal_dir().to_path_buf();
            let journal = Dir::open_checked_tail(&journal_dir, 3, false, false)?;
            let n_segments = reader.n_segments();
            let Some(last) = reader.segment_entries().last() else {
                // No segment at all: the run folder was created but its first segment never
                // made it to disk. Start it again.
                let run_id = run_dir
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let writer = Self::start(journal_dir, journal, run_id, options, 1, 0)?;
                report.n_segments = 1;
                report.warnings.extend(warnings);
                return Ok((writer, report));
            };
            let segment_path = last.file.path.clone();
            let segment_name = segment_file_name(last.file.number);
            match &last.header {
                HeaderState::Torn => {
                    // Only a regular file is moved aside (the reader refuses anything else).
                    let n_bytes = journal
                        .open_file(&segment_name, Access::Read)?
                        .metadata()
                        .map_err(|source| StoreError::io("stat", &segment_path, source))?
                        .len();
                    let saved_name = free_torn_name(&journal, &segment_name)?;
                    let saved_to = journal_dir.join(&saved_name);
                    journal.rename(&segment_name, &saved_name)?;
                    journal.sync()?;
                    report.torn.push(TornTail {
                        segment: segment_path,
                        offset: 0,
                        n_bytes,
                        saved_to,
                        last_kept_seq: None,
                    });
                    report.warnings.extend(warnings);
                    continue;
                }
                HeaderState::Salvaged(_) => {
                    return Err(StoreError::corruption(
                        &segment_path,
                        0,
                        None,
                        "bad segment header",
                    ));
                }
                HeaderState::Good(header) => {
                    let header = header.clone();
                    // Never through a symbolic link, only a regular file.
                    let file = journal.open_file(&segment_name, Access::ReadWrite)?;
                    let mut allocated_len = file
                        .metadata()
                        .map_err(|source| StoreError::io("stat", &segment_path, source))?
                        .len();
                    // The records end at the last non-zero byte; zeros after it are space
                    // allocated ahead, written over from there on.
                    let mut segment_len = crate::segment::data_end(&file, allocated_len)
                        .map_err(|source| StoreError::io("read", &segment_path, source))?;
                    // What the caller's reader read must still be the whole journal: the
                    // last segment the same file, unchanged, and no segment after it. Else
                    // another process wrote it since, and what the caller made of it (a
                    // resume's fold) is stale.
                    if let Some((read, _)) = seen
                        && (content_stamp(&file, &segment_path)? != read
                            || list_segment_files(&journal_dir)?
                                .last()
                                .is_none_or(|on_disk| on_disk.number != last.file.number))
                    {
                        return Err(StoreError::StateChanged {
                            path: segment_path,
                            what: "changed after apollo read it: another process writes this run's journal",
                        });
                    }
                    let last_seq = last_seq.unwrap_or(header.prev_seq);
                    let Some(next_seq) = last_seq.checked_add(1) else {
                        return Err(StoreError::corruption(
                            &segment_path,
                            0,
                            Some(last_seq),
                            "the journal's seq has reached the largest possible value",
                        ));
                    };
                    let torn_at = match seen {
                        Some((_, torn_at)) => torn_at,
                        None => warnings
                            .iter()
                            .find(|warning| warning.kind == WarningKind::TornTail)
                            .map(|torn| torn.offset),
                    };
                    if let Some(torn_at) = torn_at {
                        let tail = cut_torn_tail(&journal, &segment_name, torn_at, segment_len)?;
                        report.torn.push(TornTail {
                            last_kept_seq: Some(last_seq).filter(|&seq| seq > 0),
                            ..tail
                        });
                        segment_len = torn_at;
                        allocated_len = torn_at;
                    } else if allocated_len > segment_len {
                        // Zeros a writer that did not close left (a crash): given back, so
                        // that this writer's records change the file's size, as every
                        // session's do. A finished run's summary is cached while its last
                        // segment's size and times are unchanged (`runs_index.rs`), and times
                        // have the clock's coarse granularity.
                        file.set_len(segment_len)
                            .map_err(|source| StoreError::io("truncate", &segment_path, source))?;
                        allocated_len = segment_len;
                    }
                    report.warnings.extend(warnings);
                    // The first batch's time must differ from the last one kept (see
                    // `write_encoded_inner`), whichever process wrote it.
                    let last_batch_ts = crate::frame::ts_before(&file, segment_len)
                        .map_err(|source| StoreError::io("read", &segment_path, source))?
                        .and_then(|ts| {
                            let ts = std::str::from_utf8(&ts).ok()?;
                            DateTime::parse_from_rfc3339(ts).ok()
                        })
                        .map(|ts| ts.with_timezone(&Utc));
                    let clock = options.clock.clone().unwrap_or_else(|| Arc::new(Utc::now));
                    let segment_day = header
                        .created_at()
                        .map(|created| created.date_naive())
                        .unwrap_or_else(|| clock().date_naive());
                    report.n_segments = n_segments;
                    report.last_seq = last_seq;
                    let file = Arc::new(file);
                    let faults = FaultInjector::new(options.faults.clone());
                    let sync_thread = start_sync_thread(
                        &options,
                        &file,
                        &segment_path,
                        header.segment,
                        segment_len,
                        &faults,
                    )?;
                    let writer = Self {
                        journal_dir,
                        journal,
                        lock: None,
                        run_id: header.run_id.clone(),
                        durability: options.durability,
                        segment_max_bytes: options.segment_max_bytes,
                        clock,
                        faults,
                        file,
                        segment_number: header.segment,
                        segment_path,
                        segment_len,
                        acknowledged_len: segment_len,
                        sync_thread,
                        on_sync: options.on_sync,
                        allocated_len,
                        last_batch_ts,
                        segment_day,
                        segment_has_records: last_seq > header.prev_seq,
                        next_seq,
                        poisoned: None,
                        batch: Vec::new(),
                        payload: Vec::new(),
                        encoded: Vec::new(),
                        unsynced: false,
                    };
                    return Ok((writer, report));
                }
            }
        }
    }
}

/// `<segment>.torn`, or `.torn.2`, `.torn.3`... if earlier recoveries kept one already.
fn free_torn_name(journal: &Dir, segment_name: &str) -> Result<String, StoreError> {
    let mut candidate = format!("{segment_name}.torn");
    let mut n = 2;
    while journal.entry_type(&candidate)?.is_some() {
        candidate = format!("{segment_name}.torn.{n}");
        n += 1;
    }
    Ok(candidate)
}

/// Keeps bytes `offset..len` of the segment `segment_name` in a `.torn` file (durably), then
/// truncates the segment to `offset` (durably), dropping the zeros after `len` (space allocated
/// ahead) with them.
fn cut_torn_tail(
    journal: &Dir,
    segment_name: &str,
    offset: u64,
    len: u64,
) -> Result<TornTail, StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    let segment = journal.path().join(segment_name);
    let mut file = journal.open_file(segment_name, Access::ReadWrite)?;
    // A torn tail is at most what was written since the last sync: one batch of records
    // (each at most 16 MiB), and the batches of reuses written unsynced before it, which the
    // engine syncs within 200 ms and before it waits (see `Journal::append_unsynced`); and at
    // most a segment: reading it whole is bounded.
    let mut cut = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| {
            (&mut file)
                .take(len.saturating_sub(offset))
                .read_to_end(&mut cut)
        })
        .map_err(|source| StoreError::io("read", &segment, source))?;
    let saved_name = free_torn_name(journal, segment_name)?;
    journal.write_file_atomic(&saved_name, &cut, true)?;
    file.set_len(offset)
        .map_err(|source| StoreError::io("truncate", &segment, source))?;
    file.sync_all()
        .map_err(|source| StoreError::io("fsync", &segment, source))?;
    Ok(TornTail {
        segment: segment.clone(),
        offset,
        n_bytes: len.saturating_sub(offset),
        saved_to: journal.path().join(saved_name),
        last_kept_seq: None,
    })
}
