//! The journal writer: frames records, writes them, makes them durable, rotates segments.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use apollo_core::{Event, Journal, JournalError};
use chrono::{DateTime, NaiveDate, Utc};

use crate::error::{StoreError, Warning, WarningKind};
use crate::fault::{FaultInjector, FaultPlan};
use crate::frame::encode_frame;
use crate::lock::LockWatch;
use crate::reader::{HeaderState, JournalReader};
use crate::record::{encode_checked, payload};
use crate::safe_dir::{Access, Dir, content_stamp, explain_efbig, held_state, path_id};
use crate::segment::{LAST_SEGMENT_FILE, SegmentHeader, list_segment_files, segment_file_name};
use crate::sync_thread::SyncThread;

/// Whether appends wait for the disk (defined beside the `Journal` seam in apollo-core, since
/// a run's `run_started` records it).
pub use apollo_core::Durability;

/// How long a [`Durability::Batched`] writer lets a record go unsynced, by default.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(10);

/// How far a journal is known durable: the segment being written and the byte up to which it
/// is synced (every earlier segment is, whole). Reported to [`WriterOptions::on_sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncedPosition {
    /// The segment's number (`000003.log` is 3).
    pub segment: u64,
    /// The segment's bytes `0..offset` are durable.
    pub offset: u64,
}

/// Called after each sync of the journal with how far it is durable (a test hook: see
/// [`WriterOptions::on_sync`]). It is called with the writer's internal lock held, from the
/// writer's thread or its sync thread, and must not call into the writer.
pub type SyncHook = Arc<dyn Fn(SyncedPosition) + Send + Sync>;

/// How an append asks to be made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// Written, not acknowledged: durable once a later durable append is
    /// ([`Journal::append_unsynced`]).
    Unsynced,
    /// Durable as the writer's [`Durability`] says: synced before returning under `Fsync`,
    /// written and bound to be synced within the interval under `Batched`.
    Durable,
    /// Synced before returning under every mode but `None` (a non-idempotent start, a run's
    /// first or last record, a mark, a hook's record, a Slurm submission, a sealed segment).
    Strict,
}

/// Whether `event` must be durable at once even in [`Durability::Batched`] (DESIGN §18):
/// the records that open a run (a power loss must never leave a run that exists only as its
/// header) or close it, a human's verdict, a hook's end and a Slurm submission.
pub(crate) fn synced_at_once(event: &Event) -> bool {
    matches!(
        event,
        Event::RunStarted(_)
            | Event::RunResumed(_)
            | Event::RunFinished(_)
            | Event::RunReproduces(_)
            | Event::UnitMarked(_)
            | Event::UnitSubmitted(_)
            | Event::HookFinished(_)
    )
}

/// Where the writer gets the time of each record (and of each segment's creation).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// How a [`JournalWriter`] behaves.
///
/// Start from [`WriterOptions::default`] (fsync every append, 64 MiB segments, no faults, the
/// system clock) and change what you need with the chainable setters; new options may be
/// added in any release, so the struct cannot be built with a literal outside this crate:
///
/// ```
/// use apollo_store::{Durability, WriterOptions};
///
/// let options = WriterOptions::default()
///     .durability(Durability::None)
///     .segment_max_bytes(1024 * 1024);
/// assert_eq!(options.segment_max_bytes, 1024 * 1024);
/// ```
///
/// [`durability`](Self::durability) `None`, [`faults`](Self::faults) and
/// [`clock`](Self::clock) are test hooks (see [`testing`](crate::testing)).
#[derive(Clone)]
#[non_exhaustive]
pub struct WriterOptions {
    /// fsync every append, batch the syncs, or never sync.
    pub durability: Durability,
    /// Under [`Durability::Batched`], how long a record may stay unsynced (default
    /// [`DEFAULT_SYNC_INTERVAL`], 10 ms).
    pub sync_interval: Duration,
    /// Called after each sync with how far the journal is durable (tests: the power-loss
    /// attack cuts the journal anywhere after it).
    pub on_sync: Option<SyncHook>,
    /// A segment is closed and the next one started once it holds this many bytes
    /// (default 64 MiB). A record is never split: a segment may end up to one record larger.
    pub segment_max_bytes: u64,
    /// Faults to inject (tests); empty by default.
    pub faults: FaultPlan,
    /// The clock; `None` is the system clock ([`Utc::now`]). Tests inject one to cross a UTC day.
    pub clock: Option<Clock>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Fsync,
            sync_interval: DEFAULT_SYNC_INTERVAL,
            on_sync: None,
            segment_max_bytes: apollo_core::journal::DEFAULT_SEGMENT_SIZE,
            faults: FaultPlan::default(),
            clock: None,
        }
    }
}

