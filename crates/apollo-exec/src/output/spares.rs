//! Empty unnamed log files left by quick, silent attempts, kept for the next attempts.
//!
//! A file is reused only if nothing else holds it. The children get their own open of the
//! file (not a duplicate of apollo's), so before reusing a spare apollo asks for a write lease
//! on its own open: the kernel grants it only when no other open of the file remains. That is
//! asked when the spare is taken, not when it is put back: right after an attempt, a sibling
//! worker's child that is between its `clone` and its `exec` may still hold a copy of every
//! descriptor apollo had, the children's open included. A spare that a process which escaped
//! its attempt's group (`setsid`) still holds is skipped; one that such a process wrote to is
//! named after the attempt it came from; and spares that are dropped (too many, or the
//! executor is dropped) while held are named too, so what those processes write later lands in
//! the file of the attempt they came from.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::unnamed::{give_name, held_elsewhere};

/// Spare unnamed files kept for reuse, at most.
const MAX_SPARES: usize = 64;

/// Spares checked (oldest first) before a new file is made instead.
const SPARES_CHECKED_PER_TAKE: usize = 4;

/// Empty unnamed files left by quick, silent attempts, for the next attempts to reuse.
#[derive(Debug, Default)]
pub(crate) struct LogSpares {
    /// Oldest first.
    pub(super) spares: Mutex<VecDeque<Spare>>,
    /// Set once unnamed files turned out not to work here: from then on, log files are
    /// created with their names at once.
    pub(super) unsupported: AtomicBool,
}

/// An unnamed file that was empty when its attempt ended.
#[derive(Debug)]
pub(super) struct Spare {
    pub(super) file: File,
    /// The folder it was created in: it can only be linked under it (same filesystem).
    pub(super) home: PathBuf,
    /// The name it would have had in the attempt that used it last: where output that an
    /// escaped process of that attempt writes later belongs.
    pub(super) last_path: PathBuf,
}

impl Spare {
    /// Whether it can serve another attempt: still empty, and held by nothing else.
    fn reusable(&self) -> Availability {
        if !self
            .file
            .metadata()
            .is_ok_and(|metadata| metadata.len() == 0)
        {
            return Availability::Written;
        }
        held_elsewhere(&self.file)
    }

    /// Dropping it: an escaped process of its attempt may still write to it (or already
    /// did), so it gets that attempt's name first. Best effort.
    fn retire(self) {
        if self.reusable() != Availability::Free {
            let _ = give_name(&self.file, &self.last_path);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Availability {
    /// Empty, and open nowhere else.
    Free,
    /// Something else has it open.
    Held,
    /// Something wrote to it after its attempt.
    Written,
    /// Leases cannot tell here.
    Unknown,
}

impl LogSpares {
    /// A spare that can be named under `log_dir` and serve another attempt. Up to
    /// [`SPARES_CHECKED_PER_TAKE`] candidates are checked, oldest first; one that was written
    /// to is retired, one that is held stays for later.
    pub(super) fn take(&self, log_dir: &Path) -> Option<Spare> {
        let mut spares = self
            .spares
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut checked = 0;
        let mut index = 0;
        while index < spares.len() && checked < SPARES_CHECKED_PER_TAKE {
            if !log_dir.starts_with(&spares[index].home) {
                index += 1;
                continue;
            }
            checked += 1;
            match spares[index].reusable() {
                Availability::Free => return spares.remove(index),
                Availability::Held => index += 1,
                Availability::Written => {
                    if let Some(spare) = spares.remove(index) {
                        spare.retire();
                    }
                }
                Availability::Unknown => {
                    self.unsupported.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        None
    }

    pub(super) fn put(&self, spare: Spare) {
        let evicted = {
            let mut spares = self
                .spares
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            spares.push_back(spare);
            if spares.len() > MAX_SPARES {
                spares.pop_front()
            } else {
                None
            }
        };
        if let Some(spare) = evicted {
            spare.retire();
        }
    }
}

impl Drop for LogSpares {
    fn drop(&mut self) {
        let spares = std::mem::take(
            self.spares
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for spare in spares {
            spare.retire();
        }
    }
}
