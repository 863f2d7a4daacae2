//! ACL enforcement in every API, with Kafka's StandardAuthorizer on a
//! SASL_PLAINTEXT listener (PLAIN users alice, bob and the super user
//! admin): for each API, alice without the ACL gets Kafka's error and,
//! once the ACLs are granted, no authorization error; prefixed ACLs; a
//! DENY beats an ALLOW; the super user needs no ACL; Metadata, ListGroups
//! and ListTransactions leave out what the client may not DESCRIBE; the
//! authorized-operations fields follow the principal.

use crate::common::*;
use weir_acl::{
    AccessControlEntry, AclBinding, Operation, PatternType, Permission, ResourcePattern,
    ResourceType,
};

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_admin=\"admin-secret\" user_alice=\"alice-secret\" user_bob=\"bob-secret\";";

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const AUTHORIZATION_ERRORS: [i16; 4] = [
    TOPIC_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
];

async fn start_secured(dir: &std::path::Path) -> RunningBroker {
    let mut s = ConfigSources::default();
    s.set("log.dirs", &dir.display().to_string());
    s.set("http.listeners", "");
    s.set("listeners", "SASL_PLAINTEXT://127.0.0.1:0");
    s.set("sasl.enabled.mechanisms", "PLAIN");
    s.set("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS);
    s.set(
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    );
    s.set("super.users", "User:admin");
    s.set("allow.everyone.if.no.acl.found", "false");
    start(s.build().unwrap()).await.unwrap()
}

/// A client of the SASL_PLAINTEXT listener, logged in as `user`.
async fn login(b: &RunningBroker, user: &str) -> Client {
    let addr = b.listener_addr("SASL_PLAINTEXT").unwrap();
    let mut c = Client::connect(addr).await;
    let ResponseBody::SaslHandshake(h) = c
        .call(
            RequestBody::SaslHandshake(SaslHandshakeRequest {
                mechanism: "PLAIN".into(),
                ..Default::default()
            }),
            1,
        )
        .await
    else {
        panic!("not a SaslHandshake response")
    };
    assert_eq!(h.error_code, 0);
    let token = format!("\0{user}\0{user}-secret");
    let ResponseBody::SaslAuthenticate(r) = c
        .call(
            RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
                auth_bytes: Bytes::from(token.into_bytes()),
                ..Default::default()
            }),
            2,
        )
        .await
    else {
        panic!("not a SaslAuthenticate response")
    };
    assert_eq!(r.error_code, 0, "{user} logs in");
    c
}

fn binding(
    principal: &str,
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    op: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: rt,
            name: name.to_string(),
            pattern_type: pattern,
        },
        entry: AccessControlEntry {
            principal: principal.to_string(),
            host: "*".to_string(),
            operation: op,
            permission,
        },
    }
}

fn grant(b: &RunningBroker, acls: Vec<AclBinding>) {
    for r in b.broker.acls.create(acls) {
        r.unwrap();
    }
}

fn allow(b: &RunningBroker, user: &str, rt: ResourceType, name: &str, op: Operation) {
    grant(
        b,
        vec![binding(
            &format!("User:{user}"),
            rt,
            name,
            PatternType::Literal,
            op,
            Permission::Allow,
        )],
    );
}

fn codes(body: &ResponseBody) -> Vec<i16> {
    let mut out = Vec::new();
    body.for_each_error_code(&mut |c| out.push(c));
    // named `partition_error_code`, which the walk does not visit
    if let ResponseBody::AddPartitionsToTxn(r) = body {
        for t in &r.results_by_topic_v3_and_below {
            out.extend(
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code),
            );
        }
    }
    out
}

fn max_version(key: ApiKey) -> i16 {
    weir_broker::handler::supported_range(key).unwrap().1
}

/// The broker with topic `t` (made by the super user); its id.
async fn secured_with_topic(dir: &std::path::Path) -> (RunningBroker, Uuid) {
    let b = start_secured(dir).await;
    let mut admin = login(&b, "admin").await;
    assert_eq!(create_topic(&mut admin, "t", 1, &[]).await, NONE);
    let m = metadata(&mut admin, Some(vec!["t"]), false).await;
    let id = m.topics[0].topic_id;
    // something to read and a committed offset for the group APIs
    produce(&mut admin, "t", 0, batch(&["a"], 0), 1).await;
    (b, id)
}

