//! The record batch format and the image state machine: round trips, bad
//! bytes, snapshot/restore, skipped batches and published deltas.

use bytes::Bytes;
use weir_cluster::batch::{BatchError, decode_batch, encode_batch};
use weir_cluster::image::{ImageStateMachine, image_records};
use weir_metadata::MetadataImage;
use weir_metadata::controller::{
    AlterPartition, Controller, ControllerConfig, Heartbeat, NewTopic, Reassignment, Registration,
};
use weir_metadata::image::Endpoint;
use weir_protocol::Uuid;
use weir_protocol::messages::metadata::{
    ConfigRecord, FeatureLevelRecord, TopicRecord, UnregisterBrokerRecord,
};
use weir_protocol::metadata_record::MetadataRecord;
use weir_raft::MetadataStateMachine;

/// Drives `records` through the state machine as one committed batch.
fn commit(sm: &mut ImageStateMachine, index: &mut u64, records: &[MetadataRecord]) {
    *index += 1;
    let payload = encode_batch(records).unwrap();
    sm.apply(*index, &payload).unwrap();
}

/// An image with a bit of everything: brokers with endpoints and racks (one
/// re-registered, one unregistered), topics with configs, a fenced broker and
/// the elections it caused, an ISR change, producer ids, ACLs, SCRAM
/// credentials and client quotas (some removed again), a feature level and
/// a broker config.
fn busy_image() -> (ImageStateMachine, weir_cluster::ImageReader, u64) {
    let (mut sm, reader) = ImageStateMachine::new();
    let mut c = Controller::new(ControllerConfig::default(), 7);
    let mut i = 0;
    let mut epochs = Vec::new();
    for id in 1..=4 {
        let reg = Registration {
            broker_id: id,
            incarnation_id: Uuid([id as u8; 16]),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: format!("host-{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            rack: Some(format!("rack-{}", id % 2)),
        };
        let image = reader.current().image.clone();
        let (epoch, records) = c.register_broker(&image, &reg, 0).unwrap();
        commit(&mut sm, &mut i, &records);
        let hb = Heartbeat {
            broker_id: id,
            broker_epoch: epoch,
            current_metadata_offset: i as i64,
            want_fence: false,
            want_shutdown: false,
        };
        let image = reader.current().image.clone();
        let reply = c.heartbeat(&image, &hb, i as i64, 10).unwrap();
        commit(&mut sm, &mut i, &reply.records);
        epochs.push(epoch);
    }
    // Broker 4 goes away for good: the highest epoch must survive it.
    commit(
        &mut sm,
        &mut i,
        &[MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 4,
            broker_epoch: epochs[3],
            ..Default::default()
        })],
    );
    for (name, rf) in [("orders", 3), ("audit", 2)] {
        let topic = NewTopic {
            name: name.into(),
            num_partitions: 4,
            replication_factor: rf,
            configs: vec![("cleanup.policy".into(), Some("compact".into()))],
            ..Default::default()
        };
        let image = reader.current().image.clone();
        let (_, records) = c.create_topic(&image, &topic).unwrap();
        commit(&mut sm, &mut i, &records);
    }
    // Broker 2's session expires: fenced, leadership moves.
    let image = reader.current().image.clone();
    for id in [1, 3] {
        let hb = Heartbeat {
            broker_id: id,
            broker_epoch: image.broker(id).unwrap().epoch,
            current_metadata_offset: i as i64,
            want_fence: false,
            want_shutdown: false,
        };
        c.heartbeat(&image, &hb, i as i64, 9_000).unwrap();
    }
    let records = c.expire_sessions(&image, 9_500);
    assert!(!records.is_empty());
    commit(&mut sm, &mut i, &records);
    // Shrink one ISR.
    let image = reader.current().image.clone();
    let t = image.topic_by_name("orders").unwrap();
    let (&pid, p) = t.partitions.iter().find(|(_, p)| p.isr.len() == 2).unwrap();
    let leader = p.leader;
    let req = AlterPartition {
        topic_id: t.id,
        partition: pid,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![(leader, -1)],
    };
    let epoch = image.broker(leader).unwrap().epoch;
    let (_, records) = c.alter_partition(&image, leader, epoch, &req).unwrap();
    commit(&mut sm, &mut i, &records);
    // A reassignment in progress: an audit partition on fenced broker 2
    // moves to both live brokers; the one it lacks is still catching up.
    let image = reader.current().image.clone();
    let t = image.topic_by_name("audit").unwrap();
    let (&pid, _) = t
        .partitions
        .iter()
        .find(|(_, p)| p.replicas.contains(&2))
        .unwrap();
    let move_to = Reassignment {
        topic: "audit".into(),
        partition: pid,
        target: Some(vec![1, 3]),
    };
    let (_, records) = c.alter_partition_reassignments(&image, &[move_to]);
    commit(&mut sm, &mut i, &records);
    assert!(
        reader
            .current()
            .image
            .topic_by_name("audit")
            .unwrap()
            .partitions[&pid]
            .is_reassigning()
    );
    let image = reader.current().image.clone();
    let (_, records) = c.allocate_producer_ids(&image, 1, epochs[0]).unwrap();
    commit(&mut sm, &mut i, &records);
    // ACLs: three created, one of them deleted again.
    let acl = |principal: &str, op: weir_acl::Operation| weir_acl::AclBinding {
        pattern: weir_acl::ResourcePattern {
            resource_type: weir_acl::ResourceType::Topic,
            name: "audit".into(),
            pattern_type: weir_acl::PatternType::Prefixed,
        },
        entry: weir_acl::AccessControlEntry {
            principal: principal.into(),
            host: "10.0.0.1".into(),
            operation: op,
            permission: weir_acl::Permission::Deny,
        },
    };
    let image = reader.current().image.clone();
    let created = c.create_acls(
        &image,
        &[
            acl("User:a", weir_acl::Operation::Read),
            acl("User:b", weir_acl::Operation::Write),
            acl("User:c", weir_acl::Operation::All),
        ],
    );
    commit(&mut sm, &mut i, &created.records);
    let image = reader.current().image.clone();
    let filter = weir_acl::AclBindingFilter {
        principal: Some("User:b".into()),
        ..weir_acl::AclBindingFilter::any()
    };
    let deleted = weir_metadata::controller::delete_acls(&image, &[filter]).unwrap();
    commit(&mut sm, &mut i, &deleted.records);
    assert_eq!(reader.current().image.acls().len(), 2);
    // SCRAM credentials: three set, one deleted again.
    use weir_metadata::scram::{Deletion, ScramHash, Upsertion, salted_password};
    let upsert = |user: &str, hash: ScramHash| Upsertion {
        user: user.into(),
        mechanism: hash.wire_type(),
        iterations: 4096,
        salt: user.as_bytes().to_vec(),
        salted_password: salted_password(hash, "pw", user.as_bytes(), 4096),
    };
    let image = reader.current().image.clone();
    let set = weir_metadata::controller::alter_scram_credentials(
        &image,
        &[],
        &[
            upsert("alice", ScramHash::Sha256),
            upsert("bob", ScramHash::Sha512),
            upsert("carol", ScramHash::Sha512),
        ],
    );
    commit(&mut sm, &mut i, &set.records);
    let image = reader.current().image.clone();
    let gone = weir_metadata::controller::alter_scram_credentials(
        &image,
        &[Deletion {
            user: "bob".into(),
            mechanism: 2,
        }],
        &[],
    );
    commit(&mut sm, &mut i, &gone.records);
    assert_eq!(reader.current().image.scram().len(), 2);
    // Client quotas: a user's default client, a client id and an ip, one
    // key removed again.
    use weir_metadata::client_quotas::{Alteration, Op};
    let quota = |entity: &[(&str, Option<&str>)], key: &str, value: Option<f64>| Alteration {
        entity: entity
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(String::from)))
            .collect(),
        ops: vec![Op {
            key: key.into(),
            value: value.unwrap_or(0.0),
            remove: value.is_none(),
        }],
    };
    let image = reader.current().image.clone();
    let set = weir_metadata::controller::alter_client_quotas(
        &image,
        &[
            quota(
                &[("user", Some("alice")), ("client-id", None)],
                "producer_byte_rate",
                Some(1024.0),
            ),
            quota(
                &[("client-id", Some("app"))],
                "request_percentage",
                Some(12.5),
            ),
            quota(&[("ip", None)], "connection_creation_rate", Some(30.0)),
        ],
        false,
    );
    commit(&mut sm, &mut i, &set.records);
    let image = reader.current().image.clone();
    let removed = weir_metadata::controller::alter_client_quotas(
        &image,
        &[quota(&[("ip", None)], "connection_creation_rate", None)],
        false,
    );
    commit(&mut sm, &mut i, &removed.records);
    assert_eq!(reader.current().image.client_quotas().entries.len(), 2);
    commit(
        &mut sm,
        &mut i,
        &[
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: "metadata.version".into(),
                feature_level: 21,
                ..Default::default()
            }),
            MetadataRecord::Config(ConfigRecord {
                resource_type: weir_metadata::image::BROKER_RESOURCE,
                resource_name: "1".into(),
                name: "log.retention.ms".into(),
                value: Some("1000".into()),
                ..Default::default()
            }),
        ],
    );
    (sm, reader, i)
}

