//! Client quotas (Kafka's `ClientQuotaManager` and
//! `ClientRequestQuotaManager`): produce and fetch byte rates and the
//! share of request-handling time a user and/or client id may use, set
//! with AlterClientQuotas and listed with DescribeClientQuotas.
//!
//! Durable in `weir-client-quotas.json` in the first log dir, written like
//! `weir-dynamic-configs.json` (temporary file, fsync, rename, directory
//! fsync):
//!
//! ```json
//! {"version": 1,
//!  "entities": [{"entity": {"user": "alice", "client-id": null},
//!                "quotas": {"producer_byte_rate": 1048576.0}}]}
//! ```
//!
//! A `null` name is the entity type's default (`<default>`). A file that
//! cannot be read or parsed stops the broker at start: starting without
//! it would lift every quota it holds.
//!
//! On a cluster member ([`QuotaStore::in_cluster`]) there is no file: the
//! quotas live in the metadata log, AlterClientQuotas goes to the active
//! controller ([`crate::security_admin`]), and the process that applies
//! the metadata image hands every new quota set to [`QuotaStore::replace`].
//! The entities and their checks are shared with the controller
//! ([`weir_metadata::client_quotas`]).
//!
//! Enforcement: the connection layer ([`throttle`]) charges each answered
//! request to the quota that applies to its client, found with Kafka's
//! precedence ([`Index::resolve`]), measured by a [`rate::Rate`] over
//! `quota.window.num` windows of `quota.window.size.seconds` at the
//! broker's clock. A client over its quota gets `throttle_time_ms` in the
//! answer and its connection reads nothing more for that long (KIP-219).
//! With no quota set, the check is one relaxed atomic load.

pub mod entity;
pub mod rate;
pub mod throttle;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use weir_protocol::error_code::ErrorCode;

pub use entity::{Alteration, ClientQuotas, Component, EntityType, Op, QuotaEntity, Refusal};
pub use rate::WindowConfig;

use crate::topics::{self, TopicStoreError};

pub const CLIENT_QUOTAS_FILE: &str = "weir-client-quotas.json";

/// Sensors not recorded on for this long are dropped (Kafka's inactive
/// quota sensor expiry).
const SENSOR_IDLE_MS: i64 = 3_600_000;
/// Idle sensors are looked for once every this many records.
const SWEEP_EVERY: u64 = 4096;

/// Why the stored quotas cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("corrupt client quotas file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(transparent)]
    Write(#[from] TopicStoreError),
    #[error("a cluster member's client quotas are changed through the metadata log")]
    InCluster,
}

/// The quotas the broker enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    /// `producer_byte_rate`: Produce request bytes per second.
    Produce,
    /// `consumer_byte_rate`: record bytes fetched per second by consumers.
    Fetch,
    /// `request_percentage`: request-handling time as a percentage of one
    /// thread.
    Request,
}

impl QuotaType {
    pub const ALL: [QuotaType; 3] = [QuotaType::Produce, QuotaType::Fetch, QuotaType::Request];

    pub fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => entity::PRODUCER_BYTE_RATE,
            QuotaType::Fetch => entity::CONSUMER_BYTE_RATE,
            QuotaType::Request => entity::REQUEST_PERCENTAGE,
        }
    }

    /// The `type` label of the throttle metrics (Kafka's sensor names).
    pub fn label(self) -> &'static str {
        match self {
            QuotaType::Produce => "produce",
            QuotaType::Fetch => "fetch",
            QuotaType::Request => "request",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn bit(self) -> u8 {
        1 << self.index()
    }
}

/// The enforced quotas of one entity, by [`QuotaType::index`].
type Limits = [Option<f64>; 3];

fn limit(l: &Limits, t: QuotaType) -> Option<f64> {
    l.get(t.index()).copied().flatten()
}

/// One level of the precedence: limits by name and for the default.
#[derive(Debug, Default)]
struct Names {
    named: HashMap<String, Limits>,
    default: Option<Limits>,
}

impl Names {
    fn get(&self, name: &str, t: QuotaType) -> Option<f64> {
        self.named.get(name).and_then(|l| limit(l, t))
    }

    fn default(&self, t: QuotaType) -> Option<f64> {
        self.default.as_ref().and_then(|l| limit(l, t))
    }

