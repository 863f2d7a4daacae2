//! AlterClientQuotas, as Kafka 4's `ClientQuotaControlManager` decides it:
//! the request is checked and planned by [`ClientQuotas::plan_alter`] (the
//! same code a single node runs, so the codes and messages are the same),
//! and each quota key that changed is written as one `ClientQuotaRecord`
//! (the entity, the key, the value, or `remove`).
//!
//! - A key set to the value the image holds, or removed when it is not
//!   set, writes nothing.
//! - `validate_only` answers as the real request would and writes nothing.
//! - One request writes at most [`MAX_RECORDS_PER_USER_OP`] records; a
//!   larger one is refused whole with INVALID_REQUEST.
//!
//! DescribeClientQuotas is not decided here: every broker answers it from
//! its own image with [`ClientQuotas::describe`].

use std::collections::BTreeSet;

use weir_protocol::messages::metadata::ClientQuotaRecord;
use weir_protocol::messages::metadata::client_quota_record::EntityData;
use weir_protocol::metadata_record::MetadataRecord;

use super::MAX_RECORDS_PER_USER_OP;
use crate::client_quotas::{Alteration, ClientQuotas, QuotaEntity, Refusal};
use crate::image::MetadataImage;

/// The `ClientQuotaRecord` that sets `key` of `entity` to `value`
/// (`None`: removes it).
pub fn client_quota_record(entity: &QuotaEntity, key: &str, value: Option<f64>) -> MetadataRecord {
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: entity
            .0
            .iter()
            .map(|(t, n)| EntityData {
                entity_type: t.name().to_string(),
                entity_name: n.clone(),
                ..Default::default()
            })
            .collect(),
        key: key.to_string(),
        value: value.unwrap_or(0.0),
        remove: value.is_none(),
        ..Default::default()
    })
}

/// The records that turn `before` into `after`, by entity then key.
pub fn client_quota_changes(before: &ClientQuotas, after: &ClientQuotas) -> Vec<MetadataRecord> {
    let entities: BTreeSet<&QuotaEntity> =
        before.entries.keys().chain(after.entries.keys()).collect();
    let mut records = Vec::new();
    for entity in entities {
        let old = before.entries.get(entity);
        let new = after.entries.get(entity);
        let keys: BTreeSet<&String> = old
            .into_iter()
            .chain(new)
            .flat_map(|values| values.keys())
            .collect();
        for key in keys {
            let was = old.and_then(|v| v.get(key));
            let is = new.and_then(|v| v.get(key));
            if was != is {
                records.push(client_quota_record(entity, key, is.copied()));
            }
        }
    }
    records
}

/// What an AlterClientQuotas decision answers and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    /// One result per request entry, in order.
    pub results: Vec<Result<(), Refusal>>,
    pub records: Vec<MetadataRecord>,
}

/// AlterClientQuotas (see the module doc).
pub fn alter_client_quotas(
    image: &MetadataImage,
    alterations: &[Alteration],
    validate_only: bool,
) -> QuotaAlteration {
    let current = image.client_quotas();
    let plan = current.plan_alter(alterations);
    let records = client_quota_changes(current, &plan.next);
    if records.len() > MAX_RECORDS_PER_USER_OP {
        let why = format!(
            "cannot change more than {MAX_RECORDS_PER_USER_OP} client quotas in one request"
        );
        return QuotaAlteration {
            results: plan
                .results
                .into_iter()
                .map(|r| r.and(Err(Refusal::invalid(why.clone()))))
                .collect(),
            records: Vec::new(),
        };
    }
    QuotaAlteration {
        results: plan.results,
        records: if validate_only { Vec::new() } else { records },
    }
}

#[cfg(test)]
mod tests {
    use weir_protocol::error_code::ErrorCode;

    use super::*;
    use crate::client_quotas::{
        CONNECTION_CREATION_RATE, EntityType, Op, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
    };

