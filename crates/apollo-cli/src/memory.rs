//! The process's memory between loading a pipeline and running it.

/// Gives the memory freed so far back to the system (glibc's `malloc_trim`).
///
/// Loading 100,000 units builds and drops a YAML tree and the units as written, ~50 MB the
/// allocator would otherwise keep for the whole run: freed, but resident, in the middle of its
/// heap. The run then holds what it uses and no more (issue 17's budget: 150 MiB for a
/// 100,000-unit run). Elsewhere than glibc this does nothing.
pub(crate) fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free pages of the allocator's own heaps to the
    // system; it touches no memory the program holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
