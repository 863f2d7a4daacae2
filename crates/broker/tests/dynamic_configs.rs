//! Dynamic broker configs over the wire: a cluster-wide
//! `min.insync.replicas=2` set with IncrementalAlterConfigs makes acks=all
//! produce fail with NOT_ENOUGH_REPLICAS at once (one replica), topics
//! report it as their value, and deleting it restores the default.

use crate::common;

use common::*;

const NOT_ENOUGH_REPLICAS: i16 = 19;
const RESOURCE_BROKER: i8 = 4;

/// Sets (`Some`) or deletes a config of the cluster-default broker
/// resource; the resource's error code.
async fn alter_default(c: &mut Client, name: &str, value: Option<&str>) -> i16 {
    alter_config(c, RESOURCE_BROKER, "", name, value).await
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
        alter_default(&mut c, "min.insync.replicas", Some("2")).await,
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
        alter_default(&mut c, "min.insync.replicas", None).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["d"], now), -1).await.0,
        NONE
    );
    b.shutdown().await.unwrap();
}

/// Like [`alter_default`], with the resource's error message.
async fn alter_default_msg(c: &mut Client, name: &str, value: &str) -> (i16, Option<String>) {
    alter_config_answer(c, RESOURCE_BROKER, "", name, Some(value)).await
}

/// `max.connections.per.ip` lowered at run time refuses the next connection
/// over the limit (open ones stay, as in Kafka); deleting it lets new
/// connections in again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limit_changes_live() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c1 = Client::connect(b.local_addr).await;
    let mut c2 = Client::connect(b.local_addr).await;
    for c in [&mut c1, &mut c2] {
        match c
            .call(RequestBody::ApiVersions(Default::default()), 3)
            .await
        {
            ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        alter_default(&mut c1, "max.connections.per.ip", Some("2")).await,
        NONE
    );
    let mut c3 = Client::connect(b.local_addr).await;
    assert!(
        c3.is_closed().await,
        "a third connection from one IP is refused once the limit is 2"
    );
    // the two open connections stay usable
    assert_eq!(
        alter_default(&mut c2, "max.connections.per.ip", None).await,
        NONE
    );
    let mut c4 = Client::connect(b.local_addr).await;
    match c4
        .call(RequestBody::ApiVersions(Default::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
        other => panic!("{other:?}"),
    }
    b.shutdown().await.unwrap();
}

/// `log.cleaner.*` settings are dynamic: the cleaner's next round uses the
/// new I/O rate and thread count; `log.cleaner.threads` follows Kafka's
/// at-most-double, at-least-half rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleaner_settings_change_live() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("log.cleaner.backoff.ms", "0")]).await;
    let mut c = Client::connect(b.local_addr).await;
    let (code, msg) = alter_default_msg(&mut c, "log.cleaner.threads", "3").await;
    assert_eq!(code, 42, "INVALID_REQUEST: {msg:?}");
    assert_eq!(
        msg.as_deref(),
        Some("Log cleaner threads cannot be increased to more than double the current value 1")
    );
    let (code, msg) = alter_default_msg(&mut c, "log.cleaner.threads", "2").await;
    assert_eq!(code, NONE, "{msg:?}");
    let (code, msg) =
        alter_default_msg(&mut c, "log.cleaner.io.max.bytes.per.second", "1048576").await;
    assert_eq!(code, NONE, "{msg:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let cfg = b.broker.metrics.cleaner().map(|c| c.config());
        if cfg
            .as_ref()
            .is_some_and(|c| c.threads == 2 && c.io_max_bytes_per_second == 1_048_576.0)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cleaner never took the new settings: {cfg:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // From 2, 5 is more than double.
    let (code, _) = alter_default_msg(&mut c, "log.cleaner.threads", "5").await;
    assert_eq!(code, 42);
    b.shutdown().await.unwrap();
}