    fn alter(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> Alteration {
        Alteration {
            entity: entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(String::from)))
                .collect(),
            ops: ops
                .iter()
                .map(|(k, v)| Op {
                    key: k.to_string(),
                    value: v.unwrap_or(0.0),
                    remove: v.is_none(),
                })
                .collect(),
        }
    }

    #[test]
    fn changed_keys_become_records_and_replay_to_the_same_quotas() {
        let image = MetadataImage::empty();
        let alice = [("user", Some("alice")), ("client-id", None)];
        let a = alter_client_quotas(
            &image,
            &[
                alter(
                    &alice,
                    &[
                        (PRODUCER_BYTE_RATE, Some(1024.0)),
                        (REQUEST_PERCENTAGE, Some(50.0)),
                    ],
                ),
                alter(&[("user", Some(""))], &[(PRODUCER_BYTE_RATE, Some(1.0))]),
                alter(&[("ip", None)], &[(CONNECTION_CREATION_RATE, Some(10.0))]),
            ],
            false,
        );
        let codes: Vec<ErrorCode> = a
            .results
            .iter()
            .map(|r| r.as_ref().map_or_else(|r| r.code, |_| ErrorCode::None))
            .collect();
        assert_eq!(
            codes,
            [ErrorCode::None, ErrorCode::InvalidRequest, ErrorCode::None]
        );
        let Err(r) = &a.results[1] else {
            unreachable!()
        };
        assert_eq!(r.message, "Empty user not supported");
        assert_eq!(a.records.len(), 3);
        let (image, delta) = image.apply(&a.records).unwrap();
        assert!(delta.client_quotas_changed && !delta.scram_changed);
        assert_eq!(image.client_quotas().entries.len(), 2);
        let planned = ClientQuotas::default()
            .plan_alter(&[
                alter(
                    &alice,
                    &[
                        (PRODUCER_BYTE_RATE, Some(1024.0)),
                        (REQUEST_PERCENTAGE, Some(50.0)),
                    ],
                ),
                alter(&[("ip", None)], &[(CONNECTION_CREATION_RATE, Some(10.0))]),
            ])
            .next;
        assert_eq!(**image.client_quotas(), planned);

        // validate_only: the same answers, nothing written.
        let v = alter_client_quotas(
            &image,
            &[alter(&alice, &[(PRODUCER_BYTE_RATE, Some(2048.0))])],
            true,
        );
        assert!(v.results[0].is_ok() && v.records.is_empty());

        // The same value again, and removing what is not set: nothing written.
        let same = alter_client_quotas(
            &image,
            &[alter(
                &alice,
                &[
                    (PRODUCER_BYTE_RATE, Some(1024.0)),
                    ("consumer_byte_rate", None),
                ],
            )],
            false,
        );
        assert!(same.results[0].is_ok() && same.records.is_empty());

        // Removing both of alice's keys: two remove records, the entity gone.
        let removed = alter_client_quotas(
            &image,
            &[alter(
                &alice,
                &[(PRODUCER_BYTE_RATE, None), (REQUEST_PERCENTAGE, None)],
            )],
            false,
        );
        assert_eq!(removed.records.len(), 2);
        assert!(removed.records.iter().all(|r| matches!(
            r,
            MetadataRecord::ClientQuota(q) if q.remove
        )));
        let (image, delta) = image.apply(&removed.records).unwrap();
        assert!(delta.client_quotas_changed);
        let left: Vec<&QuotaEntity> = image.client_quotas().entries.keys().collect();
        assert_eq!(left.len(), 1);
        assert!(left[0].get(EntityType::Ip).is_some());
    }

    #[test]
    fn the_image_refuses_bad_quota_records() {
        let entity =
            crate::client_quotas::validate_entity(&[("user".into(), Some("a".into()))]).unwrap();
        let image = MetadataImage::empty();
        for bad in [
            client_quota_record(&entity, PRODUCER_BYTE_RATE, Some(-1.0)),
            client_quota_record(&entity, PRODUCER_BYTE_RATE, Some(f64::NAN)),
            client_quota_record(&entity, CONNECTION_CREATION_RATE, Some(1.0)),
            client_quota_record(&QuotaEntity::default(), PRODUCER_BYTE_RATE, Some(1.0)),
        ] {
            assert!(
                matches!(
                    image.apply(std::slice::from_ref(&bad)).unwrap_err(),
                    crate::ApplyError::InvalidClientQuota { .. }
                ),
                "{bad:?}"
            );
        }
    }
}
