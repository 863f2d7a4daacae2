//! librdkafka members with the KIP-848 consumer protocol
//! (`group.protocol=consumer`), each its own process
//! (`rdkafka-group-member --protocol consumer`, see
//! `src/bin/rdkafka_group_member.rs`), against one `weir serve`:
//!
//! 1. two members split a 12-partition topic 6/6, five members 2-3 each;
//!    one closes (leaves with epoch -1) and the others take its
//!    partitions; one is SIGKILLed and after the broker's session timeout
//!    (`group.consumer.session.timeout.ms`, 6 s here) the rest take its
//!    partitions. Every record is read, each exactly once except a record
//!    the killed member read but whose commit it had not seen
//!    acknowledged; the committed offsets end at the log end offsets.
//! 2. a regex subscription (`^rx-.*`) picks up a topic created after the
//!    member joined.
//! 3. a static member (`group.instance.id`) that closes (leaving with
//!    epoch -2) and is restarted within the session timeout gets its
//!    partitions back, the other member's assignment never changes and
//!    nothing is read twice. Before the restart the test waits until
//!    `weir groups describe` shows the closed member at epoch -2 (or gone)
//!    and the other one reconciled at the newest group epoch, and then
//!    until the broker has answered more ConsumerGroupHeartbeats (only the
//!    other member is running), so a broker that let the partitions go
//!    at the -2 leave would have handed them to the other member. The
//!    same `weir groups describe` output is checked for the group type,
//!    state, epochs and current vs target owners.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset};
use weir_compat_tests::{WeirProcess, run_with_timeout, weir_binary};

use crate::rdkafka_groups_members::{Event, Member, create_topic, diagnostics, produce, wait_for};

const TIMEOUT: Duration = Duration::from_secs(30);

