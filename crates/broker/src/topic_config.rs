//! Effective topic configuration: a topic override wins over the broker
//! synonym (dynamic for this broker, then dynamic cluster-wide, then
//! static), which wins over Kafka's default. Pure functions.

use std::collections::BTreeMap;

use weir_storage::{LogConfig, TimestampType};

use crate::config::BrokerConfig;
use crate::configdef::{self, ConfigDef};

/// DescribeConfigs `ConfigSource` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    /// Kafka's GROUP_CONFIG: a per-group config override.
    Group = 8,
}

impl ConfigSource {
    /// Kafka's name of the source, as `kafka-configs.sh` prints it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::Group => "GROUP_CONFIG",
        }
    }
}

/// One resolved config value with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedConfig {
    pub def: &'static ConfigDef,
    pub value: Option<String>,
    pub source: ConfigSource,
    /// Lower-precedence values (synonyms), highest first.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}

/// The broker-level value of a topic config's synonym in one layer of
/// broker configs, following Kafka's unit fallbacks (`log.roll.hours`,
/// `log.retention.hours`, …): (broker name, its value as set, the value
/// in the topic config's unit).
fn broker_value(
    e: &BTreeMap<String, String>,
    topic_name: &str,
) -> Option<(String, String, String)> {
    let mul = |k: &str, f: i64| -> Option<(String, String, String)> {
        let raw = e.get(k)?;
        let v = raw.parse::<i64>().ok()?;
        Some((k.to_string(), raw.clone(), v.saturating_mul(f).to_string()))
    };
    let direct = |k: &str| e.get(k).map(|v| (k.to_string(), v.clone(), v.clone()));
    match topic_name {
        "segment.ms" => direct("log.roll.ms").or_else(|| mul("log.roll.hours", 3_600_000)),
        "segment.jitter.ms" => {
            direct("log.roll.jitter.ms").or_else(|| mul("log.roll.jitter.hours", 3_600_000))
        }
        "retention.ms" => direct("log.retention.ms")
            .or_else(|| mul("log.retention.minutes", 60_000))
            .or_else(|| mul("log.retention.hours", 3_600_000)),
        "flush.ms" => {
            direct("log.flush.interval.ms").or_else(|| direct("log.flush.scheduler.interval.ms"))
        }
        other => configdef::topic_def(other)
            .and_then(|d| d.synonym)
            .and_then(direct),
    }
}

