//! The metadata image: the cluster's state as of one point of the metadata
//! log, built by applying records.
//!
//! A [`MetadataImage`] is an immutable value behind an `Arc`: cloning it is
//! a reference-count bump, so readers take a snapshot and never lock.
//! [`MetadataImage::apply`] returns a new image and a [`MetadataDelta`]
//! saying what changed; a batch applies completely or not at all.
//!
//! Always true of an image (checked by `debug_assert!` after every apply):
//! every partition's replicas are distinct and non-empty, its ISR is a
//! non-empty subset of its replicas, its leader is in the ISR or is
//! [`NO_LEADER`], and its adding and removing replicas (a reassignment in
//! progress) are disjoint sets of its replicas. Every ACL passed
//! [`AclBinding::validate`]. Every SCRAM credential passed
//! [`ScramCredential::check`] under a non-empty user name; every client
//! quota entity passed [`client_quotas::validate_entity`] and every value
//! [`client_quotas::validate_value`], and no entity has an empty key map.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use weir_acl::AclBinding;
use weir_protocol::Uuid;
use weir_protocol::messages::metadata::{
    AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClientQuotaRecord,
    PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, UserScramCredentialRecord,
};
use weir_protocol::metadata_record::MetadataRecord;

use crate::client_quotas::{self, ClientQuotas};
use crate::scram::{ScramCredential, ScramHash, ScramUsers};

/// `leader` of a partition with no leader.
pub const NO_LEADER: i32 = -1;
/// `leader` of a `PartitionChangeRecord` that leaves the leader unchanged.
pub const NO_LEADER_CHANGE: i32 = -2;
/// `ConfigRecord.resource_type` of a topic.
pub const TOPIC_RESOURCE: i8 = 2;
/// `ConfigRecord.resource_type` of a broker.
pub const BROKER_RESOURCE: i8 = 4;

/// A listener a broker advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    /// Changes on every process start; a new one means a new broker epoch.
    pub incarnation_id: Uuid,
    pub epoch: i64,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl Broker {
    /// May lead partitions and join ISRs: unfenced and not shutting down.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One partition's replica set and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    /// Bumped whenever the leader changes.
    pub leader_epoch: i32,
    /// Bumped on every change of the partition.
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966); carried, not acted on.
    pub eligible_leader_replicas: Vec<i32>,
    /// Replicas an ongoing reassignment adds (KIP-455): in `replicas`, and
    /// not in the original assignment.
    pub adding_replicas: Vec<i32>,
    /// Replicas an ongoing reassignment removes once the adding ones are
    /// in the ISR: in `replicas`, and not in the target assignment.
    pub removing_replicas: Vec<i32>,
}

impl Partition {
    /// Whether a reassignment is in progress.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// This partition with `r` applied, as [`MetadataImage::apply`] applies
    /// it (the leader epoch bumped when `r` names a leader, the partition
    /// epoch always), or why it would be invalid.
    pub fn changed(&self, r: &PartitionChangeRecord) -> Result<Partition, ApplyError> {
        let mut p = self.clone();
        if let Some(isr) = &r.isr {
            p.isr = isr.clone();
        }
        if let Some(replicas) = &r.replicas {
            p.replicas = replicas.clone();
        }
        if let Some(elr) = &r.eligible_leader_replicas {
            p.eligible_leader_replicas = elr.clone();
        }
        if let Some(adding) = &r.adding_replicas {
            p.adding_replicas = adding.clone();
        }
        if let Some(removing) = &r.removing_replicas {
            p.removing_replicas = removing.clone();
        }
        if r.leader != NO_LEADER_CHANGE {
            if r.leader < NO_LEADER {
                return Err(ApplyError::InvalidField {
                    field: "PartitionChangeRecord.leader",
                    value: r.leader.into(),
                });
            }
            p.leader = r.leader;
            p.leader_epoch = p
                .leader_epoch
                .checked_add(1)
                .ok_or(ApplyError::InvalidField {
                    field: "leader_epoch",
                    value: p.leader_epoch.into(),
                })?;
        }
        p.partition_epoch = p
            .partition_epoch
            .checked_add(1)
            .ok_or(ApplyError::InvalidField {
                field: "partition_epoch",
                value: p.partition_epoch.into(),
            })?;
        validate(&p).map_err(|why| ApplyError::InvalidPartition {
            topic_id: r.topic_id,
            partition: r.partition_id,
            why,
        })?;
        Ok(p)
    }
}