impl WriterOptions {
    /// With this durability. [`Durability::None`] is for tests and benchmarks only.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// With records synced within `sync_interval` under [`Durability::Batched`].
    pub fn sync_interval(mut self, sync_interval: Duration) -> Self {
        self.sync_interval = sync_interval;
        self
    }

    /// With `on_sync` told how far the journal is durable after each sync (a test hook; see
    /// [`SyncHook`]).
    pub fn on_sync(mut self, on_sync: SyncHook) -> Self {
        self.on_sync = Some(on_sync);
        self
    }

    /// With segments closed once they hold `segment_max_bytes` bytes (a segment may end up
    /// one record larger: records are never split).
    pub fn segment_max_bytes(mut self, segment_max_bytes: u64) -> Self {
        self.segment_max_bytes = segment_max_bytes;
        self
    }

    /// With these faults injected (tests; see [`FaultPlan`](crate::testing::FaultPlan)).
    pub fn faults(mut self, faults: FaultPlan) -> Self {
        self.faults = faults;
        self
    }

    /// With records timestamped by `clock` instead of the system clock (tests; see
    /// [`Clock`]).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("durability", &self.durability)
            .field("sync_interval", &self.sync_interval)
            .field("on_sync", &self.on_sync.as_ref().map(|_| "custom"))
            .field("segment_max_bytes", &self.segment_max_bytes)
            .field("faults", &self.faults)
            .field("clock", &self.clock.as_ref().map(|_| "custom"))
            .finish()
    }
}

/// A torn tail that [`JournalWriter::open_for_append`] cut off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment it was cut from.
    pub segment: PathBuf,
    /// Where the cut starts (the new length of the segment).
    pub offset: u64,
    /// How many bytes were cut.
    pub n_bytes: u64,
    /// Where the cut bytes were kept (`<segment>.torn`, or `.torn.2`... if that exists).
    pub saved_to: PathBuf,
    /// The last record kept, when any.
    pub last_kept_seq: Option<u64>,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "torn write recovered: cut {} unacknowledged bytes off {} at byte {}",
            self.n_bytes,
            self.segment.display(),
            self.offset
        )?;
        if let Some(seq) = self.last_kept_seq {
            write!(f, " (after seq {seq})")?;
        }
        write!(f, "; they are kept in {}", self.saved_to.display())
    }
}

/// What [`JournalWriter::open_for_append`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments in the journal after recovery.
    pub n_segments: usize,
    /// The seq of the last record kept (0 for an empty journal).
    pub last_seq: u64,
    /// Torn tails cut off (at most one record's worth, or a torn segment header).
    pub torn: Vec<TornTail>,
    /// Every warning, as text-ready values.
    pub warnings: Vec<Warning>,
}

