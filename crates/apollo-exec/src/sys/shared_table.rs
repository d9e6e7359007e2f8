//! The guard's table of process-group ids: `SLOTS + 1` atomic `i32`s in an anonymous
//! `MAP_SHARED` mapping, which the forked guard helper sees as apollo writes it.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

/// Slots in the table: the most phases one executor can run at once. Entry 0 is not a slot: it
/// holds the high-water mark (one past the highest slot ever taken), so the helper scans only
/// the part of the table that was used.
pub(crate) const SLOTS: usize = 1 << 16;

/// The shared table. Its entries are only ever accessed atomically.
pub(crate) struct Table {
    base: NonNull<AtomicI32>,
}

// SAFETY: the mapping is plain shared memory, accessed only through atomics, and owned by the
// table (unmapped when it drops): sharing or sending the pointer between threads is sound.
unsafe impl Send for Table {}
// SAFETY: as above.
unsafe impl Sync for Table {}

impl Table {
    const BYTES: usize = (SLOTS + 1) * std::mem::size_of::<AtomicI32>();

    pub(crate) fn new() -> io::Result<Table> {
        // SAFETY: an anonymous shared mapping at an address the kernel picks: no file, and it
        // aliases no Rust object. The kernel zero-fills it, a valid `AtomicI32` bit pattern.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Table::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(address.cast::<AtomicI32>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Table { base })
    }

    /// Entry 0 (the high-water mark), then the slots.
    pub(crate) fn entries(&self) -> &[AtomicI32] {
        // SAFETY: a live, zero-initialised, page-aligned mapping of `SLOTS + 1` atomics, only
        // ever accessed atomically, unmapped only when `self` is dropped (which the borrow
        // prevents while the slice lives).
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), SLOTS + 1) }
    }

    /// One past the highest slot ever taken.
    pub(crate) fn high_water(&self) -> usize {
        high_water(&self.entries()[0])
    }

    /// Armed group ids (in the slots used so far).
    pub(crate) fn armed(&self) -> impl Iterator<Item = i32> + '_ {
        armed(self.entries())
    }

    /// The entries, as the forked helper sees them: it gets the same memory at the same
    /// address, but cannot use `&self` (the helper never returns, so nothing would unmap).
    pub(crate) fn raw(&self) -> NonNull<AtomicI32> {
        self.base
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` created; nothing refers to it any more
        // (slots borrow the guard that owns the table).
        unsafe { libc::munmap(self.base.as_ptr().cast(), Table::BYTES) };
    }
}

/// The high-water mark stored in `mark`, as an index bound.
pub(crate) fn high_water(mark: &AtomicI32) -> usize {
    usize::try_from(mark.load(Ordering::Acquire))
        .unwrap_or(0)
        .min(SLOTS + 1)
}

/// The armed group ids among `entries` (entry 0 being the high-water mark). Allocation-free,
/// for the forked helper too.
pub(crate) fn armed(entries: &[AtomicI32]) -> impl Iterator<Item = i32> + '_ {
    let used = high_water(&entries[0]).min(entries.len());
    entries[..used]
        .iter()
        .skip(1)
        .map(|entry| entry.load(Ordering::Acquire))
        .filter(|&pgid| pgid > 0)
}