/// A topic and its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, Partition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Inner {
    brokers: BTreeMap<i32, Broker>,
    topics: BTreeMap<Uuid, Topic>,
    topic_ids: BTreeMap<String, Uuid>,
    configs: BTreeMap<(i8, String), BTreeMap<String, String>>,
    features: BTreeMap<String, i16>,
    next_producer_id: i64,
    highest_broker_epoch: i64,
    /// ACLs by the id their `AccessControlEntryRecord` gave them. Behind
    /// an `Arc` of its own, so a batch without ACL records keeps the same
    /// map and readers can tell by pointer that the ACLs did not change.
    acls: Arc<BTreeMap<Uuid, AclBinding>>,
    /// SCRAM credentials by user and mechanism; an `Arc` of its own, as
    /// `acls`.
    scram: Arc<ScramUsers>,
    /// Client quotas by entity; an `Arc` of its own, as `acls`.
    client_quotas: Arc<ClientQuotas>,
}

/// The cluster metadata as of one point of the metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    inner: Arc<Inner>,
}

/// What one [`MetadataImage::apply`] changed, for the components that act on
/// it (the partition layer, the coordinators).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    pub brokers_registered: BTreeSet<i32>,
    pub brokers_unregistered: BTreeSet<i32>,
    pub brokers_fenced: BTreeSet<i32>,
    pub brokers_unfenced: BTreeSet<i32>,
    pub topics_created: BTreeSet<Uuid>,
    /// Removed topics with their last state.
    pub topics_removed: BTreeMap<Uuid, Topic>,
    /// Partitions created or changed, by (topic id, partition).
    pub partitions_changed: BTreeSet<(Uuid, i32)>,
    /// Partitions whose leader (and so leader epoch) changed.
    pub leaders_changed: BTreeSet<(Uuid, i32)>,
    pub configs_changed: BTreeSet<(i8, String)>,
    /// An ACL was added or removed.
    pub acls_changed: bool,
    /// A SCRAM credential was set or removed.
    pub scram_changed: bool,
    /// A client quota was set or removed.
    pub client_quotas_changed: bool,
}

/// Why a record cannot be applied to an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("unknown topic id {0:?}")]
    UnknownTopicId(Uuid),
    #[error("topic {name} already exists")]
    TopicExists { name: String },
    #[error("partition {partition} of topic {topic_id:?} does not exist")]
    UnknownPartition { topic_id: Uuid, partition: i32 },
    #[error("partition {partition} of topic {topic_id:?} already exists")]
    PartitionExists { topic_id: Uuid, partition: i32 },
    #[error("partition {partition} of topic {topic_id:?} would be invalid: {why}")]
    InvalidPartition {
        topic_id: Uuid,
        partition: i32,
        why: &'static str,
    },
    #[error("broker {id} is not registered")]
    UnknownBroker { id: i32 },
    #[error("broker {id} has epoch {current}, the record names {record}")]
    BrokerEpochMismatch { id: i32, current: i64, record: i64 },
    #[error("broker {id} registered with epoch {record}, not above the highest so far {highest}")]
    BrokerEpochNotIncreasing { id: i32, record: i64, highest: i64 },
    #[error("next producer id {record} is not above the current {current}")]
    ProducerIdsNotIncreasing { record: i64, current: i64 },
    #[error("{field} has the invalid value {value}")]
    InvalidField { field: &'static str, value: i64 },
    #[error("ACL {id:?} is invalid: {reason}")]
    InvalidAcl { id: Uuid, reason: String },
    #[error("ACL {0:?} already exists")]
    AclExists(Uuid),
    #[error("ACL {0:?} does not exist")]
    UnknownAcl(Uuid),
    #[error("SCRAM credential of user {user:?} (mechanism {mechanism}) is invalid: {reason}")]
    InvalidScramCredential {
        user: String,
        mechanism: i8,
        reason: String,
    },
    #[error("user {user:?} has no SCRAM credential of mechanism {mechanism}")]
    UnknownScramCredential { user: String, mechanism: i8 },
    #[error("client quota {key} of {entity} is invalid: {reason}")]
    InvalidClientQuota {
        entity: String,
        key: String,
        reason: String,
    },
}

