//! Dynamic broker configs over the wire: a cluster-wide
//! `min.insync.replicas=2` set with IncrementalAlterConfigs makes acks=all
//! produce fail with NOT_ENOUGH_REPLICAS at once (one replica), topics
//! report it as their value, and deleting it restores the default.

mod common;

use common::*;
use weir_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use weir_protocol::messages::{IncrementalAlterConfigsRequest, RequestBody, ResponseBody};

const NOT_ENOUGH_REPLICAS: i16 = 19;
const RESOURCE_BROKER: i8 = 4;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// One IncrementalAlterConfigs operation on the cluster-default broker
/// resource; the resource's error code.
async fn alter_default(c: &mut Client, name: &str, op: i8, value: Option<&str>) -> i16 {
    let req = IncrementalAlterConfigsRequest {
        resources: vec![AlterConfigsResource {
            resource_type: RESOURCE_BROKER,
            resource_name: String::new(),
            configs: vec![AlterableConfig {
                name: name.to_string(),
                config_operation: op,
                value: value.map(String::from),
                ..Default::default()
            }],
            ..Default::default()
        }],
        validate_only: false,
        ..Default::default()
    };
    match c.call(RequestBody::IncrementalAlterConfigs(req), 1).await {
        ResponseBody::IncrementalAlterConfigs(r) => r.responses[0].error_code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn min_insync_replicas_changes_live() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let now = 1_700_000_000_000;
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["a"], now), -1).await.0,
        NONE
    );

    assert_eq!(
        alter_default(&mut c, "min.insync.replicas", OP_SET, Some("2")).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["b"], now), -1).await.0,
        NOT_ENOUGH_REPLICAS
    );
    // acks=1 does not wait for replicas
    assert_eq!(produce(&mut c, "t", 0, batch(&["c"], now), 1).await.0, NONE);
    let cfg = topic_config(&mut c, "t").await;
    assert_eq!(
        cfg["min.insync.replicas"],
        (Some("2".to_string()), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );

    assert_eq!(
        alter_default(&mut c, "min.insync.replicas", OP_DELETE, None).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["d"], now), -1).await.0,
        NONE
    );
    b.shutdown().await.unwrap();
}
