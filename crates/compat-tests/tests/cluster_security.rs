//! SCRAM credentials and client quotas in a three-node cluster: they live
//! in the metadata log, so what is set through one broker holds on every
//! broker and survives a kill -9 of every node.
//!
//! Every node serves PLAINTEXT (the CLI and the checks) and SASL_PLAINTEXT
//! with SCRAM-SHA-512 and no static JAAS users, so a SCRAM login works only
//! with a credential set at run time:
//!
//! - `weir users scram set` through node 1 creates `dave`; node 1 lets him
//!   in at once (its answer waited for its own image), librdkafka logs in
//!   on node 2 and node 3 (each bootstrapped on that node alone), and
//!   `weir users scram list` through node 3 shows him;
//! - `weir quotas alter` through node 1 gives client id `slow-producer` a
//!   `producer_byte_rate` of 1 B/s; DescribeClientQuotas on node 3 shows it
//!   and a produce of that client to a partition node 2 leads gets
//!   `throttle_time_ms > 0` from node 2;
//! - after kill -9 and restart of every node, all of that still holds;
//! - `weir users scram delete` through node 2 refuses dave's logins on
//!   every node (weir-client's SCRAM login, which reports the broker's
//!   SASL_AUTHENTICATION_FAILED), also after another kill -9 and restart,
//!   once every node lets in erin (set with dave), so the refusals come
//!   from an image that holds the credentials, not from one still loading.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use weir_client::{ClientOptions, Connection, Security};
use weir_compat_tests::cluster::{FAST_FAILOVER, WeirCluster};
use weir_compat_tests::{CommandOutput, run_with_timeout, weir_binary};
use weir_protocol::messages::describe_client_quotas_request::ComponentData;
use weir_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use weir_protocol::messages::{DescribeClientQuotasRequest, ProduceRequest};
use weir_protocol::records::{Compression, RecordBatchBuilder};

use crate::cluster::{ALL, READY, agreed, create_topic, runtime, wait_settled, wait_until};

const USER: &str = "dave";
const PASSWORD: &str = "dave-secret";
/// Set with dave and never deleted.
const OTHER: &str = "erin";
const SLOW: &str = "slow-producer";
const TOPIC: &str = "quota-topic";
/// A committed change reaching every node.
const SPREAD: Duration = Duration::from_secs(30);
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

fn start() -> WeirCluster {
    let mut settings = FAST_FAILOVER.to_vec();
    settings.push(("sasl.enabled.mechanisms", "SCRAM-SHA-512"));
    WeirCluster::start_with_listeners(
        ALL.len(),
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        &settings,
    )
    .unwrap_or_else(|e| panic!("the cluster did not start: {e}"))
}

fn plaintext(cluster: &WeirCluster, id: i32) -> String {
    cluster.nodes[(id - 1) as usize].bootstrap().to_string()
}

fn sasl(cluster: &WeirCluster, id: i32) -> String {
    cluster.nodes[(id - 1) as usize]
        .listener_addr("SASL_PLAINTEXT")
        .unwrap_or_else(|| panic!("node {id} has no SASL_PLAINTEXT listener in its log"))
        .to_string()
}

/// `weir ARGS…` against node `id`'s PLAINTEXT listener.
fn weir(cluster: &WeirCluster, id: i32, args: &[&str], stdin: Option<&[u8]>) -> CommandOutput {
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = std::process::Command::new(bin);
    cmd.args(args)
        .args(["--bootstrap-server", &plaintext(cluster, id)]);
    run_with_timeout(&mut cmd, stdin, CLI_TIMEOUT).expect("weir runs")
}

/// A SCRAM-SHA-512 login as dave on node `id` with weir-client: `Err` with
/// the broker's message when it refuses.
fn login(cluster: &WeirCluster, id: i32, password: &str) -> Result<(), String> {
    login_as(cluster, id, USER, password)
}