impl MetadataImage {
    /// The empty image, before the first record.
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn brokers(&self) -> impl Iterator<Item = &Broker> {
        self.inner.brokers.values()
    }

    pub fn broker(&self, id: i32) -> Option<&Broker> {
        self.inner.brokers.get(&id)
    }

    /// Whether broker `id` is registered, unfenced and not shutting down.
    pub fn is_active(&self, id: i32) -> bool {
        self.broker(id).is_some_and(Broker::is_active)
    }

    /// The highest broker epoch ever registered; a new registration gets a
    /// higher one.
    pub fn highest_broker_epoch(&self) -> i64 {
        self.inner.highest_broker_epoch
    }

    pub fn topics(&self) -> impl Iterator<Item = &Topic> {
        self.inner.topics.values()
    }

    pub fn topic(&self, id: Uuid) -> Option<&Topic> {
        self.inner.topics.get(&id)
    }

    pub fn topic_by_name(&self, name: &str) -> Option<&Topic> {
        self.inner
            .topic_ids
            .get(name)
            .and_then(|id| self.inner.topics.get(id))
    }

    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<&Partition> {
        self.topic(topic_id)?.partitions.get(&partition)
    }

    /// Configs of one resource (`TOPIC_RESOURCE` / `BROKER_RESOURCE`, name).
    pub fn configs(&self, resource_type: i8, name: &str) -> Option<&BTreeMap<String, String>> {
        self.inner.configs.get(&(resource_type, name.to_owned()))
    }

    /// Every resource's configs: ((resource type, name), key → value).
    pub fn all_configs(&self) -> impl Iterator<Item = (&(i8, String), &BTreeMap<String, String>)> {
        self.inner.configs.iter()
    }

    pub fn feature_level(&self, name: &str) -> Option<i16> {
        self.inner.features.get(name).copied()
    }

    /// Every feature with its (non-zero) level.
    pub fn features(&self) -> impl Iterator<Item = (&str, i16)> {
        self.inner.features.iter().map(|(n, l)| (n.as_str(), *l))
    }

    /// Every ACL by its id. The same `Arc` as the previous image's when
    /// an apply added and removed none.
    pub fn acls(&self) -> &Arc<BTreeMap<Uuid, AclBinding>> {
        &self.inner.acls
    }

    /// Every SCRAM credential set with AlterUserScramCredentials. The same
    /// `Arc` as the previous image's when an apply changed none.
    pub fn scram(&self) -> &Arc<ScramUsers> {
        &self.inner.scram
    }

    /// Every client quota set with AlterClientQuotas. The same `Arc` as
    /// the previous image's when an apply changed none.
    pub fn client_quotas(&self) -> &Arc<ClientQuotas> {
        &self.inner.client_quotas
    }

    /// The first producer id not yet handed out.
    pub fn next_producer_id(&self) -> i64 {
        self.inner.next_producer_id
    }

