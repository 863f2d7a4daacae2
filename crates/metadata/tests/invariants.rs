//! Random sequences of cluster events driven through the controller, the
//! record framing and `MetadataImage::apply`, with the invariants checked
//! after every step:
//!
//! - the controller's records apply (it never proposes an invalid change);
//! - decode(encode(record)) == record, and the decoded record is what applies;
//! - leader ∈ ISR ⊆ replicas, or leader = -1, and then no ISR member is active;
//! - leader epochs and partition epochs never decrease;
//! - fenced and shutting-down brokers lead nothing;
//! - added partitions keep the topic's replication factor, and after a
//!   leader rebalance no partition could still move to its preferred
//!   replica.

use bytes::BytesMut;
use proptest::prelude::*;
use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, ElectionType, Heartbeat, NewPartitions, NewTopic,
    Registration, imbalanced_partitions,
};
use weir_metadata::{MetadataImage, NO_LEADER};
use weir_protocol::Uuid;
use weir_protocol::metadata_record::MetadataRecord;

const BROKERS: i32 = 4;
const NAMES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Event {
    Register {
        id: i32,
        incarnation: u8,
    },
    Heartbeat {
        id: i32,
        caught_up: bool,
        want_fence: bool,
    },
    Advance {
        ms: u64,
    },
    CreateTopic {
        name: usize,
        partitions: i32,
        rf: i16,
    },
    DeleteTopic {
        name: usize,
    },
    AlterIsr {
        pick: usize,
        member: usize,
        expand: bool,
    },
    Shutdown {
        id: i32,
    },
    CreatePartitions {
        name: usize,
        count: i32,
    },
    Elect {
        unclean: bool,
        /// Every partition, or one picked.
        pick: Option<usize>,
    },
    Rebalance,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        1 => (1..=BROKERS, 0u8..3).prop_map(|(id, incarnation)| Event::Register { id, incarnation }),
        4 => (1..=BROKERS, any::<bool>(), prop::bool::weighted(0.05))
            .prop_map(|(id, caught_up, want_fence)| Event::Heartbeat { id, caught_up, want_fence }),
        2 => (0u64..6_000).prop_map(|ms| Event::Advance { ms }),
        2 => (0..NAMES.len(), 1i32..5, 1i16..4)
            .prop_map(|(name, partitions, rf)| Event::CreateTopic { name, partitions, rf }),
        1 => (0..NAMES.len()).prop_map(|name| Event::DeleteTopic { name }),
        3 => (any::<usize>(), any::<usize>(), any::<bool>())
            .prop_map(|(pick, member, expand)| Event::AlterIsr { pick, member, expand }),
        1 => (1..=BROKERS).prop_map(|id| Event::Shutdown { id }),
        1 => (0..NAMES.len(), 0i32..8)
            .prop_map(|(name, count)| Event::CreatePartitions { name, count }),
        1 => (any::<bool>(), prop::option::of(any::<usize>()))
            .prop_map(|(unclean, pick)| Event::Elect { unclean, pick }),
        1 => Just(Event::Rebalance),
    ]
}

struct Sim {
    controller: Controller,
    image: MetadataImage,
    now_ms: u64,
    /// Records committed so far: the metadata log's committed offset.
    offset: i64,
}

impl Sim {
    fn records_for(&mut self, e: &Event) -> Vec<MetadataRecord> {
        let image = &self.image;
        let c = &mut self.controller;
        let now = self.now_ms;
        match *e {
            Event::Register { id, incarnation } => {
                let reg = Registration {
                    broker_id: id,
                    incarnation_id: Uuid([incarnation.wrapping_add(id as u8 * 8); 16]),
                    endpoints: vec![],
                    rack: None,
                };
                c.register_broker(image, &reg, now)
                    .map(|r| r.1)
                    .unwrap_or_default()
            }
            Event::Heartbeat {
                id,
                caught_up,
                want_fence,
            } => {
                let Some(b) = image.broker(id) else {
                    return vec![];
                };
                let hb = Heartbeat {
                    broker_id: id,
                    broker_epoch: b.epoch,
                    current_metadata_offset: if caught_up {
                        self.offset
                    } else {
                        self.offset - 1
                    },
                    want_fence,
                    want_shutdown: false,
                };
                c.heartbeat(image, &hb, self.offset, now)
                    .map(|r| r.records)
                    .unwrap_or_default()
            }
            Event::Advance { ms } => {
                self.now_ms += ms;
                c.expire_sessions(image, self.now_ms)
            }
            Event::CreateTopic {
                name,
                partitions,
                rf,
            } => {
                let t = NewTopic {
                    name: NAMES[name].into(),
                    num_partitions: partitions,
                    replication_factor: rf,
                    ..Default::default()
                };
                c.create_topic(image, &t).map(|r| r.1).unwrap_or_default()
            }
            Event::DeleteTopic { name } => c.delete_topic(image, NAMES[name]).unwrap_or_default(),
            Event::AlterIsr {
                pick,
                member,
                expand,
            } => {
                let parts: Vec<_> = image
                    .topics()
                    .flat_map(|t| t.partitions.iter().map(move |(i, p)| (t.id, *i, p)))
                    .filter(|(_, _, p)| p.leader != NO_LEADER)
                    .collect();
                if parts.is_empty() {
                    return vec![];
                }
                let (topic_id, partition, p) = parts[pick % parts.len()];
                let mut isr = p.isr.clone();
                if expand {
                    let out: Vec<i32> = p
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| !isr.contains(r))
                        .collect();
                    if out.is_empty() {
                        return vec![];
                    }
                    isr.push(out[member % out.len()]);
                } else {
                    let followers: Vec<i32> =
                        isr.iter().copied().filter(|r| *r != p.leader).collect();
                    if followers.is_empty() {
                        return vec![];
                    }
                    let gone = followers[member % followers.len()];
                    isr.retain(|r| *r != gone);
                }
                let req = AlterPartition {
                    topic_id,
                    partition,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr: isr.into_iter().map(|r| (r, -1)).collect(),
                };
                let epoch = image.broker(p.leader).map_or(-1, |b| b.epoch);
                c.alter_partition(image, p.leader, epoch, &req)
                    .map(|r| r.1)
                    .unwrap_or_default()
            }
            Event::Shutdown { id } => {
                let Some(b) = image.broker(id) else {
                    return vec![];
                };
                c.controlled_shutdown(image, id, b.epoch)
                    .unwrap_or_default()
            }
            Event::CreatePartitions { name, count } => {
                let req = NewPartitions {
                    name: NAMES[name].into(),
                    count,
                    assignments: None,
                };
                c.create_partitions(image, &req).unwrap_or_default()
            }
            Event::Elect { unclean, pick } => {
                let all: Vec<(String, i32)> = image
                    .topics()
                    .flat_map(|t| t.partitions.keys().map(|p| (t.name.clone(), *p)))
                    .collect();
                let asked: Option<Vec<(String, i32)>> = match pick {
                    Some(_) if all.is_empty() => return vec![],
                    Some(i) => Some(vec![all[i % all.len()].clone()]),
                    None => None,
                };
                let election = if unclean {
                    ElectionType::Unclean
                } else {
                    ElectionType::Preferred
                };
                c.elect_leaders(image, election, asked.as_deref()).1
            }
            Event::Rebalance => c.rebalance_leaders(image),
        }
    }
}

