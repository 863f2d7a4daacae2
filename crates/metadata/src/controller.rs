//! The controller's decisions: pure functions of the current image and an
//! event, returning the records to append to the metadata log (or a Kafka
//! error). Nothing here changes the image: the caller commits the records
//! through the log and every node applies them with
//! [`MetadataImage::apply`](crate::MetadataImage::apply).
//!
//! The only state the controller keeps itself is soft: when each broker
//! last heartbeated (time is the `now_ms` argument, never the wall clock)
//! and the seed that picks where replica placement starts. A new active
//! controller starts every known broker's session at its first `now_ms`.
//!
//! Leadership follows Kafka's rules without unclean election: a leader is
//! the first replica, in replica order, that is in the ISR and active
//! (unfenced, not shutting down); when none is, the leader is
//! [`NO_LEADER`] and the ISR keeps its last member.

use std::collections::{BTreeMap, BTreeSet};

use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::{
    BrokerRegistrationChangeRecord, ConfigRecord, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord,
    register_broker_record::BrokerEndpoint,
};
use weir_protocol::metadata_record::MetadataRecord;

use crate::image::{
    Endpoint, MetadataImage, NO_LEADER, NO_LEADER_CHANGE, Partition, TOPIC_RESOURCE,
};

/// Kafka's `broker.session.timeout.ms` default.
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 9_000;
/// Producer ids handed out per `AllocateProducerIds`, as in Kafka.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1_000;
/// Longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Controller settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker that has not heartbeated for
    /// longer is fenced.
    pub session_timeout_ms: u64,
    /// `num.partitions`, for a CreateTopics that leaves it at -1.
    pub default_partitions: i32,
    /// `default.replication.factor`, for a CreateTopics that leaves it at -1.
    pub default_replication_factor: i16,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: DEFAULT_SESSION_TIMEOUT_MS,
            default_partitions: 1,
            default_replication_factor: 1,
        }
    }
}

/// A Kafka error with the message to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
}

fn reject<T>(code: ErrorCode, message: impl Into<String>) -> Result<T, Rejection> {
    Err(Rejection {
        code,
        message: message.into(),
    })
}

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub broker_id: i32,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The offset of the metadata log the broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// The answer to a heartbeat, with the records it needs committed first.
#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub records: Vec<MetadataRecord>,
    /// Whether the broker is fenced once `records` are applied.
    pub is_fenced: bool,
    /// Whether a broker in controlled shutdown may stop now (it leads
    /// nothing).
    pub should_shut_down: bool,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewTopic {
    pub name: String,
    /// -1: `default_partitions`.
    pub num_partitions: i32,
    /// -1: `default_replication_factor`.
    pub replication_factor: i16,
    /// Explicit replicas per partition (partition i = entry i); when given,
    /// `num_partitions` and `replication_factor` must be -1.
    pub assignments: Vec<Vec<i32>>,
    pub configs: Vec<(String, Option<String>)>,
}

/// One partition of an AlterPartition request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The proposed ISR: (broker id, broker epoch or -1 to skip the check).
    pub new_isr: Vec<(i32, i64)>,
}

/// A broker's session as this controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    last_heartbeat_ms: u64,
}

/// The active controller's soft state; see the module doc.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    sessions: BTreeMap<i32, Session>,
    rng: u64,
}

