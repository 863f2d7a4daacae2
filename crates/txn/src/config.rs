//! Coordinator configuration (Kafka broker settings with their defaults).

/// Settings of the transaction coordinator. Names follow Kafka's broker
/// configs; durations are in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`.
    pub state_topic_partitions: i32,
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a
    /// producer may ask for (longer: INVALID_TRANSACTION_TIMEOUT).
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle transactional id (no open
    /// transaction) not updated for this long is forgotten.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how
    /// often transactions past their timeout are looked for.
    pub abort_timed_out_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how
    /// often expired transactional ids are looked for.
    pub remove_expired_interval_ms: i64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            state_topic_partitions: 50,
            max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            abort_timed_out_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
        }
    }
}

/// A configuration value out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be positive, got {value}")]
pub struct ConfigError {
    pub name: &'static str,
    pub value: i64,
}

impl TxnConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            (
                "transaction.state.log.num.partitions",
                i64::from(self.state_topic_partitions),
            ),
            ("transaction.max.timeout.ms", i64::from(self.max_timeout_ms)),
            (
                "transactional.id.expiration.ms",
                self.transactional_id_expiration_ms,
            ),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                self.abort_timed_out_interval_ms,
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                self.remove_expired_interval_ms,
            ),
        ];
        for (name, value) in positive {
            if value <= 0 {
                return Err(ConfigError { name, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_kafkas() {
        let c = TxnConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.max_timeout_ms, 15 * 60 * 1000);
        assert_eq!(c.transactional_id_expiration_ms, 7 * 24 * 3600 * 1000);
        let bad = TxnConfig {
            max_timeout_ms: 0,
            ..c
        };
        assert_eq!(
            bad.validate().unwrap_err().name,
            "transaction.max.timeout.ms"
        );
    }
}
