//! CreateAcls and DeleteAcls through the CONTROLLER listener: three nodes,
//! the change sent with a `ControllerClient` is committed once and every
//! node's image holds the same ACLs with the same ids.

use crate::controller_listener::{active, client_config, start_cluster, unfenced};

use std::collections::BTreeMap;

use weir_client::Connection;
use weir_cluster::{ClusterNode, ControllerClient};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_request::AclCreation;
use weir_protocol::messages::delete_acls_request::DeleteAclsFilter;
use weir_protocol::messages::{CreateAclsRequest, DeleteAclsRequest};

use crate::common::{bounded, wait_for};

/// TOPIC, LITERAL, WRITE, DENY for `principal` on topic `name`.
fn deny_write(principal: &str, name: &str) -> AclCreation {
    AclCreation {
        resource_type: 2,
        resource_name: name.into(),
        resource_pattern_type: 3,
        principal: principal.into(),
        host: "*".into(),
        operation: 4,
        permission_type: 2,
        ..Default::default()
    }
}

fn acls_of(node: &ClusterNode) -> BTreeMap<Uuid, weir_acl::AclBinding> {
    (**node.images().current().image.acls()).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_change_through_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let client = ControllerClient::new(voters.clone(), client_config());

    // Two valid ACLs, one named twice, and one with a bad principal.
    let mut bad = deny_write("alice", "t");
    bad.principal = "alice".into();
    let req = CreateAclsRequest {
        creations: vec![
            deny_write("User:alice", "t"),
            bad,
            deny_write("User:bob", "t"),
            deny_write("User:alice", "t"),
        ],
        ..Default::default()
    };
    let resp = client.send(&req).await.unwrap();
    let codes: Vec<ErrorCode> = resp
        .results
        .iter()
        .map(|r| ErrorCode::from_code_lossy(r.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ErrorCode::None,
            ErrorCode::InvalidRequest,
            ErrorCode::None,
            ErrorCode::None
        ]
    );
    let want = wait_for("every image holds two ACLs", || {
        let first = acls_of(&nodes[0]);
        (first.len() == 2 && nodes.iter().all(|n| acls_of(n) == first)).then_some(first)
    })
    .await;

    // Sent again (as after a failover): a success that adds nothing.
    let resp = client.send(&req).await.unwrap();
    assert_eq!(resp.results[0].error_code, 0);
    let topic = crate::controller_listener::create("later", 1, 1, false);
    let resp = client.send(&topic).await.unwrap();
    assert_eq!(
        crate::controller_listener::only_error(&resp),
        ErrorCode::None
    );
    wait_for("every image holds the later topic", || {
        nodes
            .iter()
            .all(|n| n.images().current().image.topic_by_name("later").is_some())
            .then_some(())
    })
    .await;
    for n in &nodes {
        assert_eq!(acls_of(n), want, "node {}", n.node_id());
    }

    // Off the active controller: NOT_CONTROLLER for every ACL.
    let follower = nodes.iter().find(|n| n.node_id() != controller).unwrap();
    let mut conn = bounded(
        "connect",
        Connection::connect(&voters[&follower.node_id()], "test"),
    )
    .await
    .unwrap();
    let resp = conn.send(&req).await.unwrap();
    let codes: Vec<ErrorCode> = resp
        .results
        .iter()
        .map(|r| ErrorCode::from_code_lossy(r.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ErrorCode::NotController,
            ErrorCode::InvalidRequest,
            ErrorCode::NotController,
            ErrorCode::NotController
        ]
    );

    // DeleteAcls: bob's ACL by principal; a filter with an unknown code is
    // INVALID_REQUEST.
    let delete = DeleteAclsRequest {
        filters: vec![
            DeleteAclsFilter {
                resource_type_filter: 1,
                pattern_type_filter: 1,
                resource_name_filter: None,
                principal_filter: Some("User:bob".into()),
                host_filter: None,
                operation: 1,
                permission_type: 1,
                ..Default::default()
            },
            DeleteAclsFilter {
                resource_type_filter: 0,
                pattern_type_filter: 1,
                operation: 1,
                permission_type: 1,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let resp = client.send(&delete).await.unwrap();
    assert_eq!(resp.filter_results[0].error_code, 0, "{resp:?}");
    assert_eq!(resp.filter_results[0].matching_acls.len(), 1, "{resp:?}");
    assert_eq!(
        resp.filter_results[0].matching_acls[0].principal,
        "User:bob"
    );
    assert_eq!(
        resp.filter_results[1].error_code,
        ErrorCode::InvalidRequest.code()
    );
    wait_for("bob's ACL is gone everywhere", || {
        nodes
            .iter()
            .all(|n| {
                let acls = acls_of(n);
                acls.len() == 1 && acls.values().all(|a| a.entry.principal == "User:alice")
            })
            .then_some(())
    })
    .await;
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
