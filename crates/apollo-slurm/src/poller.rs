//! The one poller thread of an executor: it watches every job of the run at once, so a
//! thousand queued jobs cost one thread and one `squeue` per interval, never a thread or a
//! process per job.
//!
//! Each waiting attempt registers a [`Watch`] (the job's name, its folder, its id if known)
//! and gets a channel on which the poller sends [`JobNews`]. Per turn the poller
//!
//! * looks for the wrapper's `started` and `result` files of every watched job (a `stat`
//!   each, no Slurm call): a `result` file means the job is over, whatever Slurm says;
//! * at most once per queue interval, runs **one** `squeue` for all of this user's jobs and
//!   matches them to the watches by job name, and task for a job array's (so a job is found
//!   even when apollo never learnt its id). A job that Slurm no longer lists, or lists as ended, and that left no
//!   `result` file after `lost_after` more polls is reported [`JobNews::Vanished`].
//!
//! Both intervals back off (doubling up to their maximum) while nothing changes, and go back
//! to their minimum when a job is added, changes state, or an attempt asks for haste (after
//! a `scancel`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::client::SlurmClient;
use crate::job_name::JobRef;
use crate::result::read_started;
use crate::script::RESULT;
use crate::squeue::{JobState, QueueEntry};

/// What the poller tells a waiting attempt about its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobNews {
    /// Slurm lists the job with this id, in this state (sent when the state changes).
    Seen { job_id: String, state: JobState },
    /// The wrapper began, at this time (epoch ms).
    Started { job_id: String, at_ms: u64 },
    /// The wrapper's `result` file is there: the job is over.
    Finished,
    /// Slurm does not know the job any more (or lists it as ended) and it left no result.
    Vanished { last_state: Option<JobState> },
}

/// A job to watch.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// The job's name (`apollo:<run>:<unit>:<attempt>:<token>`), and its task in an array.
    pub(crate) job: JobRef,
    /// The attempt folder, where the wrapper writes its files.
    pub(crate) dir: PathBuf,
    /// The job id, when known.
    pub(crate) job_id: Option<String>,
}

/// The poller's intervals.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PollTiming {
    pub(crate) files_min: Duration,
    pub(crate) files_max: Duration,
    pub(crate) queue_min: Duration,
    pub(crate) queue_max: Duration,
    /// Polls a job may be missing (or ended) without a result before it counts as vanished.
    pub(crate) lost_after: u32,
}

struct Watched {
    dir: PathBuf,
    job_id: Option<String>,
    started_sent: bool,
    last_state: Option<JobState>,
    missing: u32,
    news: Sender<JobNews>,
}

#[derive(Default)]
struct State {
    watches: HashMap<String, Watched>,
    /// Go back to the shortest intervals (and poll at once).
    hurry: bool,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    client: Arc<SlurmClient>,
    timing: PollTiming,
}

/// The poller: a thread started with the first watch, stopped when dropped.
pub(crate) struct Poller {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl Poller {
    pub(crate) fn new(client: Arc<SlurmClient>, timing: PollTiming) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                client,
                timing,
            }),
            thread: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Watch `watch`'s job; its news arrive on the returned channel until it is finished,
    /// vanished or [`unwatch`](Self::unwatch)ed.
    pub(crate) fn watch(&self, watch: Watch) -> Receiver<JobNews> {
        let (news, receiver) = crossbeam_channel::unbounded();
        {
            let mut state = self.lock();
            state.watches.insert(
                watch.job.key(),
                Watched {
                    dir: watch.dir,
                    job_id: watch.job_id,
                    started_sent: false,
                    last_state: None,
                    missing: 0,
                    news,
                },
            );
            state.hurry = true;
        }
        self.shared.wake.notify_all();
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        if thread.is_none() {
            let shared = Arc::clone(&self.shared);
            *thread = Some(std::thread::spawn(move || poll_loop(&shared)));
        }
        receiver
    }

    /// Stop watching `job`.
    pub(crate) fn unwatch(&self, job: &JobRef) {
        self.lock().watches.remove(&job.key());
    }

    /// Poll soon, at the shortest intervals (a job was just cancelled).
    pub(crate) fn hurry(&self) {
        self.lock().hurry = true;
        self.shared.wake.notify_all();
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self
            .thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = thread.join();
        }
    }
}

