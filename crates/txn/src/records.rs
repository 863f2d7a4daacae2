//! Keys and values of `__transaction_state` records in Kafka's format:
//! an int16 version, then the generated `TransactionLogKey` (version 0) or
//! `TransactionLogValue` (versions 0 and 1) body. The layout is in
//! `docs/transactions.md`.
//!
//! Values are written as version 1 (flexible, with the previous producer
//! id as tagged field 0 when there is one); both versions are read. An
//! Empty transactional id is written with a null partition list, as Kafka
//! does, and partitions of an Empty value are ignored when read. A key of
//! another version is not a transaction record (Kafka skips it with a
//! warning); a value of an unknown version or state is an error.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use weir_protocol::codec::{Decodable, DecodeError, Encodable};
use weir_protocol::messages::transaction_coordinator::transaction_log_value::PartitionsSchema;
use weir_protocol::messages::transaction_coordinator::{TransactionLogKey, TransactionLogValue};

use crate::metadata::TxnMetadata;
use crate::state::TxnState;
use crate::types::{NO_PRODUCER_EPOCH, TopicPartition, TxnRecord};

/// The key version written and read.
pub const KEY_VERSION: i16 = 0;
/// The value version written.
pub const VALUE_VERSION: i16 = 1;

/// Why a `__transaction_state` key or value could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record shorter than its version field")]
    NoVersion,
    #[error("unsupported {kind} version {version}")]
    UnsupportedVersion { kind: &'static str, version: i16 },
    #[error("cannot decode {kind}: {source}")]
    Decode {
        kind: &'static str,
        source: DecodeError,
    },
    #[error("{remaining} trailing bytes after the {kind}")]
    TrailingBytes {
        kind: &'static str,
        remaining: usize,
    },
    #[error("unknown transaction state id {0}")]
    UnknownState(i8),
    #[error("negative producer id {0}")]
    NegativeProducerId(i64),
    #[error("an empty transactional id")]
    EmptyTransactionalId,
}

/// A decoded key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordKey {
    Transaction {
        transactional_id: String,
    },
    /// A key version this coordinator does not know; skipped on replay.
    Other {
        version: i16,
    },
}

fn split_version(bytes: &[u8]) -> Result<(i16, Bytes), RecordError> {
    if bytes.len() < 2 {
        return Err(RecordError::NoVersion);
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    Ok((version, Bytes::copy_from_slice(&bytes[2..])))
}

/// TransactionLogKey v0 of `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Bytes {
    let key = TransactionLogKey {
        transactional_id: transactional_id.to_string(),
        ..Default::default()
    };
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(KEY_VERSION);
    // A transactional id longer than an int16 string cannot be written;
    // the coordinator never accepts one (see `valid_transactional_id`).
    if key.encode(&mut buf, KEY_VERSION).is_err() {
        buf.truncate(2);
        buf.put_i16(0);
    }
    buf.freeze()
}

/// The value of a transition target. Dead is never written (its record is
/// a tombstone, `value: None`).
pub fn encode_value(t: &crate::metadata::Transit) -> Bytes {
    let partitions = (t.state != TxnState::Empty).then(|| {
        let mut by_topic: Vec<PartitionsSchema> = Vec::new();
        for tp in &t.partitions {
            match by_topic.last_mut() {
                Some(last) if last.topic == tp.topic => last.partition_ids.push(tp.partition),
                _ => by_topic.push(PartitionsSchema {
                    topic: tp.topic.clone(),
                    partition_ids: vec![tp.partition],
                    ..Default::default()
                }),
            }
        }
        by_topic
    });
    let value = TransactionLogValue {
        producer_id: t.producer_id,
        previous_producer_id: t.previous_producer_id,
        producer_epoch: t.producer_epoch,
        transaction_timeout_ms: t.timeout_ms,
        transaction_status: t.state.id(),
        transaction_partitions: partitions,
        transaction_last_update_timestamp_ms: t.last_update_ms,
        transaction_start_timestamp_ms: t.start_ms,
        ..Default::default()
    };
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(VALUE_VERSION);
    // Every field fits version 1 (topic names are bounded by the broker).
    let _ = value.encode(&mut buf, VALUE_VERSION);
    buf.freeze()
}

