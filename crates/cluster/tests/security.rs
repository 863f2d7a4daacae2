//! AlterUserScramCredentials and AlterClientQuotas through the CONTROLLER
//! listener: three nodes, a change sent with a `ControllerClient` is
//! committed once and every node's image holds the same credentials and
//! quotas; off the active controller every user or entry is
//! NOT_CONTROLLER.

use crate::controller_listener::{active, client_config, start_cluster, unfenced};

use weir_client::Connection;
use weir_cluster::{ClusterNode, ControllerClient};
use weir_metadata::client_quotas::ClientQuotas;
use weir_metadata::scram::{ScramCredential, ScramHash, ScramUsers, salted_password};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use weir_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use weir_protocol::messages::{AlterClientQuotasRequest, AlterUserScramCredentialsRequest};

use crate::common::{bounded, wait_for};

fn upsertion(user: &str, password: &str, iterations: i32) -> ScramCredentialUpsertion {
    let salt = format!("salt-{user}").into_bytes();
    ScramCredentialUpsertion {
        name: user.into(),
        mechanism: ScramHash::Sha512.wire_type(),
        iterations,
        salted_password: salted_password(ScramHash::Sha512, password, &salt, 4096).into(),
        salt: salt.into(),
        ..Default::default()
    }
}

fn scram_of(node: &ClusterNode) -> ScramUsers {
    (**node.images().current().image.scram()).clone()
}

fn quotas_of(node: &ClusterNode) -> ClientQuotas {
    (**node.images().current().image.client_quotas()).clone()
}

fn user_quota(user: &str, key: &str, value: Option<f64>) -> EntryData {
    EntryData {
        entity: vec![EntityData {
            entity_type: "user".into(),
            entity_name: Some(user.into()),
            ..Default::default()
        }],
        ops: vec![OpData {
            key: key.into(),
            value: value.unwrap_or(0.0),
            remove: value.is_none(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_quotas_change_through_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let client = ControllerClient::new(voters.clone(), client_config());

    // alice set, bob refused (too few iterations), a missing deletion.
    let req = AlterUserScramCredentialsRequest {
        deletions: vec![ScramCredentialDeletion {
            name: "nobody".into(),
            mechanism: 1,
            ..Default::default()
        }],
        upsertions: vec![
            upsertion("alice", "secret", 4096),
            upsertion("bob", "x", 10),
        ],
        ..Default::default()
    };
    let resp = client.send(&req).await.unwrap();
    let codes: Vec<(&str, ErrorCode)> = resp
        .results
        .iter()
        .map(|r| (r.user.as_str(), ErrorCode::from_code_lossy(r.error_code)))
        .collect();
    assert_eq!(
        codes,
        [
            ("alice", ErrorCode::None),
            ("nobody", ErrorCode::ResourceNotFound),
            ("bob", ErrorCode::UnacceptableCredential)
        ]
    );
    assert_eq!(
        resp.results[2].error_message.as_deref(),
        Some("Too few iterations")
    );
    let want = ScramCredential::from_password(ScramHash::Sha512, "secret", b"salt-alice", 4096);
    wait_for("every image holds alice's credential", || {
        nodes
            .iter()
            .all(|n| scram_of(n).get(ScramHash::Sha512, "alice") == Some(&want))
            .then_some(())
    })
    .await;
    for n in &nodes {
        assert_eq!(scram_of(n).len(), 1, "node {}", n.node_id());
    }

    // A quota, validate_only first (nothing written), then for real.
    let mut quotas = AlterClientQuotasRequest {
        entries: vec![
            user_quota("alice", "producer_byte_rate", Some(1024.0)),
            user_quota("carol", "producer_byte_rate", Some(1.5)),
        ],
        validate_only: true,
        ..Default::default()
    };
    let resp = client.send(&quotas).await.unwrap();
    let codes: Vec<i16> = resp.entries.iter().map(|e| e.error_code).collect();
    assert_eq!(codes, [0, ErrorCode::InvalidRequest.code()]);
    assert_eq!(
        resp.entries[1].error_message.as_deref(),
        Some("Configuration producer_byte_rate must be a Long value")
    );
    quotas.validate_only = false;
    let resp = client.send(&quotas).await.unwrap();
    assert_eq!(resp.entries[0].error_code, 0, "{resp:?}");
    wait_for("every image holds alice's quota", || {
        nodes
            .iter()
            .all(|n| quotas_of(n).entries.len() == 1)
            .then_some(())
    })
    .await;
    // validate_only wrote nothing before: the quota came with the second
    // request; a later topic shows nothing else arrived meanwhile.
    let topic = crate::controller_listener::create("later", 1, 1, false);
    client.send(&topic).await.unwrap();
    wait_for("every image holds the later topic", || {
        nodes
            .iter()
            .all(|n| n.images().current().image.topic_by_name("later").is_some())
            .then_some(())
    })
    .await;
    for n in &nodes {
        let q = quotas_of(n);
        let values: Vec<f64> = q
            .entries
            .values()
            .flat_map(|v| v.values().copied())
            .collect();
        assert_eq!(values, [1024.0], "node {}", n.node_id());
    }

    // Off the active controller: NOT_CONTROLLER for every user and entry.
    let follower = nodes.iter().find(|n| n.node_id() != controller).unwrap();
    let mut conn = bounded(
        "connect",
        Connection::connect(&voters[&follower.node_id()], "test"),
    )
    .await
    .unwrap();
    let resp = conn.send(&req).await.unwrap();
    assert!(
        resp.results
            .iter()
            .all(|r| r.error_code == ErrorCode::NotController.code()),
        "{resp:?}"
    );
    assert_eq!(resp.results.len(), 3);
    let resp = conn.send(&quotas).await.unwrap();
    assert!(
        resp.entries
            .iter()
            .all(|e| e.error_code == ErrorCode::NotController.code()),
        "{resp:?}"
    );

    // Deleting alice's credential and removing her quota.
    let delete = AlterUserScramCredentialsRequest {
        deletions: vec![ScramCredentialDeletion {
            name: "alice".into(),
            mechanism: 2,
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp = client.send(&delete).await.unwrap();
    assert_eq!(resp.results[0].error_code, 0, "{resp:?}");
    let remove = AlterClientQuotasRequest {
        entries: vec![user_quota("alice", "producer_byte_rate", None)],
        ..Default::default()
    };
    let resp = client.send(&remove).await.unwrap();
    assert_eq!(resp.entries[0].error_code, 0, "{resp:?}");
    wait_for("alice's credential and quota are gone everywhere", || {
        nodes
            .iter()
            .all(|n| scram_of(n).is_empty() && quotas_of(n).is_empty())
            .then_some(())
    })
    .await;
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
