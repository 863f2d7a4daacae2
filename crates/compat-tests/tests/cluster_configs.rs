//! Topic configs in a three-node cluster: a change sent to one node goes
//! through the active controller, and every node then describes the new
//! value, also the nodes that host no replica of the topic; a bad value is
//! refused with INVALID_CONFIG and changes nothing anywhere.
//!
//! Each node is asked on its own with a DescribeConfigs v1 request written
//! from the protocol spec here (a client library would pick the broker it
//! asks itself).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use weir_compat_tests::cluster::{FAST_FAILOVER, WeirCluster, fetch_metadata};

const NODES: [i32; 3] = [1, 2, 3];
const TOPIC: &str = "configured";
/// Start-up of the cluster: raft election, registrations, `__consumer_offsets`.
const READY: Duration = Duration::from_secs(60);
/// A committed change reaching every node.
const SPREAD: Duration = Duration::from_secs(30);
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

fn wait_until<T>(
    cluster: &WeirCluster,
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            let tails: Vec<String> = cluster
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("--- node {}:\n{}", i + 1, n.stderr_tail()))
                .collect();
            panic!(
                "timed out after {limit:?} waiting for {what}; last: {last}\n{}",
                tails.join("\n")
            );
        }
        std::thread::sleep(POLL);
    }
}

fn bootstrap_of(cluster: &WeirCluster, id: i32) -> String {
    cluster.nodes[(id - 1) as usize].bootstrap().to_string()
}

/// (name, value) of every config of `topic` as node `id` describes it.
fn describe_on(
    cluster: &WeirCluster,
    id: i32,
    topic: &str,
) -> Result<Vec<(String, Option<String>)>, String> {
    describe_topic_v1(&bootstrap_of(cluster, id), topic)
}

/// One DescribeConfigs v1 request for every config of `topic`.
fn describe_topic_v1(addr: &str, topic: &str) -> Result<Vec<(String, Option<String>)>, String> {
    const API_KEY: i16 = 32;
    const CORRELATION_ID: i32 = 32;
    let client_id = b"weir-compat-configs";
    let mut body = Vec::new();
    body.extend_from_slice(&API_KEY.to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes()); // version
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    body.extend_from_slice(&1i32.to_be_bytes()); // one resource
    body.push(2); // TOPIC
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes()); // every config
    body.push(0); // include_synonyms = false
    let io = |e: std::io::Error| format!("{addr}: {e}");
    let mut stream = TcpStream::connect(addr).map_err(io)?;
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).map_err(io)?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(io)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(io)?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|l| *l <= 1 << 20)
        .ok_or("response length out of range")?;
    let mut response = vec![0u8; len];
    stream.read_exact(&mut response).map_err(io)?;
    let mut r = Reader(&response);
    if r.i32()? != CORRELATION_ID {
        return Err("correlation id mismatch".into());
    }
    let _throttle = r.i32()?;
    if r.count()? != 1 {
        return Err("not one result".into());
    }
    let error_code = r.i16()?;
    let message = r.string()?;
    if error_code != 0 {
        return Err(format!("error {error_code}: {message:?}"));
    }
    let _resource_type = r.take(1)?;
    let _name = r.string()?;
    let mut configs = Vec::new();
    for _ in 0..r.count()? {
        let name = r.string()?.unwrap_or_default();
        let value = r.string()?;
        let _flags = r.take(3)?; // read_only, config_source, is_sensitive
        for _ in 0..r.count()? {
            let _synonym = (r.string()?, r.string()?, r.take(1)?);
        }
        configs.push((name, value));
    }
    Ok(configs)
}

/// A cursor over a response body; every read checks the bytes are there.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn count(&mut self) -> Result<usize, String> {
        let n = self.i32()?;
        let n = usize::try_from(n).unwrap_or(0);
        if n > self.0.len() {
            return Err("array count beyond the frame".into());
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<Option<String>, String> {
        let n = self.i16()?;
        let Ok(n) = usize::try_from(n) else {
            return Ok(None);
        };
        let b = self.take(n)?;
        Ok(Some(String::from_utf8_lossy(b).into_owned()))
    }
}

fn value_of(configs: &[(String, Option<String>)], name: &str) -> Option<String> {
    configs
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.clone())
}