/// The record that makes `t` the state of `transactional_id`.
pub fn record(transactional_id: &str, t: &crate::metadata::Transit) -> TxnRecord {
    TxnRecord {
        key: encode_key(transactional_id),
        value: (t.state != TxnState::Dead).then(|| encode_value(t)),
    }
}

/// The tombstone that forgets `transactional_id`.
pub fn tombstone(transactional_id: &str) -> TxnRecord {
    TxnRecord {
        key: encode_key(transactional_id),
        value: None,
    }
}

pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, RecordError> {
    let (version, mut body) = split_version(bytes)?;
    if version != KEY_VERSION {
        return Ok(RecordKey::Other { version });
    }
    let key =
        TransactionLogKey::decode(&mut body, version).map_err(|source| RecordError::Decode {
            kind: "key",
            source,
        })?;
    if !body.is_empty() {
        return Err(RecordError::TrailingBytes {
            kind: "key",
            remaining: body.len(),
        });
    }
    if key.transactional_id.is_empty() {
        return Err(RecordError::EmptyTransactionalId);
    }
    Ok(RecordKey::Transaction {
        transactional_id: key.transactional_id,
    })
}

/// The metadata a value holds (Kafka's `readTxnRecordValue`): no pending
/// transition, no last epoch (it is not written).
pub fn decode_value(transactional_id: &str, bytes: &[u8]) -> Result<TxnMetadata, RecordError> {
    let (version, mut body) = split_version(bytes)?;
    if !(0..=1).contains(&version) {
        return Err(RecordError::UnsupportedVersion {
            kind: "value",
            version,
        });
    }
    let v =
        TransactionLogValue::decode(&mut body, version).map_err(|source| RecordError::Decode {
            kind: "value",
            source,
        })?;
    if !body.is_empty() {
        return Err(RecordError::TrailingBytes {
            kind: "value",
            remaining: body.len(),
        });
    }
    let state = TxnState::from_id(v.transaction_status)
        .ok_or(RecordError::UnknownState(v.transaction_status))?;
    if v.producer_id < 0 {
        return Err(RecordError::NegativeProducerId(v.producer_id));
    }
    let partitions: BTreeSet<TopicPartition> = if state == TxnState::Empty {
        BTreeSet::new()
    } else {
        v.transaction_partitions
            .unwrap_or_default()
            .into_iter()
            .flat_map(|s| {
                let topic = s.topic;
                s.partition_ids
                    .into_iter()
                    .map(move |p| TopicPartition::new(topic.clone(), p))
            })
            .collect()
    };
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id: v.producer_id,
        previous_producer_id: v.previous_producer_id,
        producer_epoch: v.producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms: v.transaction_timeout_ms,
        state,
        partitions,
        start_ms: v.transaction_start_timestamp_ms,
        last_update_ms: v.transaction_last_update_timestamp_ms,
        pending: None,
        has_failed_epoch_fence: false,
    })
}

