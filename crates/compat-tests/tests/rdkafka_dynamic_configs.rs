//! Dynamic broker configs through librdkafka's admin client (the `rdkafka`
//! crate) against a real `weir serve`: AlterConfigs on the broker resource
//! takes effect live (a lowered `message.max.bytes` refuses a produce with
//! MESSAGE_TOO_LARGE), DescribeConfigs reports the source on the broker and
//! on topics that inherit it, read-only configs are refused with Kafka's
//! INVALID_REQUEST, and the values survive a restart. Group configs and
//! the cluster-wide default (which the `rdkafka` crate cannot address) go
//! through `weir configs` against the same broker.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigResource, ConfigSource, NewTopic,
    ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use weir_compat_tests::WeirProcess;

const TIMEOUT: Duration = Duration::from_secs(30);
const NODE: i32 = 1;
const TOPIC: &str = "dynamic";

fn admin(broker: &WeirProcess) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client")
}

fn opts() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT))
}

async fn describe(broker: &WeirProcess, spec: ResourceSpecifier<'_>) -> ConfigResource {
    let mut described = admin(broker)
        .describe_configs([&spec], &opts())
        .await
        .unwrap_or_else(|e| panic!("describe {spec:?}: {e}\n{}", broker.stderr_tail()));
    described
        .pop()
        .expect("one result")
        .unwrap_or_else(|e| panic!("describe {spec:?}: {e:?}"))
}

/// AlterConfigs on this broker (replaces its whole dynamic set). The
/// `rdkafka` crate (0.39) reports every resource as altered, whatever its
/// error code, so refusals are checked by their having changed nothing
/// (and their code with `weir configs`, in the CLI tests).
async fn alter_broker(broker: &WeirProcess, set: &[(&str, &str)]) {
    let mut alter = AlterConfig::new(ResourceSpecifier::Broker(NODE));
    for (k, v) in set {
        alter = alter.set(k, v);
    }
    let results = admin(broker)
        .alter_configs([&alter], &opts())
        .await
        .unwrap_or_else(|e| panic!("alter_configs: {e}\n{}", broker.stderr_tail()));
    assert_eq!(results.len(), 1, "{results:?}");
}

/// Produces one record of `size` bytes; the error code if it was refused.
async fn produce(broker: &WeirProcess, size: usize) -> Option<RDKafkaErrorCode> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("message.timeout.ms", "20000")
        .set("compression.type", "none")
        .create()
        .expect("producer");
    let payload = vec![b'x'; size];
    match producer
        .send(
            FutureRecord::<(), _>::to(TOPIC).payload(&payload),
            Duration::from_secs(0),
        )
        .await
    {
        Ok(_) => None,
        Err((KafkaError::MessageProduction(code), _)) => Some(code),
        Err((e, _)) => panic!("produce: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_configs_change_live_and_survive_a_restart() {
    let mut broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1));
    let created = admin(&broker)
        .create_topics([&topic], &opts())
        .await
        .expect("create_topics");
    assert!(created[0].is_ok(), "{created:?}");

    // Before: defaults, and the dynamic ones are not read-only.
    let b = describe(&broker, ResourceSpecifier::Broker(NODE)).await;
    let mmb = b.get("message.max.bytes").expect("message.max.bytes");
    assert_eq!(mmb.source, ConfigSource::Default);
    assert!(!mmb.is_read_only, "{mmb:?}");
    assert!(b.get("node.id").expect("node.id").is_read_only);
    assert_eq!(
        produce(&broker, 4000).await,
        None,
        "a 4000-byte record fits"
    );

    // A set with a read-only config is refused as a whole.
    alter_broker(&broker, &[("message.max.bytes", "1000"), ("node.id", "7")]).await;
    let b = describe(&broker, ResourceSpecifier::Broker(NODE)).await;
    assert_eq!(
        b.get("message.max.bytes").map(|e| &e.source),
        Some(&ConfigSource::Default)
    );
    assert_eq!(produce(&broker, 4000).await, None);

    // Lower message.max.bytes for this broker: live, on every topic that
    // does not override max.message.bytes.
    alter_broker(&broker, &[("message.max.bytes", "1000")]).await;
    let check = |b: ConfigResource, t: ConfigResource| {
        let mmb = b.get("message.max.bytes").expect("message.max.bytes");
        assert_eq!(mmb.value.as_deref(), Some("1000"));
        assert_eq!(mmb.source, ConfigSource::DynamicBroker);
        let tmmb = t.get("max.message.bytes").expect("max.message.bytes");
        assert_eq!(tmmb.value.as_deref(), Some("1000"));
        assert_eq!(tmmb.source, ConfigSource::DynamicBroker);
    };
    check(
        describe(&broker, ResourceSpecifier::Broker(NODE)).await,
        describe(&broker, ResourceSpecifier::Topic(TOPIC)).await,
    );
    assert_eq!(
        produce(&broker, 4000).await,
        Some(RDKafkaErrorCode::MessageSizeTooLarge)
    );

    // Durable: the same after a restart.
    broker
        .restart()
        .unwrap_or_else(|e| panic!("restart: {e}\n{}", broker.stderr_tail()));
    check(
        describe(&broker, ResourceSpecifier::Broker(NODE)).await,
        describe(&broker, ResourceSpecifier::Topic(TOPIC)).await,
    );
    assert_eq!(
        produce(&broker, 4000).await,
        Some(RDKafkaErrorCode::MessageSizeTooLarge)
    );

    // An empty AlterConfigs set removes them: back to the default, live.
    alter_broker(&broker, &[]).await;
    let b = describe(&broker, ResourceSpecifier::Broker(NODE)).await;
    assert_eq!(
        b.get("message.max.bytes").map(|e| &e.source),
        Some(&ConfigSource::Default)
    );
    assert_eq!(produce(&broker, 4000).await, None);
}

/// `weir configs args…` against `broker`; its stdout on success.
fn weir_configs(broker: &WeirProcess, args: &[&str]) -> String {
    let bin = weir_compat_tests::weir_binary().expect("weir binary");
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("configs")
        .args(args)
        .args(["--bootstrap-server", broker.bootstrap()]);
    let out = weir_compat_tests::run_with_timeout(&mut cmd, None, TIMEOUT).expect("weir configs");
    assert!(out.success(), "{}", out.describe("weir configs"));
    out.stdout
}

#[test]
fn group_and_default_broker_configs_survive_a_restart() {
    let mut broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let group = ["--entity-type", "groups", "--entity-name", "g"];
    let default = ["--entity-type", "brokers", "--entity-default"];
    let alter = |b: &WeirProcess, target: &[&str], config: &str| {
        let mut args = vec!["alter"];
        args.extend_from_slice(target);
        args.extend(["--add-config", config]);
        weir_configs(b, &args);
    };
    let describe = |b: &WeirProcess, target: &[&str]| {
        let mut args = vec!["describe"];
        args.extend_from_slice(target);
        weir_configs(b, &args)
    };
    // (each is the last change of its kind before the restart)
    alter(&broker, &default, "log.retention.bytes=1048576");
    alter(&broker, &group, "consumer.heartbeat.interval.ms=6000");
    broker
        .restart()
        .unwrap_or_else(|e| panic!("restart: {e}\n{}", broker.stderr_tail()));
    let g = describe(&broker, &group);
    assert!(
        g.contains("consumer.heartbeat.interval.ms=6000 source=GROUP_CONFIG"),
        "{g}"
    );
    let d = describe(&broker, &default);
    assert!(
        d.contains("log.retention.bytes=1048576 source=DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "{d}"
    );
}
