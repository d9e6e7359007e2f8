//! Fault injection: fail the N-th write or fsync of a journal writer.
//!
//! Every write and every sync a [`JournalWriter`](crate::JournalWriter) issues (segment data,
//! segment headers, the zeros allocated ahead, directory fsyncs, torn-tail copies) goes through
//! one [`FaultInjector`], which
//! counts them. A [`FaultPlan`] names which operation fails and with which error. A failed write
//! first writes half of its buffer, as a full disk or a crash in the middle of `write(2)` can
//! leave it, so the recovery of a torn tail is exercised too.
//!
//! Plans are parsed from strings such as `write:5:ENOSPC` or `fsync:3:EIO,write:9:EIO`, so an
//! end-to-end test can pass one through an environment variable.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StoreError;

/// Which kind of operation a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// A `write(2)` of journal bytes.
    Write,
    /// An `fdatasync(2)` of a segment or an `fsync(2)` of a directory.
    Fsync,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultErrno {
    /// No space left on device.
    Enospc,
    /// Input/output error.
    Eio,
    /// Disk quota exceeded.
    Edquot,
}

impl FaultErrno {
    fn raw(self) -> i32 {
        match self {
            FaultErrno::Enospc => libc::ENOSPC,
            FaultErrno::Eio => libc::EIO,
            FaultErrno::Edquot => libc::EDQUOT,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FaultErrno::Enospc => "ENOSPC",
            FaultErrno::Eio => "EIO",
            FaultErrno::Edquot => "EDQUOT",
        }
    }
}

/// One injected fault: the `nth` (from 1) operation of kind `op` fails with `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Fault {
    /// Which operations are counted.
    pub op: FaultOp,
    /// Which one fails, counting from 1.
    pub nth: u64,
    /// The error it fails with.
    pub errno: FaultErrno,
}

/// A set of faults to inject; empty (the default) injects nothing. Build one with
/// [`FaultPlan::fail`] and [`FaultPlan::and`], or parse it (`write:5:ENOSPC,fsync:3:EIO`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultPlan {
    /// The faults.
    pub faults: Vec<Fault>,
}

/// The environment variable the `apollo` binary reads a [`FaultPlan`] from (end-to-end tests
/// only), e.g. `APOLLO_FAULTS=fsync:3:EIO`.
pub const FAULT_PLAN_ENV: &str = "APOLLO_FAULTS";

impl FaultPlan {
    /// The plan in [`FAULT_PLAN_ENV`], or the empty plan when it is unset.
    pub fn from_env() -> Result<Self, StoreError> {
        match std::env::var(FAULT_PLAN_ENV) {
            Ok(text) => text
                .parse()
                .map_err(|error| StoreError::invalid(format!("{FAULT_PLAN_ENV}: {error}"))),
            Err(_) => Ok(Self::default()),
        }
    }

    /// A plan that fails the `nth` operation of kind `op` with `errno`.
    pub fn fail(op: FaultOp, nth: u64, errno: FaultErrno) -> Self {
        Self {
            faults: vec![Fault { op, nth, errno }],
        }
    }

    /// This plan, and also the `nth` operation of kind `op` failing with `errno`.
    #[must_use]
    pub fn and(mut self, op: FaultOp, nth: u64, errno: FaultErrno) -> Self {
        self.faults.push(Fault { op, nth, errno });
        self
    }

    /// Whether the plan injects nothing.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }
}

impl FromStr for FaultPlan {
    type Err = StoreError;

    /// Parses `op:nth:ERRNO[,op:nth:ERRNO...]` where op is `write` or `fsync` and ERRNO is
    /// `ENOSPC`, `EIO` or `EDQUOT`. An empty string is the empty plan.
    fn from_str(text: &str) -> Result<Self, StoreError> {
        let mut faults = Vec::new();
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let parts: Vec<&str> = item.split(':').collect();
            let [op, nth, errno] = parts.as_slice() else {
                return Err(StoreError::invalid(format!(
                    "fault `{item}` is not of the form op:nth:ERRNO (e.g. write:5:ENOSPC)"
                )));
            };
            let op = match *op {
                "write" => FaultOp::Write,
                "fsync" => FaultOp::Fsync,
                other => {
                    return Err(StoreError::invalid(format!(
                        "fault `{item}`: unknown operation `{other}`, expected `write` or `fsync`"
                    )));
                }
            };
            let nth = match nth.parse::<u64>() {
                Ok(nth) if nth >= 1 => nth,
                _ => {
                    return Err(StoreError::invalid(format!(
                        "fault `{item}`: `{nth}` is not a count from 1"
                    )));
                }
            };
            let errno = match errno.to_ascii_uppercase().as_str() {
                "ENOSPC" => FaultErrno::Enospc,
                "EIO" => FaultErrno::Eio,
                "EDQUOT" => FaultErrno::Edquot,
                other => {
                    return Err(StoreError::invalid(format!(
                        "fault `{item}`: unknown error `{other}`, expected ENOSPC, EIO or EDQUOT"
                    )));
                }
            };
            faults.push(Fault { op, nth, errno });
        }
        Ok(Self { faults })
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, fault) in self.faults.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            let op = match fault.op {
                FaultOp::Write => "write",
                FaultOp::Fsync => "fsync",
            };
            write!(f, "{op}:{}:{}", fault.nth, fault.errno.name())?;
        }
        Ok(())
    }
}

/// What a fault that fires writes on stderr, before the fault (`write:5:ENOSPC`).
pub const FAULT_FIRED: &str = "apollo: APOLLO_FAULTS fired: ";

/// Counts a writer's operations and fails the ones its plan names. Cheap when the plan is
/// empty: two relaxed atomic increments per operation.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultInjector {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    plan: FaultPlan,
    writes: AtomicU64,
    syncs: AtomicU64,
}

