//! CreateAcls and DeleteAcls, as Kafka 4's `AclControlManager` decides
//! them: each new ACL gets a fresh id and an `AccessControlEntryRecord`,
//! each deleted one a `RemoveAccessControlEntryRecord` naming its id.
//!
//! - An ACL that fails [`AclBinding::validate`] is INVALID_REQUEST with
//!   the reason; the others of the request are created.
//! - An ACL the image already holds (or that the request names twice) is
//!   a success that writes nothing, so a request sent again after a
//!   controller failover creates nothing twice.
//! - A filter deletes every ACL it matches that an earlier filter of the
//!   request did not already delete; each filter's result lists what it
//!   deleted.
//! - One request writes at most [`MAX_RECORDS_PER_USER_OP`] records; a
//!   larger one is refused whole with INVALID_REQUEST.

use std::collections::BTreeSet;

use weir_acl::{AclBinding, AclBindingFilter};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::{AccessControlEntryRecord, RemoveAccessControlEntryRecord};
use weir_protocol::metadata_record::MetadataRecord;

use super::*;
use crate::image::MetadataImage;

/// The `AccessControlEntryRecord` that adds `acl` under `id`.
pub fn acl_record(id: Uuid, acl: &AclBinding) -> MetadataRecord {
    MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
        id,
        resource_type: acl.pattern.resource_type.code(),
        resource_name: acl.pattern.name.clone(),
        pattern_type: acl.pattern.pattern_type.code(),
        principal: acl.entry.principal.clone(),
        host: acl.entry.host.clone(),
        operation: acl.entry.operation.code(),
        permission_type: acl.entry.permission.code(),
        ..Default::default()
    })
}

/// What a CreateAcls decision answers and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct AclCreation {
    /// One result per ACL asked, in order.
    pub results: Vec<Result<(), Rejection>>,
    pub records: Vec<MetadataRecord>,
}

/// What a DeleteAcls decision answers and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct AclDeletion {
    /// Per filter, in order, the ACLs it deleted.
    pub deleted: Vec<Vec<AclBinding>>,
    pub records: Vec<MetadataRecord>,
}

impl Controller {
    /// CreateAcls (see the module doc).
    pub fn create_acls(&mut self, image: &MetadataImage, acls: &[AclBinding]) -> AclCreation {
        if acls.len() > MAX_RECORDS_PER_USER_OP {
            let why =
                format!("cannot create more than {MAX_RECORDS_PER_USER_OP} ACLs in one request");
            return AclCreation {
                results: acls
                    .iter()
                    .map(|_| reject(ErrorCode::InvalidRequest, why.clone()))
                    .collect(),
                records: Vec::new(),
            };
        }
        let mut existing: BTreeSet<&AclBinding> = image.acls().values().collect();
        let mut taken: BTreeSet<Uuid> = BTreeSet::new();
        let mut records = Vec::new();
        let results = acls
            .iter()
            .map(|acl| {
                if let Err(e) = acl.validate() {
                    return reject(ErrorCode::InvalidRequest, e.to_string());
                }
                if existing.insert(acl) {
                    let id = self.new_acl_id(image, &taken);
                    taken.insert(id);
                    records.push(acl_record(id, acl));
                }
                Ok(())
            })
            .collect();
        AclCreation { results, records }
    }

    /// A fresh ACL id: random from the seed, never zero, never in use.
    fn new_acl_id(&mut self, image: &MetadataImage, taken: &BTreeSet<Uuid>) -> Uuid {
        loop {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&self.next_random().to_be_bytes());
            b[8..].copy_from_slice(&self.next_random().to_be_bytes());
            let id = Uuid(b);
            if id != Uuid::ZERO && !image.acls().contains_key(&id) && !taken.contains(&id) {
                return id;
            }
        }
    }
}

/// DeleteAcls (see the module doc).
pub fn delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Result<AclDeletion, Rejection> {
    let mut gone: BTreeSet<Uuid> = BTreeSet::new();
    let mut records = Vec::new();
    let mut deleted = Vec::with_capacity(filters.len());
    for f in filters {
        let mut matched = Vec::new();
        for (id, acl) in image.acls().iter() {
            if f.matches(acl) && gone.insert(*id) {
                records.push(MetadataRecord::RemoveAccessControlEntry(
                    RemoveAccessControlEntryRecord {
                        id: *id,
                        ..Default::default()
                    },
                ));
                matched.push(acl.clone());
            }
        }
        deleted.push(matched);
    }
    if records.len() > MAX_RECORDS_PER_USER_OP {
        return reject(
            ErrorCode::InvalidRequest,
            format!("cannot delete more than {MAX_RECORDS_PER_USER_OP} ACLs in one request"),
        );
    }
    Ok(AclDeletion { deleted, records })
}

#[cfg(test)]
mod tests {
    use weir_acl::{
        AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType,
    };

    use super::*;

