//! KRaft metadata records as they are framed in `__cluster_metadata`.
//!
//! Each record value in the metadata log is (Kafka's `MetadataRecordSerde`):
//!
//! ```text
//! uvarint frame_version   always 1 (0 was KRaft's 2.8 preview, refused)
//! uvarint api_key         the record type (TopicRecord = 2, …)
//! uvarint version         the record's schema version
//! body                    the generated codec's encoding of that version
//! ```
//!
//! Decoding refuses an unknown frame version or record type, a type or
//! version above `i16::MAX`, a body the generated decoder rejects, and
//! trailing bytes after the body. It never panics and never allocates more
//! than the input can hold (the generated decoders check every length).
//!
//! ```
//! use weir_protocol::messages::metadata::TopicRecord;
//! use weir_protocol::metadata_record::MetadataRecord;
//! use weir_protocol::Uuid;
//!
//! let rec = MetadataRecord::Topic(TopicRecord {
//!     name: "orders".into(),
//!     topic_id: Uuid([7; 16]),
//!     ..Default::default()
//! });
//! let bytes = rec.encode_to_vec(0).unwrap();
//! assert_eq!(&bytes[..3], &[1, 2, 0]); // frame 1, type 2, version 0
//! let (back, version) = MetadataRecord::decode(bytes.into()).unwrap();
//! assert_eq!((back, version), (rec, 0));
//! ```

use bytes::{Buf, Bytes, BytesMut};

use crate::codec::{Decodable, DecodeError, Encodable, EncodeError, Message};
use crate::messages::metadata::*;
use crate::varint::{self, VarintError};

/// The only frame version Kafka writes and reads.
pub const FRAME_VERSION: u32 = 1;

/// Why a metadata record value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataRecordError {
    #[error("reading the record's {field}: {source}")]
    Header {
        field: &'static str,
        source: VarintError,
    },
    #[error("record {field} {value} is larger than {max}", max = i16::MAX)]
    TooLarge { field: &'static str, value: u32 },
    #[error("unknown metadata frame version {version} (only {FRAME_VERSION} is supported)")]
    UnknownFrameVersion { version: u32 },
    #[error("unknown metadata record type {api_key}")]
    UnknownType { api_key: u16 },
    #[error("metadata record type {api_key} version {version}: {source}")]
    Body {
        api_key: u16,
        version: i16,
        source: DecodeError,
    },
    #[error("{remaining} bytes after metadata record type {api_key}")]
    TrailingBytes { api_key: u16, remaining: usize },
}

/// Reads one unsigned varint header field that must fit in an `i16`.
fn header_field(buf: &mut Bytes, field: &'static str) -> Result<u32, MetadataRecordError> {
    let (value, n) = varint::read_unsigned_varint(buf)
        .map_err(|source| MetadataRecordError::Header { field, source })?;
    buf.advance(n);
    Ok(value)
}

fn short(value: u32, field: &'static str) -> Result<u16, MetadataRecordError> {
    match i16::try_from(value) {
        Ok(v) => Ok(v as u16),
        Err(_) => Err(MetadataRecordError::TooLarge { field, value }),
    }
}

macro_rules! metadata_records {
    ($($variant:ident($ty:ident)),* $(,)?) => {
        /// One KRaft metadata record of any type.
        #[derive(Debug, Clone, PartialEq)]
        pub enum MetadataRecord {
            $(
                #[doc = concat!("`", stringify!($ty), "`.")]
                $variant($ty),
            )*
        }

        impl MetadataRecord {
            /// Every record type: `(api_key, name, valid versions)`.
            pub const TYPES: &'static [(u16, &'static str, (i16, i16))] = &[
                $(($ty::API_KEY, <$ty as Message>::NAME, <$ty as Message>::VALID_VERSIONS),)*
            ];

            /// The record type (the framing's `api_key`).
            pub fn api_key(&self) -> u16 {
                match self {
                    $(Self::$variant(_) => $ty::API_KEY,)*
                }
            }

            /// The record's schema name, e.g. `"TopicRecord"`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => <$ty as Message>::NAME,)*
                }
            }

            /// The versions this record type has.
            pub fn valid_versions(&self) -> (i16, i16) {
                match self {
                    $(Self::$variant(_) => <$ty as Message>::VALID_VERSIONS,)*
                }
            }

            fn encode_body(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
                match self {
                    $(Self::$variant(r) => r.encode(buf, version),)*
                }
            }

            fn body_len(&self, version: i16) -> Result<usize, EncodeError> {
                match self {
                    $(Self::$variant(r) => r.encoded_len(version),)*
                }
            }

            fn decode_body(api_key: u16, buf: &mut Bytes, version: i16) -> Result<Self, MetadataRecordError> {
                let body = |source| MetadataRecordError::Body { api_key, version, source };
                $(
                    if api_key == $ty::API_KEY {
                        return $ty::decode(buf, version).map(Self::$variant).map_err(body);
                    }
                )*
                Err(MetadataRecordError::UnknownType { api_key })
            }

            /// A random record of type `api_key` valid in `version`, or
            /// `None` for an unknown type (property tests).
            #[cfg(any(test, feature = "arbitrary"))]
            pub fn random(api_key: u16, rng: &mut crate::codec::arbitrary::Rng, version: i16) -> Option<Self> {
                use crate::codec::arbitrary::Random;
                $(
                    if api_key == $ty::API_KEY {
                        return Some(Self::$variant($ty::random(rng, version)));
                    }
                )*
                None
            }
        }

        $(
            impl From<$ty> for MetadataRecord {
                fn from(r: $ty) -> Self {
                    Self::$variant(r)
                }
            }
        )*
    };
}

