//! The process's allocator, and how it holds memory while a large config is parsed.
//!
//! `apollo` allocates with mimalloc. Deciding a run is short and allocation-heavy: with glibc's
//! malloc much of it was heap bookkeeping and page faults, which mimalloc, keeping freed pages
//! for reuse and mapping its arenas in transparent huge pages where the kernel allows, mostly
//! avoids. The figures: `docs/design/2026-12-01-allocator.md`.

use std::sync::{Mutex, PoisonError};

/// Every allocation of the binary goes through mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`; libmimalloc-sys names no constant for
/// it): how many milliseconds freed memory stays committed before it goes back to the system.
/// The test below checks the number still names that option.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Held while the purge delay is changed (see [`freeing_at_once`]).
static SETTING: Mutex<()> = Mutex::new(());

/// Runs `parse` with freed memory given back to the system at once, then the allocator's
/// delay set back (`apollo run` around the parse of a parse-cache miss, `apollo check`).
///
/// A config of 100,000 units is parsed on this thread while another walks its units as they
/// come (apollo-core's config loader), and the YAML tree is freed as it is walked: kept
/// committed for mimalloc's default second, it raised the peak of a first run of 100,000 units
/// past issue 17's budget (`docs/design/2026-12-01-scale-100k.md`), and giving it back costs
/// no time there. Anything else (a parse-cache hit, the run itself) keeps the default, which is
/// what makes it fast.
#[allow(unsafe_code)] // mimalloc has no safe wrapper for its options.
pub(crate) fn freeing_at_once<T>(parse: impl FnOnce() -> T) -> T {
    // One setter at a time, so that each sets back what it found.
    let _one_at_a_time = SETTING.lock().unwrap_or_else(PoisonError::into_inner);
    /// Sets the delay back however `parse` ends.
    struct Restore(std::ffi::c_long);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: mimalloc's options are process-wide settings any thread may read and
            // change at any time; changing one only changes when freed memory is returned.
            unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, self.0) };
        }
    }
    // SAFETY: as above.
    let _restore = Restore(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) });
    // SAFETY: as above.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
    parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(unsafe_code)] // As `freeing_at_once`.
    fn purge_delay() -> std::ffi::c_long {
        // SAFETY: reading an option has no effect.
        unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }
    }

    #[test]
    fn the_purge_delay_option_is_the_one_mimalloc_documents_and_is_set_back() {
        // mimalloc's documented default for `purge_delay` (options.c): 1000 ms. Another
        // option at this number would have another default. (Read under the lock: other
        // tests check configs in this process.)
        let default = {
            let _setting = SETTING.lock().unwrap_or_else(PoisonError::into_inner);
            purge_delay()
        };
        assert_eq!(default, 1000);
        assert_eq!(freeing_at_once(purge_delay), 0);
        let after = {
            let _setting = SETTING.lock().unwrap_or_else(PoisonError::into_inner);
            purge_delay()
        };
        assert_eq!(after, default);
    }
}
