//! Topic config changes (AlterConfigs / IncrementalAlterConfigs of a TOPIC
//! resource, forwarded by a broker).
//!
//! The controller trusts the override set it is given: names and values
//! are checked by the broker that forwards the change, which has the config
//! definitions. The decision only turns the new set into the difference
//! from the image, as `ConfigRecord`s.

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::ConfigRecord;
use weir_protocol::metadata_record::MetadataRecord;

use super::*;
use crate::image::{MetadataImage, TOPIC_RESOURCE};

/// The records that make `topic`'s config overrides exactly
/// `new_overrides`: one `ConfigRecord` per key set or changed, one with a
/// null value per key removed (as KRaft writes a deletion), none for keys
/// left as they are, so an unchanged set writes nothing. An unknown topic
/// is UNKNOWN_TOPIC_OR_PARTITION; more keys than
/// [`MAX_RECORDS_PER_USER_OP`] is INVALID_REQUEST.
pub fn alter_topic_configs(
    image: &MetadataImage,
    topic: &str,
    new_overrides: &BTreeMap<String, String>,
) -> Result<Vec<MetadataRecord>, Rejection> {
    if image.topic_by_name(topic).is_none() {
        return reject(
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {topic} does not exist"),
        );
    }
    if new_overrides.len() > MAX_RECORDS_PER_USER_OP {
        return reject(
            ErrorCode::InvalidRequest,
            format!(
                "{} config overrides exceed the limit of {MAX_RECORDS_PER_USER_OP}",
                new_overrides.len()
            ),
        );
    }
    let empty = BTreeMap::new();
    let current = image.configs(TOPIC_RESOURCE, topic).unwrap_or(&empty);
    let record = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: TOPIC_RESOURCE,
            resource_name: topic.to_string(),
            name: name.to_string(),
            value: value.cloned(),
            ..Default::default()
        })
    };
    let removed = current
        .keys()
        .filter(|k| !new_overrides.contains_key(*k))
        .map(|k| record(k, None));
    let set = new_overrides
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| record(k, Some(v)));
    Ok(removed.chain(set).collect())
}