/// Resolves every topic config for a topic with `overrides`.
pub fn resolve_all(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ResolvedConfig> {
    configdef::TOPIC_CONFIGS
        .iter()
        .map(|d| resolve(broker, overrides, d))
        .collect()
}

pub fn resolve(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    def: &'static ConfigDef,
) -> ResolvedConfig {
    let mut chain = Vec::new();
    // the first source set wins (in the topic config's unit)
    let mut winner = None;
    if let Some(v) = overrides.get(def.name) {
        chain.push((
            def.name.to_string(),
            Some(v.clone()),
            ConfigSource::DynamicTopic,
        ));
        winner = Some((Some(v.clone()), ConfigSource::DynamicTopic));
    }
    for (layer, source) in broker.layers() {
        if let Some((k, raw, v)) = broker_value(layer, def.name) {
            chain.push((k, Some(raw), source));
            winner = winner.or(Some((Some(v), source)));
        }
    }
    // the default ends the chain
    let (value, source) = winner.unwrap_or((def.default.map(String::from), ConfigSource::Default));
    chain.push((
        def.name.to_string(),
        def.default.map(String::from),
        ConfigSource::Default,
    ));
    ResolvedConfig {
        def,
        value,
        source,
        synonyms: chain,
    }
}

fn num<T: std::str::FromStr>(v: &Option<String>, fallback: T) -> T {
    v.as_deref()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(fallback)
}

/// The storage configuration of a topic.
pub fn log_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let mut c = LogConfig::default();
    for r in resolve_all(broker, overrides) {
        let v = &r.value;
        match r.def.name {
            "segment.bytes" => c.segment_bytes = num(v, c.segment_bytes),
            "segment.ms" => c.segment_ms = num(v, c.segment_ms),
            "segment.jitter.ms" => c.segment_jitter_ms = num(v, c.segment_jitter_ms),
            "segment.index.bytes" => c.segment_index_bytes = num(v, c.segment_index_bytes),
            "index.interval.bytes" => c.index_interval_bytes = num(v, c.index_interval_bytes),
            "flush.messages" => c.flush_messages = num::<i64>(v, i64::MAX).max(1) as u64,
            "flush.ms" => c.flush_ms = num(v, c.flush_ms),
            "max.message.bytes" => c.max_message_bytes = num::<i64>(v, 1_048_588).max(0) as u32,
            "message.timestamp.type" => {
                c.message_timestamp_type = match v.as_deref() {
                    Some(s) if s.eq_ignore_ascii_case("LogAppendTime") => {
                        TimestampType::LogAppendTime
                    }
                    _ => TimestampType::CreateTime,
                }
            }
            "message.timestamp.before.max.ms" => {
                c.message_timestamp_before_max_ms = num(v, c.message_timestamp_before_max_ms)
            }
            "message.timestamp.after.max.ms" => {
                c.message_timestamp_after_max_ms = num(v, c.message_timestamp_after_max_ms)
            }
            "retention.ms" => c.retention_ms = num(v, c.retention_ms),
            "retention.bytes" => c.retention_bytes = num(v, c.retention_bytes),
            "cleanup.policy" => {
                c.cleanup_policy = v.clone().unwrap_or_else(|| "delete".to_string())
            }
            "file.delete.delay.ms" => c.file_delete_delay_ms = num(v, c.file_delete_delay_ms),
            "delete.retention.ms" => c.delete_retention_ms = num(v, c.delete_retention_ms),
            "min.compaction.lag.ms" => c.min_compaction_lag_ms = num(v, c.min_compaction_lag_ms),
            "max.compaction.lag.ms" => c.max_compaction_lag_ms = num(v, c.max_compaction_lag_ms),
            "min.cleanable.dirty.ratio" => {
                c.min_cleanable_dirty_ratio =
                    weir_storage::Ratio(num(v, c.min_cleanable_dirty_ratio.0))
            }
            _ => {}
        }
    }
    c
}

/// Validates a set of topic config overrides (names and values).
pub fn validate_overrides(overrides: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in overrides {
        let def =
            configdef::topic_def(k).ok_or_else(|| format!("Unknown topic config name: {k}"))?;
        def.validate(v)
            .map_err(|e| format!("Invalid value {v} for configuration {k}: {}", e.0))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_topic_then_broker_then_default() {
        let b =
            BrokerConfig::from_pairs([("log.retention.hours", "1"), ("log.segment.bytes", "2048")])
                .unwrap();
        let mut o = BTreeMap::new();
        let c = log_config(&b, &o);
        assert_eq!(c.retention_ms, 3_600_000);
        assert_eq!(c.segment_bytes, 2048);
        assert_eq!(c.max_message_bytes, 1_048_588);
        o.insert("retention.ms".to_string(), "5".to_string());
        o.insert(
            "message.timestamp.type".to_string(),
            "LogAppendTime".to_string(),
        );
        let c = log_config(&b, &o);
        assert_eq!(c.retention_ms, 5);
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        let r = resolve(&b, &o, configdef::topic_def("retention.ms").unwrap());
        assert_eq!(r.source, ConfigSource::DynamicTopic);
        assert_eq!(r.synonyms.len(), 3);
        let r = resolve(&b, &o, configdef::topic_def("segment.bytes").unwrap());
        assert_eq!(r.source, ConfigSource::StaticBroker);
        let r = resolve(&b, &o, configdef::topic_def("flush.messages").unwrap());
        assert_eq!(
            (r.source, r.value.as_deref()),
            (ConfigSource::Default, Some("9223372036854775807"))
        );
    }

    #[test]
    fn override_validation() {
        let ok: BTreeMap<_, _> = [("cleanup.policy".to_string(), "compact".to_string())].into();
        assert!(validate_overrides(&ok).is_ok());
        let bad: BTreeMap<_, _> = [("no.such".to_string(), "1".to_string())].into();
        assert!(validate_overrides(&bad).is_err());
        let bad: BTreeMap<_, _> = [("retention.ms".to_string(), "soon".to_string())].into();
        assert!(validate_overrides(&bad).is_err());
    }
}
