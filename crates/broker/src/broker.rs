//! Shared broker state: configuration (static and dynamic), the topic
//! table, the cluster view, topic admin, the group coordinator and metrics,
//! around the partition layer ([`ReplicaManager`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_storage::backend::{FileStorage, Storage};
use weir_storage::{LogManager, LogManagerConfig, StorageError, TopicPartition};

use crate::cluster::{ClusterSnapshot, ClusterView, LocalTopicAdmin, SingleNode, TopicAdmin};
use crate::config::BrokerConfig;
use crate::dynamic_config::{self, DynamicConfigs, Scope};
use crate::groups::Groups;
use crate::replica_manager::ReplicaManager;
use crate::topic_config;
use crate::topics::{self, MetaProperties, TopicMeta, TopicStore, TopicStoreError};
use crate::transactions::Transactions;

/// Milliseconds since the Unix epoch; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Topics(#[from] TopicStoreError),
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// `quota.window.num` windows of `quota.window.size.seconds` (read once:
/// not dynamic, as in Kafka).
fn quota_window(config: &BrokerConfig) -> crate::quotas::WindowConfig {
    let d = crate::quotas::WindowConfig::DEFAULT;
    crate::quotas::WindowConfig {
        samples: config
            .integer("quota.window.num")
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .unwrap_or(d.samples),
        window_ms: config
            .integer("quota.window.size.seconds")
            .filter(|n| *n >= 1)
            .map_or(d.window_ms, |s| s.saturating_mul(1000)),
    }
}

/// Hands out producer ids unique in the cluster.
pub trait ProducerIdSource: Send + Sync {
    fn next(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<i64, ErrorCode>> + Send + '_>>;
}

/// Why creating a topic failed; mapped to Kafka error codes by the handlers.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicError {
    #[error("Topic '{0}' already exists.")]
    Exists(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("Number of partitions must be larger than 0 (got {0}).")]
    InvalidPartitions(i32),
    #[error("{0}")]
    InvalidReplicationFactor(String),
    #[error("{0}")]
    InvalidConfig(String),
    /// The logs or the topic table could not be written (nothing of the
    /// topic was kept); Kafka's KAFKA_STORAGE_ERROR.
    #[error("{0}")]
    Storage(String),
    #[error("{0}")]
    Internal(String),
}

/// Why adding partitions failed; mapped to Kafka error codes by the handler.
#[derive(Debug, thiserror::Error)]
pub enum AddPartitionsError {
    /// Unknown topic, or not more partitions than now: INVALID_PARTITIONS.
    #[error("{0}")]
    Invalid(String),
    /// The logs or the topic table could not be written (no partition was
    /// added): KAFKA_STORAGE_ERROR.
    #[error("{0}")]
    Storage(String),
}

