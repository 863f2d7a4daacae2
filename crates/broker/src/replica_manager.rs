//! The partition layer: the partition logs this broker holds, their high
//! watermarks, their idempotent-producer state and the wake-ups of the
//! long-poll fetches waiting on them.
//!
//! Handlers of the data path (Produce, Fetch, ListOffsets, DeleteRecords,
//! DescribeLogDirs) and the group coordinator's `__consumer_offsets` writes
//! reach partitions only through a [`ReplicaManager`]; which topics exist
//! and who leads a partition are not its business (that is the topic table
//! and the [`ClusterView`](crate::cluster::ClusterView)). Today every
//! partition has one replica, so the high watermark follows the log end
//! offset; replication (followers, the ISR, `acks=all`) belongs here too.
//!
//! ```
//! use weir_broker::replica_manager::ReplicaManager;
//! use weir_storage::{LogConfig, LogManager, LogManagerConfig, TopicPartition};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let logs = LogManager::open(LogManagerConfig::new(vec![dir.path().to_path_buf()]), 0)?;
//! let replicas = ReplicaManager::new(logs);
//! replicas
//!     .prepare_logs("t", [1; 16], 0..1, LogConfig::default())?
//!     .commit();
//! let log = replicas.log("t", 0).ok_or("no log")?;
//! assert_eq!(log.high_watermark(), 0);
//! replicas.remove_partition(&TopicPartition::new("t", 0))?;
//! assert!(replicas.log("t", 0).is_none());
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use weir_protocol::error_code::ErrorCode;
use weir_storage::{Log, LogConfig, LogManager, PendingCreation, StorageError, TopicPartition};

use crate::producer_state::PartitionProducers;
use crate::topics::TopicMeta;
use crate::wakeups::PartitionWakeups;

/// One partition's producer state; `None` until first used after start.
type ProducerSlot = Arc<Mutex<Option<PartitionProducers>>>;

/// Owner of the partition logs and everything kept per partition beside
/// them.
///
/// What is always true of it:
/// - a partition's high watermark never moves backwards: it is changed only
///   by [`ReplicaManager::advance_high_watermark`], under one lock, and only
///   upwards (a `debug_assert!` checks it);
/// - `log start <= high watermark <= log end offset` (the log clamps and
///   checks it);
/// - after every append that moves a partition's log end offset or high
///   watermark, its waiting fetches are woken
///   ([`ReplicaManager::notify_append`]); a fetch registered before its last
///   read therefore never sleeps past data it could return;
/// - producer state is kept only for partitions with a log: removing a
///   partition ([`ReplicaManager::remove_partition`]) drops it, and it is
///   rebuilt from the log (snapshot and tail) the next time it is needed.
pub struct ReplicaManager {
    logs: LogManager,
    /// Long-poll fetches waiting for appends, by partition.
    wakeups: PartitionWakeups,
    /// Per-partition producer state, loaded on first use.
    producers: Mutex<HashMap<TopicPartition, ProducerSlot>>,
    /// Serialises high-watermark updates so the HW never moves backwards.
    hw_lock: Mutex<()>,
}

impl ReplicaManager {
    /// Takes over the opened partition logs.
    pub fn new(logs: LogManager) -> ReplicaManager {
        ReplicaManager {
            logs,
            wakeups: PartitionWakeups::default(),
            producers: Mutex::new(HashMap::new()),
            hw_lock: Mutex::new(()),
        }
    }

    /// The log manager, for storage-wide work (retention, the cleaner, log
    /// dir reports) and start-up.
    pub fn logs(&self) -> &LogManager {
        &self.logs
    }

    /// The long-poll fetches waiting on partitions.
    pub fn wakeups(&self) -> &PartitionWakeups {
        &self.wakeups
    }

    /// The open log of a partition.
    pub fn log(&self, topic: &str, partition: i32) -> Option<Arc<Log>> {
        self.logs.get(&TopicPartition::new(topic, partition))
    }

    /// The error code for a partition without an open log: a partition of a
    /// known topic (`topic`, as the topic table has it) whose log failed to
    /// open is a storage error, anything else is unknown.
    pub fn missing_log_error(&self, topic: Option<&TopicMeta>, partition: i32) -> ErrorCode {
        let failed = topic
            .filter(|t| (0..t.partitions).contains(&partition))
            .is_some_and(|t| {
                self.logs
                    .failed_logs()
                    .contains_key(&TopicPartition::new(t.name.clone(), partition))
            });
        if failed {
            ErrorCode::KafkaStorageError
        } else {
            ErrorCode::UnknownTopicOrPartition
        }
    }