/// One API of the matrix: the request alice sends, the error she gets
/// without ACLs, and the ACLs that make it pass.
struct Case {
    key: ApiKey,
    version: i16,
    refused: i16,
    grants: Vec<(ResourceType, &'static str, Operation)>,
}

fn case(key: ApiKey, refused: i16, grants: Vec<(ResourceType, &'static str, Operation)>) -> Case {
    Case {
        key,
        version: max_version(key),
        refused,
        grants,
    }
}

fn matrix() -> Vec<Case> {
    use Operation::*;
    use ResourceType::{Cluster, Group, Topic, TransactionalId as Txn};
    const C: &str = "kafka-cluster";
    vec![
        case(
            ApiKey::Produce,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Write)],
        ),
        case(
            ApiKey::Fetch,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Read)],
        ),
        case(
            ApiKey::ListOffsets,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Describe)],
        ),
        case(
            ApiKey::Metadata,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Describe)],
        ),
        case(
            ApiKey::OffsetForLeaderEpoch,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Describe)],
        ),
        case(
            ApiKey::DeleteRecords,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Delete)],
        ),
        case(
            ApiKey::CreatePartitions,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", Alter)],
        ),
        case(
            ApiKey::DescribeConfigs,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", DescribeConfigs)],
        ),
        case(
            ApiKey::AlterConfigs,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", AlterConfigs)],
        ),
        case(
            ApiKey::IncrementalAlterConfigs,
            TOPIC_AUTHORIZATION_FAILED,
            vec![(Topic, "t", AlterConfigs)],
        ),
        case(
            ApiKey::InitProducerId,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, IdempotentWrite)],
        ),
        case(
            ApiKey::DescribeLogDirs,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Describe)],
        ),
        case(
            ApiKey::AlterUserScramCredentials,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Alter)],
        ),
        case(
            ApiKey::DescribeUserScramCredentials,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Describe)],
        ),
        case(
            ApiKey::AlterClientQuotas,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, AlterConfigs)],
        ),
        case(
            ApiKey::DescribeClientQuotas,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, DescribeConfigs)],
        ),
        case(
            ApiKey::CreateAcls,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Alter)],
        ),
        case(
            ApiKey::DescribeAcls,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Describe)],
        ),
        case(
            ApiKey::DeleteAcls,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Alter)],
        ),
        case(
            ApiKey::ElectLeaders,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Alter)],
        ),
        case(
            ApiKey::AlterPartitionReassignments,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Alter)],
        ),
        case(
            ApiKey::ListPartitionReassignments,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, Describe)],
        ),
        case(
            ApiKey::WriteTxnMarkers,
            CLUSTER_AUTHORIZATION_FAILED,
            vec![(Cluster, C, ClusterAction)],
        ),
        case(
            ApiKey::FindCoordinator,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Describe)],
        ),
        case(
            ApiKey::JoinGroup,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Read)],
        ),
        case(
            ApiKey::SyncGroup,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Read)],
        ),
        case(
            ApiKey::Heartbeat,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Read)],
        ),
        case(
            ApiKey::LeaveGroup,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Read)],
        ),
        case(
            ApiKey::OffsetCommit,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Read), (Topic, "t", Read)],
        ),
        case(
            ApiKey::OffsetFetch,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Describe), (Topic, "t", Describe)],
        ),
        case(
            ApiKey::DescribeGroups,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Describe)],
        ),
        case(
            ApiKey::DeleteGroups,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "absent-1", Delete)],
        ),
        case(
            ApiKey::OffsetDelete,
            GROUP_AUTHORIZATION_FAILED,
            vec![(Group, "g", Delete), (Topic, "t", Read)],
        ),
        case(
            ApiKey::TxnOffsetCommit,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            vec![
                (Txn, "txn-1", Write),
                (Group, "txn-g-1", Read),
                (Topic, "t", Read),
            ],
        ),
        Case {
            // the client form; v4+ is broker to broker
            version: 3,
            ..case(
                ApiKey::AddPartitionsToTxn,
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                vec![(Txn, "txn-1", Write), (Topic, "t", Write)],
            )
        },
        case(
            ApiKey::AddOffsetsToTxn,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            vec![(Txn, "txn-1", Write), (Group, "txn-g-1", Read)],
        ),
        case(
            ApiKey::EndTxn,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            vec![(Txn, "txn-1", Write)],
        ),
        case(
            ApiKey::DescribeTransactions,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            vec![(Txn, "txn-1", Describe)],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_api_refuses_without_its_acl_and_passes_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (b, id) = secured_with_topic(dir.path()).await;
    let mut alice = login(&b, "alice").await;
    let mut failures = Vec::new();
    for c in matrix() {
        let req = || request_for(c.key, c.version, "t", id, 1);
        let before = codes(&alice.call(req(), c.version).await);
        if !before.contains(&c.refused) {
            failures.push(format!(
                "{:?} v{} without ACLs: {:?}, expected {} among them",
                c.key, c.version, before, c.refused
            ));
        }
        for (rt, name, op) in &c.grants {
            allow(&b, "alice", *rt, name, *op);
        }
        let after = codes(&alice.call(req(), c.version).await);
        if after.iter().any(|e| AUTHORIZATION_ERRORS.contains(e)) {
            failures.push(format!(
                "{:?} v{} with {:?}: {:?}",
                c.key, c.version, c.grants, after
            ));
        }
        // the next case starts from no ACLs for alice
        let filter = weir_acl::AclBindingFilter {
            principal: Some("User:alice".into()),
            ..weir_acl::AclBindingFilter::any()
        };
        b.broker.acls.delete(&[filter]).unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produce_is_refused_then_appended_once_write_is_granted() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = secured_with_topic(dir.path()).await;
    let mut alice = login(&b, "alice").await;
    let r = produce(&mut alice, "t", 0, batch(&["x"], 0), 1).await;
    assert_eq!(r.0, TOPIC_AUTHORIZATION_FAILED);
    // an unknown topic is refused the same way: its absence is not told
    let r = produce(&mut alice, "nowhere", 0, batch(&["x"], 0), 1).await;
    assert_eq!(r.0, TOPIC_AUTHORIZATION_FAILED);
    allow(&b, "alice", ResourceType::Topic, "t", Operation::Write);
    let r = produce(&mut alice, "t", 0, batch(&["x"], 0), 1).await;
    assert_eq!(r, (NONE, 1));
    // bob has no ACL: still refused
    let mut bob = login(&b, "bob").await;
    let r = produce(&mut bob, "t", 0, batch(&["x"], 0), 1).await;
    assert_eq!(r.0, TOPIC_AUTHORIZATION_FAILED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefixed_acls_deny_over_allow_and_the_super_user() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = secured_with_topic(dir.path()).await;
    let mut admin = login(&b, "admin").await;
    for t in ["orders-eu", "orders-us", "payments"] {
        assert_eq!(create_topic(&mut admin, t, 1, &[]).await, NONE);
    }
    let mut alice = login(&b, "alice").await;
    // WRITE on every topic starting with "orders-"
    grant(
        &b,
        vec![binding(
            "User:alice",
            ResourceType::Topic,
            "orders-",
            PatternType::Prefixed,
            Operation::Write,
            Permission::Allow,
        )],
    );
    assert_eq!(
        produce(&mut alice, "orders-eu", 0, batch(&["x"], 0), 1)
            .await
            .0,
        NONE
    );
    assert_eq!(
        produce(&mut alice, "orders-us", 0, batch(&["x"], 0), 1)
            .await
            .0,
        NONE
    );
    assert_eq!(
        produce(&mut alice, "payments", 0, batch(&["x"], 0), 1)
            .await
            .0,
        TOPIC_AUTHORIZATION_FAILED
    );
    // a literal DENY on one of them wins over the prefixed ALLOW
    grant(
        &b,
        vec![binding(
            "User:alice",
            ResourceType::Topic,
            "orders-us",
            PatternType::Literal,
            Operation::Write,
            Permission::Deny,
        )],
    );
    assert_eq!(
        produce(&mut alice, "orders-us", 0, batch(&["x"], 0), 1)
            .await
            .0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce(&mut alice, "orders-eu", 0, batch(&["x"], 0), 1)
            .await
            .0,
        NONE
    );
    // a DENY for everyone does not bind the super user, who needs no ACL
    grant(
        &b,
        vec![binding(
            "User:*",
            ResourceType::Topic,
            "payments",
            PatternType::Literal,
            Operation::All,
            Permission::Deny,
        )],
    );
    assert_eq!(
        produce(&mut admin, "payments", 0, batch(&["x"], 0), 1)
            .await
            .0,
        NONE
    );
    let ResponseBody::DescribeLogDirs(d) = admin
        .call(
            request_for(ApiKey::DescribeLogDirs, 4, "t", Uuid::ZERO, 1),
            4,
        )
        .await
    else {
        panic!()
    };
    assert_eq!(d.error_code, NONE);
    // implied operations: READ brings DESCRIBE
    allow(&b, "alice", ResourceType::Topic, "t", Operation::Read);
    assert_eq!(list_offset(&mut alice, "t", -1).await.0, NONE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_leave_out_what_the_client_may_not_describe() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _) = secured_with_topic(dir.path()).await;
    let mut admin = login(&b, "admin").await;
    assert_eq!(create_topic(&mut admin, "visible", 1, &[]).await, NONE);
    let mut alice = login(&b, "alice").await;
    allow(
        &b,
        "alice",
        ResourceType::Topic,
        "visible",
        Operation::Describe,
    );
    // all topics: only the describable one, no error for the others
    let m = metadata(&mut alice, None, false).await;
    let names: Vec<_> = m.topics.iter().filter_map(|t| t.name.clone()).collect();
    assert_eq!(names, ["visible"]);
    // named: refused whether it exists or not, without its id
    let m = metadata(&mut alice, Some(vec!["t", "nowhere"]), false).await;
    for t in &m.topics {
        assert_eq!(t.error_code, TOPIC_AUTHORIZATION_FAILED, "{:?}", t.name);
        assert_eq!(t.topic_id, Uuid::ZERO);
        assert!(t.partitions.is_empty());
    }
    // auto-creation needs CREATE: DESCRIBE alone is not enough
    allow(
        &b,
        "alice",
        ResourceType::Topic,
        "auto",
        Operation::Describe,
    );
    let m = metadata(&mut alice, Some(vec!["auto"]), true).await;
    assert_eq!(m.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    allow(&b, "alice", ResourceType::Topic, "auto", Operation::Create);
    let m = metadata(&mut alice, Some(vec!["auto"]), true).await;
    assert!(
        !AUTHORIZATION_ERRORS.contains(&m.topics[0].error_code),
        "{m:?}"
    );
    assert!(b.broker.topic("auto").is_some());

    // the authorized operations follow the principal
    let req = MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some("visible".into()),
            ..Default::default()
        }]),
        include_cluster_authorized_operations: true,
        include_topic_authorized_operations: true,
        ..Default::default()
    };
    let ResponseBody::Metadata(m) = alice.call(RequestBody::Metadata(req.clone()), 10).await else {
        panic!()
    };
    assert_eq!(m.topics[0].topic_authorized_operations, 1 << 8, "DESCRIBE");
    assert_eq!(
        m.cluster_authorized_operations, 0,
        "no DESCRIBE on the cluster"
    );
    let ResponseBody::Metadata(m) = admin.call(RequestBody::Metadata(req), 10).await else {
        panic!()
    };
    assert_eq!(m.topics[0].topic_authorized_operations, 3576);
    assert_eq!(m.cluster_authorized_operations, 8096);

    // ListGroups: only the groups alice may describe, unless DESCRIBE on
    // the cluster
    for g in ["g-seen", "g-hidden"] {
        let join = JoinGroupRequest {
            group_id: g.into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::new(),
                ..Default::default()
            }],
            ..Default::default()
        };
        // v3: joined at once, without the member-id round trip
        let ResponseBody::JoinGroup(j) = admin.call(RequestBody::JoinGroup(join), 3).await else {
            panic!()
        };
        assert_eq!(j.error_code, NONE, "{g}");
    }
    allow(
        &b,
        "alice",
        ResourceType::Group,
        "g-seen",
        Operation::Describe,
    );
    let ResponseBody::ListGroups(l) = alice
        .call(RequestBody::ListGroups(Default::default()), 5)
        .await
    else {
        panic!()
    };
    let groups: Vec<_> = l.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(groups, ["g-seen"]);
    allow(
        &b,
        "alice",
        ResourceType::Cluster,
        "kafka-cluster",
        Operation::Describe,
    );
    let ResponseBody::ListGroups(l) = alice
        .call(RequestBody::ListGroups(Default::default()), 5)
        .await
    else {
        panic!()
    };
    assert_eq!(l.groups.len(), 2);
}