impl Controller {
    /// A controller whose placement and topic ids derive from `seed`.
    pub fn new(config: ControllerConfig, seed: u64) -> Self {
        Self {
            config,
            sessions: BTreeMap::new(),
            rng: seed,
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    fn next_random(&mut self) -> u64 {
        // SplitMix64: deterministic for a seed, good enough to spread starts.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn session_alive(&self, broker_id: i32, now_ms: u64) -> bool {
        self.sessions.get(&broker_id).is_some_and(|s| {
            now_ms.saturating_sub(s.last_heartbeat_ms) <= self.config.session_timeout_ms
        })
    }

    /// BrokerRegistration. The same incarnation registering again gets its
    /// epoch back with no records; a new incarnation gets a new epoch (above
    /// every earlier one) and starts fenced, with leadership moved away from
    /// its old incarnation. A new incarnation while the old one's session is
    /// alive is DUPLICATE_BROKER_REGISTRATION.
    pub fn register_broker(
        &mut self,
        image: &MetadataImage,
        req: &Registration,
        now_ms: u64,
    ) -> Result<(i64, Vec<MetadataRecord>), Rejection> {
        if req.broker_id < 0 {
            return reject(ErrorCode::InvalidRequest, "negative broker id");
        }
        let mut records = Vec::new();
        if let Some(b) = image.broker(req.broker_id) {
            if b.incarnation_id == req.incarnation_id {
                self.sessions.insert(
                    req.broker_id,
                    Session {
                        last_heartbeat_ms: now_ms,
                    },
                );
                return Ok((b.epoch, records));
            }
            if self.session_alive(req.broker_id, now_ms) && !b.fenced {
                return reject(
                    ErrorCode::DuplicateBrokerRegistration,
                    format!(
                        "broker {} is registered with another incarnation and its session is alive",
                        req.broker_id
                    ),
                );
            }
            // The old incarnation leads nothing from here on.
            records.extend(leader_and_isr_updates(image, req.broker_id));
        }
        let epoch = image.highest_broker_epoch() + 1;
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: req.broker_id,
            incarnation_id: req.incarnation_id,
            broker_epoch: epoch,
            end_points: req
                .endpoints
                .iter()
                .map(|e| BrokerEndpoint {
                    name: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                    ..Default::default()
                })
                .collect(),
            rack: req.rack.clone(),
            fenced: true,
            ..Default::default()
        }));
        self.sessions.insert(
            req.broker_id,
            Session {
                last_heartbeat_ms: now_ms,
            },
        );
        Ok((epoch, records))
    }

    /// BrokerHeartbeat: renews the session; unfences a fenced broker whose
    /// metadata has caught up with `committed_offset` (the log's committed
    /// offset) and that does not want to stay fenced; starts a controlled
    /// shutdown on `want_shutdown`.
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        hb: &Heartbeat,
        committed_offset: i64,
        now_ms: u64,
    ) -> Result<HeartbeatReply, Rejection> {
        let Some(b) = image.broker(hb.broker_id) else {
            return reject(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {} is not registered", hb.broker_id),
            );
        };
        if b.epoch != hb.broker_epoch {
            return reject(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {} has epoch {}, not {}",
                    hb.broker_id, b.epoch, hb.broker_epoch
                ),
            );
        }
        self.sessions.insert(
            hb.broker_id,
            Session {
                last_heartbeat_ms: now_ms,
            },
        );
        if hb.want_shutdown {
            let records = self.controlled_shutdown(image, hb.broker_id, hb.broker_epoch)?;
            // Once these apply the broker leads nothing (see
            // `controlled_shutdown`), so it may stop.
            return Ok(HeartbeatReply {
                records,
                is_fenced: b.fenced,
                should_shut_down: true,
            });
        }
        let mut records = Vec::new();
        let mut is_fenced = b.fenced;
        if b.fenced && !hb.want_fence && hb.current_metadata_offset >= committed_offset {
            records.push(MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord {
                    broker_id: hb.broker_id,
                    broker_epoch: b.epoch,
                    fenced: -1,
                    ..Default::default()
                },
            ));
            records.extend(elect_on_unfence(image, hb.broker_id));
            is_fenced = false;
        } else if !b.fenced && hb.want_fence {
            records = fence(image, hb.broker_id, b.epoch);
            is_fenced = true;
        }
        Ok(HeartbeatReply {
            records,
            is_fenced,
            should_shut_down: false,
        })
    }

    /// Fences every unfenced broker whose session expired at `now_ms`, moving
    /// its leadership away and removing it from ISRs. A broker this
    /// controller has not heard from yet starts its session now.
    pub fn expire_sessions(&mut self, image: &MetadataImage, now_ms: u64) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        let mut current = image.clone();
        for b in image.brokers() {
            self.sessions.entry(b.id).or_insert(Session {
                last_heartbeat_ms: now_ms,
            });
        }
        let expired: Vec<(i32, i64)> = image
            .brokers()
            .filter(|b| !b.fenced && !self.session_alive(b.id, now_ms))
            .map(|b| (b.id, b.epoch))
            .collect();
        for (id, epoch) in expired {
            let step = fence(&current, id, epoch);
            // Each fence is decided on the image the earlier ones produce.
            if let Ok((next, _)) = current.apply(&step) {
                current = next;
                records.extend(step);
            }
        }
        records
    }

    /// Controlled shutdown: marks the broker as shutting down, removes it
    /// from every ISR it can leave and elects new leaders for what it led.
    pub fn controlled_shutdown(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<MetadataRecord>, Rejection> {
        let Some(b) = image.broker(broker_id) else {
            return reject(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {broker_id} is not registered"),
            );
        };
        if b.epoch != broker_epoch {
            return reject(
                ErrorCode::StaleBrokerEpoch,
                format!("broker {broker_id} has epoch {}", b.epoch),
            );
        }
        let mut records = Vec::new();
        if !b.in_controlled_shutdown {
            records.push(MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord {
                    broker_id,
                    broker_epoch,
                    in_controlled_shutdown: 1,
                    ..Default::default()
                },
            ));
        }
        records.extend(leader_and_isr_updates(image, broker_id));
        Ok(records)
    }

    /// CreateTopics for one topic: validation, then the topic, its configs
    /// and its partitions. Replicas are spread round-robin over the active
    /// brokers in [`placement_order`] from a start picked by the seed:
    /// partition p's replica j is broker `(start + p + j) mod n`, so leaders
    /// and followers rotate.
    pub fn create_topic(
        &mut self,
        image: &MetadataImage,
        topic: &NewTopic,
    ) -> Result<(Uuid, Vec<MetadataRecord>), Rejection> {
        validate_topic_name(&topic.name)?;
        if image.topic_by_name(&topic.name).is_some() {
            return reject(
                ErrorCode::TopicAlreadyExists,
                format!("topic {} already exists", topic.name),
            );
        }
        let active = placement_order(image);
        let assignments = if topic.assignments.is_empty() {
            let partitions = match topic.num_partitions {
                -1 => self.config.default_partitions,
                n if n >= 1 => n,
                n => {
                    return reject(
                        ErrorCode::InvalidPartitions,
                        format!("number of partitions {n} is invalid"),
                    );
                }
            };
            let rf = match topic.replication_factor {
                -1 => self.config.default_replication_factor,
                n if n >= 1 => n,
                n => {
                    return reject(
                        ErrorCode::InvalidReplicationFactor,
                        format!("replication factor {n} is invalid"),
                    );
                }
            };
            let rf = usize::from(rf.unsigned_abs());
            if rf > active.len() {
                return reject(
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "replication factor {rf} is larger than the {} available brokers",
                        active.len()
                    ),
                );
            }
            let n = active.len();
            let start = (self.next_random() % n as u64) as usize;
            (0..partitions as usize)
                .map(|p| {
                    (0..rf)
                        .filter_map(|j| active.get((start + p + j) % n).copied())
                        .collect::<Vec<i32>>()
                })
                .collect()
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return reject(
                    ErrorCode::InvalidRequest,
                    "both assignments and a number of partitions or a replication factor were given",
                );
            }
            validate_assignments(image, &topic.assignments)?;
            topic.assignments.clone()
        };
        let id = self.new_topic_id(image);
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: id,
            ..Default::default()
        })];
        for (name, value) in &topic.configs {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: TOPIC_RESOURCE,
                resource_name: topic.name.clone(),
                name: name.clone(),
                value: value.clone(),
                ..Default::default()
            }));
        }
        for (p, replicas) in assignments.into_iter().enumerate() {
            let isr: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|r| image.is_active(*r))
                .collect();
            let Some(&leader) = isr.first() else {
                return reject(
                    ErrorCode::InvalidReplicaAssignment,
                    format!("every broker assigned to partition {p} is fenced or shutting down"),
                );
            };
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: p as i32,
                topic_id: id,
                replicas,
                isr,
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                ..Default::default()
            }));
        }
        Ok((id, records))
    }

    /// A fresh topic id: random from the seed, never zero, never in use.
    fn new_topic_id(&mut self, image: &MetadataImage) -> Uuid {
        loop {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&self.next_random().to_be_bytes());
            b[8..].copy_from_slice(&self.next_random().to_be_bytes());
            let id = Uuid(b);
            if id != Uuid::ZERO && image.topic(id).is_none() {
                return id;
            }
        }
    }

    /// DeleteTopics for one topic.
    pub fn delete_topic(
        &self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<Vec<MetadataRecord>, Rejection> {
        let Some(t) = image.topic_by_name(name) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            );
        };
        Ok(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: t.id,
            ..Default::default()
        })])
    }

    /// AlterPartition from `broker_id` for one partition, with Kafka's
    /// checks in Kafka's order. Returns the partition as it will be and the
    /// record (none if the ISR is unchanged).
    pub fn alter_partition(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
        req: &AlterPartition,
    ) -> Result<(Partition, Vec<MetadataRecord>), Rejection> {
        match image.broker(broker_id) {
            Some(b) if b.epoch == broker_epoch || broker_epoch == -1 => {}
            _ => {
                return reject(
                    ErrorCode::StaleBrokerEpoch,
                    format!("broker {broker_id} epoch {broker_epoch} is stale"),
                );
            }
        }
        if image.topic(req.topic_id).is_none() {
            return reject(ErrorCode::UnknownTopicId, "unknown topic id");
        }
        let Some(p) = image.partition(req.topic_id, req.partition) else {
            return reject(
                ErrorCode::UnknownTopicOrPartition,
                format!("partition {} does not exist", req.partition),
            );
        };
        // A newer epoch than ours: this controller is probably no longer
        // the active one.
        if req.leader_epoch > p.leader_epoch || req.partition_epoch > p.partition_epoch {
            return reject(
                ErrorCode::NotController,
                "request epochs are newer than this controller's",
            );
        }
        if req.leader_epoch < p.leader_epoch {
            return reject(
                ErrorCode::FencedLeaderEpoch,
                format!(
                    "leader epoch is {}, not {}",
                    p.leader_epoch, req.leader_epoch
                ),
            );
        }
        if broker_id != p.leader {
            return reject(
                ErrorCode::InvalidRequest,
                format!("the leader is {}, not {broker_id}", p.leader),
            );
        }
        if req.partition_epoch < p.partition_epoch {
            return reject(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "partition epoch is {}, not {}",
                    p.partition_epoch, req.partition_epoch
                ),
            );
        }
        let new_isr: Vec<i32> = req.new_isr.iter().map(|(id, _)| *id).collect();
        let distinct: BTreeSet<i32> = new_isr.iter().copied().collect();
        if new_isr.is_empty()
            || distinct.len() != new_isr.len()
            || !new_isr.iter().all(|r| p.replicas.contains(r))
        {
            return reject(
                ErrorCode::InvalidRequest,
                format!("invalid ISR {new_isr:?}"),
            );
        }
        if !distinct.contains(&p.leader) {
            return reject(ErrorCode::InvalidRequest, "the ISR must include the leader");
        }
        for (id, epoch) in &req.new_isr {
            let eligible = image
                .broker(*id)
                .is_some_and(|b| b.is_active() && (*epoch == -1 || b.epoch == *epoch));
            if !eligible {
                return reject(
                    ErrorCode::IneligibleReplica,
                    format!("replica {id} is not eligible for the ISR"),
                );
            }
        }
        if new_isr == p.isr {
            return Ok((p.clone(), Vec::new()));
        }
        let mut next = p.clone();
        next.isr = new_isr.clone();
        next.partition_epoch += 1;
        Ok((
            next,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: req.partition,
                topic_id: req.topic_id,
                isr: Some(new_isr),
                ..Default::default()
            })],
        ))
    }

    /// AllocateProducerIds: the next block of [`PRODUCER_ID_BLOCK_SIZE`]
    /// ids (first id, records).
    pub fn allocate_producer_ids(
        &self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, Vec<MetadataRecord>), Rejection> {
        match image.broker(broker_id) {
            Some(b) if b.epoch == broker_epoch => {}
            Some(_) => return reject(ErrorCode::StaleBrokerEpoch, "stale broker epoch"),
            None => return reject(ErrorCode::BrokerIdNotRegistered, "broker is not registered"),
        }
        let first = image.next_producer_id();
        let Some(next) = first.checked_add(PRODUCER_ID_BLOCK_SIZE) else {
            return reject(ErrorCode::UnknownServerError, "producer ids exhausted");
        };
        Ok((
            first,
            vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id,
                broker_epoch,
                next_producer_id: next,
                ..Default::default()
            })],
        ))
    }
}