    /// Applies `records` in order. Either all apply (a new image and what
    /// changed) or none does (the error, and `self` is untouched).
    pub fn apply<'a>(
        &self,
        records: impl IntoIterator<Item = &'a MetadataRecord>,
    ) -> Result<(MetadataImage, MetadataDelta), ApplyError> {
        let mut inner = Inner::clone(&self.inner);
        let mut delta = MetadataDelta::default();
        for r in records {
            inner.apply(r, &mut delta)?;
        }
        debug_assert!(inner.check().is_ok(), "{:?}", inner.check());
        Ok((
            MetadataImage {
                inner: Arc::new(inner),
            },
            delta,
        ))
    }

    /// Checks the image's invariants; `Err` names the first broken one.
    pub fn check(&self) -> Result<(), String> {
        self.inner.check()
    }
}

/// Checks one partition's shape (see the module doc).
fn validate(p: &Partition) -> Result<(), &'static str> {
    if p.replicas.is_empty() {
        return Err("no replicas");
    }
    let distinct: BTreeSet<_> = p.replicas.iter().collect();
    if distinct.len() != p.replicas.len() {
        return Err("duplicate replicas");
    }
    if p.isr.is_empty() {
        return Err("empty ISR");
    }
    let isr: BTreeSet<_> = p.isr.iter().collect();
    if isr.len() != p.isr.len() || !isr.is_subset(&distinct) {
        return Err("ISR is not a set of replicas");
    }
    if p.leader != NO_LEADER && !isr.contains(&p.leader) {
        return Err("leader not in ISR");
    }
    if p.leader_epoch < 0 || p.partition_epoch < 0 {
        return Err("negative epoch");
    }
    let adding: BTreeSet<_> = p.adding_replicas.iter().collect();
    let removing: BTreeSet<_> = p.removing_replicas.iter().collect();
    if adding.len() != p.adding_replicas.len()
        || removing.len() != p.removing_replicas.len()
        || !adding.is_subset(&distinct)
        || !removing.is_subset(&distinct)
        || !adding.is_disjoint(&removing)
    {
        return Err("adding and removing replicas are not disjoint sets of replicas");
    }
    Ok(())
}

impl Inner {
    fn check(&self) -> Result<(), String> {
        for t in self.topics.values() {
            if self.topic_ids.get(&t.name) != Some(&t.id) {
                return Err(format!("topic {} missing from the name index", t.name));
            }
            for (i, p) in &t.partitions {
                validate(p).map_err(|why| format!("{}-{i}: {why}", t.name))?;
            }
        }
        if self.topic_ids.len() != self.topics.len() {
            return Err("name index and topics differ".into());
        }
        for (id, acl) in self.acls.iter() {
            acl.validate()
                .map_err(|e| format!("ACL {id:?} is invalid: {e}"))?;
        }
        for (user, hash, c) in self.scram.iter() {
            if user.is_empty() {
                return Err("a SCRAM user name is empty".into());
            }
            c.check(hash)
                .map_err(|e| format!("SCRAM credential of {user:?} is invalid: {e}"))?;
        }
        for (entity, values) in &self.client_quotas.entries {
            let parts: Vec<(String, Option<String>)> = entity
                .0
                .iter()
                .map(|(t, n)| (t.name().to_string(), n.clone()))
                .collect();
            client_quotas::validate_entity(&parts)
                .map_err(|r| format!("client quota entity {entity}: {}", r.message))?;
            if values.is_empty() {
                return Err(format!("client quota entity {entity} has no quota"));
            }
            for (k, v) in values {
                client_quotas::validate_value(entity.allowed_keys(), k, *v)
                    .map_err(|r| format!("client quota of {entity}: {}", r.message))?;
            }
        }
        Ok(())
    }

    fn broker_mut(&mut self, id: i32, epoch: i64) -> Result<&mut Broker, ApplyError> {
        let b = self
            .brokers
            .get_mut(&id)
            .ok_or(ApplyError::UnknownBroker { id })?;
        if b.epoch != epoch {
            return Err(ApplyError::BrokerEpochMismatch {
                id,
                current: b.epoch,
                record: epoch,
            });
        }
        Ok(b)
    }