/// Appends records to one run's journal. Single-threaded; for many appending threads with
/// group commit, see [`SharedWriter`](crate::SharedWriter).
///
/// Any write or fsync failure poisons the writer: the call returns the error and every later
/// call returns [`StoreError::Poisoned`]. Nothing is retried (after a failed fsync the kernel
/// may have dropped the dirty pages, so a retry that succeeds would lie).
pub struct JournalWriter {
    journal_dir: PathBuf,
    /// The journal folder, held open: segments are created under it (never through a
    /// symbolic link), and its identity is checked before each commit.
    journal: Dir,
    /// The lock file to check before each commit ([`JournalWriter::watch_lock`]).
    lock: Option<LockWatch>,
    run_id: String,
    durability: Durability,
    segment_max_bytes: u64,
    clock: Clock,
    faults: FaultInjector,
    /// The segment being written (shared with the sync thread).
    file: Arc<File>,
    segment_number: u64,
    segment_path: PathBuf,
    segment_len: u64,
    segment_day: NaiveDate,
    segment_has_records: bool,
    next_seq: u64,
    poisoned: Option<String>,
    batch: Vec<u8>,
    payload: Vec<u8>,
    /// The JSON objects of the events of the batch being appended, one after the other.
    encoded: Vec<u8>,
    /// Records were written by [`Journal::append_unsynced`] since the last sync: the next
    /// durable append syncs even when it writes nothing.
    unsynced: bool,
    /// The segment's length at its last acknowledged append (synced, or under
    /// [`Durability::Batched`] written by an append that returned): a failed write or sync
    /// cuts back to it, so records written unsynced before never outlive a failure half on
    /// disk.
    acknowledged_len: u64,
    /// Under [`Durability::Batched`], the thread that syncs within the interval.
    sync_thread: Option<SyncThread>,
    /// See [`WriterOptions::on_sync`].
    on_sync: Option<SyncHook>,
    /// The file's length: `segment_len` and the zeros written ahead of the records (see
    /// [`ALLOCATION_CHUNK`]).
    allocated_len: u64,
    /// The time of the last batch written: the next one's differs from it (to the
    /// microsecond records are dated to).
    last_batch_ts: Option<DateTime<Utc>>,
}

/// The writer allocates a segment's space ahead of its records by writing zeros, up to this
/// much at a time (doubling from 64 KiB), and trims what is left when it closes the segment.
/// Records are then written over zeros already on disk: the segment's size and blocks do not
/// change, so a sync need not commit the filesystem's own journal — on a loaded machine that
/// is a good part of what a sync costs. Readers read to the last non-zero byte (the writer
/// never writes a zero byte, and every record ends with a newline); see `segment::data_end`.
pub(crate) const ALLOCATION_CHUNK: u64 = 1024 * 1024;
/// The first chunk, written with a segment's header.
const FIRST_ALLOCATION: u64 = 64 * 1024;

