//! Leader election and ISR updates when a broker leaves or comes back.

use weir_protocol::messages::metadata::{BrokerRegistrationChangeRecord, PartitionChangeRecord};
use weir_protocol::metadata_record::MetadataRecord;

use super::reassignment::{PartitionTarget, partition_change};
use crate::image::{MetadataImage, NO_LEADER};

/// The records that fence broker `id`: leadership and ISR updates first,
/// then the fence, as Kafka orders them.
pub(super) fn fence(image: &MetadataImage, id: i32, epoch: i64) -> Vec<MetadataRecord> {
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
pub(super) fn elect_on_unfence(image: &MetadataImage, id: i32) -> Vec<MetadataRecord> {
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
/// A reassignment the smaller ISR makes completable completes.
pub(super) fn leader_and_isr_updates(image: &MetadataImage, gone: i32) -> Vec<MetadataRecord> {
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
            let goal = PartitionTarget {
                isr,
                ..PartitionTarget::of(p)
            };
            if let Some(record) = partition_change(t.id, pid, p, goal, active) {
                records.push(MetadataRecord::PartitionChange(record));
            }
        }
    }
    records
}