/// The active brokers in placement order: without racks, by id; with
/// racks, alternating between racks (racks by name, brokers of a rack by
/// id; brokers without a rack form one more group), as Kafka's rack-aware
/// assignment does, so that consecutive brokers, and so one partition's
/// replicas, sit in different racks where the racks allow it.
fn placement_order(image: &MetadataImage) -> Vec<i32> {
    let mut racks: BTreeMap<Option<&str>, Vec<i32>> = BTreeMap::new();
    for b in image.brokers().filter(|b| b.is_active()) {
        racks.entry(b.rack.as_deref()).or_default().push(b.id);
    }
    let longest = racks.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| racks.values().filter_map(move |ids| ids.get(i).copied()))
        .collect()
}

/// Kafka's topic name rules.
fn validate_topic_name(name: &str) -> Result<(), Rejection> {
    let why = if name.is_empty() {
        "the empty string"
    } else if name == "." || name == ".." {
        "'.' or '..'"
    } else if name.len() > MAX_TOPIC_NAME_LEN {
        "longer than 249 characters"
    } else if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    {
        "not made of ASCII letters, digits, '.', '_' and '-'"
    } else {
        return Ok(());
    };
    reject(
        ErrorCode::InvalidTopicException,
        format!("topic name {name:?} is {why}"),
    )
}