impl std::fmt::Debug for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalWriter")
            .field("segment", &self.segment_path)
            .field("next_seq", &self.next_seq)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl JournalWriter {
    /// Starts the journal of a new run in `run_dir` (creating `run_dir/journal/000001.log`).
    /// Fails if the run already has segments.
    pub fn create(
        run_dir: &Path,
        run_id: &str,
        options: WriterOptions,
    ) -> Result<Self, StoreError> {
        let journal_dir = run_dir.join("journal");
        // `runs/<id>/journal` is walked without following symbolic links.
        let journal = Dir::open_checked_tail(&journal_dir, 3, true, options.durability.syncs())?;
        if !list_segment_files(&journal_dir)?.is_empty() {
            return Err(StoreError::invalid(format!(
                "{} already holds a journal; open it for append instead",
                journal_dir.display()
            )));
        }
        Self::start(journal_dir, journal, run_id.to_owned(), options, 1, 0)
    }

    /// A writer whose first segment is `number`, after seq `prev_seq`.
    fn start(
        journal_dir: PathBuf,
        journal: Dir,
        run_id: String,
        options: WriterOptions,
        number: u64,
        prev_seq: u64,
    ) -> Result<Self, StoreError> {
        let clock = options.clock.clone().unwrap_or_else(|| Arc::new(Utc::now));
        let faults = FaultInjector::new(options.faults.clone());
        let now = clock();
        let (file, path, len, allocated_len) = new_segment(
            &journal,
            &run_id,
            number,
            prev_seq,
            now,
            options.durability,
            options.segment_max_bytes,
            &faults,
        )?;
        let file = Arc::new(file);
        let sync_thread = start_sync_thread(&options, &file, &path, number, len, &faults)?;
        Ok(Self {
            journal_dir,
            journal,
            lock: None,
            run_id,
            durability: options.durability,
            segment_max_bytes: options.segment_max_bytes,
            clock,
            faults,
            file,
            segment_number: number,
            segment_path: path,
            segment_len: len,
            acknowledged_len: len,
            sync_thread,
            on_sync: options.on_sync,
            allocated_len,
            last_batch_ts: None,
            segment_day: now.date_naive(),
            segment_has_records: false,
            next_seq: prev_seq + 1,
            poisoned: None,
            batch: Vec::new(),
            payload: Vec::new(),
            encoded: Vec::new(),
            unsynced: false,
        })
    }

    /// Opens an existing run's journal to append to it, applying the recovery rules first:
    ///
    /// * every segment's header is checked (numbering, run id, format version), and the last
    ///   segment is read in full;
    /// * a torn tail of the last segment (a bad last record with nothing good after it, whose
    ///   bytes are what an unfinished write leaves: a prefix of a frame, or zeros in whole
    ///   blocks) is cut off and kept as `<segment>.torn`; a last segment whose very header is
    ///   torn is moved aside whole as `<segment>.torn`;
    /// * anything else that is wrong — a damaged last record that was written whole (it may
    ///   have been acknowledged) included — is a [`StoreError::Corruption`] naming file,
    ///   offset and seq, and nothing is modified.
    ///
    /// Sealed segments are not read record by record here (that is what
    /// [`verify`](crate::verify) and the reader do).
    pub fn open_for_append(
        run_dir: &Path,
        options: WriterOptions,
    ) -> Result<(Self, RecoveryReport), StoreError> {
        Self::recover(run_dir, options, None)
    }

    /// [`open_for_append`](Self::open_for_append) for a caller that has just read the run's
    /// whole journal with `read` (to its end, without an error: resuming a run folds every
    /// record first): the last segment is not read a second time. If the journal changed
    /// since `read` read it (the last segment is another file, or its size or times changed,
    /// or a segment follows it) another process writes it, and what the caller made of it is
    /// stale: [`StoreError::StateChanged`], nothing modified. When `read` stopped early, read a
    /// window or salvaged, the last segment is read again as `open_for_append` does. The
    /// recovery rules and the report are the same; the report's warnings are those `read`
    /// still holds (a torn tail is cut even if the caller took them).
    pub fn open_for_append_after(
        read: JournalReader,
        run_dir: &Path,
        options: WriterOptions,
    ) -> Result<(Self, RecoveryReport), StoreError> {
        Self::recover(run_dir, options, Some(read))
    }

    /// Appends `events` in order and returns once all of them are durable (one `fdatasync`
    /// for the lot, two if a rotation happens in between). Returns the seq of the last one.
    ///
    /// Under [`Durability::Batched`] it returns once they are written, and the sync thread
    /// syncs them within the interval — unless a record must be durable at once (a run's
    /// `run_started`, `run_resumed`, `run_finished`, `run_reproduces`, a `unit_marked`,
    /// `unit_submitted` or `hook_finished`), or `events` is empty (which only syncs): then
    /// the batch and everything before it are synced before it returns.
    pub fn append_batch(&mut self, events: &[Event]) -> Result<u64, StoreError> {
        let commit = if events.is_empty() || events.iter().any(synced_at_once) {
            Commit::Strict
        } else {
            Commit::Durable
        };
        self.append_events(events, commit)
    }

    /// Appends `events` in order and returns once they and everything before them are synced,
    /// whatever the writer's durability (but `None`, which never syncs): for a batch that
    /// starts a unit that must not run twice. Returns the seq of the last one.
    pub fn append_batch_strict(&mut self, events: &[Event]) -> Result<u64, StoreError> {
        self.append_events(events, Commit::Strict)
    }

    /// How far the journal is known durable. Under [`Durability::None`], how far it would be.
    pub fn synced_position(&self) -> SyncedPosition {
        match &self.sync_thread {
            Some(sync_thread) => sync_thread.position(),
            None => SyncedPosition {
                segment: self.segment_number,
                offset: self.acknowledged_len,
            },
        }
    }

    /// Appends `events` in order without syncing them (see [`Journal::append_unsynced`]):
    /// they are durable once a later [`append_batch`](Self::append_batch) returns, which then
    /// syncs even if it has no events of its own. A rotation still makes the segment it seals
    /// durable first. Returns the seq of the last one.
    pub fn append_batch_unsynced(&mut self, events: &[Event]) -> Result<u64, StoreError> {
        self.append_events(events, Commit::Unsynced)
    }

    fn append_events(&mut self, events: &[Event], commit: Commit) -> Result<u64, StoreError> {
        self.check_poisoned()?;
        // Every event is encoded before any is written (one that cannot be is an error, and
        // nothing is written), into one buffer the writer keeps, not an allocation per
        // record.
        let mut json = std::mem::take(&mut self.encoded);
        json.clear();
        let mut ends = Vec::with_capacity(events.len());
        for event in events {
            if let Err(error) = encode_checked(event, &mut json) {
                self.encoded = json;
                return Err(error);
            }
            ends.push(json.len());
        }
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let encoded: Vec<&[u8]> = starts.zip(&ends).map(|(at, &end)| &json[at..end]).collect();
        let result = self.write_encoded_as(&encoded, commit);
        drop(encoded);
        self.encoded = json;
        result
    }

    /// Makes the writer check, before each commit, that `lock` still holds the state
    /// directory's lock file (not deleted, not replaced: else a second apollo may have taken
    /// the state directory over). The writer already checks its own journal folder and
    /// segment. A failed check is a [`StoreError::StateChanged`] and poisons the writer.
    pub fn watch_lock(&mut self, lock: &crate::StateLock) -> Result<(), StoreError> {
        let watch = lock.watch()?;
        watch.check()?;
        self.lock = Some(watch);
        Ok(())
    }

    /// Checks that what this writer writes is still where readers look: the lock file (when
    /// watched), the journal folder and the segment are not deleted or replaced. Called once
    /// per commit: two `statx` of held descriptors (identity and link count only: asking for
    /// the times would make every write change the segment's inode, see [`held_state`]) and one
    /// `lstat`, two more with a watched lock.
    fn check_in_place(&self) -> Result<(), StoreError> {
        let journal = self.journal.held_state()?;
        if journal.n_links == 0 {
            return Err(StoreError::StateChanged {
                path: self.journal_dir.clone(),
                what: "was deleted",
            });
        }
        if path_id(&self.journal_dir)? != Some(journal.id) {
            return Err(StoreError::StateChanged {
                path: self.journal_dir.clone(),
                what: "was replaced or moved",
            });
        }
        if held_state(&self.file, &self.segment_path)?.n_links == 0 {
            return Err(StoreError::StateChanged {
                path: self.segment_path.clone(),
                what: "was deleted",
            });
        }
        if let Some(lock) = &self.lock {
            lock.check()?;
        }
        Ok(())
    }

    /// The seq the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The segment being written.
    pub fn segment_path(&self) -> &Path {
        &self.segment_path
    }

    /// The run id in the segment headers.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Turns the writer into one that many threads can append through, with group commit.
    pub fn into_shared(mut self) -> crate::SharedWriter {
        // A shared writer's empty append syncs nothing: records written unsynced are made
        // durable first (a failure poisons the writer, and its appends say so).
        let _ = self.write_encoded::<&[u8]>(&[]);
        crate::SharedWriter::new(self)
    }

    /// Syncs everything written so far, whatever the durability but `None` (the group
    /// commit's strict appends).
    pub(crate) fn sync_strict(&mut self) -> Result<u64, StoreError> {
        self.write_encoded_as::<&[u8]>(&[], Commit::Strict)
    }

    pub(crate) fn check_poisoned(&self) -> Result<(), StoreError> {
        match &self.poisoned {
            Some(cause) => Err(StoreError::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Writes already-serialized events as one batch; the group-commit leader's entry point.
    pub(crate) fn write_encoded<E: AsRef<[u8]>>(
        &mut self,
        events: &[E],
    ) -> Result<u64, StoreError> {
        self.write_encoded_as(events, Commit::Durable)
    }

    /// Writes already-serialized events as one batch, made durable as `commit` says.
    fn write_encoded_as<E: AsRef<[u8]>>(
        &mut self,
        events: &[E],
        commit: Commit,
    ) -> Result<u64, StoreError> {
        self.check_poisoned()?;
        let nothing_to_sync = match commit {
            Commit::Unsynced => true,
            Commit::Durable => !self.unsynced,
            Commit::Strict => self.segment_len <= self.synced_position().offset,
        };
        if events.is_empty() && nothing_to_sync {
            return Ok(self.next_seq - 1);
        }
        let result = self.write_encoded_inner(events, commit);
        if let Err(error) = &result {
            self.poisoned = Some(error.to_string());
        }
        result
    }

    fn write_encoded_inner<E: AsRef<[u8]>>(
        &mut self,
        events: &[E],
        commit: Commit,
    ) -> Result<u64, StoreError> {
        // A sync that failed on the sync thread fails the run (DESIGN §6).
        if let Some((path, source)) = self.sync_thread.as_ref().and_then(SyncThread::take_failure) {
            return Err(StoreError::io("fdatasync", &path, source));
        }
        self.check_in_place()?;
        self.batch.clear();
        // Every record of a batch gets the batch's time, and each batch its own: recovery
        // tells one unfinished batch from acknowledged records by it (`classify_hole`).
        let mut now = (self.clock)();
        if self
            .last_batch_ts
            .is_some_and(|last| last.timestamp_micros() == now.timestamp_micros())
        {
            now += chrono::TimeDelta::microseconds(1);
        }
        if !events.is_empty() {
            self.last_batch_ts = Some(now);
        }
        for event in events {
            let has_records = self.segment_has_records || !self.batch.is_empty();
            let full = self.segment_len + self.batch.len() as u64 >= self.segment_max_bytes;
            if has_records && (full || now.date_naive() != self.segment_day) {
                // The old segment is made durable before the next one exists, so a sealed
                // segment never has a torn tail.
                self.flush_batch(Commit::Strict)?;
                self.rotate(now)?;
            }
            payload(event.as_ref(), self.next_seq, now, &mut self.payload);
            encode_frame(&self.payload, &mut self.batch);
            self.next_seq += 1;
        }
        self.flush_batch(commit)?;
        Ok(self.next_seq - 1)
    }

    /// Writes the encoded batch and makes the segment durable as `commit` says (also what
    /// unsynced appends wrote before it, even when the batch is empty).
    fn flush_batch(&mut self, commit: Commit) -> Result<(), StoreError> {
        let unsynced_before = match commit {
            Commit::Unsynced => false,
            Commit::Durable => self.unsynced,
            Commit::Strict => self.segment_len > self.synced_position().offset,
        };
        if self.batch.is_empty() && !unsynced_before {
            return Ok(());
        }
        // A failed write or sync cuts back to the last sync: what unsynced appends wrote
        // since was never said to be durable, and is only records whose loss a resume repairs
        // (see `Journal::append_unsynced`); kept, it could reach the disk in part.
        let acknowledged_len = self.acknowledged_len;
        if !self.batch.is_empty() {
            let end = self.segment_len + self.batch.len() as u64;
            let written = self.allocate(end).and_then(|()| {
                self.faults
                    .write_all_at(&self.file, &self.batch, self.segment_len)
            });
            if let Err(source) = written {
                self.cut_back(acknowledged_len);
                return Err(StoreError::io(
                    "write to",
                    &self.segment_path,
                    explain_efbig(source),
                ));
            }
            self.allocated_len = self.allocated_len.max(end);
            self.segment_len = end;
            self.segment_has_records = true;
            self.batch.clear();
        }
        let batched = self.durability == Durability::Batched;
        match commit {
            Commit::Unsynced => {
                self.unsynced = true;
                if let Some(sync_thread) = &self.sync_thread {
                    sync_thread.written(self.segment_number, self.segment_len);
                }
                return Ok(());
            }
            // Written is acknowledged: the sync thread syncs it within the interval.
            Commit::Durable if batched => {
                self.unsynced = false;
                self.acknowledged_len = self.segment_len;
                if let Some(sync_thread) = &self.sync_thread {
                    sync_thread.written(self.segment_number, self.segment_len);
                }
                return Ok(());
            }
            Commit::Durable | Commit::Strict => {}
        }
        if self.durability.syncs() {
            let file = &self.file;
            if let Err(source) = self.faults.sync(|| file.sync_data()) {
                self.cut_back(acknowledged_len);
                return Err(StoreError::io("fdatasync", &self.segment_path, source));
            }
            if let Some(sync_thread) = &self.sync_thread {
                sync_thread.synced(self.segment_number, self.segment_len);
            }
            if let Some(on_sync) = &self.on_sync {
                on_sync(SyncedPosition {
                    segment: self.segment_number,
                    offset: self.segment_len,
                });
            }
        }
        self.unsynced = false;
        self.acknowledged_len = self.segment_len;
        Ok(())
    }

    /// After a failed write or fsync, cut the segment back to what was acknowledged, best
    /// effort: records the caller was never told are durable must not be read back as if they
    /// were (a `run_finished` whose fsync failed would otherwise make the next apollo start a
    /// new run instead of resuming this one). The writer is poisoned either way; if the cut
    /// fails too, the next open's recovery rules still apply.
    fn cut_back(&mut self, acknowledged_len: u64) {
        let _ = self.file.set_len(acknowledged_len);
        self.segment_len = acknowledged_len;
        self.allocated_len = acknowledged_len;
    }

    /// Makes sure the segment's space up to `end` is allocated (written with zeros), a chunk
    /// ahead (see [`ALLOCATION_CHUNK`]). Not past `segment_max_bytes`: the batch that crosses
    /// it is the segment's last, and its write extends the file itself.
    fn allocate(&mut self, end: u64) -> std::io::Result<()> {
        if end <= self.allocated_len || end >= self.segment_max_bytes {
            return Ok(());
        }
        let chunk = self.allocated_len.clamp(FIRST_ALLOCATION, ALLOCATION_CHUNK);
        let target = (self.allocated_len + chunk)
            .min(self.segment_max_bytes)
            .max(end);
        self.faults
            .write_zeros_at(&self.file, target - self.allocated_len, self.allocated_len)?;
        self.allocated_len = target;
        Ok(())
    }

    /// Gives back the space allocated ahead of the records, best effort: zeros left behind are
    /// read as no records, and take at most a chunk. Whether it trimmed anything.
    fn trim(&mut self) -> bool {
        let trimmed = self.allocated_len > self.segment_len
            && self
                .file
                .metadata()
                .is_ok_and(|metadata| metadata.len() == self.allocated_len)
            && self.file.set_len(self.segment_len).is_ok();
        if trimmed {
            self.allocated_len = self.segment_len;
        }
        trimmed
    }

    fn rotate(&mut self, now: DateTime<Utc>) -> Result<(), StoreError> {
        // Its records are durable: the sealed segment gives its spare space back, durably
        // (best effort: zeros left are read as no records, but a 1.3 reader would call them
        // damage in a sealed segment).
        if self.trim() && self.durability.syncs() {
            let _ = self.file.sync_data();
        }
        let number = self.segment_number + 1;
        let (file, path, len, allocated_len) = new_segment(
            &self.journal,
            &self.run_id,
            number,
            self.next_seq - 1,
            now,
            self.durability,
            self.segment_max_bytes,
            &self.faults,
        )?;
        self.file = Arc::new(file);
        self.segment_number = number;
        self.segment_path = path;
        self.segment_len = len;
        self.acknowledged_len = len;
        if let Some(sync_thread) = &self.sync_thread {
            sync_thread.switch_segment(
                Arc::clone(&self.file),
                self.segment_path.clone(),
                number,
                len,
            );
        }
        self.allocated_len = allocated_len;
        self.segment_day = now.date_naive();
        self.segment_has_records = false;
        // Only now that the new segment's header is durable: the journal records that it has
        // this many segments, so a missing last segment is told from a journal that ends
        // (`verify`, the reader and recovery refuse it).
        write_last_segment(&self.journal, number, self.durability)?;
        Ok(())
    }
}

impl Drop for JournalWriter {
    /// Trims the space allocated ahead of the records (a poisoned writer has cut its segment
    /// back already). Not synced: zeros that come back after a crash are read as no records.
    fn drop(&mut self) {
        // Only while this writer still owns the segment (its lock file, journal folder and
        // segment in place): never past records another apollo may have written since.
        if self.poisoned.is_none() && self.check_in_place().is_ok() {
            // The run's end under `Batched`: what the sync thread has not synced yet is
            // synced here, best effort (the engine's last append was strict already).
            if let Some(sync_thread) = self.sync_thread.take() {
                let unsynced = self.segment_len > sync_thread.position().offset;
                drop(sync_thread);
                if unsynced
                    && self.file.sync_data().is_ok()
                    && let Some(on_sync) = &self.on_sync
                {
                    on_sync(SyncedPosition {
                        segment: self.segment_number,
                        offset: self.segment_len,
                    });
                }
            }
            let _ = self.trim();
        }
    }
}

impl Journal for JournalWriter {
    fn append(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append_batch(events)
            .map(|_| ())
            .map_err(JournalError::caused_by)
    }

    fn append_unsynced(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append_batch_unsynced(events)
            .map(|_| ())
            .map_err(JournalError::caused_by)
    }

    fn append_strict(&mut self, events: &[Event]) -> Result<(), JournalError> {
        self.append_batch_strict(events)
            .map(|_| ())
            .map_err(JournalError::caused_by)
    }

    /// Writes `runs/<id>/manifests/<sha256>.json` (see `input_manifest.rs`); the writer's own
    /// state is untouched, so a failure fails one unit, not the journal.
    fn store_input_manifest(&mut self, sha256: &str, bytes: &[u8]) -> Result<(), JournalError> {
        let run_dir = self.journal_dir.parent().unwrap_or(&self.journal_dir);
        crate::input_manifest::write_input_manifest(run_dir, sha256, bytes, self.durability)
            .map_err(JournalError::caused_by)
    }
}

/// Creates segment `number` with its header and the first chunk of zero-filled space after it,
/// durably: both are fdatasynced and the new file's directory entry fsynced. Returns the file
/// (opened for writing), its path, the header's length (where records start) and the file's.
#[allow(clippy::too_many_arguments)]
fn new_segment(
    journal: &Dir,
    run_id: &str,
    number: u64,
    prev_seq: u64,
    now: DateTime<Utc>,
    durability: Durability,
    segment_max_bytes: u64,
    faults: &FaultInjector,
) -> Result<(File, PathBuf, u64, u64), StoreError> {
    let name = segment_file_name(number);
    let path = journal.path().join(&name);
    let file = journal
        .create_new_file(&name)
        .map_err(|error| match error {
            StoreError::Io { error, .. } => StoreError::io("create segment", &path, error),
            other => other,
        })?;
    let mut frame = Vec::new();
    encode_frame(
        &SegmentHeader::new(run_id, number, prev_seq, now).to_payload(),
        &mut frame,
    );
    let header_len = frame.len() as u64;
    let allocated_len = header_len.max(FIRST_ALLOCATION.min(segment_max_bytes));
    // Two writes (one sync): a write cut short can tear the header.
    faults
        .write_all_at(&file, &frame, 0)
        .and_then(|()| {
            if allocated_len == header_len {
                return Ok(());
            }
            faults.write_zeros_at(&file, allocated_len - header_len, header_len)
        })
        .map_err(|source| StoreError::io("write to", &path, explain_efbig(source)))?;
    if durability.syncs() {
        faults
            .sync(|| file.sync_data())
            .map_err(|source| StoreError::io("fdatasync", &path, source))?;
        faults
            .sync(|| rustix::fs::fsync(journal.fd()).map_err(Into::into))
            .map_err(|source| StoreError::io("fsync directory", journal.path(), source))?;
    }
    Ok((file, path, header_len, allocated_len))
}

/// The sync thread of a [`Durability::Batched`] writer of `file`, durable up to `synced`.
fn start_sync_thread(
    options: &WriterOptions,
    file: &Arc<File>,
    path: &Path,
    segment: u64,
    synced: u64,
    faults: &FaultInjector,
) -> Result<Option<SyncThread>, StoreError> {
    if options.durability != Durability::Batched {
        return Ok(None);
    }
    SyncThread::start(
        Arc::clone(file),
        path.to_path_buf(),
        segment,
        synced,
        options.sync_interval,
        faults.clone(),
        options.on_sync.clone(),
    )
    .map(Some)
    .map_err(|source| StoreError::io("start the sync thread of", path, source))
}

/// Records in `journal/last_segment` that the journal's segments go up to `number`.
fn write_last_segment(
    journal: &Dir,
    number: u64,
    durability: Durability,
) -> Result<(), StoreError> {
    journal.write_file_atomic(
        LAST_SEGMENT_FILE,
        format!("{number}\n").as_bytes(),
        durability.syncs(),
    )
}

mod recover;

#[cfg(test)]
mod tests;
