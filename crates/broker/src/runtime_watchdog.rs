//! Measures how long the async runtime takes to start a task: a thread of
//! its own spawns a probe onto the runtime every [`PROBE_INTERVAL`] and
//! times it until the probe runs. Work that blocks a worker thread (file
//! I/O, an fsync, a lock held across either) or keeps every worker busy
//! shows here as a long delay; a delay over [`STALL`] is counted as a
//! stall (`weir_runtime_schedule_delay_seconds`,
//! `weir_runtime_stalls_total`).
//!
//! With several workers, one blocked worker alone delays a probe only when
//! the others are busy too: the measure is what a newly ready request
//! waits for, not the state of each worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::metrics::Histogram;

/// How often a probe is sent.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(10);

/// A probe delay above this is a stall.
pub const STALL: Duration = Duration::from_millis(10);

/// How long a probe is waited for before it is counted as lost (the
/// runtime is shutting down, or stuck longer than this; the delay is then
/// recorded as this long).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The delays measured so far.
#[derive(Debug, Default)]
pub struct RuntimeDelays {
    pub delay: Histogram,
    /// Probes delayed by more than [`STALL`].
    pub stalls: AtomicU64,
    /// The longest delay seen, in microseconds.
    pub max_us: AtomicU64,
}

impl RuntimeDelays {
    /// Records one probe's delay.
    pub fn observe(&self, d: Duration) {
        self.delay.observe(d);
        if d > STALL {
            self.stalls.fetch_add(1, Ordering::Relaxed);
        }
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }
}

/// The probing thread; stops when dropped.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts probing the runtime of `handle` into `delays`.
    pub fn start(handle: tokio::runtime::Handle, delays: Arc<RuntimeDelays>) -> Watchdog {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("weir-runtime-watchdog".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(PROBE_INTERVAL);
                    let (tx, rx) = std::sync::mpsc::sync_channel::<Duration>(1);
                    let sent = Instant::now();
                    handle.spawn(async move {
                        let _ = tx.send(sent.elapsed());
                    });
                    match rx.recv_timeout(PROBE_TIMEOUT) {
                        Ok(d) => delays.observe(d),
                        // The runtime is gone: nothing left to watch.
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            delays.observe(PROBE_TIMEOUT)
                        }
                    }
                }
            })
            .ok();
        Watchdog { stop, thread }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Not joined: the thread may be waiting on a probe of a runtime
        // that is shutting down; it ends within one interval or timeout.
        drop(self.thread.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_over_the_threshold_is_a_stall() {
        let d = RuntimeDelays::default();
        d.observe(Duration::from_micros(200));
        d.observe(STALL);
        assert_eq!(d.stalls.load(Ordering::Relaxed), 0);
        d.observe(STALL + Duration::from_micros(1));
        assert_eq!(d.stalls.load(Ordering::Relaxed), 1);
        assert_eq!(d.max_us.load(Ordering::Relaxed), 10_001);
        assert_eq!(d.delay.snapshot().count, 3);
    }
}