    fn set_fenced(
        &mut self,
        id: i32,
        epoch: i64,
        fenced: bool,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let b = self.broker_mut(id, epoch)?;
        if b.fenced != fenced {
            b.fenced = fenced;
            if fenced {
                delta.brokers_fenced.insert(id);
            } else {
                // Unfencing also ends a controlled shutdown: the broker came back.
                b.in_controlled_shutdown = false;
                delta.brokers_unfenced.insert(id);
            }
        }
        Ok(())
    }

    fn apply(
        &mut self,
        record: &MetadataRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        match record {
            MetadataRecord::RegisterBroker(r) => self.register(r, delta),
            MetadataRecord::UnregisterBroker(r) => {
                self.broker_mut(r.broker_id, r.broker_epoch)?;
                self.brokers.remove(&r.broker_id);
                delta.brokers_unregistered.insert(r.broker_id);
                Ok(())
            }
            MetadataRecord::FenceBroker(r) => self.set_fenced(r.id, r.epoch, true, delta),
            MetadataRecord::UnfenceBroker(r) => self.set_fenced(r.id, r.epoch, false, delta),
            MetadataRecord::BrokerRegistrationChange(r) => self.registration_change(r, delta),
            MetadataRecord::Topic(r) => {
                if self.topic_ids.contains_key(&r.name) || self.topics.contains_key(&r.topic_id) {
                    return Err(ApplyError::TopicExists {
                        name: r.name.clone(),
                    });
                }
                self.topic_ids.insert(r.name.clone(), r.topic_id);
                self.topics.insert(
                    r.topic_id,
                    Topic {
                        name: r.name.clone(),
                        id: r.topic_id,
                        partitions: BTreeMap::new(),
                    },
                );
                delta.topics_created.insert(r.topic_id);
                Ok(())
            }
            MetadataRecord::Partition(r) => self.add_partition(r, delta),
            MetadataRecord::PartitionChange(r) => self.change_partition(r, delta),
            MetadataRecord::RemoveTopic(r) => {
                let t = self
                    .topics
                    .remove(&r.topic_id)
                    .ok_or(ApplyError::UnknownTopicId(r.topic_id))?;
                self.topic_ids.remove(&t.name);
                self.configs.remove(&(TOPIC_RESOURCE, t.name.clone()));
                delta.topics_created.remove(&r.topic_id);
                delta.partitions_changed.retain(|(id, _)| *id != r.topic_id);
                delta.leaders_changed.retain(|(id, _)| *id != r.topic_id);
                delta.topics_removed.insert(r.topic_id, t);
                Ok(())
            }
            MetadataRecord::Config(r) => {
                let key = (r.resource_type, r.resource_name.clone());
                let configs = self.configs.entry(key.clone()).or_default();
                match &r.value {
                    Some(v) => {
                        configs.insert(r.name.clone(), v.clone());
                    }
                    None => {
                        configs.remove(&r.name);
                    }
                }
                if configs.is_empty() {
                    self.configs.remove(&key);
                }
                delta.configs_changed.insert(key);
                Ok(())
            }
            MetadataRecord::FeatureLevel(r) => {
                if r.feature_level < 0 {
                    return Err(ApplyError::InvalidField {
                        field: "FeatureLevelRecord.feature_level",
                        value: r.feature_level.into(),
                    });
                }
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
                Ok(())
            }
            MetadataRecord::ProducerIds(r) => {
                if r.next_producer_id <= self.next_producer_id {
                    return Err(ApplyError::ProducerIdsNotIncreasing {
                        record: r.next_producer_id,
                        current: self.next_producer_id,
                    });
                }
                self.next_producer_id = r.next_producer_id;
                Ok(())
            }
            MetadataRecord::AccessControlEntry(r) => self.add_acl(r, delta),
            MetadataRecord::RemoveAccessControlEntry(r) => {
                Arc::make_mut(&mut self.acls)
                    .remove(&r.id)
                    .ok_or(ApplyError::UnknownAcl(r.id))?;
                delta.acls_changed = true;
                Ok(())
            }
            MetadataRecord::UserScramCredential(r) => self.set_scram_credential(r, delta),
            MetadataRecord::RemoveUserScramCredential(r) => {
                let missing = || ApplyError::UnknownScramCredential {
                    user: r.name.clone(),
                    mechanism: r.mechanism,
                };
                let hash = ScramHash::from_wire_type(r.mechanism).ok_or_else(missing)?;
                Arc::make_mut(&mut self.scram)
                    .remove(hash, &r.name)
                    .ok_or_else(missing)?;
                delta.scram_changed = true;
                Ok(())
            }
            MetadataRecord::ClientQuota(r) => self.change_client_quota(r, delta),
            // Not modelled yet (delegation tokens, transactions of the
            // metadata log, controller registrations): accepted and
            // skipped, so a log that holds them still replays.
            _ => Ok(()),
        }
    }