fn start_broker() -> WeirProcess {
    WeirProcess::start_with_args(&[
        "--set",
        "group.consumer.min.session.timeout.ms=1000",
        "--set",
        "group.consumer.session.timeout.ms=6000",
        "--set",
        "group.consumer.min.heartbeat.interval.ms=100",
        "--set",
        "group.consumer.heartbeat.interval.ms=500",
        "--set",
        "http.listeners=127.0.0.1:0",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

/// The members' latest `OWN` sets when they split all `partitions`
/// partitions between them, none twice, each within `sizes`.
fn split(members: &[&Member], partitions: i32, sizes: &[usize]) -> bool {
    let mut seen = BTreeSet::new();
    for m in members {
        let Some((_, owned)) = m.owned() else {
            return false;
        };
        if !sizes.contains(&owned.len()) {
            return false;
        }
        for p in owned {
            if !seen.insert(p) {
                return false;
            }
        }
    }
    seen.len() == partitions as usize
}

/// Every `REC` line of `members`: (partition, offset, value).
pub(crate) fn values_read(members: &[&Member]) -> Vec<(i32, i64, String)> {
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

fn last_acked(m: &Member) -> BTreeMap<i32, i64> {
    let mut out = BTreeMap::new();
    for e in m.events() {
        if let Event::Commit { partition, offset } = e {
            out.insert(partition, offset);
        }
    }
    out
}

/// `weir groups describe` of a consumer-protocol group, parsed.
#[derive(Debug, Default)]
struct Described {
    /// The header's fields: TYPE, STATE, GROUP-EPOCH, ASSIGNMENT-EPOCH, …
    header: BTreeMap<String, String>,
    /// Partition → (member owning it now, member of the target assignment).
    owners: BTreeMap<i32, (String, String)>,
    /// Member id → (epoch, #assigned, #target).
    members: BTreeMap<String, (i32, usize, usize)>,
    text: String,
}

impl Described {
    fn group_epoch(&self) -> i32 {
        self.header["GROUP-EPOCH"].parse().expect("group epoch")
    }

    /// The member owning `partition` now.
    fn owner(&self, partition: i32) -> Option<&str> {
        self.owners.get(&partition).map(|o| o.0.as_str())
    }
}

fn describe_group(broker: &WeirProcess, group: &str) -> Described {
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["groups", "describe", group])
        .args(["--bootstrap-server", broker.bootstrap()]);
    let out = run_with_timeout(&mut cmd, None, TIMEOUT).expect("weir groups describe");
    assert!(out.success(), "{}", out.describe("weir groups describe"));
    let mut d = Described {
        text: out.stdout.clone(),
        ..Default::default()
    };
    let mut table = "";
    for line in out.stdout.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.first().copied() {
            None => continue,
            Some("GROUP") => {
                d.header = cols
                    .chunks(2)
                    .filter(|kv| kv.len() == 2)
                    .map(|kv| (kv[0].to_string(), kv[1].to_string()))
                    .collect();
            }
            Some("TOPIC") => table = "partitions",
            Some("CONSUMER-ID") => table = "members",
            Some(_) if table == "partitions" && cols.len() == 7 => {
                let p = cols[1].parse().expect("partition column");
                d.owners
                    .insert(p, (cols[5].to_string(), cols[6].to_string()));
            }
            Some(_) if table == "members" && cols.len() >= 6 => {
                let n = |s: &str| s.parse::<usize>().expect("count column");
                let epoch = cols[1].parse().expect("epoch column");
                d.members
                    .insert(cols[0].to_string(), (epoch, n(cols[4]), n(cols[5])));
            }
            Some(_) => panic!(
                "unexpected line in `weir groups describe`: {line}\n{}",
                out.stdout
            ),
        }
    }
    d
}

#[test]
fn rdkafka_consumer_protocol_members_split_leave_and_die() {
    const PARTITIONS: i32 = 12;
    let broker = start_broker();
    let topic = "cp-members";
    let group = "cp-members";
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, topic, PARTITIONS);
    let mut produced = produce(&rt, &broker, topic, PARTITIONS, "first", 240);
    let spawn = |name: &str| {
        Member::spawn(
            name,
            &broker,
            group,
            topic,
            &[
                "--protocol",
                "consumer",
                "--max-secs",
                "240",
                "--record-delay-ms",
                "100",
            ],
        )
    };

    // Members are slow (100 ms between reading a record and committing
    // it), so partitions move while records are in flight: a partition
    // given away before its owner revoked it would be read twice.
    let a = spawn("a");
    let b = spawn("b");
    wait_for("a and b own 6 partitions each", &broker, &[&a, &b], || {
        split(&[&a, &b], PARTITIONS, &[6])
    });
    let c = spawn("c");
    let mut d = spawn("d");
    let mut e = spawn("e");
    let five = [&a, &b, &c, &d, &e];
    wait_for(
        "five members own 2 or 3 partitions each",
        &broker,
        &five,
        || split(&five, PARTITIONS, &[2, 3]),
    );
    produced.extend(produce(&rt, &broker, topic, PARTITIONS, "second", 240));

    // e leaves: the four others own 3 each.
    e.close();
    let four = [&a, &b, &c, &d];
    wait_for(
        "after e left, four members own 3 each",
        &broker,
        &four,
        || split(&four, PARTITIONS, &[3]),
    );
    // Wait until everything so far is read, then kill d mid-stream.
    let all_read = |members: &[&Member], want: &[String]| {
        let got: BTreeSet<String> = values_read(members).into_iter().map(|r| r.2).collect();
        want.iter().all(|v| got.contains(v))
    };
    {
        let everyone = [&a, &b, &c, &d, &e];
        wait_for("the first 480 records read", &broker, &everyone, || {
            all_read(&everyone, &produced)
        });
    }
    produced.extend(produce(&rt, &broker, topic, PARTITIONS, "third", 120));
    d.kill();
    let three = [&a, &b, &c];
    wait_for(
        "after d's session timeout, three members own 4 each",
        &broker,
        &three,
        || split(&three, PARTITIONS, &[4]),
    );
    produced.extend(produce(&rt, &broker, topic, PARTITIONS, "fourth", 240));
    let everyone = [&a, &b, &c, &d, &e];
    wait_for("every record read", &broker, &everyone, || {
        all_read(&everyone, &produced)
    });

    // Exactly once, except what d read without an acknowledged commit.
    let d_acked = last_acked(&d);
    let mut reads: BTreeMap<(i32, i64), Vec<String>> = BTreeMap::new();
    for (p, o, v) in values_read(&everyone) {
        reads.entry((p, o)).or_default().push(v);
    }
    for ((p, o), vs) in &reads {
        if vs.len() > 1 {
            let acked = d_acked.get(p).copied().unwrap_or(0);
            assert!(
                vs.len() == 2 && *o >= acked,
                "partition {p} offset {o} read {} times (d's last acked commit {acked})\n{}",
                vs.len(),
                diagnostics(&broker, &everyone)
            );
        }
    }
    assert_eq!(
        reads.len(),
        produced.len(),
        "distinct records read vs produced"
    );
    // The consumer protocol it was: no member went through JoinGroup.
    assert!(
        everyone
            .iter()
            .all(|m| !m.events().iter().any(|e| matches!(e, Event::Joined { .. }))),
        "a member used the classic protocol"
    );

    // The committed offsets reach the log end offsets (read by an
    // admin-style OffsetFetch without member id).
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", group)
        .create()
        .expect("offsets client");
    wait_for(
        "committed offsets at the log end",
        &broker,
        &everyone,
        || {
            let mut list = rdkafka::TopicPartitionList::new();
            for p in 0..PARTITIONS {
                list.add_partition(topic, p);
            }
            let Ok(committed) = client.committed_offsets(list, TIMEOUT) else {
                return false;
            };
            (0..PARTITIONS).all(|p| {
                let hw = client
                    .fetch_watermarks(topic, p, TIMEOUT)
                    .map(|w| w.1)
                    .unwrap_or(-1);
                committed
                    .find_partition(topic, p)
                    .is_some_and(|e| e.offset() == Offset::Offset(hw))
            })
        },
    );
    drop(client);
    let (mut a, mut b, mut c) = (a, b, c);
    a.close();
    b.close();
    c.close();
}

#[test]
fn rdkafka_consumer_protocol_regex_picks_up_a_new_topic() {
    let broker = start_broker();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, "rx-a", 3);
    let mut produced = produce(&rt, &broker, "rx-a", 3, "a", 30);
    let mut m = Member::spawn(
        "m",
        &broker,
        "rx",
        "^rx-.*",
        &["--protocol", "consumer", "--max-secs", "240"],
    );
    let read = |m: &Member, want: &[String]| {
        let got: BTreeSet<String> = values_read(&[m]).into_iter().map(|r| r.2).collect();
        want.iter().all(|v| got.contains(v))
    };
    wait_for("rx-a read", &broker, &[&m], || read(&m, &produced));
    create_topic(&rt, &broker, "rx-b", 2);
    create_topic(&rt, &broker, "other", 2);
    let other = produce(&rt, &broker, "other", 2, "other", 10);
    produced.extend(produce(&rt, &broker, "rx-b", 2, "b", 20));
    wait_for("rx-b read after it was created", &broker, &[&m], || {
        read(&m, &produced)
    });
    let got: BTreeSet<String> = values_read(&[&m]).into_iter().map(|r| r.2).collect();
    assert!(
        other.iter().all(|v| !got.contains(v)),
        "a topic the regex does not match was read"
    );
    m.close();
}