#[expect(clippy::too_many_lines, reason = "to be split (issue 37), not grown")]
fn poll_loop(shared: &Shared) {
    let timing = shared.timing;
    let mut files_interval = timing.files_min;
    let mut queue_interval = timing.queue_min;
    let mut next_files = Instant::now();
    let mut next_queue = Instant::now() + timing.queue_min;
    loop {
        // Wait until something is due (or a watch arrives, or we must stop).
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if state.stop {
                return;
            }
            let now = Instant::now();
            if state.hurry {
                state.hurry = false;
                files_interval = timing.files_min;
                queue_interval = timing.queue_min;
                next_files = now;
                next_queue = next_queue.min(now + timing.queue_min);
            }
            if state.watches.is_empty() {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let due = next_files.min(next_queue);
            if now >= due {
                break;
            }
            state = shared
                .wake
                .wait_timeout(state, due - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let snapshot: Vec<(String, PathBuf, bool)> = state
            .watches
            .iter()
            .map(|(name, watched)| (name.clone(), watched.dir.clone(), watched.started_sent))
            .collect();
        drop(state);

        let now = Instant::now();
        let mut changed = false;
        let mut file_news: Vec<(String, JobNews)> = Vec::new();
        let files_due = now >= next_files;
        if files_due {
            for (name, dir, started_sent) in &snapshot {
                if !started_sent && let Some((job_id, at_ms)) = read_started(dir) {
                    file_news.push((name.clone(), JobNews::Started { job_id, at_ms }));
                    changed = true;
                }
                if dir.join(RESULT).exists() {
                    file_news.push((name.clone(), JobNews::Finished));
                    changed = true;
                }
            }
        }
        let queue = (now >= next_queue).then(|| shared.client.queue());

        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, news) in file_news {
            let finished = news == JobNews::Finished;
            if let Some(watched) = state.watches.get_mut(&name) {
                if let JobNews::Started { job_id, .. } = &news {
                    watched.started_sent = true;
                    if !job_id.is_empty() {
                        watched.job_id.get_or_insert_with(|| job_id.clone());
                    }
                }
                let _ = watched.news.send(news);
            }
            if finished {
                state.watches.remove(&name);
            }
        }
        let mut recheck_files = false;
        if let Some(Ok(entries)) = &queue {
            let by_key = index_by_key(entries, &state.watches);
            let mut vanished = Vec::new();
            for (name, watched) in &mut state.watches {
                match by_key.get(name.as_str()) {
                    Some(entry) => {
                        watched.job_id.get_or_insert_with(|| entry.job_id.clone());
                        if watched.last_state.as_ref() != Some(&entry.state) {
                            watched.last_state = Some(entry.state.clone());
                            let _ = watched.news.send(JobNews::Seen {
                                job_id: entry.job_id.clone(),
                                state: entry.state.clone(),
                            });
                            changed = true;
                        }
                        if entry.state.is_ended() {
                            // The result file should be there; give a shared filesystem a
                            // few polls to show it.
                            watched.missing += 1;
                            recheck_files = true;
                        } else {
                            watched.missing = 0;
                        }
                    }
                    None => watched.missing += 1,
                }
                if watched.missing > timing.lost_after && !watched.dir.join(RESULT).exists() {
                    vanished.push(name.clone());
                }
            }
            for name in vanished {
                if let Some(watched) = state.watches.remove(&name) {
                    let _ = watched.news.send(JobNews::Vanished {
                        last_state: watched.last_state,
                    });
                }
            }
        }
        drop(state);

        let now = Instant::now();
        if files_due {
            files_interval = if changed {
                timing.files_min
            } else {
                (files_interval * 2).min(timing.files_max)
            };
            next_files = now + files_interval;
        }
        if recheck_files {
            next_files = now;
        }
        if queue.is_some() {
            queue_interval = if changed || recheck_files {
                timing.queue_min
            } else {
                (queue_interval * 2).min(timing.queue_max)
            };
            next_queue = now + queue_interval;
        }
    }
}

/// The queue entries of the watched jobs, by [`JobRef::key`] (name, and task for an array's).
/// Two jobs of one key (a submission tried again) resolve to the one with the watched id,
/// else the latest.
fn index_by_key<'e>(
    entries: &'e [QueueEntry],
    watches: &HashMap<String, Watched>,
) -> HashMap<String, &'e QueueEntry> {
    let mut by_key: HashMap<String, &QueueEntry> = HashMap::new();
    for entry in entries {
        let key = JobRef::key_of(entry);
        let Some(watched) = watches.get(&key) else {
            continue;
        };
        let better = match by_key.get(&key) {
            None => true,
            Some(current) => match &watched.job_id {
                Some(id) => entry.job_id == *id,
                None => leading_number(&entry.job_id) > leading_number(&current.job_id),
            },
        };
        if better {
            by_key.insert(key, entry);
        }
    }
    by_key
}

/// A job id's number (an array task's array id), to tell the later of two jobs.
fn leading_number(job_id: &str) -> Option<u64> {
    job_id.split('_').next()?.parse().ok()
}
