//! `weir cluster describe` and the replica columns of `weir topics
//! describe`: on one node, on a three-node `weir dev cluster`, and with
//! unreachable addresses.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{self, Broker, Output, weir};
use crate::dev_cluster::{DevCluster, FAST_SESSIONS};

/// How long a new cluster may take until its brokers are registered and
/// a replicated topic can be created.
const CLUSTER_DEADLINE: Duration = Duration::from_secs(60);

/// `Key: value` fields of one tab-separated `topics describe` line.
fn fields(line: &str) -> HashMap<&str, &str> {
    line.split('\t')
        .filter_map(|f| f.split_once(": "))
        .map(|(k, v)| (k.trim(), v))
        .collect()
}

/// The `Key:   value` lines of `cluster describe` (the first of a key).
fn summary(stdout: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in stdout.lines() {
        if let Some((k, v)) = line.split_once(':')
            && !k.is_empty()
            && !k.contains(' ')
        {
            out.entry(k.to_string())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    out
}

/// The rows under the table header that starts with `first_column`, as
/// whitespace-separated cells, up to a blank line.
fn table(stdout: &str, first_column: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(first_column))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn topics_describe_prints_leader_replicas_isr_and_offline_on_one_node() {
    let b = Broker::start();
    let c = b.run(&["topics", "create", "--topic", "t", "--partitions", "2"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let d = b.run(&["topics", "describe", "--topic", "t"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", d.stdout);
    for (i, line) in lines[1..].iter().enumerate() {
        assert!(
            line.starts_with(&format!(
                "\tTopic: t\tPartition: {i}\tLeader: 1\tReplicas: 1\tIsr: 1\tOffline: \t"
            )),
            "{line}"
        );
        assert_eq!(fields(line)["Offline"], "");
    }
    // One healthy node: no partition is under-replicated or unavailable.
    for filter in ["--under-replicated-partitions", "--unavailable-partitions"] {
        let f = b.run(&["topics", "describe", filter]);
        assert_eq!(f.code, 0, "{}", f.stderr);
        assert_eq!(f.stdout, "", "{filter}");
    }
}

#[test]
fn cluster_describe_on_one_node_names_it_broker_and_controller() {
    let b = Broker::start();
    let d = b.run(&["cluster", "describe"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let s = summary(&d.stdout);
    assert!(!s["ClusterId"].is_empty(), "{}", d.stdout);
    assert_eq!(s["ControllerId"], "1", "{}", d.stdout);
    assert_eq!(s["Brokers"], "1", "{}", d.stdout);
    let brokers = table(&d.stdout, "BrokerId");
    assert_eq!(
        brokers,
        vec![vec!["1".to_string(), b.addr.clone(), "-".into()]]
    );
    // No controller address given: no quorum part.
    assert!(!d.stdout.contains("LeaderId"), "{}", d.stdout);
}

#[test]
fn unreachable_broker_and_controller_are_one_error_line_each() {
    let broker = format!("127.0.0.1:{}", common::closed_port());
    let controller = format!("127.0.0.1:{}", common::closed_port());
    let d: Output = weir(
        Some(&broker),
        &[
            "cluster",
            "describe",
            "--connect-timeout-ms",
            "2000",
            "--bootstrap-controller",
            &controller,
        ],
        None,
    );
    assert_eq!(d.code, 1, "{}", d.stderr);
    assert_eq!(d.stdout, "");
    let lines: Vec<&str> = d.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", d.stderr);
    assert!(
        lines[0].starts_with("error: cannot reach a broker at ") && lines[0].contains(&broker),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("error: cannot describe the quorum: ")
            && lines[1].contains(&controller),
        "{}",
        lines[1]
    );
}

#[test]
fn cluster_describe_of_three_nodes_shows_brokers_controller_and_voters() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(3, &dir.path().join("c"), FAST_SESSIONS);
    let describe = || {
        weir(
            Some(&cluster.bootstrap),
            &[
                "cluster",
                "describe",
                "--bootstrap-controller",
                &cluster.controllers,
            ],
            None,
        )
    };
    // Brokers register with the controller after they listen.
    let deadline = Instant::now() + CLUSTER_DEADLINE;
    let d = loop {
        let d = describe();
        if d.code == 0 && summary(&d.stdout).get("Brokers").map(String::as_str) == Some("3") {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "3 brokers not described within {CLUSTER_DEADLINE:?}: {} {}",
            d.stdout,
            d.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let s = summary(&d.stdout);
    let ids = ["1", "2", "3"];
    assert!(ids.contains(&s["ControllerId"].as_str()), "{}", d.stdout);
    let brokers = table(&d.stdout, "BrokerId");
    let broker_ids: Vec<&str> = brokers.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(broker_ids, ids, "{}", d.stdout);
    for row in &brokers {
        assert!(
            cluster.bootstrap.split(',').any(|a| a == row[1]),
            "endpoint {} not in the bootstrap {}",
            row[1],
            cluster.bootstrap
        );
    }
    assert!(ids.contains(&s["LeaderId"].as_str()), "{}", d.stdout);
    assert_eq!(s["CurrentVoters"], "[1,2,3]", "{}", d.stdout);
    let voters = table(&d.stdout, "NodeId");
    assert_eq!(voters.len(), 3, "{}", d.stdout);
    assert_eq!(voters[0][0], s["LeaderId"], "the leader is listed first");
    assert_eq!(voters[0][5], "Leader");
    let hw: i64 = s["HighWatermark"].parse().unwrap();
    assert!(hw > 0, "{}", d.stdout);
    for v in &voters {
        let leo: i64 = v[1].parse().unwrap();
        let lag: i64 = v[2].parse().unwrap();
        let leader_leo: i64 = voters[0][1].parse().unwrap();
        assert_eq!(lag, leader_leo - leo, "{}", d.stdout);
    }

    // Only the active controller answers DescribeQuorum: one follower's
    // address alone is refused, naming it.
    let follower = voters[1][0].parse::<usize>().unwrap();
    let follower_addr = cluster.controllers.split(',').nth(follower - 1).unwrap();
    let f = weir(
        Some(&cluster.bootstrap),
        &[
            "cluster",
            "describe",
            "--bootstrap-controller",
            follower_addr,
        ],
        None,
    );
    assert_eq!(f.code, 1, "{}", f.stdout);
    assert!(
        f.stderr.contains(follower_addr) && f.stderr.contains("not the active controller"),
        "{}",
        f.stderr
    );

    // A topic replicated on every node: three replicas, all in sync.
    let deadline = Instant::now() + CLUSTER_DEADLINE;
    loop {
        let c = weir(
            Some(&cluster.bootstrap),
            &[
                "topics",
                "create",
                "--topic",
                "r3",
                "--partitions",
                "2",
                "--replication-factor",
                "3",
            ],
            None,
        );
        if c.code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "create r3: {}", c.stderr);
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + CLUSTER_DEADLINE;
    loop {
        let t = weir(
            Some(&cluster.bootstrap),
            &["topics", "describe", "--topic", "r3"],
            None,
        );
        let partitions: Vec<HashMap<&str, &str>> = t.stdout.lines().skip(1).map(fields).collect();
        let settled = t.code == 0
            && partitions.len() == 2
            && partitions.iter().all(|p| {
                let mut replicas: Vec<&str> = p["Replicas"].split(',').collect();
                let mut isr: Vec<&str> = p["Isr"].split(',').collect();
                replicas.sort_unstable();
                isr.sort_unstable();
                replicas == ids
                    && isr == ids
                    && p["Offline"].is_empty()
                    && ids.contains(&p["Leader"])
            });
        if settled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "r3 not described with 3 in-sync replicas: {} {}",
            t.stdout,
            t.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