pub struct Broker {
    /// The static configuration (file, environment, flags); the one in
    /// effect, with dynamic configs on top, is [`Broker::effective_config`].
    pub config: BrokerConfig,
    /// Dynamic broker configs, as stored in `weir-dynamic-configs.json`;
    /// changed only under `admin`.
    dynamic: RwLock<DynamicConfigs>,
    /// `config` with this broker's dynamic configs on top; replaced whole
    /// when they change, so readers (produce) take a cheap `Arc` clone.
    effective: RwLock<Arc<BrokerConfig>>,
    pub meta: MetaProperties,
    /// The partition layer: logs, high watermarks, producer state and
    /// fetch wake-ups. Topic changes here create and remove its logs.
    pub replicas: Arc<ReplicaManager>,
    /// This broker's topic table (`weir-topics.json`): every topic of a
    /// single node; in a cluster, the topics this broker hosts partitions
    /// of, so that a restart knows them before the metadata image arrives.
    pub(crate) topics: Arc<RwLock<TopicStore>>,
    /// Serialises topic creation, deletion and config changes.
    pub admin: tokio::sync::Mutex<()>,
    /// Held across a topic config change from reading the current overrides
    /// to the new set being in effect, so two incremental changes on this
    /// broker never lose one another's keys. Taken before `admin`, never
    /// after it.
    pub config_changes: tokio::sync::Mutex<()>,
    /// Host and port announced in Metadata.
    advertised: Arc<RwLock<(String, u16)>>,
    /// Brokers, controller and partition leadership as handlers see them;
    /// [`SingleNode`] unless a cluster installed its own.
    cluster: RwLock<Arc<dyn ClusterView>>,
    /// Who creates and deletes topics; [`LocalTopicAdmin`] unless a cluster
    /// installed its own.
    topic_admin: RwLock<Arc<dyn TopicAdmin>>,
    /// The next producer id InitProducerId hands out (broker-wide, not a
    /// partition's).
    next_producer_id: AtomicI64,
    pub clock: Clock,
    /// The group coordinator; set once at start, after `__consumer_offsets`
    /// was replayed.
    groups: OnceLock<Groups>,
    /// The transaction coordinator; set once at start, after
    /// `__transaction_state` was replayed.
    transactions: OnceLock<Transactions>,
    /// Event counters reported at `/metrics`.
    pub metrics: crate::metrics::BrokerMetrics,
    /// The follower fetches of the partitions this broker follows.
    pub fetchers: crate::replication::fetcher::FetcherManager,
    /// Where producer ids come from in a cluster (blocks from the
    /// controller, unique cluster-wide); none on a single node, which
    /// counts them itself.
    producer_ids: RwLock<Option<Arc<dyn ProducerIdSource>>>,
    /// How ISR changes reach the controller; none on a single node.
    isr_changer: RwLock<Option<Arc<dyn crate::replication::IsrChanger>>>,
    /// SCRAM credentials set at run time (`weir-scram-credentials.json`,
    /// or the metadata image on a cluster member), checked by every SASL
    /// listener before its static JAAS users.
    pub scram: Arc<crate::scram_credentials::ScramStore>,
    /// ACLs (`weir-acls.json`, or the metadata image on a cluster member)
    /// and the authorizer's decisions.
    pub acls: Arc<crate::acls::AclStore>,
    /// Where a cluster member sends ACL, SCRAM credential and client quota
    /// changes (the metadata log); none on a single node, which changes its
    /// own files.
    security_admin: RwLock<Option<Arc<dyn crate::security_admin::SecurityAdmin>>>,
    /// Client quotas (`weir-client-quotas.json`, or the metadata image on
    /// a cluster member) and the rates measured against them.
    pub quotas: Arc<crate::quotas::QuotaStore>,
    /// Recent failed authentications per client address: how long the
    /// next one's answer waits.
    pub auth_failure_delays: crate::sasl::throttle::FailureDelays,
}

