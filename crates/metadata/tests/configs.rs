//! The topic config decision: the records that turn the image's overrides
//! into the new set, table-driven, each applied to the image.

use std::collections::BTreeMap;

use weir_metadata::MetadataImage;
use weir_metadata::controller::{
    Controller, ControllerConfig, Heartbeat, MAX_RECORDS_PER_USER_OP, NewTopic, Registration,
    alter_topic_configs,
};
use weir_metadata::image::TOPIC_RESOURCE;
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::metadata_record::MetadataRecord;

fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
    let (next, _) = image.apply(records).unwrap();
    next.check().unwrap();
    next
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One broker and topic `t` created with `configs`.
fn image_with_topic(configs: &[(&str, &str)]) -> MetadataImage {
    let mut c = Controller::new(ControllerConfig::default(), 3);
    let image = MetadataImage::empty();
    let reg = Registration {
        broker_id: 1,
        incarnation_id: Uuid([1; 16]),
        endpoints: vec![],
        rack: None,
    };
    let (epoch, records) = c.register_broker(&image, &reg, 0).unwrap();
    let image = apply(&image, &records);
    let hb = Heartbeat {
        broker_id: 1,
        broker_epoch: epoch,
        current_metadata_offset: 10,
        want_fence: false,
        want_shutdown: false,
    };
    let reply = c.heartbeat(&image, &hb, 10, 0).unwrap();
    let image = apply(&image, &reply.records);
    let topic = NewTopic {
        name: "t".into(),
        num_partitions: 2,
        replication_factor: 1,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect(),
        ..Default::default()
    };
    let (_, records) = c.create_topic(&image, &topic).unwrap();
    apply(&image, &records)
}

/// (name, value) of every ConfigRecord, checking each is a topic's.
fn changes(records: &[MetadataRecord]) -> Vec<(String, Option<String>)> {
    records
        .iter()
        .map(|r| match r {
            MetadataRecord::Config(c) => {
                assert_eq!((c.resource_type, c.resource_name.as_str()), (2, "t"));
                (c.name.clone(), c.value.clone())
            }
            other => panic!("not a ConfigRecord: {other:?}"),
        })
        .collect()
}

type Pairs = Vec<(&'static str, &'static str)>;
/// (case, overrides before, the new set, the (name, value) records wanted).
type Case = (
    &'static str,
    Pairs,
    Pairs,
    Vec<(&'static str, Option<&'static str>)>,
);

#[test]
fn records_are_the_difference_and_apply_to_the_new_set() {
    let cases: Vec<Case> = vec![
        (
            "set on none",
            vec![],
            vec![("retention.ms", "10")],
            vec![("retention.ms", Some("10"))],
        ),
        (
            "change one, keep one",
            vec![("retention.ms", "10"), ("cleanup.policy", "compact")],
            vec![("retention.ms", "20"), ("cleanup.policy", "compact")],
            vec![("retention.ms", Some("20"))],
        ),
        (
            "remove is a null value",
            vec![("retention.ms", "10"), ("segment.bytes", "2048")],
            vec![("segment.bytes", "2048")],
            vec![("retention.ms", None)],
        ),
        (
            "remove all",
            vec![("retention.ms", "10")],
            vec![],
            vec![("retention.ms", None)],
        ),
        (
            "unchanged writes nothing",
            vec![("retention.ms", "10")],
            vec![("retention.ms", "10")],
            vec![],
        ),
        ("empty to empty", vec![], vec![], vec![]),
    ];
    for (name, before, after, want) in cases {
        let image = image_with_topic(&before);
        let new = map(&after);
        let records = alter_topic_configs(&image, "t", &new).unwrap();
        let want: Vec<(String, Option<String>)> = want
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.map(String::from)))
            .collect();
        assert_eq!(changes(&records), want, "{name}");
        let next = apply(&image, &records);
        let got = next
            .configs(TOPIC_RESOURCE, "t")
            .cloned()
            .unwrap_or_default();
        assert_eq!(got, new, "{name}: the image after the records");
    }
}

#[test]
fn unknown_topic_and_too_many_keys_are_refused() {
    let image = image_with_topic(&[]);
    let err = alter_topic_configs(&image, "nope", &map(&[("retention.ms", "1")])).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownTopicOrPartition);
    let huge: BTreeMap<String, String> = (0..=MAX_RECORDS_PER_USER_OP)
        .map(|i| (format!("k{i}"), "v".to_string()))
        .collect();
    let err = alter_topic_configs(&image, "t", &huge).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
}

#[test]
fn a_deleted_topic_has_no_configs_left() {
    let image = image_with_topic(&[("retention.ms", "10")]);
    let c = Controller::new(ControllerConfig::default(), 3);
    let records = c.delete_topic(&image, "t").unwrap();
    let image = apply(&image, &records);
    assert!(image.configs(TOPIC_RESOURCE, "t").is_none());
    let err = alter_topic_configs(&image, "t", &BTreeMap::new()).unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownTopicOrPartition);
}
