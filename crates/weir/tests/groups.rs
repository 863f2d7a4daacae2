//! `weir consume --group` commits and `weir groups` against a real
//! `weir serve`: lag while a consumer is behind, reset-offsets, delete, and
//! `describe` of a KIP-848 consumer group (members driven with raw
//! ConsumerGroupHeartbeats) while it reconciles and once it is stable.

use crate::common;

use common::Broker;

/// One row of the `weir groups describe` partition table, by column name.
fn group_row(text: &str, topic: &str, partition: i32) -> std::collections::HashMap<String, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .by_ref()
        .find(|l| l.starts_with("TOPIC ") && l.contains("CURRENT-OFFSET"))
        .unwrap_or_else(|| panic!("no partition table in:\n{text}"))
        .split_whitespace()
        .collect();
    for line in lines {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if cells.len() == header.len() && cells[0] == topic && cells[1] == partition.to_string() {
            return header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect();
        }
    }
    panic!("no row for {topic}-{partition} in:\n{text}");
}

fn consume_group(b: &Broker, topic: &str, group: &str, extra: &[&str]) -> common::Output {
    let mut args = vec!["consume", "--topic", topic, "--group", group];
    args.extend_from_slice(extra);
    let out = b.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

#[test]
fn group_lag_follows_the_committed_offset() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "lag"]).code, 0);
    let input: String = (0..100).map(|i| format!("m{i}\n")).collect();
    assert_eq!(b.run_stdin(&["produce", "--topic", "lag"], &input).code, 0);

    let first = consume_group(
        &b,
        "lag",
        "g",
        &["--from-beginning", "--max-messages", "40"],
    );
    let want: String = (0..40).map(|i| format!("m{i}\n")).collect();
    assert_eq!(first.stdout, want);

    let d = b.run(&["groups", "describe", "g"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let row = group_row(&d.stdout, "lag", 0);
    assert_eq!(row["CURRENT-OFFSET"], "40", "{}", d.stdout);
    assert_eq!(row["LOG-END-OFFSET"], "100");
    assert_eq!(row["LAG"], "60");
    // The member left on exit.
    assert!(
        d.stdout.starts_with("GROUP g  TYPE classic  STATE Empty"),
        "{}",
        d.stdout
    );

    // The group resumes at its committed offset (not at the beginning).
    let rest = consume_group(&b, "lag", "g", &["--from-beginning", "--timeout-ms", "500"]);
    let want: String = (40..100).map(|i| format!("m{i}\n")).collect();
    assert_eq!(rest.stdout, want);
    let d = b.run(&["groups", "describe", "g"]);
    let row = group_row(&d.stdout, "lag", 0);
    assert_eq!(row["CURRENT-OFFSET"], "100", "{}", d.stdout);
    assert_eq!(row["LOG-END-OFFSET"], "100");
    assert_eq!(row["LAG"], "0");

    // Commits live in the internal topic, which --exclude-internal hides.
    let all = b.run(&["topics", "list"]);
    assert!(
        all.stdout.lines().any(|l| l == "__consumer_offsets"),
        "{}",
        all.stdout
    );
    let user = b.run(&["topics", "list", "--exclude-internal"]);
    assert_eq!(user.stdout, "lag\n");
}

#[test]
fn a_group_member_reads_and_commits_every_partition() {
    let b = Broker::start();
    assert_eq!(
        b.run(&["topics", "create", "--topic", "multi", "--partitions", "3"])
            .code,
        0
    );
    for p in 0..3 {
        let input: String = (0..10).map(|i| format!("p{p}-{i}\n")).collect();
        let out = b.run_stdin(
            &["produce", "--topic", "multi", "--partition", &p.to_string()],
            &input,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = consume_group(
        &b,
        "multi",
        "mg",
        &["--from-beginning", "--timeout-ms", "500"],
    );
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|p| (0..10).map(move |i| format!("p{p}-{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
    let d = b.run(&["groups", "describe", "mg"]);
    for p in 0..3 {
        let row = group_row(&d.stdout, "multi", p);
        assert_eq!(
            (row["CURRENT-OFFSET"].as_str(), row["LAG"].as_str()),
            ("10", "0"),
            "{}",
            d.stdout
        );
    }
    let list = b.run(&["groups", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["mg", "consumer", "Empty"]),
        "{}",
        list.stdout
    );
}

#[test]
fn reset_offsets_dry_run_then_execute_then_delete() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "rs"]).code, 0);
    let input: String = (0..20).map(|i| format!("v{i}\n")).collect();
    assert_eq!(b.run_stdin(&["produce", "--topic", "rs"], &input).code, 0);
    consume_group(
        &b,
        "rs",
        "rg",
        &["--from-beginning", "--max-messages", "15"],
    );

    let table = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let dry = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-offset",
        "5",
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(
        table(&dry.stdout),
        [["TOPIC", "PARTITION", "NEW-OFFSET"], ["rs", "0", "5"]]
    );
    // A dry run commits nothing.
    let d = b.run(&["groups", "describe", "rg"]);
    assert_eq!(group_row(&d.stdout, "rs", 0)["CURRENT-OFFSET"], "15");

    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--shift-by",
        "-10",
        "--execute",
    ]);
    assert_eq!(exec.code, 0, "{}", exec.stderr);
    assert_eq!(
        table(&exec.stdout),
        [["TOPIC", "PARTITION", "NEW-OFFSET"], ["rs", "0", "5"]]
    );
    let d = b.run(&["groups", "describe", "rg"]);
    let row = group_row(&d.stdout, "rs", 0);
    assert_eq!(
        (row["CURRENT-OFFSET"].as_str(), row["LAG"].as_str()),
        ("5", "15")
    );
    // The group then reads from offset 5.
    let out = consume_group(&b, "rs", "rg", &["--max-messages", "1"]);
    assert_eq!(out.stdout, "v5\n");

    // Out-of-range targets are clamped to the log, like Kafka.
    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-offset",
        "500",
        "--execute",
    ]);
    assert_eq!(table(&exec.stdout)[1], ["rs", "0", "20"]);
    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-earliest",
        "--execute",
    ]);
    assert_eq!(table(&exec.stdout)[1], ["rs", "0", "0"]);

    let del = b.run(&["groups", "delete", "rg"]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(del.stdout, "Deleted group rg\n");
    let gone = b.run(&["groups", "describe", "rg"]);
    assert_eq!(gone.code, 1);
    assert_eq!(gone.stderr, "error: consumer group rg does not exist\n");
}

