//! Glue between the pure transaction coordinator (`weir-txn`) and the
//! broker: it owns the [`TxnCoordinator`], appends its records to
//! `__transaction_state` with acks=all before a transition takes effect,
//! replays the partitions this broker leads (following leadership changes
//! as the group coordinator does), runs the timers, and delivers
//! transaction markers to the partition leaders with WriteTxnMarkers
//! ([`markers`]).
//!
//! Invariants: the coordinator lock is never held across an await; every
//! [`Write`] the coordinator hands out is reported back exactly once
//! ([`Transactions::write`] runs in its own task, so a request whose client
//! went away still completes it); a transition takes effect only after its
//! record is on every in-sync replica of its `__transaction_state`
//! partition.

mod log;
pub mod markers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::CreateTopicsRequest;
use weir_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use weir_txn::{MarkerJob, PartitionStatus, TxnConfig, TxnCoordinator, Write, WriteDone};

use crate::broker::{Broker, CreateTopicError};
use crate::config::BrokerConfig;
use crate::handler::RequestContext;

/// The internal topic holding the transaction coordinator's state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// How often the timer task looks at the coordinator's deadlines.
const TIMER_POLL: Duration = Duration::from_millis(100);

/// Back-off between rounds of a completion that failed to append.
const COMPLETION_BACKOFF: markers::Backoff = markers::Backoff {
    initial: Duration::from_millis(100),
    max: Duration::from_secs(2),
};

/// The coordinator settings from the broker configuration (defaults from
/// the config table).
pub fn txn_config(b: &BrokerConfig) -> TxnConfig {
    let d = TxnConfig::default();
    let int = |name: &str, fallback: i64| b.integer(name).unwrap_or(fallback).max(1);
    let clamp = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    TxnConfig {
        state_topic_partitions: clamp(int(
            "transaction.state.log.num.partitions",
            i64::from(d.state_topic_partitions),
        )),
        max_timeout_ms: clamp(int(
            "transaction.max.timeout.ms",
            i64::from(d.max_timeout_ms),
        )),
        transactional_id_expiration_ms: int(
            "transactional.id.expiration.ms",
            d.transactional_id_expiration_ms,
        ),
        abort_timed_out_interval_ms: int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            d.abort_timed_out_interval_ms,
        ),
        remove_expired_interval_ms: int(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            d.remove_expired_interval_ms,
        ),
    }
}

/// How `__transaction_state` is created.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TopicSettings {
    /// `transaction.state.log.replication.factor`.
    replication_factor: i64,
    /// `transaction.state.log.min.isr`.
    min_isr: i64,
    /// `transaction.state.log.segment.bytes`.
    segment_bytes: i64,
}

impl TopicSettings {
    fn of(b: &BrokerConfig) -> TopicSettings {
        let int = |name: &str, fallback: i64| b.integer(name).unwrap_or(fallback).max(1);
        TopicSettings {
            replication_factor: int("transaction.state.log.replication.factor", 3),
            min_isr: int("transaction.state.log.min.isr", 2),
            segment_bytes: int("transaction.state.log.segment.bytes", 100 * 1024 * 1024),
        }
    }

    /// Kafka's enforced configs of the topic, with `min.insync.replicas`
    /// capped at the replication factor it is created with.
    fn topic_configs(&self, replication_factor: i64) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("compression.type".to_string(), "uncompressed".to_string()),
            (
                "min.insync.replicas".to_string(),
                self.min_isr.min(replication_factor).to_string(),
            ),
            ("segment.bytes".to_string(), self.segment_bytes.to_string()),
            (
                "unclean.leader.election.enable".to_string(),
                "false".to_string(),
            ),
        ])
    }
}