#[test]
fn batches_round_trip() {
    let (_, reader, _) = busy_image();
    let records = image_records(&reader.current().image);
    assert!(records.len() > 10);
    let bytes = encode_batch(&records).unwrap();
    assert_eq!(decode_batch(bytes).unwrap(), records);
    assert_eq!(decode_batch(encode_batch(&[]).unwrap()).unwrap(), vec![]);
}

#[test]
fn bad_batches_are_errors_not_panics() {
    let (_, reader, _) = busy_image();
    let bytes = encode_batch(&image_records(&reader.current().image)).unwrap();
    // Every truncation fails.
    for len in 0..bytes.len() {
        assert!(decode_batch(bytes.slice(..len)).is_err(), "prefix {len}");
    }
    // A trailing byte, a wrong format, a count the bytes cannot hold.
    let mut long = bytes.to_vec();
    long.push(0);
    assert_eq!(
        decode_batch(Bytes::from(long)),
        Err(BatchError::TrailingBytes(1))
    );
    let mut format = bytes.to_vec();
    format[0] = 2;
    assert_eq!(
        decode_batch(Bytes::from(format)),
        Err(BatchError::UnknownFormat(2))
    );
    let huge = Bytes::from_static(&[1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0]);
    assert!(matches!(
        decode_batch(huge),
        Err(BatchError::TooManyRecords { .. })
    ));
    // Flipped bytes anywhere: an error or some batch, never a panic.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..5_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut b = bytes.to_vec();
        let at = (seed as usize) % b.len();
        b[at] ^= (seed >> 32) as u8 | 1;
        let _ = decode_batch(Bytes::from(b));
    }
}