    fn slot(&mut self, name: &Option<String>) -> &mut Limits {
        match name {
            Some(n) => self.named.entry(n.clone()).or_default(),
            None => self.default.get_or_insert_default(),
        }
    }
}

/// The quota that applies to a client and the sensor it is measured on:
/// Kafka's metric tags, the user and/or client id of the level that
/// matched ("" for a part the level does not name), so a quota set for a
/// user is shared by all its client ids while a default applies to each
/// user or client id on its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Applied<'a> {
    pub quota: f64,
    pub user: &'a str,
    pub client_id: &'a str,
}

/// The enforced quotas arranged for lookups by (user, client id) without
/// allocating.
#[derive(Debug, Default)]
pub struct Index {
    /// `/users/<u>/clients/...` by user.
    user_clients: HashMap<String, Names>,
    /// `/users/<default>/clients/...`.
    default_user_clients: Names,
    /// `/users/<u>` and `/users/<default>`.
    users: Names,
    /// `/clients/<c>` and `/clients/<default>`.
    clients: Names,
    /// Which quota types are set anywhere ([`QuotaType::bit`]).
    kinds: u8,
}

impl Index {
    pub fn build(quotas: &ClientQuotas) -> Index {
        let mut ix = Index::default();
        for (entity, values) in &quotas.entries {
            let limits: Limits = QuotaType::ALL.map(|t| values.get(t.key()).copied());
            if limits.iter().all(Option::is_none) {
                continue;
            }
            let user = entity.get(EntityType::User);
            let client = entity.get(EntityType::ClientId);
            let slot = match (user, client) {
                (Some(Some(u)), Some(c)) => ix.user_clients.entry(u.clone()).or_default().slot(c),
                (Some(None), Some(c)) => ix.default_user_clients.slot(c),
                (Some(u), None) => ix.users.slot(u),
                (None, Some(c)) => ix.clients.slot(c),
                (None, None) => continue,
            };
            *slot = limits;
            for t in QuotaType::ALL {
                if limit(&limits, t).is_some() {
                    ix.kinds |= t.bit();
                }
            }
        }
        ix
    }

    /// The quota of type `t` for `user`'s requests with `client_id`, with
    /// Kafka's precedence: `/users/<u>/clients/<c>`,
    /// `/users/<u>/clients/<default>`, `/users/<u>`,
    /// `/users/<default>/clients/<c>`,
    /// `/users/<default>/clients/<default>`, `/users/<default>`,
    /// `/clients/<c>`, `/clients/<default>`.
    pub fn resolve<'a>(
        &self,
        t: QuotaType,
        user: &'a str,
        client_id: &'a str,
    ) -> Option<Applied<'a>> {
        let both = |quota| Applied {
            quota,
            user,
            client_id,
        };
        let user_only = |quota| Applied {
            quota,
            user,
            client_id: "",
        };
        let client_only = |quota| Applied {
            quota,
            user: "",
            client_id,
        };
        let of_user = self.user_clients.get(user);
        of_user
            .and_then(|n| n.get(client_id, t))
            .map(both)
            .or_else(|| of_user.and_then(|n| n.default(t)).map(both))
            .or_else(|| self.users.get(user, t).map(user_only))
            .or_else(|| self.default_user_clients.get(client_id, t).map(both))
            .or_else(|| self.default_user_clients.default(t).map(both))
            .or_else(|| self.users.default(t).map(user_only))
            .or_else(|| self.clients.get(client_id, t).map(client_only))
            .or_else(|| self.clients.default(t).map(client_only))
    }
}

/// The quotas with their lookup index. Invariant: `index` is built from
/// `quotas`.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub quotas: ClientQuotas,
    index: Index,
}

/// What one sensor measures: a quota type for a (user, client id) pair
/// as [`Applied`] names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SensorKey {
    t: QuotaType,
    user: String,
    client_id: String,
}

#[derive(Debug)]
struct Sensor {
    rate: rate::Rate,
    last_ms: i64,
}

/// Totals of the throttling done, by [`QuotaType::index`].
#[derive(Debug, Default)]
pub struct QuotaMetrics {
    /// Responses that carried a throttle time.
    pub throttled: [AtomicU64; 3],
    /// The throttle time handed out, in milliseconds.
    pub throttle_ms: [AtomicU64; 3],
}