/// The broker's transaction coordinator.
pub struct Transactions {
    coord: Mutex<TxnCoordinator>,
    /// True once `__transaction_state` exists.
    topic_ready: AtomicBool,
    /// One creation of the topic at a time.
    creating: tokio::sync::Mutex<()>,
    settings: TopicSettings,
    /// Marker jobs found by loads (sync code), started by [`run`].
    jobs: mpsc::UnboundedSender<MarkerJob>,
    jobs_rx: Mutex<Option<mpsc::UnboundedReceiver<MarkerJob>>>,
}

impl Transactions {
    /// Builds the coordinator, owning no partition of
    /// `__transaction_state` until it leads them: on a single node, which
    /// leads every partition of the topic, an existing topic is replayed
    /// now (its partition count wins over
    /// `transaction.state.log.num.partitions`: placement depends on it); a
    /// cluster member takes up the partitions it leads as the metadata
    /// says ([`Transactions::follow_leadership`]). Until the topic exists,
    /// requests get NOT_COORDINATOR (clients look the coordinator up, which
    /// creates it).
    pub fn open(b: &Broker) -> Transactions {
        let config = txn_config(&b.config);
        let partitions = config.state_topic_partitions;
        let mut coord = TxnCoordinator::new(config);
        for p in 0..partitions {
            coord.unload(p);
        }
        let (jobs, rx) = mpsc::unbounded_channel();
        let t = Transactions {
            coord: Mutex::new(coord),
            topic_ready: AtomicBool::new(false),
            creating: tokio::sync::Mutex::new(()),
            settings: TopicSettings::of(&b.config),
            jobs,
            jobs_rx: Mutex::new(Some(rx)),
        };
        if !b.config.is_cluster() {
            t.follow_leadership(b);
        }
        t
    }