#[test]
fn rdkafka_consumer_protocol_static_member_restart_keeps_its_partitions() {
    const PARTITIONS: i32 = 6;
    let broker = start_broker();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (topic, group) = ("cp-static", "cp-static");
    create_topic(&rt, &broker, topic, PARTITIONS);
    let mut produced = produce(&rt, &broker, topic, PARTITIONS, "before", 60);
    let spawn = |name: &str, instance: &str| {
        Member::spawn(
            name,
            &broker,
            group,
            topic,
            &[
                "--protocol",
                "consumer",
                "--instance-id",
                instance,
                "--max-secs",
                "240",
            ],
        )
    };
    let mut a = spawn("a", "static-a");
    let b = spawn("b", "static-b");
    wait_for("a and b own 3 partitions each", &broker, &[&a, &b], || {
        split(&[&a, &b], PARTITIONS, &[3])
    });
    let a_owned = a.owned().expect("a owns partitions").1;
    let b_owned = b.owned().expect("b owns partitions").1;
    let b_lines_before = b.events().len();

    // `weir groups describe`: a consumer group, Stable, both members at
    // the group epoch with 3 partitions now and in the target.
    let mut d = describe_group(&broker, group);
    wait_for("the group described as Stable", &broker, &[&a, &b], || {
        d = describe_group(&broker, group);
        d.header.get("STATE").map(String::as_str) == Some("Stable")
            && d.owners.len() == PARTITIONS as usize
    });
    assert_eq!(d.header["TYPE"], "consumer", "{}", d.text);
    assert_eq!(
        d.header["GROUP-EPOCH"], d.header["ASSIGNMENT-EPOCH"],
        "{}",
        d.text
    );
    assert_eq!(d.members.len(), 2, "{}", d.text);
    for (epoch, assigned, target) in d.members.values() {
        assert_eq!(
            (*epoch, *assigned, *target),
            (d.group_epoch(), 3, 3),
            "{}",
            d.text
        );
    }
    for (now, target) in d.owners.values() {
        assert_eq!(now, target, "current and target owners differ\n{}", d.text);
    }
    let owner_of = |d: &Described, ps: &BTreeSet<i32>| -> BTreeSet<String> {
        ps.iter()
            .filter_map(|p| d.owner(*p))
            .map(str::to_string)
            .collect()
    };
    let a_id = owner_of(&d, &a_owned)
        .into_iter()
        .next()
        .expect("a described");
    let b_id = owner_of(&d, &b_owned)
        .into_iter()
        .next()
        .expect("b described");
    assert_eq!(owner_of(&d, &a_owned).len(), 1, "{}", d.text);
    assert_eq!(
        owner_of(&d, &b_owned),
        BTreeSet::from([b_id.clone()]),
        "{}",
        d.text
    );

    // a closes: as a static member it leaves with epoch -2 and keeps its
    // assignment; its successor with the same instance id takes it over.
    a.close();
    // Before the successor starts: the broker has processed the leave (a
    // is at epoch -2, or gone) and b is reconciled at the newest group
    // epoch; then b heartbeats again (the broker answers more
    // ConsumerGroupHeartbeats; only b is running). A broker that released
    // a's partitions at the leave would have given them to b by now.
    wait_for(
        "a's leave processed and b reconciled at the group epoch",
        &broker,
        &[&a, &b],
        || {
            d = describe_group(&broker, group);
            let b_done = d
                .members
                .get(&b_id)
                .is_some_and(|(epoch, assigned, target)| {
                    *epoch == d.group_epoch() && assigned == target
                });
            let a_left = d
                .members
                .get(&a_id)
                .is_none_or(|(epoch, _, _)| *epoch == -2);
            b_done && a_left
        },
    );
    let heartbeats = || {
        broker
            .metric("weir_requests_total", &[("api", "ConsumerGroupHeartbeat")])
            .unwrap_or_else(|e| panic!("metrics: {e}"))
    };
    let seen = heartbeats();
    wait_for("two more heartbeats answered", &broker, &[&a, &b], || {
        heartbeats() >= seen + 2.0
    });
    let d = describe_group(&broker, group);
    assert_eq!(
        d.members.get(&a_id).map(|m| m.0),
        Some(-2),
        "a is kept at epoch -2\n{}",
        d.text
    );
    assert_eq!(
        owner_of(&d, &a_owned),
        BTreeSet::from([a_id.clone()]),
        "a keeps its partitions while away\n{}",
        d.text
    );
    produced.extend(produce(&rt, &broker, topic, PARTITIONS, "between", 60));
    let a2 = spawn("a2", "static-a");
    wait_for(
        "the restarted static member owns a's partitions",
        &broker,
        &[&a, &a2, &b],
        || a2.owned().is_some_and(|(_, p)| p == a_owned),
    );
    let all_read = |want: &[String]| {
        let got: BTreeSet<String> = values_read(&[&a, &a2, &b])
            .into_iter()
            .map(|r| r.2)
            .collect();
        want.iter().all(|v| got.contains(v))
    };
    wait_for("every record read", &broker, &[&a, &a2, &b], || {
        all_read(&produced)
    });

    // b never owned anything but its own three partitions.
    let b_events = b.events();
    for e in &b_events[b_lines_before.saturating_sub(1)..] {
        if let Event::Own { partitions, .. } = e {
            assert_eq!(
                partitions,
                &b_owned,
                "b's assignment changed while the static member restarted\n{}",
                diagnostics(&broker, &[&a, &a2, &b])
            );
        }
    }
    // a2 resumed at a's commits: nothing read twice.
    let mut reads: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (p, o, _) in values_read(&[&a, &a2, &b]) {
        *reads.entry((p, o)).or_default() += 1;
    }
    let twice: Vec<_> = reads.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "records read twice: {twice:?}\n{}",
        diagnostics(&broker, &[&a, &a2, &b])
    );
    assert_eq!(
        reads.len(),
        produced.len(),
        "distinct records read vs produced"
    );
    let (mut a2, mut b) = (a2, b);
    a2.close();
    b.close();
}
