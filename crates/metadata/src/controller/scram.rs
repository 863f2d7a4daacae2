//! AlterUserScramCredentials, as Kafka 4's `ScramControlManager` decides
//! it: the request is checked and planned by [`ScramUsers::plan_alter`]
//! (the same code a single node runs, so the codes and messages are the
//! same), and what changed is written as one `UserScramCredentialRecord`
//! per credential set (its keys derived from the SaltedPassword, which is
//! never written) and one `RemoveUserScramCredentialRecord` per credential
//! deleted.
//!
//! - A credential set to exactly what the image holds writes nothing, so
//!   a request sent again after a controller failover changes nothing
//!   twice.
//! - One request writes at most [`MAX_RECORDS_PER_USER_OP`] records; a
//!   larger one is refused whole with INVALID_REQUEST.
//!
//! DescribeUserScramCredentials is not decided here: every broker answers
//! it from its own image with [`ScramUsers::describe`].

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::{
    RemoveUserScramCredentialRecord, UserScramCredentialRecord,
};
use weir_protocol::metadata_record::MetadataRecord;

use super::MAX_RECORDS_PER_USER_OP;
use crate::image::MetadataImage;
use crate::scram::{Deletion, Refusal, ScramCredential, ScramHash, ScramUsers, Upsertion};

/// The `UserScramCredentialRecord` that sets `user`'s credential for
/// `hash`.
pub fn scram_record(user: &str, hash: ScramHash, c: &ScramCredential) -> MetadataRecord {
    MetadataRecord::UserScramCredential(UserScramCredentialRecord {
        name: user.to_string(),
        mechanism: hash.wire_type(),
        salt: c.salt.clone().into(),
        stored_key: c.stored_key.clone().into(),
        server_key: c.server_key.clone().into(),
        // at most MAX_ITERATIONS (ScramCredential::check)
        iterations: i32::try_from(c.iterations).unwrap_or(i32::MAX),
        ..Default::default()
    })
}

/// The records that turn `before` into `after`: removals first, then the
/// credentials set or changed, each by user and mechanism.
pub fn scram_changes(before: &ScramUsers, after: &ScramUsers) -> Vec<MetadataRecord> {
    let mut records: Vec<MetadataRecord> = before
        .iter()
        .filter(|(user, hash, _)| after.get(*hash, user).is_none())
        .map(|(user, hash, _)| {
            MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                name: user.to_string(),
                mechanism: hash.wire_type(),
                ..Default::default()
            })
        })
        .collect();
    records.extend(
        after
            .iter()
            .filter(|(user, hash, c)| before.get(*hash, user) != Some(*c))
            .map(|(user, hash, c)| scram_record(user, hash, c)),
    );
    records
}

/// What an AlterUserScramCredentials decision answers and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScramAlteration {
    /// One result per user named, as [`ScramUsers::plan_alter`] orders
    /// them.
    pub results: Vec<(String, Result<(), Refusal>)>,
    pub records: Vec<MetadataRecord>,
}