fn check_step(before: &MetadataImage, after: &MetadataImage) -> Result<(), TestCaseError> {
    after.check().map_err(TestCaseError::fail)?;
    for t in after.topics() {
        for (i, p) in &t.partitions {
            if p.leader == NO_LEADER {
                prop_assert!(
                    !p.isr.iter().any(|r| after.is_active(*r)),
                    "{}-{i} is leaderless although its ISR {:?} has an active broker",
                    t.name,
                    p.isr
                );
            } else {
                prop_assert!(
                    after.is_active(p.leader),
                    "{}-{i} is led by inactive broker {}",
                    t.name,
                    p.leader
                );
            }
            if let Some(old) = before.partition(t.id, *i) {
                prop_assert!(
                    p.leader_epoch >= old.leader_epoch,
                    "{}-{i} leader epoch went back",
                    t.name
                );
                prop_assert!(
                    p.partition_epoch >= old.partition_epoch,
                    "{}-{i} partition epoch went back",
                    t.name
                );
                if p.leader != old.leader {
                    prop_assert!(
                        p.leader_epoch > old.leader_epoch,
                        "{}-{i} new leader, same epoch",
                        t.name
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn controller_keeps_the_invariants(seed in any::<u64>(), events in prop::collection::vec(event(), 1..80)) {
        let mut sim = Sim {
            controller: Controller::new(ControllerConfig::default(), seed),
            image: MetadataImage::empty(),
            now_ms: 0,
            offset: 0,
        };
        for (step, e) in events.iter().enumerate() {
            let records = sim.records_for(e);
            let mut decoded = Vec::with_capacity(records.len());
            for r in &records {
                let version = r.latest_version();
                let mut buf = BytesMut::new();
                r.encode(&mut buf, version).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let (back, v) = MetadataRecord::decode(buf.freeze()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(v, version);
                prop_assert_eq!(&back, r);
                decoded.push(back);
            }
            let (next, _delta) = sim
                .image
                .apply(&decoded)
                .map_err(|err| TestCaseError::fail(format!("step {step} {e:?}: {err}\n{records:?}")))?;
            check_step(&sim.image, &next)
                .map_err(|err| TestCaseError::fail(format!("step {step} {e:?}: {err}")))?;
            // On every state reached, a rebalance leaves no partition that
            // could still move to its preferred replica.
            let rebalance = sim.controller.rebalance_leaders(&next);
            let (balanced, _) = next
                .apply(&rebalance)
                .map_err(|err| TestCaseError::fail(format!("step {step} rebalance: {err}")))?;
            check_step(&next, &balanced)?;
            prop_assert_eq!(imbalanced_partitions(&balanced), vec![]);
            prop_assert_eq!(rebalance.len(), imbalanced_partitions(&next).len());
            match e {
                Event::CreatePartitions { name, count } if !records.is_empty() => {
                    let t = next.topic_by_name(NAMES[*name]).unwrap();
                    prop_assert_eq!(t.partitions.len() as i32, *count);
                    let rf: Vec<usize> = t.partitions.values().map(|p| p.replicas.len()).collect();
                    prop_assert!(rf.windows(2).all(|w| w[0] == w[1]), "replication factors {:?}", rf);
                }
                _ => {}
            }
            sim.image = next;
            sim.offset += records.len() as i64;
        }
    }
}