/// Kafka's rule for topic names.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Broker {
    /// Opens the data directory: meta.properties, the topic store and every
    /// partition log. Logs of topics missing from the store are adopted (a
    /// directory copied from Kafka opens), store entries without logs get
    /// their logs created. Start-up rules (`docs/broker.md`): an unreadable
    /// `weir-topics.json` is rebuilt from the partition directories; a
    /// partition or log dir that cannot be opened, or a missing partition
    /// that cannot be created (a full disk), is offline, not a reason to
    /// exit.
    pub fn open(config: BrokerConfig, clock: Clock) -> Result<Broker, BrokerError> {
        Self::open_with_storage(config, clock, Arc::new(FileStorage))
    }

    /// [`Broker::open`] with the partition logs on `storage` (tests inject
    /// faults there; `meta.properties` and `weir-topics.json` stay on the
    /// real file system).
    pub fn open_with_storage(
        config: BrokerConfig,
        clock: Clock,
        storage: Arc<dyn Storage>,
    ) -> Result<Broker, BrokerError> {
        // meta.properties and the topic table live in the first log dir.
        let dir = config
            .log_dirs
            .first()
            .cloned()
            .ok_or_else(|| BrokerError::Config("log.dirs is empty".to_string()))?;
        let meta =
            topics::load_or_create_meta_in(&dir, config.node_id, config.cluster_id().as_deref())?;
        let mut store = TopicStore::open(&dir)?;
        let dynamic = dynamic_config::load(&dir).map_err(|e| BrokerError::Config(e.to_string()))?;
        // A cluster member's ACLs, SCRAM credentials and client quotas
        // come from the metadata image.
        let (scram, acls, quotas) = if config.is_cluster() {
            (
                crate::scram_credentials::ScramStore::in_cluster(),
                crate::acls::AclStore::in_cluster(config.authorizer.clone()),
                crate::quotas::QuotaStore::in_cluster(quota_window(&config)),
            )
        } else {
            (
                crate::scram_credentials::ScramStore::open(&dir)
                    .map_err(|e| BrokerError::Config(e.to_string()))?,
                crate::acls::AclStore::open(&dir, config.authorizer.clone())
                    .map_err(|e| BrokerError::Config(e.to_string()))?,
                crate::quotas::QuotaStore::open(&dir, quota_window(&config))
                    .map_err(|e| BrokerError::Config(e.to_string()))?,
            )
        };
        let static_config = config;
        let config = static_config.with_dynamic(
            &dynamic.cluster_default,
            &dynamic.get(Scope::Broker(static_config.node_id)),
        );
        let mut lm_config = LogManagerConfig::with_storage(config.log_dirs.clone(), storage);
        lm_config.recovery_threads_per_data_dir = config.num_recovery_threads_per_data_dir;
        lm_config.default_log_config = topic_config::log_config(&config, &BTreeMap::new());
        lm_config.topic_configs = store
            .all()
            .map(|t| {
                (
                    t.name.clone(),
                    topic_config::log_config(&config, &t.configs),
                )
            })
            .collect();
        // Settles creations a crash interrupted; a lost table cannot say
        // which were committed (then a complete one stands).
        lm_config.topic_table = store.lost().is_none().then(|| store.known_topics());
        let opening = std::time::Instant::now();
        let logs = LogManager::open(lm_config, clock())?;
        let recovery = opening.elapsed();
        for (d, reason) in logs.offline_dirs() {
            tracing::error!(dir = %d.display(), "log dir is offline: {reason}");
        }
        adopt_found_topics(&mut store, &logs);
        // apply configs; create missing partition logs (but never over a
        // partition that exists on disk and failed to open, nor while a log
        // dir that may hold it is offline)
        let failed = logs.failed_logs();
        for (tp, reason) in &failed {
            tracing::error!(partition = %tp, "partition is offline: {reason}");
        }
        let dirs_offline = !logs.offline_dirs().is_empty();
        // In a cluster the metadata image says which partitions this broker
        // hosts (`reconcile_hosted` creates them), not the table.
        let creates_missing = !config.is_cluster();
        for t in store.all().filter(|_| creates_missing) {
            let cfg = topic_config::log_config(&config, &t.configs);
            for p in 0..t.partitions {
                let tp = TopicPartition::new(t.name.clone(), p);
                match logs.get(&tp) {
                    Some(log) => log.set_config(cfg.clone()),
                    None if failed.contains_key(&tp) => {}
                    None if dirs_offline => {
                        let reason = "not found in the online log dirs while a log dir is offline";
                        tracing::error!(partition = %tp, "partition is offline: {reason}");
                        logs.record_failed(&tp, reason.to_string());
                    }
                    None => {
                        if let Err(e) = logs.create_log(&tp, t.id_bytes(), cfg.clone()) {
                            tracing::error!(partition = %tp, error = %e, "partition is offline: its missing log cannot be created");
                            logs.record_failed(&tp, format!("cannot create the missing log: {e}"));
                        }
                    }
                }
            }
        }
        let advertised = match &config.advertised_listener {
            Some(l) => (l.host.clone(), l.port),
            None => (config.listener.host.clone(), config.listener.port),
        };
        let now = clock();
        let topics = Arc::new(RwLock::new(store));
        let advertised = Arc::new(RwLock::new(advertised));
        let single = SingleNode::new(static_config.node_id, topics.clone(), advertised.clone());
        Ok(Broker {
            meta,
            replicas: Arc::new(ReplicaManager::new(logs)),
            topics,
            admin: tokio::sync::Mutex::new(()),
            config_changes: tokio::sync::Mutex::new(()),
            advertised,
            cluster: RwLock::new(Arc::new(single)),
            topic_admin: RwLock::new(Arc::new(LocalTopicAdmin)),
            next_producer_id: AtomicI64::new(now.max(1).saturating_mul(1000)),
            clock,
            config: static_config,
            dynamic: RwLock::new(dynamic),
            effective: RwLock::new(Arc::new(config)),
            groups: OnceLock::new(),
            transactions: OnceLock::new(),
            metrics: crate::metrics::BrokerMetrics::new(now, recovery),
            fetchers: Default::default(),
            producer_ids: RwLock::new(None),
            isr_changer: RwLock::new(None),
            scram: Arc::new(scram),
            acls: Arc::new(acls),
            auth_failure_delays: Default::default(),
            security_admin: RwLock::new(None),
            quotas: Arc::new(quotas),
        })
    }

    /// Installs how ISR changes reach the controller (cluster wiring).
    pub fn set_isr_changer(&self, changer: Arc<dyn crate::replication::IsrChanger>) {
        *self.isr_changer.write().unwrap_or_else(|p| p.into_inner()) = Some(changer);
    }

    /// How ISR changes reach the controller, when installed.
    pub fn isr_changer(&self) -> Option<Arc<dyn crate::replication::IsrChanger>> {
        self.isr_changer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `replica.lag.time.max.ms`: how long an ISR member may go without
    /// being caught up before its leader removes it.
    pub fn replica_lag_time_max_ms(&self) -> i64 {
        self.effective_config()
            .integer("replica.lag.time.max.ms")
            .unwrap_or(30_000)
            .max(1)
    }

    /// Applies the partition leadership of the current cluster view:
    /// leaders start their epoch, followers fetch from their leaders.
    pub fn apply_leadership(self: &Arc<Self>) {
        let snap = self.cluster();
        let follow = self
            .replicas
            .apply_leadership(self.config.node_id, &snap, self.now_ms());
        self.fetchers.assign(self, follow);
    }

    /// Gives up every leadership this broker holds, for a shutdown once it
    /// no longer follows the metadata (see
    /// [`ReplicaManager::resign_leaderships`]).
    pub fn resign_leaderships(&self) -> usize {
        self.replicas.resign_leaderships()
    }

    /// The cluster as of now: one snapshot per request.
    pub fn cluster(&self) -> Arc<ClusterSnapshot> {
        let view = self
            .cluster
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        view.snapshot()
    }

    /// Who creates, deletes and grows topics.
    pub fn topic_admin(&self) -> Arc<dyn TopicAdmin> {
        self.topic_admin
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes this broker a cluster member: handlers answer from `view` and
    /// send topic changes to `admin`. Called once, before clients connect
    /// (a request already running keeps the snapshot it took).
    pub fn set_cluster(&self, view: Arc<dyn ClusterView>, admin: Arc<dyn TopicAdmin>) {
        *self.cluster.write().unwrap_or_else(|p| p.into_inner()) = view;
        *self.topic_admin.write().unwrap_or_else(|p| p.into_inner()) = admin;
    }

    /// Installs where ACL, SCRAM credential and client quota changes go
    /// (cluster wiring, before clients connect).
    pub fn set_security_admin(&self, admin: Arc<dyn crate::security_admin::SecurityAdmin>) {
        *self
            .security_admin
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Some(admin);
    }

    /// Where ACL, SCRAM credential and client quota changes go, when a
    /// cluster installed it.
    pub fn security_admin(&self) -> Option<Arc<dyn crate::security_admin::SecurityAdmin>> {
        self.security_admin
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The group coordinator, once started.
    pub fn groups(&self) -> Option<&Groups> {
        self.groups.get()
    }

    /// Installs the group coordinator (once; later calls are ignored).
    pub fn set_groups(&self, groups: Groups) {
        let _ = self.groups.set(groups);
    }

    /// The transaction coordinator, once started.
    pub fn transactions(&self) -> Option<&Transactions> {
        self.transactions.get()
    }

    /// Installs the transaction coordinator (once; later calls are
    /// ignored).
    pub fn set_transactions(&self, transactions: Transactions) {
        let _ = self.transactions.set(transactions);
    }

    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// Called once the listener is bound: without an advertised listener,
    /// Metadata announces the bound address.
    pub fn set_bound_addr(&self, addr: std::net::SocketAddr) {
        if self.config.advertised_listener.is_none() {
            let host = if addr.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                addr.ip().to_string()
            };
            if let Ok(mut a) = self.advertised.write() {
                *a = (host, addr.port());
            }
        }
    }

    pub fn advertised(&self) -> (String, u16) {
        self.advertised
            .read()
            .map(|a| a.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.topics.read().ok()?.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: &[u8; 16]) -> Option<TopicMeta> {
        self.topics.read().ok()?.by_id(id).cloned()
    }

    pub fn all_topics(&self) -> Vec<TopicMeta> {
        self.topics
            .read()
            .map(|s| s.all().cloned().collect())
            .unwrap_or_default()
    }

    /// Creates a topic (callers hold `admin`). With `validate_only`, checks
    /// everything and changes nothing.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, CreateTopicError> {
        validate_topic_name(name).map_err(CreateTopicError::InvalidName)?;
        if self.topic(name).is_some() {
            return Err(CreateTopicError::Exists(name.to_string()));
        }
        let partitions = if partitions == -1 {
            self.config.num_partitions
        } else {
            partitions
        };
        if partitions < 1 {
            return Err(CreateTopicError::InvalidPartitions(partitions));
        }
        let rf = if replication_factor == -1 {
            self.config.default_replication_factor
        } else {
            replication_factor
        };
        if rf < 1 {
            return Err(CreateTopicError::InvalidReplicationFactor(format!(
                "Replication factor must be larger than 0, or -1 to use the default value (got {rf})."
            )));
        }
        if rf > 1 {
            return Err(CreateTopicError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered (weir has no replication yet)."
            )));
        }
        topic_config::validate_overrides(&configs).map_err(CreateTopicError::InvalidConfig)?;
        let meta = TopicMeta {
            name: name.to_string(),
            id: Uuid(topics::random_uuid()).to_string(),
            partitions,
            configs,
        };
        if validate_only {
            return Ok(meta);
        }
        let cfg = topic_config::log_config(&self.effective_config(), &meta.configs);
        cfg.validate().map_err(CreateTopicError::InvalidConfig)?;
        // All or nothing: every log under an intent, then the table, then
        // the commit (see `weir_storage::PendingCreation`).
        let pending = self
            .replicas
            .prepare_logs(name, meta.id_bytes(), 0..partitions, cfg)
            .map_err(|e| {
                tracing::error!(topic = %name, error = %e, "topic creation failed");
                CreateTopicError::Storage(e.to_string())
            })?;
        let recorded = self
            .topics
            .write()
            .map_err(|_| CreateTopicError::Internal("topic store poisoned".into()))?
            .put(meta.clone());
        if let Err(e) = recorded {
            tracing::error!(topic = %name, error = %e, "topic creation failed");
            if let Err(undo) = pending.abort() {
                tracing::error!(topic = %name, error = %undo, "cannot undo the topic creation; the next start does");
            }
            return Err(CreateTopicError::Storage(e.to_string()));
        }
        pending.commit();
        tracing::info!(topic = %name, partitions, "created topic");
        Ok(meta)
    }

    /// Deletes a topic: removes it from the store first (so it is gone even if
    /// a log deletion fails half way), then its partition logs.
    pub fn delete_topic(&self, name: &str) -> Result<Option<TopicMeta>, BrokerError> {
        let removed = self
            .topics
            .write()
            .map_err(|_| BrokerError::Config("topic store poisoned".into()))?
            .remove(name)?;
        if let Some(t) = &removed {
            for p in 0..t.partitions {
                self.replicas
                    .remove_partition(&TopicPartition::new(name, p))?;
            }
            tracing::info!(topic = %name, "deleted topic");
        }
        Ok(removed)
    }

    /// Adds partitions to a topic (callers hold `admin`).
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), AddPartitionsError> {
        let mut t = self
            .topic(name)
            .ok_or_else(|| AddPartitionsError::Invalid(format!("Topic {name} does not exist")))?;
        if count <= t.partitions {
            return Err(AddPartitionsError::Invalid(format!(
                "Topic currently has {} partitions, which is higher than the requested {count}.",
                t.partitions
            )));
        }
        if validate_only {
            return Ok(());
        }
        let cfg = topic_config::log_config(&self.effective_config(), &t.configs);
        // All or nothing, as in `create_topic`.
        let pending = self
            .replicas
            .prepare_logs(name, t.id_bytes(), t.partitions..count, cfg)
            .map_err(|e| {
                tracing::error!(topic = %name, error = %e, "adding partitions failed");
                AddPartitionsError::Storage(e.to_string())
            })?;
        t.partitions = count;
        let recorded = self
            .topics
            .write()
            .map_err(|_| AddPartitionsError::Storage("topic store poisoned".to_string()))?
            .put(t);
        match recorded {
            Ok(()) => {
                pending.commit();
                Ok(())
            }
            Err(e) => {
                if let Err(undo) = pending.abort() {
                    tracing::error!(topic = %name, error = %undo, "cannot undo the partition creation; the next start does");
                }
                Err(AddPartitionsError::Storage(e.to_string()))
            }
        }
    }

    /// Replaces a topic's config overrides (callers hold `admin`).
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), String> {
        let mut t = self
            .topic(name)
            .ok_or_else(|| format!("Topic {name} does not exist"))?;
        topic_config::validate_overrides(&configs)?;
        let cfg = topic_config::log_config(&self.effective_config(), &configs);
        cfg.validate()?;
        if validate_only {
            return Ok(());
        }
        t.configs = configs;
        self.replicas.set_log_configs(name, t.partitions, &cfg);
        self.topics
            .write()
            .map_err(|_| "topic store poisoned".to_string())?
            .put(t)
            .map_err(|e| e.to_string())
    }

    /// The configuration in effect: the static one with the dynamic broker
    /// configs (cluster-wide, then this broker's) on top.
    pub fn effective_config(&self) -> Arc<BrokerConfig> {
        self.effective
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The dynamic broker configs set for `scope`.
    pub fn dynamic_configs(&self, scope: Scope) -> BTreeMap<String, String> {
        let d = self.dynamic.read().unwrap_or_else(|p| p.into_inner());
        d.get(scope)
    }

    /// Replaces the dynamic broker configs of `scope` (callers hold
    /// `admin`): validates them, and every topic's resulting log config,
    /// stores them durably, then applies them to every log. With
    /// `validate_only`, changes nothing. Errors carry Kafka's message
    /// (INVALID_REQUEST).
    pub fn set_dynamic_broker_configs(
        &self,
        scope: Scope,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), String> {
        dynamic_config::validate_broker_update(scope, &configs)?;
        let mut next = self.dynamic.read().map_err(|_| "poisoned")?.clone();
        next.set(scope, configs);
        let effective = self.config.with_dynamic(
            &next.cluster_default,
            &next.get(Scope::Broker(self.config.node_id)),
        );
        dynamic_config::validate_cleaner_threads(&self.effective_config(), &effective)?;
        let topics = self.all_topics();
        let mut planned = Vec::with_capacity(topics.len());
        for t in topics {
            let cfg = topic_config::log_config(&effective, &t.configs);
            cfg.validate()
                .map_err(|e| format!("Invalid config for topic {}: {e}", t.name))?;
            planned.push((t, cfg));
        }
        if validate_only {
            return Ok(());
        }
        self.store_dynamic(next)?;
        *self.effective.write().map_err(|_| "poisoned")? = Arc::new(effective);
        for (t, cfg) in planned {
            self.replicas.set_log_configs(&t.name, t.partitions, &cfg);
        }
        tracing::info!(?scope, "dynamic broker configs changed");
        Ok(())
    }

    /// Writes `next` to `weir-dynamic-configs.json`, then makes it the
    /// dynamic configs in memory (a failed write changes nothing).
    fn store_dynamic(&self, next: DynamicConfigs) -> Result<(), String> {
        let dir = self
            .config
            .log_dirs
            .first()
            .ok_or_else(|| "log.dirs is empty".to_string())?;
        dynamic_config::store(dir, &next).map_err(|e| e.to_string())?;
        *self.dynamic.write().map_err(|_| "poisoned")? = next;
        Ok(())
    }

    /// The configs set for group `group` (empty when none).
    pub fn group_configs(&self, group: &str) -> BTreeMap<String, String> {
        let d = self.dynamic.read().unwrap_or_else(|p| p.into_inner());
        d.groups.get(group).cloned().unwrap_or_default()
    }

    /// Replaces the configs of group `group` (callers hold `admin`); the
    /// group need not exist, as in Kafka. Errors carry Kafka's message
    /// (INVALID_CONFIG).
    pub fn set_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), String> {
        dynamic_config::validate_group_configs(&self.effective_config(), &configs)?;
        if validate_only {
            return Ok(());
        }
        let mut next = self.dynamic.read().map_err(|_| "poisoned")?.clone();
        if configs.is_empty() {
            next.groups.remove(group);
        } else {
            next.groups.insert(group.to_string(), configs);
        }
        self.store_dynamic(next)?;
        tracing::info!(group, "group configs changed");
        Ok(())
    }

    pub fn allocate_producer_id(&self) -> i64 {
        self.next_producer_id.fetch_add(1, Ordering::SeqCst)
    }

    /// Installs where producer ids come from (cluster wiring).
    pub fn set_producer_id_source(&self, source: Arc<dyn ProducerIdSource>) {
        *self.producer_ids.write().unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// A producer id no other producer of the cluster has: from the
    /// installed source, else this broker's own counter.
    pub async fn next_producer_id(&self) -> Result<i64, ErrorCode> {
        let source = self
            .producer_ids
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match source {
            Some(s) => s.next().await,
            None => Ok(self.allocate_producer_id()),
        }
    }
}