/// A broker whose only listener is SASL, with ACLs: alice's transaction
/// completes (its markers are written by the broker itself, not refused at
/// the SASL listener or by the ACLs) and the last stable offset moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_commits_on_a_sasl_only_broker_with_acls() {
    use crate::transactions::{
        add_partitions, end_txn, init_txn, latest, produce_txn, txn_batch, wait_for_state,
    };
    let dir = tempfile::tempdir().unwrap();
    let b = start_secured(dir.path()).await;
    let mut admin = login(&b, "admin").await;
    assert_eq!(create_topic(&mut admin, "t", 1, &[]).await, NONE);
    allow(
        &b,
        "alice",
        ResourceType::TransactionalId,
        "tx",
        Operation::Write,
    );
    allow(
        &b,
        "alice",
        ResourceType::TransactionalId,
        "tx",
        Operation::Describe,
    );
    allow(&b, "alice", ResourceType::Topic, "t", Operation::Write);
    allow(&b, "alice", ResourceType::Topic, "t", Operation::Read);
    let mut alice = login(&b, "alice").await;
    let (code, pid, epoch) = init_txn(&mut alice, "tx", 60_000).await;
    assert_eq!(code, NONE);
    let r = add_partitions(&mut alice, "tx", (pid, epoch), &[("t", 0)], 3).await;
    assert!(r.iter().all(|x| x.2 == NONE), "{r:?}");
    assert_eq!(
        produce_txn(&mut alice, "tx", "t", 0, txn_batch(pid, epoch, 0, "a")).await,
        NONE
    );
    assert_eq!(end_txn(&mut alice, "tx", (pid, epoch), true).await, NONE);
    wait_for_state(&mut alice, "tx", &["CompleteCommit"]).await;
    assert_eq!(latest(&mut alice, "t", 0, true).await, 2, "the LSO moved");
}
