//! Hosting the partitions the metadata image assigns to this broker: the
//! cluster's counterpart of topic creation and deletion, on the same
//! storage paths (`<topic>-<partition>` directories, creation intents,
//! `weir-topics.json` as the table that settles them after a crash).

use weir_protocol::Uuid;
use weir_storage::TopicPartition;

use crate::broker::{Broker, BrokerError};
use crate::cluster::HostedTopic;
use crate::topic_config;
use crate::topics::TopicMeta;

/// A topic whose hosting could not be brought in line with the image; the
/// next reconciliation tries again.
#[derive(Debug, thiserror::Error)]
#[error("cannot host topic {topic}: {source}")]
pub struct HostingError {
    pub topic: String,
    #[source]
    pub source: BrokerError,
}

impl Broker {
    /// Makes the local logs match `hosted`, every topic this broker should
    /// host partitions of (callers hold `admin`, the guard proves it):
    /// topics not listed, or listed with another id (deleted, or deleted
    /// and created again), are deleted as DeleteTopics does; partitions
    /// listed without a log are created as CreateTopics does (intent, the
    /// topic table, commit), so a crash leaves each either whole or absent;
    /// logs of a listed topic's partitions not listed (moved away) are
    /// removed; config overrides are applied. Idempotent: with nothing to
    /// change it writes nothing. A partition whose log failed to open stays
    /// offline, never recreated over.
    pub fn reconcile_hosted(
        &self,
        _admin: &tokio::sync::MutexGuard<'_, ()>,
        hosted: &[HostedTopic],
    ) -> Vec<HostingError> {
        let mut errors = Vec::new();
        let stale: Vec<String> = self
            .all_topics()
            .into_iter()
            .filter(|t| {
                !hosted
                    .iter()
                    .any(|h| h.name == t.name && h.id == t.id_bytes())
            })
            .map(|t| t.name)
            .collect();
        for name in stale {
            if let Err(source) = self.delete_topic(&name) {
                errors.push(HostingError {
                    topic: name,
                    source,
                });
            }
        }
        for h in hosted {
            if let Err(source) = self.host_topic(h) {
                errors.push(HostingError {
                    topic: h.name.clone(),
                    source,
                });
            }
        }
        errors
    }

    fn host_topic(&self, h: &HostedTopic) -> Result<(), BrokerError> {
        let cfg = topic_config::log_config(&self.effective_config(), &h.configs);
        let mut meta = self.topic(&h.name).unwrap_or_else(|| TopicMeta {
            name: h.name.clone(),
            id: Uuid(h.id).to_string(),
            partitions: 0,
            configs: h.configs.clone(),
        });
        if meta.configs != h.configs {
            meta.configs = h.configs.clone();
            self.put_topic(meta.clone())?;
            self.replicas
                .set_log_configs(&h.name, meta.partitions, &cfg);
        }
        // moved away: this broker no longer holds a replica
        for p in 0..meta.partitions {
            let tp = TopicPartition::new(h.name.clone(), p);
            if !h.partitions.contains(&p) && self.replicas.logs().get(&tp).is_some() {
                self.replicas.remove_partition(&tp)?;
                tracing::info!(partition = %tp, "no longer hosted here; log removed");
            }
        }
        let failed = self.replicas.logs().failed_logs();
        let mut missing: Vec<i32> = h
            .partitions
            .iter()
            .copied()
            .filter(|p| *p >= 0)
            .filter(|p| {
                let tp = TopicPartition::new(h.name.clone(), *p);
                self.replicas.logs().get(&tp).is_none() && !failed.contains_key(&tp)
            })
            .collect();
        missing.sort_unstable();
        missing.dedup();
        // One partition at a time: a topic has one creation intent file.
        for p in missing {
            let pending = self
                .replicas
                .prepare_logs(&h.name, h.id, p..p + 1, cfg.clone())?;
            if meta.partitions <= p {
                meta.partitions = p + 1;
                if let Err(e) = self.put_topic(meta.clone()) {
                    if let Err(undo) = pending.abort() {
                        tracing::error!(topic = %h.name, error = %undo, "cannot undo the partition creation; the next start does");
                    }
                    return Err(e);
                }
            }
            pending.commit();
            tracing::info!(topic = %h.name, partition = p, "hosting partition");
        }
        Ok(())
    }

    fn put_topic(&self, meta: TopicMeta) -> Result<(), BrokerError> {
        self.topics
            .write()
            .map_err(|_| BrokerError::Config("topic store poisoned".into()))?
            .put(meta)?;
        Ok(())
    }
}
