//! Dynamic broker configs (Kafka's KIP-226): values set at run time with
//! AlterConfigs / IncrementalAlterConfigs on a BROKER resource, cluster-wide
//! (empty resource name, `<default>`) or for one broker (its node id).
//!
//! Precedence, highest first: dynamic for this broker, dynamic cluster-wide,
//! the static config (file, environment, flags), the default. Only configs
//! whose [`DynamicMode`] is not read-only can be set; which ones are is in
//! `configdef` and `docs/configuration.md`.
//!
//! Durable in `weir-dynamic-configs.json` in the first log dir, written
//! like `weir-topics.json` (temporary file, fsync, rename, directory fsync):
//!
//! ```json
//! {"version": 1,
//!  "cluster_default": {"log.retention.ms": "3600000"},
//!  "brokers": {"1": {"message.max.bytes": "2000000"}}}
//! ```
//!
//! The same file holds the per-group configs (resource type GROUP, Kafka
//! 4.0's `GroupConfig`: `consumer.session.timeout.ms`, …) under `groups`.
//!
//! Validation here is pure; `Broker::set_dynamic_broker_configs` and
//! `Broker::set_group_configs` store and apply.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::BrokerConfig;
use crate::configdef::{self, DynamicMode};
use crate::topics::{self, TopicStoreError};

pub const DYNAMIC_CONFIGS_FILE: &str = "weir-dynamic-configs.json";

/// Why the stored dynamic configs cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt dynamic configs file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(transparent)]
    Write(#[from] TopicStoreError),
}

/// Every dynamic config set, as stored. Invariant: each value passed
/// [`validate_broker_update`] for its scope when it was set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicConfigs {
    /// The `<default>` broker resource: cluster-wide values.
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
    /// Per-broker values, by node id.
    #[serde(default)]
    pub brokers: BTreeMap<i32, BTreeMap<String, String>>,
    /// Per-group configs, by group id. Invariant: each set passed
    /// [`validate_group_configs`] when it was set.
    #[serde(default)]
    pub groups: BTreeMap<String, BTreeMap<String, String>>,
}

// (not `#[serde(flatten)]`: flattened maps lose their integer keys)
#[derive(Serialize, Deserialize)]
struct DynamicConfigsFile {
    version: u32,
    #[serde(default)]
    cluster_default: BTreeMap<String, String>,
    #[serde(default)]
    brokers: BTreeMap<i32, BTreeMap<String, String>>,
    #[serde(default)]
    groups: BTreeMap<String, BTreeMap<String, String>>,
}

/// Which broker resource a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Empty resource name: every broker of the cluster.
    ClusterDefault,
    /// One broker, by node id.
    Broker(i32),
}

impl DynamicConfigs {
    /// The values set for `scope`.
    pub fn get(&self, scope: Scope) -> BTreeMap<String, String> {
        match scope {
            Scope::ClusterDefault => self.cluster_default.clone(),
            Scope::Broker(id) => self.brokers.get(&id).cloned().unwrap_or_default(),
        }
    }

    /// Replaces the values set for `scope`.
    pub fn set(&mut self, scope: Scope, configs: BTreeMap<String, String>) {
        match scope {
            Scope::ClusterDefault => self.cluster_default = configs,
            Scope::Broker(id) if configs.is_empty() => {
                self.brokers.remove(&id);
            }
            Scope::Broker(id) => {
                self.brokers.insert(id, configs);
            }
        }
    }
}

/// Reads the stored dynamic configs; a missing file means none. An
/// unreadable one is an error: starting without a stored `log.retention.ms`
/// could delete data the operator meant to keep.
pub fn load(dir: &Path) -> Result<DynamicConfigs, StoreError> {
    let path = dir.join(DYNAMIC_CONFIGS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(DynamicConfigs::default());
        }
        Err(source) => return Err(StoreError::Read { path, source }),
    };
    let file: DynamicConfigsFile =
        serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    if file.version != 1 {
        return Err(StoreError::Corrupt {
            path,
            reason: format!("unsupported version {}", file.version),
        });
    }
    Ok(DynamicConfigs {
        cluster_default: file.cluster_default,
        brokers: file.brokers,
        groups: file.groups,
    })
}

