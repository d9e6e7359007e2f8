//! Local resources: a unit on the local executor runs only while the `cpus` and `memory` of
//! the local units running stay within the capacity — `max_cpus`/`max_memory`, else the
//! machine's — like Snakemake's resources or ninja's pools (DESIGN §13).
//!
//! The gate sits on the worker, just before the executor is called: the attempt's
//! `unit_started` is durable already and the attempt waits for its share as it would wait for
//! a free worker (its `queued_ms` covers both). A unit that asks for more than the whole
//! capacity never gets here: `apollo check` refuses it ([`crate::validate`]). A unit that
//! states no `cpus` counts one CPU; one that states no `memory` counts none.
//!
//! Slurm units are not counted: the cluster places them.

use std::sync::{Condvar, Mutex, PoisonError};

use crate::cancel::CancelToken;
use crate::model::{Capacity, ExecutorKind, Unit};

/// What this machine offers: its CPUs (`available_parallelism`) and its memory
/// (`MemTotal` of `/proc/meminfo`; `None` where that cannot be read).
pub(crate) fn machine_capacity() -> (u32, Option<u64>) {
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kib| kib.trim().parse::<u64>().ok())
        })
        .map(|kib| kib.saturating_mul(1024));
    (cpus, memory)
}

/// The capacity local units share: `configured` where set, else the machine's.
pub(crate) fn effective_capacity(configured: Capacity) -> (u32, Option<u64>) {
    let (machine_cpus, machine_memory) = machine_capacity();
    (
        configured.cpus.unwrap_or(machine_cpus),
        configured.memory.or(machine_memory),
    )
}

/// What a local unit's attempt takes from the pool: (cpus, memory bytes).
pub(crate) fn demand(unit: &Unit) -> (u32, u64) {
    (
        unit.resources.cpus.unwrap_or(1),
        unit.resources.memory.unwrap_or(0),
    )
}

/// The pool of local capacity the workers take from and give back to.
#[derive(Debug)]
pub(crate) struct ResourcePool {
    cpus: u32,
    memory: Option<u64>,
    /// What the running local attempts hold: (cpus, memory).
    in_use: Mutex<(u32, u64)>,
    freed: Condvar,
}

impl ResourcePool {
    /// A pool of `cpus` CPUs and `memory` bytes (`None`: memory is not limited).
    pub(crate) fn new(cpus: u32, memory: Option<u64>) -> Self {
        Self {
            cpus: cpus.max(1),
            memory,
            in_use: Mutex::new((0, 0)),
            freed: Condvar::new(),
        }
    }

    /// Whether `demand` fits beside `in_use`. A demand larger than the whole pool fits an
    /// empty pool (check refuses such units; if one gets here anyway, it runs alone rather
    /// than never).
    fn fits(&self, in_use: (u32, u64), demand: (u32, u64)) -> bool {
        if in_use == (0, 0) {
            return true;
        }
        let cpus_fit = in_use.0.saturating_add(demand.0) <= self.cpus;
        let memory_fits = self
            .memory
            .is_none_or(|memory| in_use.1.saturating_add(demand.1) <= memory);
        cpus_fit && memory_fits
    }

    /// Wait until `unit`'s demand fits, take it, and return the permit that gives it back
    /// when dropped. `None` (nothing taken) for a unit not on the local executor, or when
    /// `cancel` is raised while waiting (the executor then sees the cancellation itself).
    pub(crate) fn acquire<'p>(&'p self, unit: &Unit, cancel: &CancelToken) -> Option<Permit<'p>> {
        if unit.executor != ExecutorKind::Local {
            return None;
        }
        let demand = demand(unit);
        let mut in_use = self.in_use.lock().unwrap_or_else(PoisonError::into_inner);
        while !self.fits(*in_use, demand) {
            if cancel.is_cancelled() {
                return None;
            }
            // A short bounded wait: a cancellation is noticed within it (the pool cannot hand
            // a borrowed condvar to the token's 'static wakers).
            in_use = self
                .freed
                .wait_timeout(in_use, std::time::Duration::from_millis(50))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        in_use.0 = in_use.0.saturating_add(demand.0);
        in_use.1 = in_use.1.saturating_add(demand.1);
        Some(Permit { pool: self, demand })
    }
}

/// A local attempt's share of the pool, given back on drop.
#[derive(Debug)]
pub(crate) struct Permit<'p> {
    pool: &'p ResourcePool,
    demand: (u32, u64),
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut in_use = self
            .pool
            .in_use
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        in_use.0 = in_use.0.saturating_sub(self.demand.0);
        in_use.1 = in_use.1.saturating_sub(self.demand.1);
        drop(in_use);
        self.pool.freed.notify_all();
    }
}

/// How many local units can run at once within the pipeline's capacity (`max_cpus`, else the
/// machine's CPUs), each taking at least the fewest CPUs any of its local units asks for:
/// what bounds `max_parallel` (`-j`) for local units whatever it is set to. `None` when the
/// pipeline has no local unit.
pub fn local_parallelism_cap(pipeline: &crate::model::Pipeline) -> Option<usize> {
    let fewest = (pipeline.units.iter())
        .filter(|unit| unit.executor == crate::model::ExecutorKind::Local)
        .map(|unit| demand(unit).0.max(1))
        .min()?;
    let (cpus, _) = effective_capacity(pipeline.capacity);
    Some(usize::try_from(cpus / fewest).unwrap_or(usize::MAX).max(1))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::engine::tests::unit;

    fn with_cpus(cpus: u32) -> Unit {
        let mut unit = unit("u", &[]);
        unit.resources.cpus = Some(cpus);
        unit
    }

    #[test]
    fn running_local_units_never_hold_more_cpus_than_the_pool() {
        let pool = ResourcePool::new(4, None);
        let cancel = CancelToken::new();
        let held = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        std::thread::scope(|scope| {
            for cpus in [3, 2, 2, 1, 4, 1] {
                let (pool, cancel, held, most) = (&pool, &cancel, &held, &most);
                scope.spawn(move || {
                    let unit = with_cpus(cpus);
                    let permit = pool.acquire(&unit, cancel).expect("not cancelled");
                    let now = held.fetch_add(cpus, Ordering::SeqCst) + cpus;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::yield_now();
                    held.fetch_sub(cpus, Ordering::SeqCst);
                    drop(permit);
                });
            }
        });
        assert!(most.load(Ordering::SeqCst) <= 4);
        assert_eq!(*pool.in_use.lock().unwrap(), (0, 0));
    }

    #[test]
    fn memory_counts_too_and_slurm_units_take_nothing() {
        let pool = ResourcePool::new(8, Some(1000));
        let cancel = CancelToken::new();
        let mut big = with_cpus(1);
        big.resources.memory = Some(800);
        let first = pool.acquire(&big, &cancel).expect("fits an empty pool");
        assert!(!pool.fits(*pool.in_use.lock().unwrap(), demand(&big)));
        let mut remote = big.clone();
        remote.executor = ExecutorKind::Slurm;
        assert!(pool.acquire(&remote, &cancel).is_none());
        drop(first);
        assert_eq!(*pool.in_use.lock().unwrap(), (0, 0));
    }

    #[test]
    fn a_waiter_gives_up_when_the_run_is_cancelled() {
        let pool = ResourcePool::new(1, None);
        let cancel = CancelToken::new();
        let holder = pool.acquire(&with_cpus(1), &cancel).expect("fits");
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| pool.acquire(&with_cpus(1), &cancel).is_none());
            cancel.cancel(crate::cancel::CancelLevel::Graceful);
            assert!(waiter.join().unwrap());
        });
        drop(holder);
    }
}