/// Adopts topics found on disk that the table does not know (a directory
/// copied from Kafka, or every topic when `weir-topics.json` was lost), with
/// their on-disk topic id and the partition count their directories show;
/// grows a known topic whose directories show more partitions. A failure to
/// rewrite the table (a full disk) keeps them in memory, with an error.
fn adopt_found_topics(store: &mut TopicStore, logs: &LogManager) {
    let mut found: BTreeMap<String, (i32, [u8; 16])> = BTreeMap::new();
    for log in logs.logs() {
        let tp = log.topic_partition().clone();
        let e = found.entry(tp.topic.clone()).or_insert((0, [0; 16]));
        e.0 = e.0.max(tp.partition + 1);
        if e.1 == [0; 16] {
            e.1 = log.topic_id();
        }
    }
    // Rebuilding a lost table, offline partitions of a topic count too:
    // their directories exist. (With the table intact it has them already.)
    if store.lost().is_some() {
        for tp in logs.failed_logs().keys() {
            if let Some(e) = found.get_mut(&tp.topic) {
                e.0 = e.0.max(tp.partition + 1);
            }
        }
    }
    let mut adopted = Vec::new();
    for (name, (parts, id)) in found {
        match store.get(&name) {
            Some(t) if t.partitions < parts => {
                let mut t = t.clone();
                t.partitions = parts;
                adopted.push(t);
            }
            Some(_) => {}
            None => {
                let id = if id == [0; 16] {
                    topics::random_uuid()
                } else {
                    id
                };
                if store.lost().is_none() {
                    tracing::info!(topic = %name, partitions = parts, "adopting topic found on disk");
                }
                adopted.push(TopicMeta {
                    name,
                    id: Uuid(id).to_string(),
                    partitions: parts,
                    configs: BTreeMap::new(),
                });
            }
        }
    }
    if let Some(reason) = store.lost() {
        tracing::warn!(
            "{} could not be read ({reason}); it was moved to {} and the topic table is rebuilt from the partition directories: {} topics ({}); per-topic config overrides were stored only in that file and are lost, these topics now use the broker defaults",
            topics::TOPICS_FILE,
            topics::CORRUPT_TOPICS_FILE,
            adopted.len(),
            adopted
                .iter()
                .map(|t| format!("{} ({} partitions)", t.name, t.partitions))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Err(e) = store.adopt(adopted) {
        tracing::error!(error = %e, "cannot rewrite the topic table; the topics found on disk are served and written at the next topic change");
    }
}
