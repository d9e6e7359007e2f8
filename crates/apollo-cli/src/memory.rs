//! The process's memory while a pipeline is parsed, and between loading it and running it.

/// Runs `parse` with every thread allocating from the one heap of the main thread.
///
/// A config of 100,000 units is parsed on this thread while another walks its units as they
/// come (apollo-core's config loader): with a heap of its own, the walking thread could not
/// reuse the YAML nodes the parse frees, and a run would peak ~17 MB higher. Afterwards glibc's
/// default limit (8 heaps per CPU) is set back: the run's threads, and the threads that decode
/// a parse-cache hit (which is not parsed), keep heaps of their own. Elsewhere than glibc this
/// only runs `parse`.
pub(crate) fn in_one_heap<T>(parse: impl FnOnce() -> T) -> T {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes how many heaps glibc's allocator may create from now on.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    let parsed = parse();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let default_limit = libc::c_int::try_from(8 * cpus).unwrap_or(libc::c_int::MAX);
        // SAFETY: as above.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, default_limit);
        }
    }
    parsed
}

/// Gives the memory freed so far back to the system (glibc's `malloc_trim`).
///
/// Loading 100,000 units builds and drops a YAML tree and the units as written, ~50 MB the
/// allocator would otherwise keep for the whole run: freed, but resident, in the middle of its
/// heap (issue 17's budget: 150 MiB for a run of 100,000 units). Elsewhere than glibc this
/// does nothing.
pub(crate) fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free pages of the allocator's own heaps to the
    // system; it touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