/// Writes the dynamic configs durably (temporary file, fsync, rename).
pub fn store(dir: &Path, configs: &DynamicConfigs) -> Result<(), StoreError> {
    let file = DynamicConfigsFile {
        version: 1,
        cluster_default: configs.cluster_default.clone(),
        brokers: configs.brokers.clone(),
        groups: configs.groups.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Corrupt {
        path: dir.join(DYNAMIC_CONFIGS_FILE),
        reason: e.to_string(),
    })?;
    Ok(topics::write_atomically(dir, DYNAMIC_CONFIGS_FILE, &bytes)?)
}

/// Kafka renders the offending names as a Scala set.
fn name_set(names: &[&str]) -> String {
    format!("Set({})", names.join(", "))
}

/// Checks a new value set for `scope` the way Kafka's `DynamicBrokerConfig`
/// does: read-only (and unknown) names are refused as a whole, per-broker
/// ones at the cluster default, then each value against its type. The
/// message is Kafka's; the error code is INVALID_REQUEST.
pub fn validate_broker_update(
    scope: Scope,
    configs: &BTreeMap<String, String>,
) -> Result<(), String> {
    let mode = |n: &str| configdef::broker_def(n).map(|d| d.dynamic);
    let read_only: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|n| mode(n).is_none_or(|m| m == DynamicMode::ReadOnly))
        .collect();
    if !read_only.is_empty() {
        return Err(format!(
            "Cannot update these configs dynamically: {}",
            name_set(&read_only)
        ));
    }
    if scope == Scope::ClusterDefault {
        let per_broker: Vec<&str> = configs
            .keys()
            .map(String::as_str)
            .filter(|n| mode(n) == Some(DynamicMode::PerBroker))
            .collect();
        if !per_broker.is_empty() {
            return Err(format!(
                "Cannot update these configs at default cluster level, broker id must be specified: {}",
                name_set(&per_broker)
            ));
        }
    }
    for (k, v) in configs {
        if let Some(def) = configdef::broker_def(k) {
            def.validate(v)
                .map_err(|e| format!("Invalid value {v} for configuration {k}: {}", e.0))?;
        }
    }
    Ok(())
}

/// Kafka's rule for a new `log.cleaner.threads` (`LogCleaner`'s
/// `validateReconfiguration`): at least 1, at least half and at most double
/// the number in effect.
pub fn validate_cleaner_threads(current: &BrokerConfig, next: &BrokerConfig) -> Result<(), String> {
    let threads = |c: &BrokerConfig| c.integer("log.cleaner.threads").unwrap_or(1);
    let (now, new) = (threads(current), threads(next));
    if new == now {
        return Ok(());
    }
    if new < 1 {
        return Err("Log cleaner threads should be at least 1".into());
    }
    if new < now / 2 {
        return Err(format!(
            "Log cleaner threads cannot be reduced to less than half the current value {now}"
        ));
    }
    if new > now.saturating_mul(2) {
        return Err(format!(
            "Log cleaner threads cannot be increased to more than double the current value {now}"
        ));
    }
    Ok(())
}

/// Checks a group's config set the way Kafka's `GroupConfig.validate` does:
/// known names, typed values, each within the broker's bounds, and a
/// heartbeat interval below the session timeout. The message is Kafka's;
/// the error code is INVALID_CONFIG.
pub fn validate_group_configs(
    broker: &BrokerConfig,
    configs: &BTreeMap<String, String>,
) -> Result<(), String> {
    for (k, v) in configs {
        let def =
            configdef::group_def(k).ok_or_else(|| format!("Unknown group config name: {k}"))?;
        def.validate(v)
            .map_err(|e| format!("Invalid value {v} for configuration {k}: {}", e.0))?;
    }
    // the value in effect: the group's, else the broker's default
    let value = |name: &str| -> Option<i64> {
        match configs.get(name) {
            Some(v) => v.trim().parse().ok(),
            None => configdef::group_def(name)
                .and_then(|d| d.synonym)
                .and_then(|s| broker.integer(s)),
        }
    };
    for (name, lo, hi) in configdef::GROUP_CONFIG_BOUNDS {
        let (Some(v), Some(min), Some(max)) = (value(name), broker.integer(lo), broker.integer(hi))
        else {
            continue;
        };
        if v < min {
            return Err(format!("{name} must be greater than or equal to {lo}"));
        }
        if v > max {
            return Err(format!("{name} must be less than or equal to {hi}"));
        }
    }
    for kind in ["consumer", "share"] {
        let hb = format!("{kind}.heartbeat.interval.ms");
        let session = format!("{kind}.session.timeout.ms");
        if let (Some(h), Some(s)) = (value(&hb), value(&session))
            && h >= s
        {
            return Err(format!("{hb} must be less than {session}"));
        }
    }
    Ok(())
}