#[test]
fn snapshot_restores_an_equal_image() {
    let (sm, reader, index) = busy_image();
    let before = reader.current();
    assert_eq!(before.index, index);
    let image = &before.image;
    assert!(image.broker(4).is_none());
    assert!(image.highest_broker_epoch() > image.brokers().map(|b| b.epoch).max().unwrap());
    assert!(image.brokers().any(|b| b.fenced));
    assert!(image.next_producer_id() > 0);

    let snapshot = sm.snapshot();
    let (mut restored, restored_reader) = ImageStateMachine::new();
    let mut published = restored_reader.watch();
    assert!(!published.has_changed().unwrap());
    restored.restore(&snapshot).unwrap();
    // A restored snapshot sends no delta, but its readers see the change.
    assert!(published.has_changed().unwrap());
    assert_eq!(*published.borrow_and_update(), index);
    let after = restored_reader.current();
    assert_eq!(after.index, before.index);
    assert_eq!(after.image, before.image);
    // And the snapshot of the restored image is the same bytes.
    assert_eq!(restored.snapshot(), snapshot);

    // A corrupt snapshot is refused, not half-applied.
    let (mut other, other_reader) = ImageStateMachine::new();
    assert!(other.restore(&snapshot[..snapshot.len() - 1]).is_err());
    assert!(other.restore(&snapshot[..4]).is_err());
    assert_eq!(other_reader.current().image, MetadataImage::empty());
}

#[test]
fn a_batch_that_does_not_apply_is_skipped_whole() {
    let (mut sm, reader) = ImageStateMachine::new();
    let topic = |name: &str, id: u8| {
        MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: Uuid([id; 16]),
            ..Default::default()
        })
    };
    let mut i = 0;
    commit(&mut sm, &mut i, &[topic("a", 1)]);
    // The second record of this batch clashes: neither applies.
    commit(&mut sm, &mut i, &[topic("b", 2), topic("a", 3)]);
    let current = reader.current();
    assert_eq!(current.index, 2);
    assert!(current.image.topic_by_name("b").is_none());
    assert!(reader.rejection(2).unwrap().contains("already exists"));
    assert_eq!(reader.rejection(1), None);
    // Garbage is skipped the same way.
    sm.apply(3, b"\x01garbage").unwrap();
    assert!(reader.rejection(3).is_some());
    assert_eq!(reader.current().image.topics().count(), 1);
}

#[tokio::test]
async fn subscribers_receive_every_delta() {
    let (mut sm, reader) = ImageStateMachine::new();
    let mut updates = reader.subscribe();
    let mut i = 0;
    for id in 1..=3u8 {
        commit(
            &mut sm,
            &mut i,
            &[MetadataRecord::Topic(TopicRecord {
                name: format!("t{id}"),
                topic_id: Uuid([id; 16]),
                ..Default::default()
            })],
        );
    }
    for id in 1..=3u8 {
        let u = updates.recv().await.unwrap();
        assert_eq!(u.index, u64::from(id));
        assert!(u.delta.topics_created.contains(&Uuid([id; 16])));
        assert_eq!(u.image.topics().count(), usize::from(id));
    }
}
