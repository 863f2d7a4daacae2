//! The broker-wide budget of memory for request frames being received
//! (`queued.max.request.bytes`).
//!
//! A connection reserves a frame's declared size (from its 4-byte prefix)
//! before it buffers the body, and gives it back once the request has been
//! handled. While the budget is used up, connections wait before reading
//! their sockets, so a flood of large frames turns into TCP back-pressure
//! instead of memory.
//!
//! Always true: the bytes reserved (the sum of the live [`Reservation`]s'
//! sizes) exceed the budget only while a single frame larger than the whole
//! budget holds it alone. Such a frame waits until nothing else is reserved
//! and then takes the whole budget, so it is served and never deadlocks.
//! Waiters are served first come, first served (tokio's semaphore is fair),
//! so a large frame is not starved by a stream of small ones.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::RequestMemoryGauges;

/// Shared by every connection of a listener.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    /// None: unbounded (`queued.max.request.bytes = -1`).
    permits: Option<Arc<Semaphore>>,
    /// The budget in bytes (= the semaphore's permits).
    total: usize,
    gauges: Arc<RequestMemoryGauges>,
}

/// Bytes of one frame reserved until dropped.
#[derive(Debug)]
pub struct Reservation {
    bytes: u64,
    _permit: Option<OwnedSemaphorePermit>,
    gauges: Arc<RequestMemoryGauges>,
}

/// Counts a connection in the waiting gauge while it waits (also when the
/// wait is cancelled).
struct Waiting<'a>(&'a RequestMemoryGauges);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RequestBudget {
    /// A budget of `max_bytes`; `None` = unbounded.
    pub fn new(max_bytes: Option<u64>, gauges: Arc<RequestMemoryGauges>) -> RequestBudget {
        let total = max_bytes.map(|b| {
            usize::try_from(b)
                .unwrap_or(usize::MAX)
                .min(Semaphore::MAX_PERMITS)
        });
        RequestBudget {
            permits: total.map(|t| Arc::new(Semaphore::new(t))),
            total: total.unwrap_or(usize::MAX),
            gauges,
        }
    }

    /// An unbounded budget that only counts (for tests and tools).
    pub fn unbounded() -> RequestBudget {
        RequestBudget::new(None, Arc::default())
    }

    /// Reserves `bytes` for one frame, waiting while the budget cannot hold
    /// it. A frame larger than the whole budget waits until nothing else is
    /// reserved. Cancel-safe: a cancelled wait reserves nothing.
    pub async fn reserve(&self, bytes: u64) -> Reservation {
        let permit = match &self.permits {
            None => None,
            Some(sem) => {
                let want = usize::try_from(bytes).unwrap_or(usize::MAX).min(self.total);
                // frames are at most i32::MAX bytes, so this always fits
                let want = u32::try_from(want).unwrap_or(u32::MAX);
                match sem.clone().try_acquire_many_owned(want) {
                    Ok(p) => Some(p),
                    Err(_) => {
                        self.gauges.waiting.fetch_add(1, Ordering::Relaxed);
                        let _waiting = Waiting(&self.gauges);
                        // fails only once the semaphore is closed, and
                        // nothing closes it
                        sem.clone().acquire_many_owned(want).await.ok()
                    }
                }
            }
        };
        self.gauges.reserved.fetch_add(bytes, Ordering::Relaxed);
        Reservation {
            bytes,
            _permit: permit,
            gauges: self.gauges.clone(),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.gauges
            .reserved
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(n: u64) -> (RequestBudget, Arc<RequestMemoryGauges>) {
        let g = Arc::new(RequestMemoryGauges::default());
        (RequestBudget::new(Some(n), g.clone()), g)
    }

    #[tokio::test]
    async fn reservations_wait_for_room_and_count_in_the_gauges() {
        let (b, g) = budget(100);
        let r1 = b.reserve(60).await;
        assert_eq!(g.reserved.load(Ordering::Relaxed), 60);
        let b2 = b.clone();
        let second = tokio::spawn(async move { b2.reserve(50).await });
        while g.waiting.load(Ordering::Relaxed) != 1 {
            tokio::task::yield_now().await;
        }
        assert!(!second.is_finished());
        drop(r1);
        let r2 = second.await.unwrap();
        assert_eq!(g.reserved.load(Ordering::Relaxed), 50);
        assert_eq!(g.waiting.load(Ordering::Relaxed), 0);
        drop(r2);
        assert_eq!(g.reserved.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_budget_is_served_alone() {
        let (b, g) = budget(100);
        let small = b.reserve(10).await;
        let b2 = b.clone();
        let big = tokio::spawn(async move { b2.reserve(1000).await });
        while g.waiting.load(Ordering::Relaxed) != 1 {
            tokio::task::yield_now().await;
        }
        // first come, first served: a later small frame waits behind it
        let b3 = b.clone();
        let later = tokio::spawn(async move { b3.reserve(10).await });
        while g.waiting.load(Ordering::Relaxed) != 2 {
            tokio::task::yield_now().await;
        }
        drop(small);
        let big = big.await.unwrap();
        assert_eq!(g.reserved.load(Ordering::Relaxed), 1000);
        assert!(!later.is_finished());
        drop(big);
        let later = later.await.unwrap();
        assert_eq!(g.reserved.load(Ordering::Relaxed), 10);
        drop(later);
    }

    #[tokio::test]
    async fn a_cancelled_wait_reserves_nothing() {
        let (b, g) = budget(10);
        let r = b.reserve(10).await;
        let wait = tokio::time::timeout(std::time::Duration::from_millis(1), b.reserve(5)).await;
        assert!(wait.is_err());
        assert_eq!(g.waiting.load(Ordering::Relaxed), 0);
        drop(r);
        let _r = b.reserve(10).await;
        assert_eq!(g.reserved.load(Ordering::Relaxed), 10);
    }

    #[tokio::test]
    async fn unbounded_only_counts() {
        let g = Arc::new(RequestMemoryGauges::default());
        let b = RequestBudget::new(None, g.clone());
        let _a = b.reserve(u32::MAX as u64).await;
        let _b = b.reserve(u32::MAX as u64).await;
        assert_eq!(g.reserved.load(Ordering::Relaxed), 2 * u32::MAX as u64);
    }
}
