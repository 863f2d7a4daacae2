//! Per-partition wake-ups for parked long-poll fetches.
//!
//! A fetch that must wait for data registers one [`Notify`] under every
//! partition of its request; an append to a partition wakes only the fetches
//! registered under it. Entries exist only while someone waits: dropping the
//! [`Registration`] removes them, so partitions nobody fetches cost nothing.
//!
//! No wake-up is lost: `Notify::notify_one` stores a permit when the fetch
//! is not awaiting yet, so a fetch that registers, then re-reads its
//! partitions, then awaits, sees every append made after it registered.
//!
//! ```
//! use weir_broker::wakeups::PartitionWakeups;
//! use weir_storage::TopicPartition;
//!
//! let w = PartitionWakeups::default();
//! let a = TopicPartition::new("t", 0);
//! let reg = w.register([a.clone()]);
//! assert_eq!(w.waiting_partitions(), 1);
//! w.wake(&TopicPartition::new("t", 1)); // nobody waits there
//! w.wake(&a); // stores a permit: the next `notified().await` returns at once
//! drop(reg);
//! assert_eq!(w.waiting_partitions(), 0);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tokio::sync::Notify;
use weir_storage::TopicPartition;

/// Waiters by partition. Invariant: every entry holds at least one waiter,
/// and every waiter belongs to a live [`Registration`].
#[derive(Debug, Default)]
pub struct PartitionWakeups {
    /// A waiter is the `Notify` its registration awaits (one per
    /// registration, so the pointer identifies it).
    waiters: RwLock<HashMap<TopicPartition, Vec<Arc<Notify>>>>,
}

/// One waiting fetch, registered under its partitions until dropped.
#[derive(Debug)]
pub struct Registration<'a> {
    owner: &'a PartitionWakeups,
    partitions: Vec<TopicPartition>,
    notify: Arc<Notify>,
}

impl PartitionWakeups {
    /// Registers one waiter under `partitions` (duplicates are ignored).
    pub fn register(
        &self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Registration<'_> {
        let notify = Arc::new(Notify::new());
        let mut partitions: Vec<TopicPartition> = partitions.into_iter().collect();
        partitions.sort_unstable();
        partitions.dedup();
        let mut map = self.waiters.write().unwrap_or_else(|p| p.into_inner());
        for tp in &partitions {
            map.entry(tp.clone()).or_default().push(notify.clone());
        }
        Registration {
            owner: self,
            partitions,
            notify,
        }
    }

    /// Wakes the fetches waiting on `tp` after data became visible there.
    pub fn wake(&self, tp: &TopicPartition) {
        let map = self.waiters.read().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = map.get(tp) {
            for n in list {
                n.notify_one();
            }
        }
    }

    /// Partitions with at least one waiting fetch.
    pub fn waiting_partitions(&self) -> usize {
        self.waiters.read().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Registration<'_> {
    /// Resolves after an append to one of the registered partitions (at
    /// once if one happened since the last wake-up was consumed).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut map = self
            .owner
            .waiters
            .write()
            .unwrap_or_else(|p| p.into_inner());
        for tp in &self.partitions {
            if let Some(list) = map.get_mut(tp) {
                list.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if list.is_empty() {
                    map.remove(tp);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    async fn woken(r: &Registration<'_>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), r.notified())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn wakes_only_waiters_of_the_partition() {
        let w = PartitionWakeups::default();
        let on_a = w.register([tp(0)]);
        let on_b = w.register([tp(1), tp(2)]);
        w.wake(&tp(2));
        assert!(!woken(&on_a).await);
        assert!(woken(&on_b).await);
        w.wake(&tp(0));
        assert!(woken(&on_a).await);
        assert!(!woken(&on_b).await);
    }

    #[tokio::test]
    async fn a_wake_before_the_await_is_kept() {
        let w = PartitionWakeups::default();
        let r = w.register([tp(0)]);
        w.wake(&tp(0));
        assert!(woken(&r).await);
    }

    #[test]
    fn entries_go_with_the_last_waiter() {
        let w = PartitionWakeups::default();
        let r1 = w.register([tp(0), tp(1), tp(1)]);
        let r2 = w.register([tp(1)]);
        assert_eq!(w.waiting_partitions(), 2);
        drop(r1);
        assert_eq!(w.waiting_partitions(), 1);
        drop(r2);
        assert_eq!(w.waiting_partitions(), 0);
    }
}
