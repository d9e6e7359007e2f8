//! A relay of one output stream of one phase: the child writes into a pipe, a thread of
//! apollo's reads it, masks the secrets the unit receives (DESIGN §18) and caps the log at
//! the unit's `log_limit` (issue 36; [`crate::log_cap::Cap`]), then appends it to the log
//! file. Only units with secrets or a `log_limit` are relayed; the others write into their
//! log files directly.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use crate::log_cap::Cap;
use crate::secrets::Masker;

/// A running relay.
pub(crate) struct Relay {
    /// Sends the bytes the cap cut when the pipe's writers are gone.
    done: mpsc::Receiver<u64>,
}

/// How long, after a phase ended, its relays may take to see the end of their pipes. Only a
/// process that escaped the phase's group (and still holds the pipe) makes one wait this
/// long; its later output is still relayed, by the relay thread left running.
const RELAY_END_WAIT: Duration = Duration::from_secs(2);

impl Relay {
    /// A pipe whose write end is for the child (returned), and a thread relaying what comes
    /// out of it, masked with `values` and capped at `limit` bytes, to `log` (a descriptor in
    /// append mode).
    pub(crate) fn start(
        log: std::os::fd::BorrowedFd<'_>,
        values: &[&str],
        limit: Option<u64>,
    ) -> std::io::Result<(Relay, OwnedFd)> {
        let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let mut log = std::fs::File::from(log.try_clone_to_owned()?);
        let mut masker = (!values.is_empty()).then(|| Masker::new(values.iter().copied()));
        let mut cap = match limit {
            Some(limit) => Some(Cap::new(limit, log.metadata()?.len())),
            None => None,
        };
        let (done_sender, done) = mpsc::channel();
        std::thread::Builder::new()
            .name("apollo-relay".to_owned())
            .spawn(move || {
                let mut pipe = std::fs::File::from(read_end);
                let mut buffer = vec![0_u8; 64 * 1024];
                let mut write = |bytes: &[u8], log: &mut std::fs::File| match &mut cap {
                    Some(cap) => cap.push(bytes, log),
                    None => {
                        let _ = log.write_all(bytes);
                    }
                };
                loop {
                    match pipe.read(&mut buffer) {
                        Ok(0) => break,
                        Ok(n) => match &mut masker {
                            Some(masker) => write(&masker.push(&buffer[..n]), &mut log),
                            None => write(&buffer[..n], &mut log),
                        },
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                if let Some(masker) = &mut masker {
                    write(&masker.finish(), &mut log);
                }
                let cut = cap.map_or(0, |cap| cap.finish(&mut log));
                let _ = done_sender.send(cut);
            })?;
        Ok((Relay { done }, write_end))
    }

    /// Waits until everything the phase wrote is in the log file (the pipe's writers are
    /// gone), or [`RELAY_END_WAIT`] if a process that escaped the phase still holds it. The
    /// bytes the cap cut (0 when unknown yet).
    pub(crate) fn finish(self) -> u64 {
        self.done.recv_timeout(RELAY_END_WAIT).unwrap_or(0)
    }
}

/// The descriptor a relay's pipe gives the child, borrowed for the spawn.
pub(crate) fn borrowed(fd: &OwnedFd) -> std::os::fd::BorrowedFd<'_> {
    fd.as_fd()
}
