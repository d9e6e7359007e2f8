//! The process's memory while a pipeline is loaded, and between loading it and running it.

/// Runs `load` with every thread allocating from the one heap of the main thread, then gives
/// the memory freed so far back to the system (glibc's `malloc_trim`).
///
/// Loading 100,000 units parses on this thread while another walks the units as they come
/// (apollo-core's config loader): with a heap of its own, the walking thread could not reuse
/// the YAML nodes the parse frees, and the load would peak ~17 MB higher. What the load built
/// and dropped (~50 MB: the YAML tree, the units as written) would stay resident, freed but in
/// the middle of the heap, for the whole run; it goes back once the load is over. Threads
/// started afterwards (the run's workers) get heaps of their own again, up to glibc's default
/// limit (8 per CPU). Issue 17's budget: 150 MiB for a run of 100,000 units. Elsewhere than
/// glibc this runs `load` and does nothing else.
pub(crate) fn load_in_one_heap<T>(load: impl FnOnce() -> T) -> T {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes how many heaps glibc's allocator may create from now on.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    let loaded = load();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let default_limit = libc::c_int::try_from(8 * cpus).unwrap_or(libc::c_int::MAX);
        // SAFETY: as above; then `malloc_trim` only returns free pages of the allocator's own
        // heaps to the system, touching no memory the program holds.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, default_limit);
            libc::malloc_trim(0);
        }
    }
    loaded
}
