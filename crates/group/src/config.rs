//! Coordinator configuration (Kafka broker settings with their defaults).

/// Settings of the group coordinator. Names follow Kafka's broker configs;
/// all durations are in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_partitions: i32,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long a rebalance of an empty
    /// group waits for more members before completing.
    pub initial_rebalance_delay_ms: i32,
    /// How long a member that joined for the first time may wait parked in
    /// a join phase before it is dropped (Kafka: 5 minutes).
    pub new_member_join_timeout_ms: i64,
    /// `group.max.size`.
    pub max_group_size: usize,
    /// `offsets.retention.minutes` in milliseconds.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`.
    pub max_metadata_bytes: usize,
    /// Seed for generated member ids, so ids differ between broker runs while
    /// the state machine itself stays deterministic.
    pub member_id_seed: u64,
    /// `group.consumer.session.timeout.ms`: a consumer-protocol (KIP-848)
    /// member without a heartbeat for this long is removed.
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: told to consumer-protocol
    /// members in every heartbeat response.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: the server-side assignors a member may
    /// name (`uniform`, `range`); the first is the default.
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.max.size`.
    pub consumer_max_size: usize,
    /// `group.consumer.migration.policy`: whether a classic group with
    /// members becomes a consumer group when a consumer-protocol member
    /// joins (upgrade), and back when the last one leaves (downgrade).
    pub consumer_migration_policy: MigrationPolicy,
}

/// `group.consumer.migration.policy` (Kafka 4's default: bidirectional).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Parses Kafka's names (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        [
            MigrationPolicy::Bidirectional,
            MigrationPolicy::Upgrade,
            MigrationPolicy::Downgrade,
            MigrationPolicy::Disabled,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
    }

    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    pub fn upgrade(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrade(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_topic_partitions: 50,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            new_member_join_timeout_ms: 300_000,
            max_group_size: i32::MAX as usize,
            offsets_retention_ms: 10_080 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            max_metadata_bytes: 4096,
            member_id_seed: 0,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_assignors: vec!["uniform".to_string(), "range".to_string()],
            consumer_max_size: i32::MAX as usize,
            consumer_migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{name} must be positive, got {value}")]
    NotPositive { name: &'static str, value: i64 },
    #[error("group.min.session.timeout.ms ({min}) exceeds group.max.session.timeout.ms ({max})")]
    SessionTimeoutRange { min: i32, max: i32 },
    #[error("group.consumer.assignors: unknown assignor {0:?} (known: uniform, range)")]
    UnknownAssignor(String),
    #[error("group.consumer.assignors must name at least one assignor")]
    NoAssignor,
}

impl GroupConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            (
                "offsets.topic.num.partitions",
                i64::from(self.offsets_topic_partitions),
            ),
            ("offsets.retention.ms", self.offsets_retention_ms),
            (
                "offsets.retention.check.interval.ms",
                self.offsets_retention_check_interval_ms,
            ),
            ("group.max.size", self.max_group_size as i64),
            (
                "group.consumer.session.timeout.ms",
                i64::from(self.consumer_session_timeout_ms),
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                i64::from(self.consumer_heartbeat_interval_ms),
            ),
            ("group.consumer.max.size", self.consumer_max_size as i64),
            (
                "new.member.join.timeout.ms",
                self.new_member_join_timeout_ms,
            ),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return Err(ConfigError::NotPositive { name, value });
            }
        }
        if self.initial_rebalance_delay_ms < 0 {
            return Err(ConfigError::NotPositive {
                name: "group.initial.rebalance.delay.ms",
                value: i64::from(self.initial_rebalance_delay_ms),
            });
        }
        if self.consumer_assignors.is_empty() {
            return Err(ConfigError::NoAssignor);
        }
        if let Some(a) = self
            .consumer_assignors
            .iter()
            .find(|a| crate::consumer::assignor::Assignor::parse(a).is_none())
        {
            return Err(ConfigError::UnknownAssignor(a.clone()));
        }
        if self.min_session_timeout_ms > self.max_session_timeout_ms {
            return Err(ConfigError::SessionTimeoutRange {
                min: self.min_session_timeout_ms,
                max: self.max_session_timeout_ms,
            });
        }
        Ok(())
    }
}