fn validate_assignments(image: &MetadataImage, assignments: &[Vec<i32>]) -> Result<(), Rejection> {
    let rf = assignments.first().map_or(0, Vec::len);
    for (p, replicas) in assignments.iter().enumerate() {
        let distinct: BTreeSet<_> = replicas.iter().collect();
        let why = if replicas.is_empty() {
            "has no replicas"
        } else if distinct.len() != replicas.len() {
            "repeats a broker"
        } else if replicas.len() != rf {
            "has a different replication factor from partition 0"
        } else if let Some(r) = replicas.iter().find(|r| image.broker(**r).is_none()) {
            return reject(
                ErrorCode::InvalidReplicaAssignment,
                format!("partition {p} names broker {r}, which is not registered"),
            );
        } else {
            continue;
        };
        return reject(
            ErrorCode::InvalidReplicaAssignment,
            format!("partition {p} {why}"),
        );
    }
    Ok(())
}

/// The records that fence broker `id`: leadership and ISR updates first,
/// then the fence, as Kafka orders them.
fn fence(image: &MetadataImage, id: i32, epoch: i64) -> Vec<MetadataRecord> {
    let mut records = leader_and_isr_updates(image, id);
    records.push(MetadataRecord::BrokerRegistrationChange(
        BrokerRegistrationChangeRecord {
            broker_id: id,
            broker_epoch: epoch,
            fenced: 1,
            ..Default::default()
        },
    ));
    records
}

