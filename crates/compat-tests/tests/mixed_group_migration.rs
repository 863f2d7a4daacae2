//! A mixed group against one `weir serve`: a kafka-python member (classic
//! protocol, `tests/compat/python/group_member.py`) owns a 6-partition
//! topic; a librdkafka member with `group.protocol=consumer` joins the same
//! group, which becomes a consumer group (online upgrade) whose partitions
//! are split between the two; the librdkafka member leaves and the group
//! goes back to classic (online downgrade) with the kafka-python member
//! owning every partition. Both commit each record; every record produced
//! is read exactly once across the two, and the group type is read from
//! `/metrics` (`weir_group_type`) at each stage. The same runs with a
//! librdkafka member of the classic protocol using `cooperative-sticky`
//! in place of kafka-python (it reports the partitions it still owns when
//! it rejoins and gives up the revoked ones before they move). A static
//! librdkafka member of the classic protocol inside a consumer group,
//! SIGKILLed and restarted with its `group.instance.id`, takes its old
//! member's place (epoch and partitions) without moving anything else.

use std::collections::{BTreeMap, BTreeSet};

use weir_compat_tests::{WeirProcess, skip_or_fail, sum_samples, tools};

use crate::rdkafka_consumer_protocol::values_read;
use crate::rdkafka_groups_members::{Event, Member, create_topic, diagnostics, produce, wait_for};

const PARTITIONS: i32 = 6;
const GROUP: &str = "mixed";
const TOPIC: &str = "mixed";

fn group_type(broker: &WeirProcess) -> Option<&'static str> {
    let text = broker.metrics().ok()?;
    ["classic", "consumer"]
        .into_iter()
        .find(|t| sum_samples(&text, "weir_group_type", &[("group", GROUP), ("type", t)]) == 1.0)
}

fn owned(m: &Member) -> BTreeSet<i32> {
    m.owned().map(|(_, p)| p).unwrap_or_default()
}

fn start_broker() -> WeirProcess {
    WeirProcess::start_with_args(&[
        "--set",
        "http.listeners=127.0.0.1:0",
        "--set",
        "group.consumer.min.session.timeout.ms=1000",
        "--set",
        "group.consumer.session.timeout.ms=6000",
        "--set",
        "group.consumer.min.heartbeat.interval.ms=100",
        "--set",
        "group.consumer.heartbeat.interval.ms=500",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

#[test]
fn kafka_python_and_rdkafka_members_upgrade_and_downgrade_one_group() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = start_broker();
    // Slow members (20 ms between reading and committing a record), so
    // partitions move while records are in flight.
    mixed_group(&broker, || {
        Member::spawn_python(
            "kafka-python",
            &python,
            &broker,
            GROUP,
            TOPIC,
            &["--record-delay-ms", "20", "--max-secs", "240"],
        )
    });
}

/// The same with a librdkafka member of the classic protocol using the
/// cooperative-sticky assignor: it reports the partitions it still owns
/// when it rejoins, keeps those not revoked, and rejoins again after
/// giving up the others.
#[test]
fn classic_cooperative_and_consumer_protocol_rdkafka_members_in_one_group() {
    let broker = start_broker();
    mixed_group(&broker, || {
        Member::spawn(
            "rdkafka-classic",
            &broker,
            GROUP,
            TOPIC,
            &[
                "--strategy",
                "cooperative-sticky",
                "--record-delay-ms",
                "20",
                "--max-secs",
                "240",
            ],
        )
    });
}

/// A classic member (from `classic`) alone, then with a librdkafka member
/// of the consumer protocol (upgrade), then alone again (downgrade).
fn mixed_group(broker: &WeirProcess, classic: impl Fn() -> Member) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, broker, TOPIC, PARTITIONS);
    let mut produced = produce(&rt, broker, TOPIC, PARTITIONS, "first", 60);
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();

    let mut cl = classic();
    wait_for(
        "the classic member owns every partition",
        broker,
        &[&cl],
        || owned(&cl) == all,
    );
    assert_eq!(group_type(broker), Some("classic"));

    // The classic member is busy with these (20 ms each) while the
    // consumer-protocol member joins: partitions change hands mid-stream.
    produced.extend(produce(&rt, broker, TOPIC, PARTITIONS, "busy", 240));
    let mut rk = Member::spawn(
        "rdkafka",
        broker,
        GROUP,
        TOPIC,
        &[
            "--protocol",
            "consumer",
            "--max-secs",
            "240",
            "--record-delay-ms",
            "20",
        ],
    );
    wait_for(
        "a consumer group whose two members split the partitions",
        broker,
        &[&cl, &rk],
        || {
            let (a, b) = (owned(&cl), owned(&rk));
            group_type(broker) == Some("consumer")
                && !a.is_empty()
                && !b.is_empty()
                && a.is_disjoint(&b)
                && a.union(&b).count() == PARTITIONS as usize
        },
    );
    produced.extend(produce(&rt, broker, TOPIC, PARTITIONS, "second", 60));
    let read_all = |members: &[&Member], want: &[String]| {
        let got: BTreeSet<String> = values_read(members).into_iter().map(|r| r.2).collect();
        want.iter().all(|v| got.contains(v))
    };
    wait_for("every record read by the two", broker, &[&cl, &rk], || {
        read_all(&[&cl, &rk], &produced)
    });

    // The consumer-protocol member leaves: the group is classic again and
    // the classic member, after its rejoin, owns every partition.
    rk.close();
    wait_for(
        "a classic group whose classic member owns every partition",
        broker,
        &[&cl, &rk],
        || group_type(broker) == Some("classic") && owned(&cl) == all,
    );
    produced.extend(produce(&rt, broker, TOPIC, PARTITIONS, "third", 60));
    wait_for("every record read", broker, &[&cl, &rk], || {
        read_all(&[&cl, &rk], &produced)
    });

    // Exactly once across the two members.
    let mut reads: BTreeMap<(i32, i64), Vec<String>> = BTreeMap::new();
    for (p, o, v) in values_read(&[&cl, &rk]) {
        reads.entry((p, o)).or_default().push(v);
    }
    let twice: Vec<_> = reads.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "records read more than once: {twice:?}\n{}",
        diagnostics(broker, &[&cl, &rk])
    );
    assert_eq!(
        reads.len(),
        produced.len(),
        "distinct records read vs produced"
    );
    // Each protocol as it should be: librdkafka never sent JoinGroup, and
    // both members read records while the group was a consumer group.
    assert!(
        !rk.events()
            .iter()
            .any(|e| matches!(e, Event::Joined { .. })),
        "librdkafka used the classic protocol"
    );
    assert!(
        values_read(&[&rk])
            .iter()
            .any(|r| r.2.starts_with("second")),
        "librdkafka read none of the records produced while it was a member\n{}",
        diagnostics(broker, &[&cl, &rk])
    );
    cl.close();
}