    /// Locks the coordinator (a poisoned lock is recovered: the state
    /// machine never panics half way through a call on valid input).
    pub fn lock(&self) -> MutexGuard<'_, TxnCoordinator> {
        self.coord.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates `__transaction_state` if it does not exist yet
    /// (FindCoordinator for a transactional id does, as Kafka's). A single
    /// node creates it itself; a cluster member asks the controller, with
    /// the replication factor capped at the live brokers — the caller then
    /// answers COORDINATOR_NOT_AVAILABLE until its leaders are known.
    pub async fn ensure_topic(&self, ctx: &RequestContext) -> Result<(), String> {
        if self.topic_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let b = &ctx.broker;
        let _one = self.creating.lock().await;
        if b.cluster().topic(TRANSACTION_STATE_TOPIC).is_some() {
            self.topic_ready.store(true, Ordering::Release);
            return Ok(());
        }
        let partitions = self.lock().config().state_topic_partitions;
        if b.config.is_cluster() {
            let live = i64::try_from(b.cluster().brokers.len()).unwrap_or(1).max(1);
            let rf = self.settings.replication_factor.min(live);
            let req = CreateTopicsRequest {
                topics: vec![CreatableTopic {
                    name: TRANSACTION_STATE_TOPIC.to_string(),
                    num_partitions: partitions,
                    replication_factor: i16::try_from(rf).unwrap_or(1),
                    configs: self
                        .settings
                        .topic_configs(rf)
                        .into_iter()
                        .map(|(name, value)| CreatableTopicConfig {
                            name,
                            value: Some(value),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                timeout_ms: 30_000,
                ..Default::default()
            };
            let resp = b.topic_admin().create_topics(ctx, req).await;
            for t in &resp.topics {
                let code = ErrorCode::from_code_lossy(t.error_code);
                if code != ErrorCode::None && code != ErrorCode::TopicAlreadyExists {
                    return Err(format!(
                        "cannot create {TRANSACTION_STATE_TOPIC}: {}",
                        t.error_message.as_deref().unwrap_or(code.name())
                    ));
                }
            }
            tracing::info!(partitions, rf, "created {TRANSACTION_STATE_TOPIC}");
            return Ok(());
        }
        let _admin = b.admin.lock().await;
        if b.topic(TRANSACTION_STATE_TOPIC).is_none() {
            let configs = self.settings.topic_configs(1);
            let r = crate::handler::blocking(|| {
                b.create_topic(TRANSACTION_STATE_TOPIC, partitions, 1, configs, false)
            });
            match r {
                Ok(_) | Err(CreateTopicError::Exists(_)) => {}
                Err(e) => return Err(format!("cannot create {TRANSACTION_STATE_TOPIC}: {e}")),
            }
        }
        // This node leads every partition of its topics.
        self.follow_leadership(b);
        Ok(())
    }

    /// Coordinates exactly the `__transaction_state` partitions this broker
    /// leads in the cluster view: one it starts leading (or leads in a new
    /// leader epoch) is replayed and its unfinished transactions resume
    /// their markers; one it stopped leading is dropped (its writes and
    /// markers in flight are then stale). Called by the cluster wiring
    /// after each metadata change, once leadership is applied.
    pub fn follow_leadership(&self, b: &Broker) {
        let snap = b.cluster();
        let me = b.config.node_id;
        let Some(topic) = snap.topic(TRANSACTION_STATE_TOPIC) else {
            return;
        };
        self.topic_ready.store(true, Ordering::Release);
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let mut coord = self.lock();
        if count != coord.config().state_topic_partitions {
            // Placement depends on the count: the topic's wins.
            tracing::info!(
                partitions = count,
                "{TRANSACTION_STATE_TOPIC} has {count} partitions; placing transactional ids over them"
            );
            let config = TxnConfig {
                state_topic_partitions: count.max(1),
                ..coord.config().clone()
            };
            *coord = TxnCoordinator::new(config);
            for p in 0..count {
                coord.unload(p);
            }
        }
        let now = b.now_ms();
        for (p, view) in (0..count).zip(&topic.partitions) {
            let leads = view.leader == me;
            let status = coord.partition_status(p);
            let epoch = coord.coordinator_epoch(p);
            if leads && (status == PartitionStatus::NotOwned || epoch != Some(view.leader_epoch)) {
                coord.begin_load(p, view.leader_epoch);
                log::load_partition(b, &mut coord, p);
                let jobs = coord.complete_load(p, now);
                tracing::info!(
                    partition = p,
                    epoch = view.leader_epoch,
                    resumed = jobs.len(),
                    "coordinating the transactions of {TRANSACTION_STATE_TOPIC}"
                );
                for job in jobs {
                    let _ = self.jobs.send(job);
                }
            } else if !leads && status != PartitionStatus::NotOwned {
                tracing::info!(
                    partition = p,
                    "no longer coordinating the transactions of {TRANSACTION_STATE_TOPIC}"
                );
                coord.unload(p);
            }
        }
    }

    /// Appends `w` with acks=all and reports the outcome to the
    /// coordinator; starts the markers it calls for. Runs in its own task,
    /// so the coordinator hears of every write even when the request that
    /// caused it is dropped.
    pub async fn write(&self, broker: &Arc<Broker>, w: Write) -> WriteDone {
        let b = broker.clone();
        let task = tokio::spawn(async move {
            let Some(txns) = b.transactions() else {
                return WriteDone::default();
            };
            let coordinator_epoch = txns.lock().coordinator_epoch(w.partition);
            let outcome = match coordinator_epoch {
                Some(epoch) => log::append(&b, &w, epoch).await,
                None => Err(ErrorCode::NotLeaderOrFollower),
            };
            if let Err(code) = outcome {
                tracing::debug!(
                    partition = w.partition,
                    ?code,
                    "{TRANSACTION_STATE_TOPIC} append failed"
                );
            }
            let done = txns.lock().write_completed(w.id, outcome, b.now_ms());
            if let Some(job) = &done.markers {
                let _ = txns.jobs.send(job.clone());
            }
            done
        });
        task.await.unwrap_or_else(|e| {
            tracing::error!("{TRANSACTION_STATE_TOPIC} write task failed: {e}");
            WriteDone {
                answer: Some(Err(ErrorCode::UnknownServerError)),
                ..WriteDone::default()
            }
        })
    }
}

/// Kafka's answer to clients too old to know PRODUCER_FENCED (request
/// versions below `since`): INVALID_PRODUCER_EPOCH, which they handle the
/// same way.
pub fn fenced_code(code: ErrorCode, version: i16, since: i16) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < since {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

/// The answer a request gets from its write.
pub fn answer_of(done: &WriteDone) -> Result<weir_txn::ProducerIdAndEpoch, ErrorCode> {
    done.answer.unwrap_or(Err(ErrorCode::UnknownServerError))
}

/// Runs the coordinator's timers and the marker deliveries until shutdown.
pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let Some(txns) = broker.transactions() else {
        return;
    };
    let Some(mut jobs) = txns
        .jobs_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return;
    };
    let mut interval = tokio::time::interval(TIMER_POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {
                let now = broker.now_ms();
                let writes = {
                    let mut coord = txns.lock();
                    if coord.next_deadline().is_some_and(|t| t > now) {
                        continue;
                    }
                    coord.tick(now)
                };
                for w in writes {
                    let b = broker.clone();
                    tokio::spawn(async move {
                        if let Some(txns) = b.transactions() {
                            txns.write(&b, w).await;
                        }
                    });
                }
            }
            job = jobs.recv() => {
                let Some(job) = job else { break };
                tokio::spawn(finish_transaction(broker.clone(), job, shutdown.clone()));
            }
            _ = shutdown.changed() => break,
        }
    }
}

/// Delivers a transaction's markers, then writes its completion (retried
/// until it is durable or the job is stale).
async fn finish_transaction(b: Arc<Broker>, job: MarkerJob, mut shutdown: watch::Receiver<bool>) {
    let Some(txns) = b.transactions() else {
        return;
    };
    tracing::debug!(
        transactional_id = %job.transactional_id,
        result = ?job.result,
        partitions = job.partitions.len(),
        "writing transaction markers"
    );
    let routes = markers::ClusterRoutes(b.clone());
    let progress = markers::CoordinatorProgress(b.clone());
    let delivered = markers::deliver(
        &job,
        &routes,
        &progress,
        markers::Backoff::DEFAULT,
        shutdown.clone(),
    )
    .await;
    if delivered != markers::Delivery::Written {
        tracing::info!(
            transactional_id = %job.transactional_id,
            ?delivered,
            "transaction markers not all written"
        );
        return;
    }
    let mut delay = COMPLETION_BACKOFF.initial;
    loop {
        let Some(w) = txns.lock().complete_markers(&job) else {
            return;
        };
        let done = txns.write(&b, w).await;
        if !done.retry_completion {
            return;
        }
        tracing::warn!(
            transactional_id = %job.transactional_id,
            "cannot write the completion of a transaction yet; retrying"
        );
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return,
        }
        delay = (delay * 2).min(COMPLETION_BACKOFF.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coordinator's settings come from the broker's table of
    /// defaults, which agrees with the state machine's own defaults.
    #[test]
    fn default_settings_come_from_the_config_table() {
        let c = BrokerConfig::default();
        for name in [
            "transaction.state.log.num.partitions",
            "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr",
            "transaction.state.log.segment.bytes",
            "transaction.max.timeout.ms",
            "transactional.id.expiration.ms",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms",
        ] {
            assert!(c.integer(name).is_some(), "{name} has no default");
        }
        assert_eq!(txn_config(&c), TxnConfig::default());
        let s = TopicSettings::of(&c);
        assert_eq!((s.replication_factor, s.min_isr), (3, 2));
        // a single replica cannot have two in sync
        assert_eq!(s.topic_configs(1)["min.insync.replicas"], "1");
        assert_eq!(s.topic_configs(3)["min.insync.replicas"], "2");
        assert_eq!(s.topic_configs(3)["cleanup.policy"], "compact");
    }
}
