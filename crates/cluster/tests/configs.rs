//! Topic config changes through the CONTROLLER listener: three nodes, the
//! change sent to a node that is not the controller is committed once and
//! every node's image shows it.

use crate::common;
use crate::controller_listener::{
    active, client_config, create, only_error, start_cluster, unfenced,
};

use std::collections::BTreeMap;

use common::{bounded, wait_for};
use weir_client::Connection;
use weir_cluster::{ClusterNode, ControllerClient};
use weir_metadata::image::TOPIC_RESOURCE;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use weir_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

fn alter(
    resource_type: i8,
    topic: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource_type,
            resource_name: topic.into(),
            configs: ops
                .iter()
                .map(|(name, op, value)| AlterableConfig {
                    name: name.to_string(),
                    config_operation: *op,
                    value: value.map(String::from),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        validate_only,
        ..Default::default()
    }
}

fn only(resp: &IncrementalAlterConfigsResponse) -> ErrorCode {
    assert_eq!(resp.responses.len(), 1, "{resp:?}");
    ErrorCode::from_code_lossy(resp.responses[0].error_code)
}

fn configs_of(node: &ClusterNode, topic: &str) -> BTreeMap<String, String> {
    node.images()
        .current()
        .image
        .configs(TOPIC_RESOURCE, topic)
        .cloned()
        .unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn everywhere(nodes: &[ClusterNode], topic: &str, want: &BTreeMap<String, String>) {
    wait_for("every image holds the configs", || {
        nodes
            .iter()
            .all(|n| configs_of(n, topic) == *want)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_configs_change_through_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, voters) = start_cluster(dir.path(), 3).await;
    wait_for("three brokers unfenced", || {
        nodes.iter().all(unfenced).then_some(())
    })
    .await;
    let controller = wait_for("one active controller", || active(&nodes)).await;
    let client = ControllerClient::new(voters.clone(), client_config());
    let resp = bounded("create", client.send(&create("cfg", 2, 3, false))).await;
    assert_eq!(only_error(&resp.unwrap()), ErrorCode::None);

    // The complete new set as SET operations.
    let resp = client
        .send(&alter(
            TOPIC_RESOURCE,
            "cfg",
            &[
                ("retention.ms", SET, Some("1000")),
                ("segment.bytes", SET, Some("2048")),
            ],
            false,
        ))
        .await
        .unwrap();
    assert_eq!(only(&resp), ErrorCode::None, "{resp:?}");
    let first = map(&[("retention.ms", "1000"), ("segment.bytes", "2048")]);
    everywhere(&nodes, "cfg", &first).await;

    // A change and a removal in one request.
    let resp = client
        .send(&alter(
            TOPIC_RESOURCE,
            "cfg",
            &[
                ("retention.ms", SET, Some("2000")),
                ("segment.bytes", DELETE, None),
            ],
            false,
        ))
        .await
        .unwrap();
    assert_eq!(only(&resp), ErrorCode::None, "{resp:?}");
    let second = map(&[("retention.ms", "2000")]);
    everywhere(&nodes, "cfg", &second).await;

    // validate_only commits nothing; wait for a later change to be seen
    // everywhere, so the unchanged value is not merely not yet applied.
    let resp = client
        .send(&alter(
            TOPIC_RESOURCE,
            "cfg",
            &[("retention.ms", SET, Some("3000"))],
            true,
        ))
        .await
        .unwrap();
    assert_eq!(only(&resp), ErrorCode::None, "{resp:?}");
    let resp = client.send(&create("later", 1, 1, false)).await.unwrap();
    assert_eq!(only_error(&resp), ErrorCode::None);
    wait_for("every image holds the later topic", || {
        nodes
            .iter()
            .all(|n| n.images().current().image.topic_by_name("later").is_some())
            .then_some(())
    })
    .await;
    for n in &nodes {
        assert_eq!(configs_of(n, "cfg"), second, "node {}", n.node_id());
    }

    // Refusals.
    let refusals: Vec<(&str, IncrementalAlterConfigsRequest, ErrorCode)> = vec![
        (
            "unknown topic",
            alter(
                TOPIC_RESOURCE,
                "nope",
                &[("retention.ms", SET, Some("1"))],
                false,
            ),
            ErrorCode::UnknownTopicOrPartition,
        ),
        (
            "a broker resource",
            alter(4, "1", &[("log.retention.ms", SET, Some("1"))], false),
            ErrorCode::InvalidRequest,
        ),
        (
            "append",
            alter(
                TOPIC_RESOURCE,
                "cfg",
                &[("cleanup.policy", APPEND, Some("compact"))],
                false,
            ),
            ErrorCode::InvalidRequest,
        ),
        (
            "set without a value",
            alter(TOPIC_RESOURCE, "cfg", &[("retention.ms", SET, None)], false),
            ErrorCode::InvalidRequest,
        ),
        (
            "a config named twice",
            alter(
                TOPIC_RESOURCE,
                "cfg",
                &[
                    ("retention.ms", SET, Some("1")),
                    ("retention.ms", DELETE, None),
                ],
                false,
            ),
            ErrorCode::InvalidRequest,
        ),
    ];
    for (what, req, want) in refusals {
        let resp = client.send(&req).await.unwrap();
        assert_eq!(only(&resp), want, "{what}: {resp:?}");
    }
    let mut twice = alter(
        TOPIC_RESOURCE,
        "cfg",
        &[("retention.ms", SET, Some("1"))],
        false,
    );
    twice.resources.push(twice.resources[0].clone());
    let resp = client.send(&twice).await.unwrap();
    assert!(
        resp.responses
            .iter()
            .all(|r| r.error_code == ErrorCode::InvalidRequest.code()),
        "{resp:?}"
    );
    for n in &nodes {
        assert_eq!(configs_of(n, "cfg"), second, "refusals change nothing");
    }

    // Off the active controller: NOT_CONTROLLER.
    let other = voters.iter().find(|(id, _)| **id != controller).unwrap().1;
    let mut conn = bounded("connect", Connection::connect(other, "test"))
        .await
        .unwrap();
    let resp = conn
        .send(&alter(
            TOPIC_RESOURCE,
            "cfg",
            &[("retention.ms", SET, Some("9"))],
            false,
        ))
        .await
        .unwrap();
    assert_eq!(only(&resp), ErrorCode::NotController);

    for n in nodes {
        n.shutdown().await.unwrap();
    }
}
