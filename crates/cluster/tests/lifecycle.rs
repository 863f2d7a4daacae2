//! Broker lifecycle and controller request edges over the CONTROLLER
//! listener: refused registrations, NOT_CONTROLLER off the leader,
//! re-registration after a stale epoch, controlled shutdown.

use crate::common;
use crate::controller_listener::{
    CLUSTER_ID, active, client_config, create, only_error, start_cluster, unfenced,
};

use std::sync::Arc;
use std::time::Duration;

use common::{bounded, wait_for};
use weir_client::Connection;
use weir_cluster::{BrokerInfo, BrokerLifecycle, ControllerClient, LifecycleConfig};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use weir_protocol::messages::delete_topics_request::DeleteTopicState;
use weir_protocol::messages::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, ControlledShutdownRequest,
    CreateTopicsRequest, DeleteTopicsRequest, DescribeQuorumRequest,
};

fn registration(id: i32, incarnation: u8, cluster_id: &str) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id: id,
        cluster_id: cluster_id.into(),
        incarnation_id: Uuid([incarnation; 16]),
        rack: None,
        ..Default::default()
    }
}

fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code_lossy(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_refusals_and_not_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let client = ControllerClient::new(voters.clone(), client_config());

    let r = client
        .send(&registration(9, 9, "other-cluster"))
        .await
        .unwrap();
    assert_eq!(code(r.error_code), ErrorCode::InconsistentClusterId);
    // Broker 1 is alive with another incarnation.
    let r = client
        .send(&registration(1, 0xee, CLUSTER_ID))
        .await
        .unwrap();
    assert_eq!(code(r.error_code), ErrorCode::DuplicateBrokerRegistration);
    let r = client
        .send(&BrokerHeartbeatRequest {
            broker_id: 42,
            broker_epoch: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(code(r.error_code), ErrorCode::BrokerIdNotRegistered);

    // Every request kind on a node that is not the controller.
    let follower = voters.keys().copied().find(|id| *id != controller).unwrap();
    let mut conn = bounded("connect", Connection::connect(&voters[&follower], "test"))
        .await
        .unwrap();
    let r = conn.send(&registration(9, 9, CLUSTER_ID)).await.unwrap();
    assert_eq!(code(r.error_code), ErrorCode::NotController);
    let r = conn
        .send(&BrokerHeartbeatRequest {
            broker_id: 1,
            broker_epoch: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(code(r.error_code), ErrorCode::NotController);
    let r = conn
        .send(&ControlledShutdownRequest {
            broker_id: 1,
            broker_epoch: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(code(r.error_code), ErrorCode::NotController);
    let r = conn.send(&create("nope", 1, 1, false)).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::NotController);
    let r = conn
        .send(&DeleteTopicsRequest {
            topics: vec![DeleteTopicState {
                name: Some("nope".into()),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(code(r.responses[0].error_code), ErrorCode::NotController);
    let r = conn.send(&DescribeQuorumRequest::default()).await.unwrap();
    assert_eq!(code(r.error_code), ErrorCode::NotController);

    // DeleteTopics through the client: the topic goes from every image.
    let r = client
        .send(&create("short-lived", 2, 3, false))
        .await
        .unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);
    let delete = DeleteTopicsRequest {
        topics: vec![DeleteTopicState {
            name: Some("short-lived".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = client.send(&delete).await.unwrap();
    assert_eq!(code(r.responses[0].error_code), ErrorCode::None);
    wait_for("the topic gone everywhere", || {
        nodes
            .iter()
            .all(|n| {
                n.images()
                    .current()
                    .image
                    .topic_by_name("short-lived")
                    .is_none()
            })
            .then_some(())
    })
    .await;
    let r = client.send(&delete).await.unwrap();
    assert_eq!(
        code(r.responses[0].error_code),
        ErrorCode::UnknownTopicOrPartition
    );
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}

fn broker(id: i32) -> BrokerInfo {
    BrokerInfo {
        node_id: id,
        cluster_id: CLUSTER_ID.into(),
        listeners: vec![],
        rack: None,
    }
}

fn lifecycle_config() -> LifecycleConfig {
    LifecycleConfig {
        heartbeat_interval: Duration::from_millis(100),
        shutdown_timeout: Duration::from_secs(10),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_epoch_reregisters_and_controlled_shutdown_moves_leadership() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let client = Arc::new(ControllerClient::new(voters.clone(), client_config()));
    let images = nodes[0].images();
    let offset = Arc::new(move || images.current().index as i64);
    let seven = BrokerLifecycle::start(
        broker(7),
        lifecycle_config(),
        Arc::clone(&client),
        offset.clone(),
    );
    let state = seven.state();
    let first_epoch = wait_for("broker 7 unfenced", || {
        let s = state.borrow();
        (!s.fenced).then_some(s.broker_epoch)?
    })
    .await;

    // Another incarnation of 7 takes over while 7 is fenced: 7's next
    // heartbeat is STALE_BROKER_EPOCH and it registers again.
    let other = bounded("another incarnation registers", async {
        loop {
            let fence = BrokerHeartbeatRequest {
                broker_id: 7,
                broker_epoch: first_epoch,
                current_metadata_offset: i64::MAX,
                want_fence: true,
                ..Default::default()
            };
            client.send(&fence).await.unwrap();
            let r = client
                .send(&registration(7, 0x77, CLUSTER_ID))
                .await
                .unwrap();
            if r.error_code == 0 {
                return r.broker_epoch;
            }
            assert_eq!(code(r.error_code), ErrorCode::DuplicateBrokerRegistration);
        }
    })
    .await;
    assert!(other > first_epoch);
    let again = wait_for("broker 7 registered again and unfenced", || {
        let s = state.borrow();
        s.broker_epoch.filter(|e| *e > other && !s.fenced)
    })
    .await;
    assert!(again > other);
    assert_eq!(
        nodes[0]
            .images()
            .current()
            .image
            .broker(7)
            .map(|b| b.incarnation_id),
        Some(seven.incarnation_id())
    );

    // Broker 7 leads a partition; its controlled shutdown moves the
    // leadership away before it stops.
    let topic = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "led-by-seven".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![CreatableReplicaAssignment {
                partition_index: 0,
                broker_ids: vec![7, 1],
                ..Default::default()
            }],
            ..Default::default()
        }],
        timeout_ms: 5000,
        ..Default::default()
    };
    let r = client.send(&topic).await.unwrap();
    assert_eq!(only_error(&r), ErrorCode::None);
    let leader = |n: &weir_cluster::ClusterNode| {
        let image = n.images().current();
        let t = image.image.topic_by_name("led-by-seven")?;
        Some(t.partitions.get(&0)?.leader)
    };
    wait_for("7 leads on every image", || {
        nodes.iter().all(|n| leader(n) == Some(7)).then_some(())
    })
    .await;
    assert!(
        bounded("controlled shutdown", seven.shutdown()).await,
        "the controller agreed"
    );
    wait_for("1 leads on every image", || {
        nodes.iter().all(|n| leader(n) == Some(1)).then_some(())
    })
    .await;
    let b = nodes[0]
        .images()
        .current()
        .image
        .broker(7)
        .cloned()
        .unwrap();
    assert!(b.in_controlled_shutdown);
    assert!(state.borrow().stopped && state.borrow().shut_down);
    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