    /// Sets (or replaces) one user's credential for one mechanism, checked
    /// as [`ScramUsers::plan_alter`] checks an upsertion.
    fn set_scram_credential(
        &mut self,
        r: &UserScramCredentialRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let invalid = |reason: String| ApplyError::InvalidScramCredential {
            user: r.name.clone(),
            mechanism: r.mechanism,
            reason,
        };
        if r.name.is_empty() {
            return Err(invalid("empty user name".into()));
        }
        let hash = ScramHash::from_wire_type(r.mechanism)
            .ok_or_else(|| invalid("unknown mechanism".into()))?;
        let credential = ScramCredential {
            salt: r.salt.to_vec(),
            iterations: u32::try_from(r.iterations)
                .map_err(|_| invalid(format!("{} iterations", r.iterations)))?,
            stored_key: r.stored_key.to_vec(),
            server_key: r.server_key.to_vec(),
        };
        credential.check(hash).map_err(invalid)?;
        Arc::make_mut(&mut self.scram).insert(hash, &r.name, credential);
        delta.scram_changed = true;
        Ok(())
    }

    /// Sets or removes one quota key of one entity, checked as
    /// [`ClientQuotas::plan_alter`] checks an entry; an entity left
    /// without keys is gone.
    fn change_client_quota(
        &mut self,
        r: &ClientQuotaRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let parts: Vec<(String, Option<String>)> = r
            .entity
            .iter()
            .map(|e| (e.entity_type.clone(), e.entity_name.clone()))
            .collect();
        let invalid = |entity: String, reason: String| ApplyError::InvalidClientQuota {
            entity,
            key: r.key.clone(),
            reason,
        };
        let entity = client_quotas::validate_entity(&parts)
            .map_err(|refusal| invalid(format!("{parts:?}"), refusal.message))?;
        if !r.remove {
            client_quotas::validate_value(entity.allowed_keys(), &r.key, r.value)
                .map_err(|refusal| invalid(entity.to_string(), refusal.message))?;
        }
        let quotas = Arc::make_mut(&mut self.client_quotas);
        let values = quotas.entries.entry(entity.clone()).or_default();
        if r.remove {
            values.remove(&r.key);
        } else {
            values.insert(r.key.clone(), r.value);
        }
        if values.is_empty() {
            quotas.entries.remove(&entity);
        }
        delta.client_quotas_changed = true;
        Ok(())
    }

    fn add_acl(
        &mut self,
        r: &AccessControlEntryRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let binding = AclBinding::from_codes(
            r.resource_type,
            &r.resource_name,
            r.pattern_type,
            &r.principal,
            &r.host,
            r.operation,
            r.permission_type,
        )
        .map_err(|reason| ApplyError::InvalidAcl { id: r.id, reason })?;
        if self.acls.contains_key(&r.id) {
            return Err(ApplyError::AclExists(r.id));
        }
        Arc::make_mut(&mut self.acls).insert(r.id, binding);
        delta.acls_changed = true;
        Ok(())
    }

