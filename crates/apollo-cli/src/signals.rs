//! SIGINT/SIGTERM while a run is in progress: the first asks the engine to stop gracefully
//! (start nothing new, terminate running units' groups with their grace, run cleanups), a
//! second one kills running units at once.
//!
//! The handlers only record the signal (signal-hook's self-pipe); a thread turns each into a
//! [`CancelToken`] escalation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use apollo_core::{CancelLevel, CancelToken};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// Installed signal handling; dropping it restores nothing but stops the watcher thread.
pub(crate) struct SignalWatch {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl SignalWatch {
    /// Watch SIGINT and SIGTERM, escalating `cancel` on each.
    pub(crate) fn install(cancel: &CancelToken) -> std::io::Result<Self> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let cancel = cancel.clone();
        let counter = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn(move || {
            for _signal in signals.forever() {
                let n_received = counter.fetch_add(1, Ordering::SeqCst) + 1;
                if n_received == 1 {
                    eprintln!(
                        "\napollo: stopping: terminating running units (grace, then kill), running cleanups; press Ctrl-C again to kill at once"
                    );
                    cancel.cancel(CancelLevel::Graceful);
                } else {
                    eprintln!("\napollo: killing running units now");
                    cancel.cancel(CancelLevel::Immediate);
                }
            }
        });
        Ok(Self {
            handle,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
