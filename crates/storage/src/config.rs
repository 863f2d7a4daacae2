//! Per-topic log configuration and partition names.

use std::fmt;

/// A topic partition. Displays as `topic-partition`, which is also the name
/// of its directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Parses a partition directory name `<topic>-<partition>` (the topic may
    /// itself contain dashes; the partition is after the last one).
    pub fn from_dir_name(name: &str) -> Option<TopicPartition> {
        let (topic, part) = name.rsplit_once('-')?;
        if topic.is_empty() || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let partition: i32 = part.parse().ok()?;
        Some(TopicPartition::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

/// Per-topic settings, with Kafka's names and defaults (SPEC S12).
/// "Never" is `u64::MAX` / `i64::MAX`, as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: a random amount up to this is subtracted from `segment_ms`.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: size of each index file (preallocated).
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u32,
    /// `flush.messages`: fsync after this many unflushed records.
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the last flush is older than this.
    pub flush_ms: i64,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` (CreateTime only).
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (CreateTime only).
    pub message_timestamp_after_max_ms: i64,
    /// `retention.ms` (stored; used by retention).
    pub retention_ms: i64,
    /// `retention.bytes` (stored; used by retention).
    pub retention_bytes: i64,
    /// `cleanup.policy`.
    pub cleanup_policy: String,
    /// `file.delete.delay.ms`: how long files renamed `.deleted` by
    /// retention stay before they are unlinked.
    pub file_delete_delay_ms: i64,
    /// `delete.retention.ms`: tombstones survive this long after the
    /// cleaning that first saw them.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: younger records are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this forces a cleaning.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: Ratio,
}

/// A ratio in `[0, 1]`, compared by its bits so configs stay `Eq`.
#[derive(Debug, Clone, Copy)]
pub struct Ratio(pub f64);

impl PartialEq for Ratio {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for Ratio {}

impl LogConfig {
    /// `cleanup.policy` contains `compact`.
    pub fn compact(&self) -> bool {
        self.cleanup_policy
            .split(',')
            .any(|p| p.trim() == "compact")
    }
    /// `cleanup.policy` contains `delete`.
    pub fn delete(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p.trim() == "delete")
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            flush_messages: u64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: "delete".to_string(),
            file_delete_delay_ms: 60_000,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: Ratio(0.5),
        }
    }
}

impl LogConfig {
    /// Checks the values are usable.
    pub fn validate(&self) -> Result<(), String> {
        if self.segment_bytes < 14 {
            return Err(format!("segment.bytes {} is below 14", self.segment_bytes));
        }
        if self.segment_bytes > i32::MAX as u64 {
            return Err(format!(
                "segment.bytes {} exceeds {} (positions are int32)",
                self.segment_bytes,
                i32::MAX
            ));
        }
        if self.segment_index_bytes < 12 {
            return Err(format!(
                "segment.index.bytes {} is below 12",
                self.segment_index_bytes
            ));
        }
        if self.segment_ms < 1 {
            return Err("segment.ms must be positive".into());
        }
        if self.segment_jitter_ms < 0 {
            return Err("segment.jitter.ms must not be negative".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names() {
        let tp = TopicPartition::from_dir_name("my-topic-12").unwrap();
        assert_eq!(tp, TopicPartition::new("my-topic", 12));
        assert_eq!(tp.to_string(), "my-topic-12");
        assert!(TopicPartition::from_dir_name("topic").is_none());
        assert!(TopicPartition::from_dir_name("topic-").is_none());
        assert!(TopicPartition::from_dir_name("-3").is_none());
        assert!(TopicPartition::from_dir_name("t-1.abc-delete").is_none());
        assert!(TopicPartition::from_dir_name("t-99999999999").is_none());
    }
}