fn login_as(cluster: &WeirCluster, id: i32, user: &str, password: &str) -> Result<(), String> {
    let jaas = format!(
        "org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"{user}\" password=\"{password}\";"
    );
    let security = Security::from_properties(&|k| match k {
        "security.protocol" => Some("SASL_PLAINTEXT".into()),
        "sasl.mechanism" => Some("SCRAM-SHA-512".into()),
        "sasl.jaas.config" => Some(jaas.clone()),
        _ => None,
    })
    .map_err(|e| e.to_string())?;
    let options = ClientOptions {
        security,
        ..ClientOptions::default()
    };
    let addr = sasl(cluster, id);
    runtime().block_on(async {
        Connection::connect_with(&addr, "weir-compat-scram", &options)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

/// Dave is refused on node `id` for his credentials (not for anything else).
fn refused(cluster: &WeirCluster, id: i32) -> Result<(), String> {
    match login(cluster, id, PASSWORD) {
        Ok(()) => Err(format!("node {id} let dave in")),
        Err(e) if e.contains("authentication") || e.contains("Authentication") => Ok(()),
        Err(e) => Err(format!("node {id}: {e}")),
    }
}

/// librdkafka logs in as dave on node `id` alone: Metadata through its
/// SASL_PLAINTEXT listener, the only broker it knows.
fn rdkafka_login(cluster: &WeirCluster, id: i32) -> Result<(), String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", sasl(cluster, id))
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", USER)
        .set("sasl.password", PASSWORD)
        .create()
        .map_err(|e| e.to_string())?;
    consumer
        .fetch_metadata(None, SPREAD)
        .map(|_| ())
        .map_err(|e| format!("librdkafka on node {id}: {e}"))
}

/// The `producer_byte_rate` node `id` describes for client id
/// `slow-producer`, if any.
fn described_rate(cluster: &WeirCluster, id: i32) -> Result<Option<f64>, String> {
    let req = DescribeClientQuotasRequest {
        components: vec![ComponentData {
            entity_type: "client-id".into(),
            match_type: 0,
            r#match: Some(SLOW.into()),
            ..Default::default()
        }],
        strict: true,
        ..Default::default()
    };
    let addr = plaintext(cluster, id);
    runtime().block_on(async {
        let mut conn = Connection::connect(&addr, "weir-compat-quotas")
            .await
            .map_err(|e| e.to_string())?;
        let resp = conn.send(&req).await.map_err(|e| e.to_string())?;
        if resp.error_code != 0 {
            return Err(format!("DescribeClientQuotas: {:?}", resp.error_message));
        }
        Ok(resp
            .entries
            .unwrap_or_default()
            .iter()
            .flat_map(|e| &e.values)
            .find(|v| v.key == "producer_byte_rate")
            .map(|v| v.value))
    })
}

/// The `throttle_time_ms` node 2 answers a 10 kB produce of
/// `slow-producer` to `partition` (which node 2 leads) with, on a fresh
/// connection (a throttled one reads nothing for that long).
fn produce_throttle(cluster: &WeirCluster, partition: i32) -> Result<i32, String> {
    let mut batch = RecordBatchBuilder::new(Compression::None);
    batch
        .push(0, None, Some(bytes::Bytes::from(vec![7u8; 10_000])), vec![])
        .map_err(|e| e.to_string())?;
    let req = ProduceRequest {
        acks: 1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.to_string(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(batch.build().map_err(|e| e.to_string())?.as_bytes().clone()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let addr = plaintext(cluster, 2);
    runtime().block_on(async {
        let mut conn = Connection::connect(&addr, SLOW)
            .await
            .map_err(|e| e.to_string())?;
        let resp = conn.send(&req).await.map_err(|e| e.to_string())?;
        let code = resp
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
            .map(|p| p.error_code);
        if code != Some(0) {
            return Err(format!(
                "produce to {TOPIC}-{partition} on node 2: {code:?}"
            ));
        }
        Ok(resp.throttle_time_ms)
    })
}

/// What must hold once dave and the quota are set: dave logs in on every
/// node (librdkafka on nodes 2 and 3), node 3 describes the quota and node
/// 2 throttles the slow producer.
fn set_everywhere(cluster: &WeirCluster, what: &str, partition: i32) {
    wait_until(
        cluster,
        &format!("{what}: dave logs in everywhere"),
        SPREAD,
        || ALL.iter().try_for_each(|&id| login(cluster, id, PASSWORD)),
    );
    for id in [2, 3] {
        rdkafka_login(cluster, id).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert!(
        login(cluster, 3, "wrong").is_err(),
        "{what}: a wrong password was accepted"
    );
    wait_until(
        cluster,
        &format!("{what}: node 3 describes the quota"),
        SPREAD,
        || {
            let rate = described_rate(cluster, 3)?;
            if rate == Some(1.0) {
                Ok(())
            } else {
                Err(format!("producer_byte_rate {rate:?}"))
            }
        },
    );
    wait_until(
        cluster,
        &format!("{what}: node 2 throttles"),
        SPREAD,
        || match produce_throttle(cluster, partition)? {
            t if t > 0 => Ok(()),
            t => Err(format!("throttle_time_ms {t}")),
        },
    );
}

fn restart_all(cluster: &mut WeirCluster) {
    for id in ALL {
        cluster.node(id).kill_hard().expect("kill");
    }
    for id in ALL {
        cluster.node(id).restart().expect("restart");
    }
    wait_settled(cluster, &ALL, READY);
}

#[test]
fn scram_credentials_and_quotas_set_through_one_broker_hold_on_all_and_survive_restarts() {
    let mut cluster = start();
    wait_settled(&cluster, &ALL, READY);
    for id in ALL {
        refused(&cluster, id).unwrap_or_else(|e| panic!("before any credential: {e}"));
    }
    // A partition led by node 2, for the produce under the quota.
    create_topic(&cluster.bootstrap(), TOPIC, 3, 1)
        .unwrap_or_else(|e| panic!("create {TOPIC}: {e:?}"));
    let partition = wait_until(&cluster, "a partition led by node 2", READY, || {
        let m = agreed(&cluster, &ALL)?;
        m.partitions(TOPIC)
            .iter()
            .find(|p| p.leader == 2)
            .map(|p| p.partition)
            .ok_or_else(|| format!("{:?}", m.partitions(TOPIC)))
    });

    let out = weir(
        &cluster,
        1,
        &[
            "users",
            "scram",
            "set",
            "--user",
            USER,
            "--mechanism",
            "SCRAM-SHA-512",
            "--password-stdin",
            "--iterations",
            "8192",
        ],
        Some(format!("{PASSWORD}\n").as_bytes()),
    );
    assert!(out.success(), "{}", out.describe("weir users scram set"));
    let out = weir(
        &cluster,
        1,
        &[
            "users",
            "scram",
            "set",
            "--user",
            OTHER,
            "--mechanism",
            "SCRAM-SHA-512",
            "--password",
            PASSWORD,
        ],
        None,
    );
    assert!(out.success(), "{}", out.describe("weir users scram set"));
    // Node 1 answered once its own image had the credential.
    login(&cluster, 1, PASSWORD).unwrap_or_else(|e| panic!("right after the set: {e}"));
    let out = weir(&cluster, 3, &["users", "scram", "list"], None);
    assert!(out.success(), "{}", out.describe("weir users scram list"));
    wait_until(&cluster, "node 3 lists dave", SPREAD, || {
        let out = weir(
            &cluster,
            3,
            &["users", "scram", "list", "--user", USER],
            None,
        );
        let want = "SCRAM credential configs for user-principal 'dave' are \
                    SCRAM-SHA-512=iterations=8192";
        if out.stdout.trim() == want {
            Ok(())
        } else {
            Err(out.describe("weir users scram list"))
        }
    });

    let out = weir(
        &cluster,
        1,
        &[
            "quotas",
            "alter",
            "--entity-type",
            "clients",
            "--entity-name",
            SLOW,
            "--add-config",
            "producer_byte_rate=1",
        ],
        None,
    );
    assert!(out.success(), "{}", out.describe("weir quotas alter"));
    set_everywhere(&cluster, "once set", partition);

    restart_all(&mut cluster);
    set_everywhere(&cluster, "after kill -9 and restart", partition);

    let out = weir(
        &cluster,
        2,
        &[
            "users",
            "scram",
            "delete",
            "--user",
            USER,
            "--mechanism",
            "SCRAM-SHA-512",
        ],
        None,
    );
    assert!(out.success(), "{}", out.describe("weir users scram delete"));
    // Node 2 answered once its own image had lost the credential.
    refused(&cluster, 2).unwrap_or_else(|e| panic!("right after the delete: {e}"));
    wait_until(&cluster, "every node refuses dave", SPREAD, || {
        ALL.iter().try_for_each(|&id| refused(&cluster, id))
    });

    restart_all(&mut cluster);
    wait_until(
        &cluster,
        "erin logs in everywhere after kill -9 and restart",
        SPREAD,
        || {
            ALL.iter()
                .try_for_each(|&id| login_as(&cluster, id, OTHER, PASSWORD))
        },
    );
    for id in ALL {
        refused(&cluster, id).unwrap_or_else(|e| panic!("after the second restart: {e}"));
    }
    let out = weir(&cluster, 1, &["users", "scram", "list"], None);
    assert!(out.success(), "{}", out.describe("weir users scram list"));
    assert!(
        out.stdout.contains("'erin'") && !out.stdout.contains("'dave'"),
        "{}",
        out.stdout
    );
}