    fn register(
        &mut self,
        r: &RegisterBrokerRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        if r.broker_epoch <= self.highest_broker_epoch {
            return Err(ApplyError::BrokerEpochNotIncreasing {
                id: r.broker_id,
                record: r.broker_epoch,
                highest: self.highest_broker_epoch,
            });
        }
        self.highest_broker_epoch = r.broker_epoch;
        let endpoints = r
            .end_points
            .iter()
            .map(|e| Endpoint {
                name: e.name.clone(),
                host: e.host.clone(),
                port: e.port,
                security_protocol: e.security_protocol,
            })
            .collect();
        self.brokers.insert(
            r.broker_id,
            Broker {
                id: r.broker_id,
                incarnation_id: r.incarnation_id,
                epoch: r.broker_epoch,
                endpoints,
                rack: r.rack.clone(),
                fenced: r.fenced,
                in_controlled_shutdown: r.in_controlled_shutdown,
            },
        );
        delta.brokers_registered.insert(r.broker_id);
        Ok(())
    }

    fn registration_change(
        &mut self,
        r: &BrokerRegistrationChangeRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        match r.fenced {
            0 => {}
            1 => self.set_fenced(r.broker_id, r.broker_epoch, true, delta)?,
            -1 => self.set_fenced(r.broker_id, r.broker_epoch, false, delta)?,
            v => {
                return Err(ApplyError::InvalidField {
                    field: "BrokerRegistrationChangeRecord.fenced",
                    value: v.into(),
                });
            }
        }
        match r.in_controlled_shutdown {
            0 => Ok(()),
            1 => {
                self.broker_mut(r.broker_id, r.broker_epoch)?
                    .in_controlled_shutdown = true;
                Ok(())
            }
            v => Err(ApplyError::InvalidField {
                field: "BrokerRegistrationChangeRecord.in_controlled_shutdown",
                value: v.into(),
            }),
        }
    }

    fn add_partition(
        &mut self,
        r: &PartitionRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let topic = self
            .topics
            .get_mut(&r.topic_id)
            .ok_or(ApplyError::UnknownTopicId(r.topic_id))?;
        let key = (r.topic_id, r.partition_id);
        if r.partition_id < 0 {
            return Err(ApplyError::InvalidPartition {
                topic_id: r.topic_id,
                partition: r.partition_id,
                why: "negative partition id",
            });
        }
        if topic.partitions.contains_key(&r.partition_id) {
            return Err(ApplyError::PartitionExists {
                topic_id: r.topic_id,
                partition: r.partition_id,
            });
        }
        let p = Partition {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            leader: r.leader,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            eligible_leader_replicas: r.eligible_leader_replicas.clone().unwrap_or_default(),
            adding_replicas: r.adding_replicas.clone(),
            removing_replicas: r.removing_replicas.clone(),
        };
        validate(&p).map_err(|why| ApplyError::InvalidPartition {
            topic_id: r.topic_id,
            partition: r.partition_id,
            why,
        })?;
        topic.partitions.insert(r.partition_id, p);
        delta.partitions_changed.insert(key);
        delta.leaders_changed.insert(key);
        Ok(())
    }

    fn change_partition(
        &mut self,
        r: &PartitionChangeRecord,
        delta: &mut MetadataDelta,
    ) -> Result<(), ApplyError> {
        let topic = self
            .topics
            .get_mut(&r.topic_id)
            .ok_or(ApplyError::UnknownTopicId(r.topic_id))?;
        let current =
            topic
                .partitions
                .get_mut(&r.partition_id)
                .ok_or(ApplyError::UnknownPartition {
                    topic_id: r.topic_id,
                    partition: r.partition_id,
                })?;
        let p = current.changed(r)?;
        *current = p;
        let key = (r.topic_id, r.partition_id);
        delta.partitions_changed.insert(key);
        if r.leader != NO_LEADER_CHANGE {
            delta.leaders_changed.insert(key);
        }
        Ok(())
    }
}