/// One ConsumerGroupHeartbeat of `member` to group `cgd` (topic `cgd`):
/// a join (epoch 0) or a heartbeat owning `owned` partitions; returns
/// (error code, member epoch, assigned partitions if the response says).
async fn cgd_heartbeat(
    client: &mut weir_client::Client,
    topic_id: weir_protocol::Uuid,
    member: &str,
    epoch: i32,
    owned: &[i32],
) -> (i16, i32, Option<Vec<i32>>) {
    use weir_protocol::messages::ConsumerGroupHeartbeatRequest;
    use weir_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    let req = ConsumerGroupHeartbeatRequest {
        group_id: "cgd".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: if epoch == 0 { 60_000 } else { -1 },
        subscribed_topic_names: (epoch == 0).then(|| vec!["cgd".to_string()]),
        topic_partitions: Some(if owned.is_empty() {
            Vec::new()
        } else {
            vec![TopicPartitions {
                topic_id,
                partitions: owned.to_vec(),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    let conn = client
        .coordinator_connection("cgd")
        .await
        .expect("coordinator");
    let r = conn.send(&req).await.expect("ConsumerGroupHeartbeat");
    let assigned = r.assignment.map(|a| {
        let mut ps: Vec<i32> = a
            .topic_partitions
            .into_iter()
            .flat_map(|t| t.partitions)
            .collect();
        ps.sort();
        ps
    });
    (r.error_code, r.member_epoch, assigned)
}

/// The cells of each line of the `describe` output that starts with
/// `first` (a member id or a topic name).
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.first() == Some(&first))
        .collect()
}

/// `weir groups describe` of a KIP-848 consumer group while it reconciles
/// and once it is stable: the type, state, group and assignment epochs,
/// each member's epoch with assigned and target counts, and per partition
/// the member owning it now beside the one the target gives it to.
#[test]
fn describe_shows_a_consumer_groups_epochs_and_current_vs_target() {
    let b = Broker::start();
    let out = b.run(&["topics", "create", "--topic", "cgd", "--partitions", "4"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut client = rt
        .block_on(weir_client::Client::connect(&b.addr, "describe-test"))
        .expect("connect");
    let topic_id = rt
        .block_on(client.metadata(Some(&["cgd".to_string()]), false))
        .expect("metadata")
        .into_iter()
        .find(|t| t.name == "cgd")
        .expect("topic cgd")
        .topic_id;
    let mut beat = |member: &str, epoch: i32, owned: &[i32]| {
        rt.block_on(cgd_heartbeat(&mut client, topic_id, member, epoch, owned))
    };
    // m1 joins alone: epoch 1 and every partition; m2 joins: group epoch
    // 2, the target splits 2/2, m1 (not heartbeated since) still owns all.
    let (code, epoch, assigned) = beat("m1", 0, &[]);
    assert_eq!((code, epoch, assigned), (0, 1, Some(vec![0, 1, 2, 3])));
    let (code, epoch, assigned) = beat("m2", 0, &[]);
    assert_eq!((code, epoch, assigned), (0, 2, Some(vec![])));

    let d = b.run(&["groups", "describe", "cgd"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let text = &d.stdout;
    assert!(
        text.starts_with(
            "GROUP cgd  TYPE consumer  STATE Reconciling  GROUP-EPOCH 2  ASSIGNMENT-EPOCH 2  ASSIGNOR uniform  MEMBERS 2\n"
        ),
        "{text}"
    );
    let parts = rows(text, "cgd");
    assert_eq!(parts.len(), 4, "{text}");
    let m2_target: Vec<&str> = parts
        .iter()
        .filter(|c| c[6] == "m2")
        .map(|c| c[1])
        .collect();
    assert_eq!(m2_target.len(), 2, "{text}");
    for c in &parts {
        assert_eq!(c[5], "m1", "m1 owns every partition now: {text}");
    }
    let member = |text: &str, id: &str| -> Vec<String> {
        let r = rows(text, id);
        assert_eq!(r.len(), 1, "{text}");
        r[0].iter().map(|s| s.to_string()).collect()
    };
    // CONSUMER-ID EPOCH HOST CLIENT-ID #ASSIGNED #TARGET SUBSCRIPTION
    let m1 = member(text, "m1");
    let m2 = member(text, "m2");
    assert_eq!(
        (m1[1].as_str(), m1[4].as_str(), m1[5].as_str()),
        ("1", "4", "2"),
        "{text}"
    );
    assert_eq!(
        (m2[1].as_str(), m2[4].as_str(), m2[5].as_str()),
        ("2", "0", "2"),
        "{text}"
    );
    assert_eq!(m2[6], "cgd", "{text}");

    // m1 heartbeats (revokes what it must give up), m2 gets it: Stable,
    // every partition owned by its target member.
    let (_, e, kept) = beat("m1", 1, &[0, 1, 2, 3]);
    let kept = kept.expect("m1's new assignment");
    assert_eq!(kept.len(), 2);
    let (code, e, _) = beat("m1", e, &kept);
    assert_eq!((code, e), (0, 2));
    let (code, e, got) = beat("m2", 2, &[]);
    assert_eq!((code, e), (0, 2));
    assert_eq!(got.map(|g| g.len()), Some(2));
    let d = b.run(&["groups", "describe", "cgd"]);
    let text = &d.stdout;
    assert!(text.contains("  STATE Stable  GROUP-EPOCH 2  "), "{text}");
    for c in rows(text, "cgd") {
        assert_eq!(c[5], c[6], "current and target owners differ: {text}");
    }
    for id in ["m1", "m2"] {
        let m = member(text, id);
        assert_eq!(
            (m[1].as_str(), m[4].as_str(), m[5].as_str()),
            ("2", "2", "2"),
            "{text}"
        );
    }
}
