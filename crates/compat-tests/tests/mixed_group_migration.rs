//! A mixed group against one `weir serve`: a kafka-python member (classic
//! protocol, `tests/compat/python/group_member.py`) owns a 6-partition
//! topic; a librdkafka member with `group.protocol=consumer` joins the same
//! group, which becomes a consumer group (online upgrade) whose partitions
//! are split between the two; the librdkafka member leaves and the group
//! goes back to classic (online downgrade) with the kafka-python member
//! owning every partition. Both commit each record; every record produced
//! is read exactly once across the two, and the group type is read from
//! `/metrics` (`weir_group_type`) at each stage.

use std::collections::{BTreeMap, BTreeSet};

use weir_compat_tests::{WeirProcess, skip_or_fail, sum_samples, tools};

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

fn values_read(members: &[&Member]) -> Vec<(i32, i64, String)> {
    members
        .iter()
        .flat_map(|m| m.events())
        .filter_map(|e| match e {
            Event::Rec {
                partition,
                offset,
                value,
            } => Some((partition, offset, value)),
            _ => None,
        })
        .collect()
}

#[test]
fn kafka_python_and_rdkafka_members_upgrade_and_downgrade_one_group() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = WeirProcess::start_with_args(&[
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
    .unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, TOPIC, PARTITIONS);
    let mut produced = produce(&rt, &broker, TOPIC, PARTITIONS, "first", 60);
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();

    // Slow members (20 ms between reading and committing a record), so
    // partitions move while records are in flight.
    let mut py = Member::spawn_python(
        "kafka-python",
        &python,
        &broker,
        GROUP,
        TOPIC,
        &["--record-delay-ms", "20", "--max-secs", "240"],
    );
    wait_for("kafka-python owns every partition", &broker, &[&py], || {
        owned(&py) == all
    });
    assert_eq!(group_type(&broker), Some("classic"));

    // kafka-python is busy with these (20 ms each) while librdkafka joins:
    // partitions change hands mid-stream.
    produced.extend(produce(&rt, &broker, TOPIC, PARTITIONS, "busy", 240));
    let mut rk = Member::spawn(
        "rdkafka",
        &broker,
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
        &broker,
        &[&py, &rk],
        || {
            let (a, b) = (owned(&py), owned(&rk));
            group_type(&broker) == Some("consumer")
                && !a.is_empty()
                && !b.is_empty()
                && a.is_disjoint(&b)
                && a.union(&b).count() == PARTITIONS as usize
        },
    );
    produced.extend(produce(&rt, &broker, TOPIC, PARTITIONS, "second", 60));
    let read_all = |members: &[&Member], want: &[String]| {
        let got: BTreeSet<String> = values_read(members).into_iter().map(|r| r.2).collect();
        want.iter().all(|v| got.contains(v))
    };
    wait_for("every record read by the two", &broker, &[&py, &rk], || {
        read_all(&[&py, &rk], &produced)
    });

    // The consumer-protocol member leaves: the group is classic again and
    // kafka-python, after its rejoin, owns every partition.
    rk.close();
    wait_for(
        "a classic group whose kafka-python member owns every partition",
        &broker,
        &[&py, &rk],
        || group_type(&broker) == Some("classic") && owned(&py) == all,
    );
    produced.extend(produce(&rt, &broker, TOPIC, PARTITIONS, "third", 60));
    wait_for("every record read", &broker, &[&py, &rk], || {
        read_all(&[&py, &rk], &produced)
    });

    // Exactly once across the two members.
    let mut reads: BTreeMap<(i32, i64), Vec<String>> = BTreeMap::new();
    for (p, o, v) in values_read(&[&py, &rk]) {
        reads.entry((p, o)).or_default().push(v);
    }
    let twice: Vec<_> = reads.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "records read more than once: {twice:?}\n{}",
        diagnostics(&broker, &[&py, &rk])
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
        diagnostics(&broker, &[&py, &rk])
    );
    py.close();
}