/// The broker's client quotas: the file, the quotas every connection
/// checks, and the rates measured against them. Invariant: `current` is
/// what the file holds (a change is written before it is swapped in), or
/// on a cluster member what the metadata image last handed over, and
/// `kinds` is its index's `kinds`.
#[derive(Debug)]
pub struct QuotaStore {
    /// Where the file lives; None on a cluster member.
    dir: Option<PathBuf>,
    window: WindowConfig,
    current: RwLock<Arc<Snapshot>>,
    /// The quota types set anywhere; read on every request, so the path
    /// without quotas is one atomic load.
    kinds: AtomicU8,
    /// Serialises alterations from planning to the swap.
    writer: Mutex<()>,
    sensors: Mutex<HashMap<SensorKey, Sensor>>,
    records: AtomicU64,
    pub metrics: QuotaMetrics,
}

impl QuotaStore {
    /// Loads `weir-client-quotas.json` from `dir` (the first log dir).
    pub fn open(dir: &Path, window: WindowConfig) -> Result<QuotaStore, StoreError> {
        let quotas = load(dir)?;
        Ok(QuotaStore::with(Some(dir.to_path_buf()), window, quotas))
    }

    /// The store of a cluster member: no file, no quotas until the first
    /// [`QuotaStore::replace`] (see the module doc).
    pub fn in_cluster(window: WindowConfig) -> QuotaStore {
        QuotaStore::with(None, window, ClientQuotas::default())
    }

    fn with(dir: Option<PathBuf>, window: WindowConfig, quotas: ClientQuotas) -> QuotaStore {
        let index = Index::build(&quotas);
        QuotaStore {
            dir,
            window,
            kinds: AtomicU8::new(index.kinds),
            current: RwLock::new(Arc::new(Snapshot { quotas, index })),
            writer: Mutex::new(()),
            sensors: Mutex::new(HashMap::new()),
            records: AtomicU64::new(0),
            metrics: QuotaMetrics::default(),
        }
    }

    /// Makes `quotas` the quotas, as the metadata image holds them (a
    /// cluster member); the next request is measured against them. The
    /// rates measured so far are kept.
    pub fn replace(&self, quotas: ClientQuotas) {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.swap(quotas);
    }

    fn swap(&self, quotas: ClientQuotas) {
        let index = Index::build(&quotas);
        let kinds = index.kinds;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(Snapshot { quotas, index });
        self.kinds.store(kinds, Ordering::Relaxed);
    }

    pub fn window(&self) -> WindowConfig {
        self.window
    }

    /// Whether no quota of type `t` is set (the common case: then nothing
    /// is measured).
    pub fn is_empty(&self) -> bool {
        self.kinds.load(Ordering::Relaxed) == 0
    }

    pub fn has(&self, t: QuotaType) -> bool {
        self.kinds.load(Ordering::Relaxed) & t.bit() != 0
    }

    /// The quotas as of now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Applies an AlterClientQuotas request (planned by
    /// [`ClientQuotas::plan_alter`]); with `validate_only` nothing is
    /// changed. When the file cannot be written nothing changes and the
    /// entries that would have been applied get KAFKA_STORAGE_ERROR.
    /// Blocks on the file system.
    pub fn alter(
        &self,
        alterations: &[Alteration],
        validate_only: bool,
    ) -> Vec<Result<(), Refusal>> {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let plan = self.snapshot().quotas.plan_alter(alterations);
        if validate_only || !plan.changed {
            return plan.results;
        }
        let stored = match &self.dir {
            Some(dir) => store(dir, &plan.next),
            None => Err(StoreError::InCluster),
        };
        if let Err(e) = stored {
            tracing::error!(error = %e, "client quotas not changed: cannot write them");
            let message = format!("cannot store the client quotas: {e}");
            return plan
                .results
                .into_iter()
                .map(|r| {
                    r.and(Err(Refusal {
                        code: ErrorCode::KafkaStorageError,
                        message: message.clone(),
                    }))
                })
                .collect();
        }
        self.swap(plan.next);
        tracing::info!("client quotas changed");
        plan.results
    }