/// Parses a BROKER resource name: empty is the cluster default, else a node
/// id, which must be this broker's (weir runs one broker).
pub fn scope_of(resource_name: &str, node_id: i32) -> Result<Scope, String> {
    if resource_name.is_empty() {
        return Ok(Scope::ClusterDefault);
    }
    match resource_name.parse::<i32>() {
        Ok(id) if id == node_id => Ok(Scope::Broker(id)),
        _ => Err(format!(
            "Unexpected broker id, expected {node_id} or empty string, but received {resource_name}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn read_only_and_bad_values_are_refused() {
        let ok = map(&[("log.retention.ms", "1000"), ("message.max.bytes", "2048")]);
        assert!(validate_broker_update(Scope::ClusterDefault, &ok).is_ok());
        assert!(validate_broker_update(Scope::Broker(1), &ok).is_ok());
        let ro = map(&[
            ("log.retention.ms", "1"),
            ("node.id", "2"),
            ("log.dirs", "/x"),
        ]);
        assert_eq!(
            validate_broker_update(Scope::Broker(1), &ro).unwrap_err(),
            "Cannot update these configs dynamically: Set(log.dirs, node.id)"
        );
        let unknown = map(&[("no.such.config", "1")]);
        assert!(validate_broker_update(Scope::Broker(1), &unknown).is_err());
        let bad = map(&[("message.max.bytes", "lots")]);
        assert!(
            validate_broker_update(Scope::ClusterDefault, &bad)
                .unwrap_err()
                .starts_with("Invalid value lots for configuration message.max.bytes")
        );
    }

    #[test]
    fn group_configs_within_the_broker_bounds() {
        let b = BrokerConfig::default();
        let ok = map(&[("consumer.session.timeout.ms", "50000")]);
        assert!(validate_group_configs(&b, &ok).is_ok());
        let cases = [
            (
                ("consumer.session.timeout.ms", "44999"),
                "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                ("consumer.session.timeout.ms", "60001"),
                "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                ("consumer.heartbeat.interval.ms", "4999"),
                "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (("no.such", "1"), "Unknown group config name: no.such"),
        ];
        for ((k, v), want) in cases {
            assert_eq!(
                validate_group_configs(&b, &map(&[(k, v)])).unwrap_err(),
                want
            );
        }
        // wider broker bounds let the heartbeat reach the session timeout
        let wide = BrokerConfig::from_pairs([
            ("group.consumer.min.session.timeout.ms", "1000"),
            ("group.consumer.max.heartbeat.interval.ms", "60000"),
        ])
        .unwrap();
        let hb = map(&[
            ("consumer.session.timeout.ms", "10000"),
            ("consumer.heartbeat.interval.ms", "10000"),
        ]);
        assert_eq!(
            validate_group_configs(&wide, &hb).unwrap_err(),
            "consumer.heartbeat.interval.ms must be less than consumer.session.timeout.ms"
        );
        assert!(
            validate_group_configs(&b, &map(&[("share.auto.offset.reset", "sideways")])).is_err()
        );
    }

    #[test]
    fn scopes() {
        assert_eq!(scope_of("", 1), Ok(Scope::ClusterDefault));
        assert_eq!(scope_of("1", 1), Ok(Scope::Broker(1)));
        assert!(scope_of("2", 1).is_err());
        assert!(scope_of("x", 1).is_err());
    }

    #[test]
    fn store_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), DynamicConfigs::default());
        let mut c = DynamicConfigs::default();
        c.set(Scope::ClusterDefault, map(&[("log.retention.ms", "5")]));
        c.set(Scope::Broker(3), map(&[("message.max.bytes", "100")]));
        c.groups
            .insert("g".into(), map(&[("consumer.session.timeout.ms", "50000")]));
        store(dir.path(), &c).unwrap();
        assert_eq!(load(dir.path()).unwrap(), c);
        c.set(Scope::Broker(3), BTreeMap::new());
        assert!(c.brokers.is_empty());
        std::fs::write(dir.path().join(DYNAMIC_CONFIGS_FILE), b"{oops").unwrap();
        assert!(load(dir.path()).is_err());
    }
}