metadata_records! {
    RegisterBroker(RegisterBrokerRecord),
    UnregisterBroker(UnregisterBrokerRecord),
    Topic(TopicRecord),
    Partition(PartitionRecord),
    Config(ConfigRecord),
    PartitionChange(PartitionChangeRecord),
    FenceBroker(FenceBrokerRecord),
    UnfenceBroker(UnfenceBrokerRecord),
    RemoveTopic(RemoveTopicRecord),
    DelegationToken(DelegationTokenRecord),
    RemoveDelegationToken(RemoveDelegationTokenRecord),
    FeatureLevel(FeatureLevelRecord),
    ClientQuota(ClientQuotaRecord),
    ProducerIds(ProducerIdsRecord),
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    AccessControlEntry(AccessControlEntryRecord),
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    NoOp(NoOpRecord),
    ZkMigrationState(ZkMigrationStateRecord),
    UserScramCredential(UserScramCredentialRecord),
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    BeginTransaction(BeginTransactionRecord),
    EndTransaction(EndTransactionRecord),
    AbortTransaction(AbortTransactionRecord),
    RegisterController(RegisterControllerRecord),
}

impl MetadataRecord {
    /// The highest version of this record type, the one a new record is
    /// written in unless the cluster's `metadata.version` says otherwise.
    pub fn latest_version(&self) -> i16 {
        self.valid_versions().1
    }

    /// Bytes [`encode`](Self::encode) writes for `version`.
    pub fn encoded_len(&self, version: i16) -> Result<usize, EncodeError> {
        Ok(varint::unsigned_varint_len(FRAME_VERSION)
            + varint::unsigned_varint_len(u32::from(self.api_key()))
            + varint::unsigned_varint_len(u32::from(version as u16))
            + self.body_len(version)?)
    }

    /// Appends the framed record in `version` to `buf`. A version the type
    /// does not have (or a field set that `version` cannot carry) is an
    /// error and leaves `buf` unchanged.
    pub fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        // Checked before the header so that nothing is written on error.
        self.body_len(version)?;
        varint::put_unsigned_varint(buf, FRAME_VERSION);
        varint::put_unsigned_varint(buf, u32::from(self.api_key()));
        varint::put_unsigned_varint(buf, u32::from(version as u16));
        self.encode_body(buf, version)
    }

    /// The framed record in `version` as a fresh buffer.
    pub fn encode_to_vec(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        let mut buf = BytesMut::with_capacity(self.encoded_len(version)?);
        self.encode(&mut buf, version)?;
        Ok(buf.to_vec())
    }

    /// Decodes one framed record value (all of `buf`); returns the record and
    /// the version it was written in.
    pub fn decode(mut buf: Bytes) -> Result<(Self, i16), MetadataRecordError> {
        let frame = header_field(&mut buf, "frame version")?;
        if frame != FRAME_VERSION {
            return Err(MetadataRecordError::UnknownFrameVersion { version: frame });
        }
        let api_key = short(header_field(&mut buf, "type")?, "type")?;
        let version = short(header_field(&mut buf, "version")?, "version")? as i16;
        let record = Self::decode_body(api_key, &mut buf, version)?;
        if buf.has_remaining() {
            return Err(MetadataRecordError::TrailingBytes {
                api_key,
                remaining: buf.remaining(),
            });
        }
        Ok((record, version))
    }
}

/// Entry point of a metadata-record fuzz target (also run by the fuzz smoke
/// test). Panics only when an invariant breaks: a record that decodes must
/// re-encode, in the same version, to exactly the input bytes' record (and
/// `encoded_len` must equal what is written).
pub fn fuzz_metadata_record(data: &[u8]) {
    let Ok((record, version)) = MetadataRecord::decode(Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut buf = BytesMut::new();
    // A decoded record always re-encodes: every field it holds exists in
    // `version`.
    #[allow(clippy::unwrap_used)] // a failure here is the bug being fuzzed for
    record.encode(&mut buf, version).unwrap();
    #[allow(clippy::unwrap_used)] // as above
    let len = record.encoded_len(version).unwrap();
    assert_eq!(len, buf.len());
    #[allow(clippy::unwrap_used)] // as above
    let (again, v2) = MetadataRecord::decode(buf.freeze()).unwrap();
    assert_eq!(v2, version);
    assert_eq!(again, record);
}