    fn acl(principal: &str, topic: &str, permission: Permission) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: topic.into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: Operation::Write,
                permission,
            },
        }
    }

    fn codes(results: &[Result<(), Rejection>]) -> Vec<ErrorCode> {
        results
            .iter()
            .map(|r| r.as_ref().map_or_else(|r| r.code, |_| ErrorCode::None))
            .collect()
    }

    fn with_principal(p: &str) -> AclBindingFilter {
        AclBindingFilter {
            principal: Some(p.into()),
            ..AclBindingFilter::any()
        }
    }

    #[test]
    fn creation_gives_each_new_acl_an_id_once() {
        let mut c = Controller::new(ControllerConfig::default(), 7);
        let image = MetadataImage::empty();
        let alice = acl("User:alice", "t", Permission::Allow);
        let mut bad = acl("alice", "t", Permission::Allow);
        let created = c.create_acls(&image, &[alice.clone(), bad.clone(), alice.clone()]);
        assert_eq!(
            codes(&created.results),
            [ErrorCode::None, ErrorCode::InvalidRequest, ErrorCode::None]
        );
        let Err(r) = &created.results[1] else {
            unreachable!()
        };
        assert!(r.message.contains("Type:name"), "{}", r.message);
        assert_eq!(created.records.len(), 1);
        let (image, delta) = image.apply(&created.records).unwrap();
        assert!(delta.acls_changed);
        let stored: Vec<&AclBinding> = image.acls().values().collect();
        assert_eq!(stored, [&alice]);

        // Asked again (a retry after a failover): nothing new is written.
        let again = c.create_acls(&image, std::slice::from_ref(&alice));
        assert_eq!(codes(&again.results), [ErrorCode::None]);
        assert!(again.records.is_empty());

        // Another ACL gets another id.
        bad.entry.principal = "User:bob".into();
        let bob = c.create_acls(&image, std::slice::from_ref(&bad));
        let (image, _) = image.apply(&bob.records).unwrap();
        assert_eq!(image.acls().len(), 2);
        let ids: BTreeSet<&Uuid> = image.acls().keys().collect();
        assert_eq!(ids.len(), 2);
        assert!(!ids.contains(&Uuid::ZERO));
    }

    #[test]
    fn deletion_removes_by_id_and_reports_under_the_first_filter() {
        let mut c = Controller::new(ControllerConfig::default(), 1);
        let acls = [
            acl("User:alice", "t", Permission::Allow),
            acl("User:alice", "u", Permission::Deny),
            acl("User:bob", "t", Permission::Allow),
        ];
        let created = c.create_acls(&MetadataImage::empty(), &acls);
        let (image, _) = MetadataImage::empty().apply(&created.records).unwrap();
        let by_alice = with_principal("User:alice");
        let denies = AclBindingFilter {
            permission: Permission::Deny,
            ..AclBindingFilter::any()
        };
        let nobody = with_principal("User:carol");
        let deletion = delete_acls(&image, &[by_alice, denies, nobody]).unwrap();
        let counts: Vec<usize> = deletion.deleted.iter().map(Vec::len).collect();
        assert_eq!(counts, [2, 0, 0]);
        assert!(
            deletion
                .records
                .iter()
                .all(|r| matches!(r, MetadataRecord::RemoveAccessControlEntry(_)))
        );
        let (after, delta) = image.apply(&deletion.records).unwrap();
        assert!(delta.acls_changed);
        let left: Vec<&AclBinding> = after.acls().values().collect();
        assert_eq!(left, [&acls[2]]);

        // Nothing matched: nothing written, the ACL map is the same one.
        let none = delete_acls(&after, &[with_principal("User:carol")]).unwrap();
        assert!(none.records.is_empty());
        let (same, delta) = after.apply(&none.records).unwrap();
        assert!(!delta.acls_changed);
        assert!(std::sync::Arc::ptr_eq(same.acls(), after.acls()));
    }

    #[test]
    fn the_image_refuses_bad_acl_records() {
        let good = acl("User:a", "t", Permission::Allow);
        let id = Uuid([9; 16]);
        let (image, _) = MetadataImage::empty()
            .apply(&[acl_record(id, &good)])
            .unwrap();
        assert_eq!(
            image.apply(&[acl_record(id, &good)]).unwrap_err(),
            crate::ApplyError::AclExists(id)
        );
        let remove = |id| {
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                id,
                ..Default::default()
            })
        };
        assert_eq!(
            image.apply(&[remove(Uuid([8; 16]))]).unwrap_err(),
            crate::ApplyError::UnknownAcl(Uuid([8; 16]))
        );
        let mut bad = acl_record(Uuid([7; 16]), &good);
        if let MetadataRecord::AccessControlEntry(r) = &mut bad {
            r.operation = 1; // ANY: only in filters
        }
        assert!(matches!(
            image.apply(&[bad]).unwrap_err(),
            crate::ApplyError::InvalidAcl { .. }
        ));
    }

    #[test]
    fn oversized_requests_are_refused_whole() {
        let mut c = Controller::new(ControllerConfig::default(), 1);
        let many: Vec<AclBinding> = (0..=MAX_RECORDS_PER_USER_OP)
            .map(|i| acl(&format!("User:u{i}"), "t", Permission::Allow))
            .collect();
        let created = c.create_acls(&MetadataImage::empty(), &many);
        assert!(created.records.is_empty());
        assert!(
            codes(&created.results)
                .iter()
                .all(|c| *c == ErrorCode::InvalidRequest)
        );
    }
}