/// AlterUserScramCredentials (see the module doc).
pub fn alter_scram_credentials(
    image: &MetadataImage,
    deletions: &[Deletion],
    upsertions: &[Upsertion],
) -> ScramAlteration {
    let current = image.scram();
    let plan = current.plan_alter(deletions, upsertions);
    let records = scram_changes(current, &plan.next);
    if records.len() > MAX_RECORDS_PER_USER_OP {
        let why = format!(
            "cannot change more than {MAX_RECORDS_PER_USER_OP} SCRAM credentials in one request"
        );
        return ScramAlteration {
            results: plan
                .results
                .into_iter()
                .map(|(user, r)| {
                    let r = r.and(Err(Refusal::new(ErrorCode::InvalidRequest, why.clone())));
                    (user, r)
                })
                .collect(),
            records: Vec::new(),
        };
    }
    ScramAlteration {
        results: plan.results,
        records,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::salted_password;

    fn upsert(user: &str, hash: ScramHash, password: &str, iterations: i32) -> Upsertion {
        let salt = format!("salt-of-{user}").into_bytes();
        Upsertion {
            user: user.into(),
            mechanism: hash.wire_type(),
            iterations,
            salted_password: salted_password(hash, password, &salt, 4096.max(iterations as u32)),
            salt,
        }
    }

    fn delete(user: &str, hash: ScramHash) -> Deletion {
        Deletion {
            user: user.into(),
            mechanism: hash.wire_type(),
        }
    }

    fn codes(a: &ScramAlteration) -> Vec<(&str, ErrorCode)> {
        a.results
            .iter()
            .map(|(u, r)| {
                (
                    u.as_str(),
                    r.as_ref().map_or_else(|r| r.code, |_| ErrorCode::None),
                )
            })
            .collect()
    }

    #[test]
    fn upsertions_write_derived_keys_and_deletions_remove_them() {
        let image = MetadataImage::empty();
        let a = alter_scram_credentials(
            &image,
            &[delete("nobody", ScramHash::Sha256)],
            &[
                upsert("alice", ScramHash::Sha512, "pw", 8192),
                upsert("bob", ScramHash::Sha256, "pw", 100),
            ],
        );
        assert_eq!(
            codes(&a),
            [
                ("alice", ErrorCode::None),
                ("nobody", ErrorCode::ResourceNotFound),
                ("bob", ErrorCode::UnacceptableCredential)
            ]
        );
        assert_eq!(a.records.len(), 1);
        let MetadataRecord::UserScramCredential(r) = &a.records[0] else {
            panic!("{:?}", a.records)
        };
        // The record carries StoredKey and ServerKey, as a password gives them.
        let want = ScramCredential::from_password(ScramHash::Sha512, "pw", b"salt-of-alice", 8192);
        assert_eq!(
            (r.name.as_str(), r.mechanism, r.iterations),
            ("alice", 2, 8192)
        );
        assert_eq!(r.stored_key.as_ref(), want.stored_key.as_slice());
        assert_eq!(r.server_key.as_ref(), want.server_key.as_slice());
        assert_eq!(r.salt.as_ref(), b"salt-of-alice");
        let (image, delta) = image.apply(&a.records).unwrap();
        assert!(delta.scram_changed && !delta.acls_changed);
        assert_eq!(image.scram().get(ScramHash::Sha512, "alice"), Some(&want));

        // The same credential again (a retry after a failover): nothing written.
        let again = alter_scram_credentials(
            &image,
            &[],
            &[upsert("alice", ScramHash::Sha512, "pw", 8192)],
        );
        assert_eq!(codes(&again), [("alice", ErrorCode::None)]);
        assert!(again.records.is_empty());
        let (same, delta) = image.apply(&again.records).unwrap();
        assert!(!delta.scram_changed);
        assert!(std::sync::Arc::ptr_eq(same.scram(), image.scram()));

        // A new password for alice, and alice's SHA-512 deleted in another request.
        let changed = alter_scram_credentials(
            &image,
            &[],
            &[upsert("alice", ScramHash::Sha512, "new", 8192)],
        );
        assert_eq!(changed.records.len(), 1);
        let (image, _) = image.apply(&changed.records).unwrap();
        let deleted = alter_scram_credentials(&image, &[delete("alice", ScramHash::Sha512)], &[]);
        assert_eq!(codes(&deleted), [("alice", ErrorCode::None)]);
        assert!(matches!(
            deleted.records.as_slice(),
            [MetadataRecord::RemoveUserScramCredential(r)] if r.name == "alice" && r.mechanism == 2
        ));
        let (image, delta) = image.apply(&deleted.records).unwrap();
        assert!(delta.scram_changed);
        assert!(image.scram().is_empty());

        // Deleting it again: RESOURCE_NOT_FOUND, as on a single node.
        let missing = alter_scram_credentials(&image, &[delete("alice", ScramHash::Sha512)], &[]);
        assert_eq!(codes(&missing), [("alice", ErrorCode::ResourceNotFound)]);
        assert!(missing.records.is_empty());
    }

    #[test]
    fn the_image_refuses_bad_scram_records() {
        let good = ScramCredential::from_password(ScramHash::Sha256, "pw", b"s", 4096);
        let record = |user: &str, mechanism: i8, c: &ScramCredential| {
            let MetadataRecord::UserScramCredential(mut r) =
                scram_record(user, ScramHash::Sha256, c)
            else {
                unreachable!()
            };
            r.mechanism = mechanism;
            MetadataRecord::UserScramCredential(r)
        };
        let image = MetadataImage::empty();
        for bad in [
            record("", 1, &good),
            record("a", 3, &good),
            record("a", 2, &good), // SHA-256 keys under SHA-512
            record(
                "a",
                1,
                &ScramCredential {
                    iterations: 100,
                    ..good.clone()
                },
            ),
        ] {
            assert!(
                matches!(
                    image.apply(std::slice::from_ref(&bad)).unwrap_err(),
                    crate::ApplyError::InvalidScramCredential { .. }
                ),
                "{bad:?}"
            );
        }
        let remove = MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
            name: "a".into(),
            mechanism: 1,
            ..Default::default()
        });
        assert!(matches!(
            image.apply(std::slice::from_ref(&remove)).unwrap_err(),
            crate::ApplyError::UnknownScramCredential { .. }
        ));
        let (image, _) = image.apply(&[record("a", 1, &good)]).unwrap();
        let (image, _) = image.apply(&[remove]).unwrap();
        assert!(image.scram().is_empty());
    }
}