/// Waits until every node describes `name` of the topic as `want`.
fn wait_everywhere(cluster: &WeirCluster, name: &str, want: &str) {
    wait_until(
        cluster,
        &format!("every node to describe {name}={want}"),
        SPREAD,
        || {
            for id in NODES {
                let configs = describe_on(cluster, id, TOPIC)?;
                let got = value_of(&configs, name);
                if got.as_deref() != Some(want) {
                    return Err(format!("node {id}: {name}={got:?}"));
                }
            }
            Ok(())
        },
    );
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .expect("admin client")
}

fn opts() -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(CLIENT_TIMEOUT))
        .request_timeout(Some(CLIENT_TIMEOUT))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `weir configs args…` against node `id`.
fn weir_configs(cluster: &WeirCluster, id: i32, args: &[&str]) -> weir_compat_tests::CommandOutput {
    let bin = weir_compat_tests::weir_binary().expect("weir binary");
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("configs")
        .args(args)
        .args(["--bootstrap-server", &bootstrap_of(cluster, id)]);
    weir_compat_tests::run_with_timeout(&mut cmd, None, CLIENT_TIMEOUT).expect("weir configs")
}

#[test]
fn a_topic_config_change_on_one_node_is_described_by_every_node() {
    let cluster = WeirCluster::start(NODES.len(), FAST_FAILOVER)
        .unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    wait_until(&cluster, "three brokers seen by every node", READY, || {
        for id in NODES {
            let m = fetch_metadata(&bootstrap_of(&cluster, id), CLIENT_TIMEOUT)
                .map_err(|e| format!("node {id}: {e}"))?;
            if m.brokers.len() != NODES.len() || m.controller_id < 1 {
                return Err(format!("node {id}: {m:?}"));
            }
        }
        Ok(())
    });

    // One replica: two of the three nodes host nothing of the topic.
    let rt = runtime();
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1));
    let created = rt
        .block_on(admin(&cluster.bootstrap()).create_topics([&topic], &opts()))
        .expect("create_topics");
    assert!(created[0].is_ok(), "{created:?}");
    let leader = wait_until(
        &cluster,
        "every node to know the topic's leader",
        SPREAD,
        || {
            let mut leaders = Vec::new();
            for id in NODES {
                let m = fetch_metadata(&bootstrap_of(&cluster, id), CLIENT_TIMEOUT)
                    .map_err(|e| format!("node {id}: {e}"))?;
                leaders.push(m.partitions(TOPIC).first().map_or(-1, |p| p.leader));
            }
            match leaders.as_slice() {
                [l, rest @ ..] if *l > 0 && rest.iter().all(|o| o == l) => Ok(*l),
                _ => Err(format!("{leaders:?}")),
            }
        },
    );
    wait_everywhere(&cluster, "retention.ms", "604800000");

    // AlterConfigs through librdkafka, bootstrapped on a node that hosts
    // nothing of the topic.
    let other = NODES.into_iter().find(|id| *id != leader).unwrap();
    let alter = AlterConfig::new(ResourceSpecifier::Topic(TOPIC)).set("retention.ms", "1234567");
    let results = rt
        .block_on(admin(&bootstrap_of(&cluster, other)).alter_configs([&alter], &opts()))
        .expect("alter_configs");
    assert_eq!(results.len(), 1, "{results:?}");
    wait_everywhere(&cluster, "retention.ms", "1234567");

    // A bad value, sent to each node: INVALID_CONFIG, nothing changes.
    let topic_args = ["--entity-type", "topics", "--entity-name", TOPIC];
    for id in NODES {
        let mut args = vec!["alter"];
        args.extend(topic_args);
        args.extend(["--add-config", "retention.ms=soon"]);
        let out = weir_configs(&cluster, id, &args);
        assert!(!out.success(), "{}", out.describe("weir configs alter"));
        assert!(
            out.stderr.contains("INVALID_CONFIG"),
            "{}",
            out.describe("weir configs alter")
        );
    }
    // A later good change (IncrementalAlterConfigs) everywhere, so the bad
    // ones had their chance to arrive: the first value is still in force.
    let mut args = vec!["alter"];
    args.extend(topic_args);
    args.extend(["--add-config", "segment.bytes=1048576"]);
    let out = weir_configs(&cluster, leader, &args);
    assert!(out.success(), "{}", out.describe("weir configs alter"));
    wait_everywhere(&cluster, "segment.bytes", "1048576");
    for id in NODES {
        let configs = describe_on(&cluster, id, TOPIC).unwrap();
        assert_eq!(
            value_of(&configs, "retention.ms").as_deref(),
            Some("1234567"),
            "node {id}"
        );
    }
}