    /// Creates the logs of `partitions` of a topic all or nothing; they
    /// exist after a crash only once the returned creation is committed
    /// (see [`LogManager::prepare_logs`]).
    pub fn prepare_logs(
        &self,
        topic: &str,
        topic_id: [u8; 16],
        partitions: std::ops::Range<i32>,
        config: LogConfig,
    ) -> Result<PendingCreation<'_>, StorageError> {
        self.logs.prepare_logs(topic, topic_id, partitions, config)
    }

    /// Removes a partition this broker no longer holds: its log when open,
    /// then its producer state.
    pub fn remove_partition(&self, tp: &TopicPartition) -> Result<(), StorageError> {
        if self.logs.get(tp).is_some() {
            self.logs.delete_log(tp)?;
        }
        self.forget_producers(tp);
        Ok(())
    }

    /// Gives the open logs of partitions `0..partitions` of `name` their
    /// new configuration.
    pub fn set_log_configs(&self, name: &str, partitions: i32, cfg: &LogConfig) {
        for p in 0..partitions {
            if let Some(log) = self.log(name, p) {
                log.set_config(cfg.clone());
            }
        }
    }

    /// Drops the producer state kept for a partition whose log is gone.
    fn forget_producers(&self, tp: &TopicPartition) {
        if let Ok(mut m) = self.producers.lock() {
            m.remove(tp);
        }
    }

    /// Single replica: the high watermark follows the log end offset.
    pub fn advance_high_watermark(&self, log: &Log) {
        let _g = self.hw_lock.lock().unwrap_or_else(|p| p.into_inner());
        let before = log.high_watermark();
        let leo = log.log_end_offset();
        if before < leo {
            log.set_high_watermark(leo);
        }
        debug_assert!(
            log.high_watermark() >= before,
            "high watermark of {} moved backwards: {before} -> {}",
            log.topic_partition(),
            log.high_watermark()
        );
    }

    /// Wakes the long-poll fetches waiting on `log`'s partition after data
    /// became visible there.
    pub fn notify_append(&self, log: &Log) {
        self.wakeups.wake(log.topic_partition());
    }

    /// Runs `f` on the producer state of a partition, loading it (snapshot
    /// and log tail) the first time the partition is touched. Holds only that
    /// partition's lock while `f` runs.
    pub fn with_producers<R>(&self, log: &Log, f: impl FnOnce(&mut PartitionProducers) -> R) -> R {
        let slot = {
            let mut map = self.producers.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(log.topic_partition().clone())
                .or_default()
                .clone()
        };
        let mut state = slot.lock().unwrap_or_else(|p| p.into_inner());
        f(state.get_or_insert_with(|| crate::producer_state_io::rebuild(log)))
    }

    /// Periodic time-driven work of the logs (segment rolls by time).
    pub fn tick(&self, now_ms: i64) -> Result<(), StorageError> {
        self.logs.tick(now_ms)
    }

    /// Writes a producer-state snapshot for every partition whose state is
    /// in memory, at its current log end offset.
    pub fn snapshot_producers(&self) {
        let slots: Vec<_> = {
            let map = self.producers.lock().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(tp, s)| (tp.clone(), s.clone())).collect()
        };
        for (tp, slot) in slots {
            let Some(log) = self.logs.get(&tp) else {
                continue;
            };
            let state = slot.lock().unwrap_or_else(|p| p.into_inner());
            let Some(state) = state.as_ref() else {
                continue;
            };
            // appends of idempotent batches hold this lock, so the state
            // covers every batch below this log end offset
            let leo = log.log_end_offset();
            if let Err(e) =
                crate::producer_state_io::write_snapshot(&*log.storage(), &log.dir(), leo, state)
            {
                tracing::warn!(partition = %tp, "cannot write producer snapshot: {e}");
            }
        }
    }

    /// Checkpoints recovery points, log starts and producer state.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        self.snapshot_producers();
        self.logs.checkpoint()
    }

    /// Snapshots producer state, then flushes, checkpoints and writes the
    /// clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StorageError> {
        self.snapshot_producers();
        self.logs.shutdown()
    }
}
