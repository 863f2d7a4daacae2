//! A gate on the group coordinator's I/O on `__consumer_offsets` (its
//! appends, and the replay of a partition it starts to lead): tests close
//! it for a partition to hold that I/O as a stalled disk would,
//! deterministically, and watch what the broker still answers. Open (the
//! only state outside tests) it costs one atomic load per append or load.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Always true: `held[p]` counts the threads waiting in [`IoGate::pass`]
/// for partition `p`, and only while `p` is in `paused`.
#[derive(Default)]
pub(super) struct IoGate {
    /// False while no partition is paused (the fast path).
    any: AtomicBool,
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    paused: BTreeSet<i32>,
    held: BTreeMap<i32, usize>,
}

impl IoGate {
    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns at once unless `partition` is paused; then blocks until it
    /// is resumed.
    pub(super) fn pass(&self, partition: i32) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state();
        if !s.paused.contains(&partition) {
            return;
        }
        *s.held.entry(partition).or_default() += 1;
        while s.paused.contains(&partition) {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(n) = s.held.get_mut(&partition) {
            *n -= 1;
            if *n == 0 {
                s.held.remove(&partition);
            }
        }
    }

    pub(super) fn pause(&self, partition: i32) {
        self.state().paused.insert(partition);
        self.any.store(true, Ordering::Release);
    }

    pub(super) fn resume(&self, partition: i32) {
        let mut s = self.state();
        s.paused.remove(&partition);
        self.any.store(!s.paused.is_empty(), Ordering::Release);
        drop(s);
        self.changed.notify_all();
    }

    /// Appends to `partition` waiting in the gate now.
    pub(super) fn held(&self, partition: i32) -> usize {
        self.state().held.get(&partition).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_paused_partition_holds_its_appends_until_resumed() {
        let gate = Arc::new(IoGate::default());
        gate.pass(0); // open: returns at once
        gate.pause(1);
        gate.pass(0); // another partition is not held
        let passed = Arc::new(AtomicBool::new(false));
        let t = {
            let (gate, passed) = (gate.clone(), passed.clone());
            std::thread::spawn(move || {
                gate.pass(1);
                passed.store(true, Ordering::SeqCst);
            })
        };
        wait_until("the append to be held", || gate.held(1) == 1);
        assert!(!passed.load(Ordering::SeqCst));
        gate.resume(1);
        t.join().unwrap();
        assert!(passed.load(Ordering::SeqCst));
        assert_eq!(gate.held(1), 0);
        assert!(!gate.any.load(Ordering::SeqCst));
    }
}