    /// Records `value` (bytes, or percent-seconds of a thread) for a
    /// request of `user` with `client_id` at `now_ms` and returns how long
    /// the client must wait, 0 when within its quota or without one.
    pub fn record(
        &self,
        t: QuotaType,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
    ) -> i64 {
        if !self.has(t) {
            return 0;
        }
        let snapshot = self.snapshot();
        let Some(applied) = snapshot.index.resolve(t, user, client_id) else {
            return 0;
        };
        let key = SensorKey {
            t,
            user: applied.user.to_string(),
            client_id: applied.client_id.to_string(),
        };
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if self.records.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            sensors.retain(|_, s| now_ms.saturating_sub(s.last_ms) < SENSOR_IDLE_MS);
        }
        let sensor = sensors.entry(key).or_insert_with(|| Sensor {
            rate: rate::Rate::new(),
            last_ms: now_ms,
        });
        sensor.last_ms = now_ms;
        sensor.rate.record(self.window, value, now_ms);
        let observed = sensor.rate.measure(self.window, now_ms);
        if observed <= applied.quota {
            return 0;
        }
        let span = sensor.rate.window_size_ms(self.window, now_ms);
        rate::throttle_time_ms(observed, applied.quota, span, self.window)
    }

    /// Takes back a value recorded with [`QuotaStore::record`] (a throttled
    /// fetch whose data is not sent).
    pub fn unrecord(&self, t: QuotaType, user: &str, client_id: &str, value: f64, now_ms: i64) {
        let snapshot = self.snapshot();
        let Some(applied) = snapshot.index.resolve(t, user, client_id) else {
            return;
        };
        let key = SensorKey {
            t,
            user: applied.user.to_string(),
            client_id: applied.client_id.to_string(),
        };
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = sensors.get_mut(&key) {
            s.rate.record(self.window, -value, now_ms);
        }
    }

    /// Counts a throttle of `ms` for quota type `t`.
    pub fn count_throttle(&self, t: QuotaType, ms: i64) {
        let i = t.index();
        if let (Some(n), Some(total)) = (
            self.metrics.throttled.get(i),
            self.metrics.throttle_ms.get(i),
        ) {
            n.fetch_add(1, Ordering::Relaxed);
            total.fetch_add(ms.max(0) as u64, Ordering::Relaxed);
        }
    }

    /// Writes the throttle metrics into a scrape.
    pub fn render_metrics(&self, w: &mut crate::metrics::text::TextWriter) {
        use crate::metrics::text::Kind;
        let families = [
            (
                "weir_quota_throttled_responses_total",
                "Responses that carried a client quota throttle time, by quota type.",
                &self.metrics.throttled,
            ),
            (
                "weir_quota_throttle_time_ms_total",
                "Client quota throttle time handed out (milliseconds), by quota type.",
                &self.metrics.throttle_ms,
            ),
        ];
        for (name, help, values) in families {
            w.family(name, Kind::Counter, help);
            for t in QuotaType::ALL {
                let v = values
                    .get(t.index())
                    .map_or(0, |a| a.load(Ordering::Relaxed));
                w.sample_int(name, &[("type", t.label())], i128::from(v));
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
struct QuotasFile {
    version: u32,
    entities: Vec<StoredEntity>,
}

#[derive(Serialize, Deserialize)]
struct StoredEntity {
    entity: BTreeMap<String, Option<String>>,
    quotas: BTreeMap<String, f64>,
}

/// Reads the quotas from `dir`; none when the file does not exist.
pub fn load(dir: &Path) -> Result<ClientQuotas, StoreError> {
    let path = dir.join(CLIENT_QUOTAS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ClientQuotas::default()),
        Err(source) => return Err(StoreError::Read { path, source }),
    };
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.clone(),
        reason,
    };
    let file: QuotasFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.version != 1 {
        return Err(corrupt(format!("unknown version {}", file.version)));
    }
    let mut quotas = ClientQuotas::default();
    for stored in file.entities {
        let parts: Vec<(String, Option<String>)> = stored.entity.into_iter().collect();
        let entity = entity::validate_entity(&parts).map_err(|r| corrupt(r.message))?;
        for (k, v) in &stored.quotas {
            entity::validate_value(entity.allowed_keys(), k, *v)
                .map_err(|r| corrupt(format!("{entity}: {}", r.message)))?;
        }
        if stored.quotas.is_empty() || quotas.entries.contains_key(&entity) {
            return Err(corrupt(format!("{entity}: empty or listed twice")));
        }
        quotas.entries.insert(entity, stored.quotas);
    }
    Ok(quotas)
}

/// Writes the quotas durably (temporary file, fsync, rename, directory
/// fsync).
pub fn store(dir: &Path, quotas: &ClientQuotas) -> Result<(), StoreError> {
    let file = QuotasFile {
        version: 1,
        entities: quotas
            .entries
            .iter()
            .map(|(e, q)| StoredEntity {
                entity: e
                    .0
                    .iter()
                    .map(|(t, n)| (t.name().to_string(), n.clone()))
                    .collect(),
                quotas: q.clone(),
            })
            .collect(),
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Corrupt {
        path: dir.join(CLIENT_QUOTAS_FILE),
        reason: e.to_string(),
    })?;
    Ok(topics::write_atomically(dir, CLIENT_QUOTAS_FILE, &bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (entity type, name or default) pairs.
    type EntityNames<'a> = &'a [(&'a str, Option<&'a str>)];

    fn quotas(entries: &[(EntityNames<'_>, &str, f64)]) -> ClientQuotas {
        let alterations: Vec<Alteration> = entries
            .iter()
            .map(|(entity, key, value)| Alteration {
                entity: entity
                    .iter()
                    .map(|(t, n)| (t.to_string(), n.map(String::from)))
                    .collect(),
                ops: vec![Op {
                    key: key.to_string(),
                    value: *value,
                    remove: false,
                }],
            })
            .collect();
        let plan = ClientQuotas::default().plan_alter(&alterations);
        assert!(plan.results.iter().all(Result::is_ok), "{:?}", plan.results);
        plan.next
    }

    const P: &str = entity::PRODUCER_BYTE_RATE;

    #[test]
    fn precedence_is_kafkas() {
        // each level's value names its rank (1 most specific)
        let levels: [(EntityNames<'_>, f64); 8] = [
            (&[("user", Some("u")), ("client-id", Some("c"))], 1.0),
            (&[("user", Some("u")), ("client-id", None)], 2.0),
            (&[("user", Some("u"))], 3.0),
            (&[("user", None), ("client-id", Some("c"))], 4.0),
            (&[("user", None), ("client-id", None)], 5.0),
            (&[("user", None)], 6.0),
            (&[("client-id", Some("c"))], 7.0),
            (&[("client-id", None)], 8.0),
        ];
        // remove levels from the most specific on: the next one applies
        for first in 0..levels.len() {
            let entries: Vec<_> = levels[first..].iter().map(|(e, v)| (*e, P, *v)).collect();
            let ix = Index::build(&quotas(&entries));
            let a = ix.resolve(QuotaType::Produce, "u", "c").unwrap();
            assert_eq!(a.quota, (first + 1) as f64);
            // the sensor: shared by the user's clients for a user level,
            // by the users of a client id for a client level
            let (user, client) = match first + 1 {
                3 | 6 => ("u", ""),
                7 | 8 => ("", "c"),
                _ => ("u", "c"),
            };
            assert_eq!((a.user, a.client_id), (user, client), "level {}", first + 1);
            // another quota type is not affected
            assert_eq!(ix.resolve(QuotaType::Fetch, "u", "c"), None);
        }
        // a named level does not apply to another name
        let ix = Index::build(&quotas(&[(&[("user", Some("u"))], P, 3.0)]));
        assert_eq!(ix.resolve(QuotaType::Produce, "v", "c"), None);
        assert_eq!(ix.kinds, QuotaType::Produce.bit());
        // an ip quota is not a client quota
        let ix = Index::build(&quotas(&[(
            &[("ip", None)],
            entity::CONNECTION_CREATION_RATE,
            3.0,
        )]));
        assert_eq!(ix.kinds, 0);
    }

    #[test]
    fn a_client_that_waits_its_throttle_time_stays_near_its_quota() {
        let dir = tempfile::tempdir().unwrap();
        let store = QuotaStore::open(dir.path(), WindowConfig::DEFAULT).unwrap();
        let q = quotas(&[(&[("client-id", Some("c"))], P, 10_000.0)]);
        let alterations: Vec<Alteration> = q
            .entries
            .iter()
            .map(|(e, v)| Alteration {
                entity: e
                    .0
                    .iter()
                    .map(|(t, n)| (t.name().to_string(), n.clone()))
                    .collect(),
                ops: v
                    .iter()
                    .map(|(k, v)| Op {
                        key: k.clone(),
                        value: *v,
                        remove: false,
                    })
                    .collect(),
            })
            .collect();
        assert!(store.alter(&alterations, false).iter().all(Result::is_ok));
        // another client is not measured at all
        assert_eq!(
            store.record(QuotaType::Produce, "ANONYMOUS", "other", 1e9, 0),
            0
        );
        // 5 KB requests back to back, waiting whenever throttled
        let (mut now, mut sent, mut throttles) = (0i64, 0f64, 0);
        while now < 120_000 {
            sent += 5_000.0;
            let t = store.record(QuotaType::Produce, "ANONYMOUS", "c", 5_000.0, now);
            assert!(t <= 11_000);
            if t > 0 {
                throttles += 1;
            }
            now += t + 10;
        }
        let achieved = sent / (now as f64 / 1000.0);
        assert!(throttles > 0);
        assert!(achieved < 10_000.0 * 1.2, "achieved {achieved} B/s");
        assert!(achieved > 10_000.0 * 0.8, "achieved {achieved} B/s");
    }

    #[test]
    fn a_cluster_store_takes_the_images_quotas() {
        let store = QuotaStore::in_cluster(WindowConfig::DEFAULT);
        assert!(store.is_empty());
        assert_eq!(store.record(QuotaType::Produce, "u", "c", 1e9, 0), 0);
        store.replace(quotas(&[(&[("user", Some("u"))], P, 10.0)]));
        assert!(store.has(QuotaType::Produce));
        assert!(store.record(QuotaType::Produce, "u", "c", 1e6, 0) > 0);
        // Not changed locally: a cluster member forwards the request.
        let lift = Alteration {
            entity: vec![("user".into(), Some("u".into()))],
            ops: vec![Op {
                key: P.into(),
                value: 0.0,
                remove: true,
            }],
        };
        let r = store.alter(&[lift], false);
        assert_eq!(
            r[0].as_ref().unwrap_err().code,
            ErrorCode::KafkaStorageError
        );
        assert!(store.has(QuotaType::Produce));
        store.replace(ClientQuotas::default());
        assert!(store.is_empty());
    }

    #[test]
    fn quotas_survive_a_reopen_and_a_corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = QuotaStore::open(dir.path(), WindowConfig::DEFAULT).unwrap();
        assert!(store.is_empty());
        let alteration = Alteration {
            entity: vec![
                ("user".into(), Some("alice".into())),
                ("client-id".into(), None),
            ],
            ops: vec![Op {
                key: P.into(),
                value: 1024.0,
                remove: false,
            }],
        };
        // validate_only changes nothing
        assert!(store.alter(std::slice::from_ref(&alteration), true)[0].is_ok());
        assert!(store.is_empty());
        assert!(store.alter(&[alteration], false)[0].is_ok());
        assert!(store.has(QuotaType::Produce) && !store.has(QuotaType::Fetch));
        let reopened = QuotaStore::open(dir.path(), WindowConfig::DEFAULT).unwrap();
        assert_eq!(reopened.snapshot().quotas, store.snapshot().quotas);
        assert!(reopened.has(QuotaType::Produce));
        std::fs::write(dir.path().join(CLIENT_QUOTAS_FILE), b"{not json").unwrap();
        let err = QuotaStore::open(dir.path(), WindowConfig::DEFAULT).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        std::fs::write(
            dir.path().join(CLIENT_QUOTAS_FILE),
            br#"{"version":1,"entities":[{"entity":{"user":"a"},"quotas":{"producer_byte_rate":-1}}]}"#,
        )
        .unwrap();
        assert!(QuotaStore::open(dir.path(), WindowConfig::DEFAULT).is_err());
    }
}
