//! ACLs in a three-node cluster: they live in the metadata log, so an ACL
//! created through one broker is enforced by every broker and survives a
//! kill -9 of every node.
//!
//! The cluster's client listeners are PLAINTEXT, so clients are
//! `User:ANONYMOUS`: the nodes run Kafka's StandardAuthorizer with
//! `allow.everyone.if.no.acl.found=true`, and the ACL under test is a DENY
//! of WRITE on one topic. Each broker is asked on its own with weir-client
//! (a client library would pick the broker itself).

use std::time::Duration;

use weir_client::Connection;
use weir_compat_tests::cluster::{FAST_FAILOVER, WeirCluster};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_request::AclCreation;
use weir_protocol::messages::delete_acls_request::DeleteAclsFilter;
use weir_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use weir_protocol::messages::{
    CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, ProduceRequest,
};
use weir_protocol::records::{Compression, RecordBatchBuilder};

use crate::cluster::{ALL, READY, create_topic, runtime, wait_settled, wait_until};

const DENIED: &str = "acl-denied";
const OPEN: &str = "acl-open";
/// A committed change reaching every node.
const SPREAD: Duration = Duration::from_secs(30);

const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const ANY: i8 = 1;
const WRITE: i8 = 4;
const DENY: i8 = 2;

fn bootstrap_of(cluster: &WeirCluster, id: i32) -> String {
    cluster.nodes[(id - 1) as usize].bootstrap().to_string()
}