/// Fuzz entry point (the `transaction_state_records` target and its smoke
/// test): decoding arbitrary bytes as a key and as a value never panics,
/// and what decodes encodes back to the same key and metadata.
pub fn fuzz_decode(data: &[u8]) {
    if let Ok(RecordKey::Transaction { transactional_id }) = decode_key(data) {
        assert_eq!(
            decode_key(&encode_key(&transactional_id)),
            Ok(RecordKey::Transaction {
                transactional_id: transactional_id.clone()
            })
        );
    }
    if let Ok(m) = decode_value("t", data) {
        let again = decode_value("t", &encode_value(&m.current()))
            .expect("a decoded value encodes to a valid one");
        assert_eq!(again, m, "value round trip");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::Transit;

    fn transit(state: TxnState, partitions: &[(&str, i32)]) -> Transit {
        Transit {
            producer_id: 4000,
            previous_producer_id: 3999,
            producer_epoch: 7,
            last_producer_epoch: 6,
            timeout_ms: 60_000,
            state,
            partitions: partitions
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            start_ms: 1_000,
            last_update_ms: 2_000,
        }
    }

    #[test]
    fn key_layout_is_kafkas() {
        // int16 version 0, then an int16-length string.
        assert_eq!(&encode_key("tx")[..], &[0, 0, 0, 2, b't', b'x']);
        assert_eq!(
            decode_key(&encode_key("tx")),
            Ok(RecordKey::Transaction {
                transactional_id: "tx".into()
            })
        );
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            Ok(RecordKey::Other { version: 1 })
        );
        assert_eq!(decode_key(&[0]), Err(RecordError::NoVersion));
        assert!(matches!(
            decode_key(&[0, 0, 0, 9, b'x']),
            Err(RecordError::Decode { .. })
        ));
    }

    #[test]
    fn values_round_trip_in_every_state() {
        for state in TxnState::ALL.into_iter().filter(|s| *s != TxnState::Dead) {
            let t = transit(state, &[("a", 1), ("a", 0), ("b", 3)]);
            let m = decode_value("tx", &encode_value(&t)).unwrap();
            assert_eq!(m.state, state);
            assert_eq!(m.producer_id, 4000);
            assert_eq!(m.previous_producer_id, 3999);
            assert_eq!(m.producer_epoch, 7);
            assert_eq!(m.last_producer_epoch, NO_PRODUCER_EPOCH, "not written");
            assert_eq!(
                (m.start_ms, m.last_update_ms, m.timeout_ms),
                (1_000, 2_000, 60_000)
            );
            if state == TxnState::Empty {
                assert!(m.partitions.is_empty());
            } else {
                assert_eq!(m.partitions, t.partitions);
            }
        }
    }

    #[test]
    fn an_empty_value_has_a_null_partition_list() {
        let bytes = encode_value(&transit(TxnState::Empty, &[]));
        // version, producer id, epoch, timeout, status, then the compact
        // array length: 0 is null.
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(bytes[2 + 8 + 2 + 4 + 1], 0);
    }

    #[test]
    fn version_0_values_are_read() {
        let v = TransactionLogValue {
            producer_id: 5,
            producer_epoch: 2,
            transaction_timeout_ms: 100,
            transaction_status: TxnState::Ongoing.id(),
            transaction_partitions: Some(vec![PartitionsSchema {
                topic: "t".into(),
                partition_ids: vec![0, 2],
                ..Default::default()
            }]),
            transaction_last_update_timestamp_ms: 9,
            transaction_start_timestamp_ms: 8,
            ..Default::default()
        };
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        v.encode(&mut buf, 0).unwrap();
        let m = decode_value("tx", &buf).unwrap();
        assert_eq!(m.state, TxnState::Ongoing);
        assert_eq!(m.previous_producer_id, -1);
        assert_eq!(m.partitions.len(), 2);
    }

    #[test]
    fn bad_values_are_errors() {
        let mut bytes = encode_value(&transit(TxnState::Ongoing, &[])).to_vec();
        bytes[2 + 8 + 2 + 4] = 9; // status
        assert_eq!(
            decode_value("tx", &bytes),
            Err(RecordError::UnknownState(9))
        );
        assert_eq!(
            decode_value("tx", &[0, 2, 0]),
            Err(RecordError::UnsupportedVersion {
                kind: "value",
                version: 2
            })
        );
        let mut long = encode_value(&transit(TxnState::Ongoing, &[])).to_vec();
        long.push(0);
        assert!(matches!(
            decode_value("tx", &long),
            Err(RecordError::TrailingBytes { .. })
        ));
    }
}