impl FaultInjector {
    pub(crate) fn new(plan: FaultPlan) -> Self {
        Self {
            inner: Arc::new(Counters {
                plan,
                writes: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
            }),
        }
    }

    fn check(&self, op: FaultOp) -> Option<io::Error> {
        let counter = match op {
            FaultOp::Write => &self.inner.writes,
            FaultOp::Fsync => &self.inner.syncs,
        };
        let nth = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let fault =
            (self.inner.plan.faults.iter()).find(|fault| fault.op == op && fault.nth == nth)?;
        // Said on stderr (only ever under a plan, a test's): a test then tells a fault that
        // fired from one the run never reached, whatever the run's exit code.
        let fired = FaultPlan {
            faults: vec![*fault],
        };
        eprintln!("{FAULT_FIRED}{fired}");
        Some(io::Error::from_raw_os_error(fault.errno.raw()))
    }

    /// Writes all of `bytes` to `file` at `offset`, or half of them and an injected error.
    pub(crate) fn write_all_at(
        &self,
        file: &std::fs::File,
        bytes: &[u8],
        offset: u64,
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        if let Some(error) = self.check(FaultOp::Write) {
            file.write_all_at(&bytes[..bytes.len() / 2], offset)?;
            return Err(error);
        }
        file.write_all_at(bytes, offset)
    }

    /// Writes `len` zero bytes to `file` at `offset` (one counted write), or half of them and
    /// an injected error. The zeros come from one static block, written many times over with
    /// `pwritev`: no buffer of `len` fresh bytes to allocate and fault in.
    pub(crate) fn write_zeros_at(
        &self,
        file: &std::fs::File,
        len: u64,
        offset: u64,
    ) -> io::Result<()> {
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        let injected = self.check(FaultOp::Write);
        let end = offset + if injected.is_some() { len / 2 } else { len };
        let mut at = offset;
        while at < end {
            let left = end - at;
            let slices: Vec<io::IoSlice<'_>> = (0..left.div_ceil(ZEROS.len() as u64).min(64))
                .map(|index| {
                    let from = index * ZEROS.len() as u64;
                    let n = (left - from).min(ZEROS.len() as u64);
                    io::IoSlice::new(&ZEROS[..usize::try_from(n).unwrap_or(ZEROS.len())])
                })
                .collect();
            match rustix::io::pwritev(file, &slices, at) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => at += n as u64,
                Err(rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
        match injected {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Runs `sync`, or returns an injected error without syncing.
    pub(crate) fn sync(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        if let Some(error) = self.check(FaultOp::Fsync) {
            return Err(error);
        }
        sync()
    }

    /// Operations counted so far: (writes, syncs).
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.inner.writes.load(Ordering::Relaxed),
            self.inner.syncs.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_print_back() {
        let plan: FaultPlan = "write:5:ENOSPC, fsync:3:eio".parse().unwrap();
        assert_eq!(
            plan,
            FaultPlan::fail(FaultOp::Write, 5, FaultErrno::Enospc).and(
                FaultOp::Fsync,
                3,
                FaultErrno::Eio
            )
        );
        assert_eq!(plan.to_string(), "write:5:ENOSPC,fsync:3:EIO");
        assert!("".parse::<FaultPlan>().unwrap().is_empty());
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        for (text, expected) in [
            ("write:0:EIO", "not a count from 1"),
            ("read:1:EIO", "unknown operation `read`"),
            ("write:1:EPERM", "unknown error `EPERM`"),
            ("write:1", "not of the form"),
        ] {
            let error = text.parse::<FaultPlan>().unwrap_err();
            assert!(error.to_string().contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn zeros_are_written_over_what_was_there_and_an_injected_failure_writes_half() {
        use std::os::unix::fs::FileExt;
        let injector = FaultInjector::new(FaultPlan::fail(FaultOp::Write, 2, FaultErrno::Enospc));
        let file = tempfile::tempfile().unwrap();
        let ones = vec![0xffu8; 5 << 20];
        file.write_all_at(&ones, 0).unwrap();
        // Past what one `pwritev` of 64 blocks writes, at an odd offset.
        injector.write_zeros_at(&file, (4 << 20) + 100, 7).unwrap();
        let mut bytes = vec![0u8; 5 << 20];
        file.read_exact_at(&mut bytes, 0).unwrap();
        assert!(bytes[..7].iter().all(|&byte| byte == 0xff));
        assert!(bytes[7..(4 << 20) + 107].iter().all(|&byte| byte == 0));
        assert!(bytes[(4 << 20) + 107..].iter().all(|&byte| byte == 0xff));
        file.write_all_at(&ones, 0).unwrap();
        let error = injector.write_zeros_at(&file, 1000, 0).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSPC));
        file.read_exact_at(&mut bytes[..1000], 0).unwrap();
        assert!(bytes[..500].iter().all(|&byte| byte == 0));
        assert!(bytes[500..1000].iter().all(|&byte| byte == 0xff));
    }

    #[test]
    fn the_nth_write_fails_after_writing_half() {
        let injector = FaultInjector::new(FaultPlan::fail(FaultOp::Write, 2, FaultErrno::Eio));
        let file = tempfile::tempfile().unwrap();
        injector.write_all_at(&file, b"abcd", 0).unwrap();
        let error = injector.write_all_at(&file, b"efgh", 4).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EIO));
        assert_eq!(
            std::fs::read(format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(&file)
            ))
            .unwrap(),
            b"abcdef"
        );
        injector.write_all_at(&file, b"ij", 6).unwrap();
        assert_eq!(injector.counts(), (3, 0));
    }
}