/// A static librdkafka member of the classic protocol inside a consumer
/// group (upgraded by a consumer-protocol member) is SIGKILLed and
/// restarted with the same `group.instance.id` within its session: its
/// JoinGroup without member id replaces the old member (Kafka 4), so it
/// comes back in the old member's epoch with the old member's partitions,
/// the consumer-protocol member's assignment never changes, and nothing
/// is lost.
#[test]
fn a_restarted_static_classic_member_takes_its_place_in_a_consumer_group() {
    let broker = start_broker();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, TOPIC, PARTITIONS);
    let mut produced = produce(&rt, &broker, TOPIC, PARTITIONS, "first", 60);
    let classic = |name: &str| {
        Member::spawn(
            name,
            &broker,
            GROUP,
            TOPIC,
            &[
                "--instance-id",
                "static-classic",
                "--session-timeout-ms",
                "30000",
                "--max-secs",
                "240",
            ],
        )
    };
    let mut s = classic("static");
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    wait_for(
        "the static member owns every partition",
        &broker,
        &[&s],
        || owned(&s) == all,
    );
    let rk = Member::spawn(
        "rdkafka",
        &broker,
        GROUP,
        TOPIC,
        &["--protocol", "consumer", "--max-secs", "240"],
    );
    wait_for(
        "a consumer group whose two members split the partitions",
        &broker,
        &[&s, &rk],
        || {
            let (a, b) = (owned(&s), owned(&rk));
            group_type(&broker) == Some("consumer")
                && a.len() == 3
                && b.len() == 3
                && a.is_disjoint(&b)
        },
    );
    let (generation, s_owned) = s.owned().expect("s owns partitions");
    let rk_owned = owned(&rk);
    let rk_lines = rk.events().len();

    s.kill();
    produced.extend(produce(&rt, &broker, TOPIC, PARTITIONS, "after", 60));
    let s2 = classic("static-restarted");
    let members = [&s, &s2, &rk];
    wait_for(
        "the restarted member owns the old member's partitions",
        &broker,
        &members,
        || owned(&s2) == s_owned,
    );
    let read_all = |want: &[String]| {
        let got: BTreeSet<String> = values_read(&members).into_iter().map(|r| r.2).collect();
        want.iter().all(|v| got.contains(v))
    };
    wait_for("every record read", &broker, &members, || {
        read_all(&produced)
    });
    assert_eq!(
        s2.owned(),
        Some((generation, s_owned)),
        "the restarted member joined in the old member's epoch\n{}",
        diagnostics(&broker, &members)
    );
    assert_eq!(group_type(&broker), Some("consumer"));
    for e in &rk.events()[rk_lines.saturating_sub(1)..] {
        if let Event::Own { partitions, .. } = e {
            assert_eq!(
                partitions,
                &rk_owned,
                "the consumer-protocol member's assignment changed\n{}",
                diagnostics(&broker, &members)
            );
        }
    }
    let (mut s2, mut rk) = (s2, rk);
    s2.close();
    rk.close();
}
