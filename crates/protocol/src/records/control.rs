//! Control records: the records of a batch whose control flag is set.
//!
//! Key (4 bytes): `version int16` (0), `type int16`.
//! For COMMIT and ABORT markers the value (6 bytes) is
//! `version int16` (0), `coordinatorEpoch int32`.
//!
//! Like Kafka, a key or value with a newer version is read with the
//! version-0 layout (fields are only ever appended).

use bytes::Bytes;

use super::error::RecordsError;
use super::record::Record;

/// Type of a control record (the second int16 of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// End of an aborted transaction.
    Abort,
    /// End of a committed transaction.
    Commit,
    /// KRaft leader change (type 2).
    LeaderChange,
    /// KRaft snapshot header (type 3).
    SnapshotHeader,
    /// KRaft snapshot footer (type 4).
    SnapshotFooter,
    /// KRaft version (type 5).
    KRaftVersion,
    /// KRaft voters (type 6).
    KRaftVoters,
    /// A type this code does not know; Kafka ignores these.
    Unknown(i16),
}

/// Size of a control record key.
pub const CONTROL_KEY_LEN: usize = 4;
/// Size of an end-transaction marker value.
pub const END_TXN_MARKER_VALUE_LEN: usize = 6;
/// Current version of the control key and the marker value.
pub const CONTROL_KEY_VERSION: i16 = 0;

impl ControlRecordType {
    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KRaftVersion => 5,
            ControlRecordType::KRaftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    pub fn from_id(id: i16) -> Self {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KRaftVersion,
            6 => ControlRecordType::KRaftVoters,
            other => ControlRecordType::Unknown(other),
        }
    }

    /// Parses a control record key.
    pub fn parse_key(key: &[u8]) -> Result<Self, RecordsError> {
        let Some((head, _)) = key.split_first_chunk::<CONTROL_KEY_LEN>() else {
            return Err(RecordsError::InvalidControlRecord {
                reason: "key shorter than 4 bytes",
            });
        };
        let version = i16::from_be_bytes([head[0], head[1]]);
        if version < 0 {
            return Err(RecordsError::InvalidControlRecord {
                reason: "negative key version",
            });
        }
        Ok(Self::from_id(i16::from_be_bytes([head[2], head[3]])))
    }

    /// Parses the key of `record`, which must belong to a control batch.
    pub fn of_record(record: &Record) -> Result<Self, RecordsError> {
        match &record.key {
            Some(k) => Self::parse_key(k),
            None => Err(RecordsError::InvalidControlRecord {
                reason: "control record without a key",
            }),
        }
    }

    /// The 4-byte key of a control record of this type.
    pub fn key(self) -> Bytes {
        let mut k = Vec::with_capacity(CONTROL_KEY_LEN);
        k.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
        k.extend_from_slice(&self.id().to_be_bytes());
        Bytes::from(k)
    }

    /// True for COMMIT and ABORT.
    pub fn is_end_txn(self) -> bool {
        matches!(self, ControlRecordType::Abort | ControlRecordType::Commit)
    }
}

/// The value of a COMMIT or ABORT control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT or ABORT.
    pub kind: ControlRecordType,
    pub version: i16,
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    pub fn commit(coordinator_epoch: i32) -> Self {
        EndTxnMarker {
            kind: ControlRecordType::Commit,
            version: CONTROL_KEY_VERSION,
            coordinator_epoch,
        }
    }

    pub fn abort(coordinator_epoch: i32) -> Self {
        EndTxnMarker {
            kind: ControlRecordType::Abort,
            version: CONTROL_KEY_VERSION,
            coordinator_epoch,
        }
    }

    /// Parses a COMMIT/ABORT control record.
    pub fn from_record(record: &Record) -> Result<Self, RecordsError> {
        let kind = ControlRecordType::of_record(record)?;
        if !kind.is_end_txn() {
            return Err(RecordsError::InvalidControlRecord {
                reason: "not a COMMIT or ABORT marker",
            });
        }
        let Some(value) = &record.value else {
            return Err(RecordsError::InvalidControlRecord {
                reason: "end transaction marker without a value",
            });
        };
        let Some((v, _)) = value.split_first_chunk::<END_TXN_MARKER_VALUE_LEN>() else {
            return Err(RecordsError::InvalidControlRecord {
                reason: "end transaction marker value shorter than 6 bytes",
            });
        };
        let version = i16::from_be_bytes([v[0], v[1]]);
        if version < 0 {
            return Err(RecordsError::InvalidControlRecord {
                reason: "negative end transaction marker version",
            });
        }
        Ok(EndTxnMarker {
            kind,
            version,
            coordinator_epoch: i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
        })
    }

    /// The 6-byte value of this marker (always written as version 0).
    pub fn value(&self) -> Bytes {
        let mut v = Vec::with_capacity(END_TXN_MARKER_VALUE_LEN);
        v.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
        v.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        Bytes::from(v)
    }

    /// The control record carrying this marker, with offset and timestamp
    /// deltas 0.
    pub fn to_record(&self) -> Record {
        Record {
            key: Some(self.kind.key()),
            value: Some(self.value()),
            ..Record::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_bytes() {
        let rec = EndTxnMarker::commit(7).to_record();
        assert_eq!(rec.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(rec.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
        assert_eq!(EndTxnMarker::from_record(&rec), Ok(EndTxnMarker::commit(7)));
        let abort = EndTxnMarker::abort(-1).to_record();
        assert_eq!(abort.key.as_deref(), Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(
            EndTxnMarker::from_record(&abort),
            Ok(EndTxnMarker::abort(-1))
        );
    }

    #[test]
    fn rejects_malformed() {
        assert!(ControlRecordType::parse_key(&[0, 0, 1]).is_err());
        assert!(ControlRecordType::parse_key(&[0xff, 0xff, 0, 1]).is_err());
        assert_eq!(
            ControlRecordType::parse_key(&[0, 0, 0, 9]),
            Ok(ControlRecordType::Unknown(9))
        );
        let mut rec = EndTxnMarker::commit(1).to_record();
        rec.value = Some(Bytes::from_static(&[0, 0, 0]));
        assert!(EndTxnMarker::from_record(&rec).is_err());
        rec.value = None;
        assert!(EndTxnMarker::from_record(&rec).is_err());
        rec.key = Some(ControlRecordType::LeaderChange.key());
        rec.value = Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0]));
        assert!(EndTxnMarker::from_record(&rec).is_err());
    }
}