/// After broker `id` is unfenced: leaderless partitions whose ISR holds an
/// active broker (now including `id`) get a leader.
fn elect_on_unfence(image: &MetadataImage, id: i32) -> Vec<MetadataRecord> {
    let active = |b: i32| b == id || image.is_active(b);
    let mut records = Vec::new();
    for t in image.topics() {
        for (&pid, p) in &t.partitions {
            if p.leader != NO_LEADER {
                continue;
            }
            if let Some(&leader) = p.replicas.iter().find(|r| p.isr.contains(r) && active(**r)) {
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: pid,
                    topic_id: t.id,
                    leader,
                    ..Default::default()
                }));
            }
        }
    }
    records
}

/// Removes `gone` from the ISR of every partition that has it (unless it is
/// the last member) and re-elects where the leader is `gone` or inactive.
fn leader_and_isr_updates(image: &MetadataImage, gone: i32) -> Vec<MetadataRecord> {
    let active = |b: i32| b != gone && image.is_active(b);
    let mut records = Vec::new();
    for t in image.topics() {
        for (&pid, p) in &t.partitions {
            if !p.isr.contains(&gone) && p.leader != gone {
                continue;
            }
            let mut isr: Vec<i32> = p.isr.iter().copied().filter(|r| *r != gone).collect();
            if isr.is_empty() {
                // No unclean election: the last ISR member stays, leaderless.
                isr = p.isr.clone();
            }
            let leader = if p.leader != NO_LEADER && active(p.leader) && isr.contains(&p.leader) {
                p.leader
            } else {
                p.replicas
                    .iter()
                    .copied()
                    .find(|r| isr.contains(r) && active(*r))
                    .unwrap_or(NO_LEADER)
            };
            if isr == p.isr && leader == p.leader {
                continue;
            }
            records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: pid,
                topic_id: t.id,
                isr: (isr != p.isr).then_some(isr),
                leader: if leader == p.leader {
                    NO_LEADER_CHANGE
                } else {
                    leader
                },
                ..Default::default()
            }));
        }
    }
    records
}