/// The error code of a one-record acks=1 produce to partition 0 of
/// `topic` on node `id`.
fn produce_on(cluster: &WeirCluster, id: i32, topic: &str) -> Result<ErrorCode, String> {
    let mut batch = RecordBatchBuilder::new(Compression::None);
    batch
        .push(0, None, Some(bytes::Bytes::from_static(b"v")), vec![])
        .map_err(|e| e.to_string())?;
    let req = ProduceRequest {
        acks: 1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.to_string(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch.build().map_err(|e| e.to_string())?.as_bytes().clone()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let addr = bootstrap_of(cluster, id);
    runtime().block_on(async {
        let mut conn = Connection::connect(&addr, "weir-compat-acls")
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let resp = conn.send(&req).await.map_err(|e| format!("produce: {e}"))?;
        resp.responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .map(|p| ErrorCode::from_code_lossy(p.error_code))
            .ok_or_else(|| "no partition in the answer".to_string())
    })
}

/// Produces to `topic` through every node: `denied` means every node
/// answers TOPIC_AUTHORIZATION_FAILED; otherwise none does (the leader
/// appends, the others answer NOT_LEADER_OR_FOLLOWER).
fn enforced_everywhere(cluster: &WeirCluster, topic: &str, denied: bool) -> Result<(), String> {
    let mut appended = false;
    for id in ALL {
        let code = produce_on(cluster, id, topic)?;
        let refused = code == ErrorCode::TopicAuthorizationFailed;
        if refused != denied {
            return Err(format!("node {id} answered {code:?} for {topic}"));
        }
        if !denied {
            match code {
                ErrorCode::None => appended = true,
                ErrorCode::NotLeaderOrFollower => {}
                other => return Err(format!("node {id} answered {other:?} for {topic}")),
            }
        }
    }
    if denied || appended {
        Ok(())
    } else {
        Err(format!("no node appended to {topic}"))
    }
}

/// (principal, operation, permission) of every ACL node `id` describes.
fn described_on(cluster: &WeirCluster, id: i32) -> Result<Vec<(String, i8, i8)>, String> {
    let req = DescribeAclsRequest {
        resource_type_filter: ANY,
        resource_name_filter: None,
        pattern_type_filter: ANY,
        principal_filter: None,
        host_filter: None,
        operation: ANY,
        permission_type: ANY,
        ..Default::default()
    };
    let addr = bootstrap_of(cluster, id);
    runtime().block_on(async {
        let mut conn = Connection::connect(&addr, "weir-compat-acls")
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let resp = conn.send(&req).await.map_err(|e| e.to_string())?;
        if resp.error_code != 0 {
            return Err(format!("DescribeAcls: {:?}", resp.error_message));
        }
        Ok(resp
            .resources
            .iter()
            .flat_map(|r| &r.acls)
            .map(|a| (a.principal.clone(), a.operation, a.permission_type))
            .collect())
    })
}

#[test]
fn an_acl_created_on_one_broker_is_enforced_by_all_and_survives_a_restart() {
    let mut settings = FAST_FAILOVER.to_vec();
    settings.extend([
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("allow.everyone.if.no.acl.found", "true"),
    ]);
    let mut cluster = WeirCluster::start(ALL.len(), &settings)
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    wait_settled(&cluster, &ALL, READY);
    for topic in [DENIED, OPEN] {
        create_topic(&cluster.bootstrap(), topic, 1, 3)
            .unwrap_or_else(|e| panic!("create {topic}: {e:?}"));
    }
    wait_until(&cluster, "every node lets anyone write", SPREAD, || {
        enforced_everywhere(&cluster, DENIED, false)
    });

    // The DENY, created through node 1: enforced there as soon as it is
    // answered, and by the others once their images have it.
    let create = CreateAclsRequest {
        creations: vec![AclCreation {
            resource_type: TOPIC,
            resource_name: DENIED.into(),
            resource_pattern_type: LITERAL,
            principal: "User:ANONYMOUS".into(),
            host: "*".into(),
            operation: WRITE,
            permission_type: DENY,
            ..Default::default()
        }],
        ..Default::default()
    };
    let addr = bootstrap_of(&cluster, 1);
    let resp = runtime().block_on(async {
        let mut conn = Connection::connect(&addr, "weir-compat-acls")
            .await
            .unwrap();
        conn.send(&create).await.unwrap()
    });
    assert_eq!(resp.results.len(), 1);
    assert_eq!(resp.results[0].error_code, 0, "{resp:?}");
    assert_eq!(
        produce_on(&cluster, 1, DENIED),
        Ok(ErrorCode::TopicAuthorizationFailed)
    );
    wait_until(&cluster, "every node denies the write", SPREAD, || {
        enforced_everywhere(&cluster, DENIED, true)
    });
    enforced_everywhere(&cluster, OPEN, false).unwrap();
    let want = vec![("User:ANONYMOUS".to_string(), WRITE, DENY)];
    for id in ALL {
        assert_eq!(described_on(&cluster, id), Ok(want.clone()), "node {id}");
    }

    // Every node killed, then started again on its data dir.
    for id in ALL {
        cluster.node(id).kill_hard().expect("kill");
    }
    for id in ALL {
        cluster.node(id).restart().expect("restart");
    }
    wait_settled(&cluster, &ALL, READY);
    wait_until(
        &cluster,
        "every node denies the write after the restart",
        SPREAD,
        || {
            enforced_everywhere(&cluster, DENIED, true)?;
            enforced_everywhere(&cluster, OPEN, false)
        },
    );
    for id in ALL {
        assert_eq!(described_on(&cluster, id), Ok(want.clone()), "node {id}");
    }

    // Deleted through node 2: every node lets the write in again.
    let delete = DeleteAclsRequest {
        filters: vec![DeleteAclsFilter {
            resource_type_filter: TOPIC,
            resource_name_filter: Some(DENIED.into()),
            pattern_type_filter: ANY,
            principal_filter: None,
            host_filter: None,
            operation: ANY,
            permission_type: ANY,
            ..Default::default()
        }],
        ..Default::default()
    };
    let addr = bootstrap_of(&cluster, 2);
    let resp = runtime().block_on(async {
        let mut conn = Connection::connect(&addr, "weir-compat-acls")
            .await
            .unwrap();
        conn.send(&delete).await.unwrap()
    });
    assert_eq!(resp.filter_results[0].error_code, 0, "{resp:?}");
    assert_eq!(resp.filter_results[0].matching_acls.len(), 1, "{resp:?}");
    wait_until(
        &cluster,
        "every node lets anyone write again",
        SPREAD,
        || enforced_everywhere(&cluster, DENIED, false),
    );
    for id in ALL {
        assert_eq!(described_on(&cluster, id), Ok(vec![]), "node {id}");
    }
}
