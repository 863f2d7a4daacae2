//! Model test of consumer-protocol reconciliation: random joins,
//! heartbeats (revoking at once or late), leaves, topic changes and time
//! passing, driven by model clients in virtual time.
//!
//! Checked after every step: no partition is consumed by two clients (so
//! no partition is handed to a member before its previous owner revoked
//! it). After the run every live client heartbeats until the group
//! settles: then each partition of the subscribed topics is consumed by
//! exactly one client, the group is Stable, and a coordinator rebuilt from
//! the appended records describes the same group.

use proptest::prelude::*;

use crate::consumer_common::*;

#[derive(Clone, Debug)]
enum Op {
    /// Client i heartbeats (joining if needed); `revoke`: it gives up
    /// partitions no longer assigned before heartbeating.
    Beat {
        i: usize,
        revoke: bool,
    },
    Leave {
        i: usize,
    },
    /// Time passes; clients whose session would expire first stop
    /// consuming (as a real client does when its heartbeats fail).
    Wait {
        ms: i64,
    },
    /// Topic `t` gets more partitions (or is created).
    Grow {
        t: u8,
        partitions: i32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..5usize, any::<bool>()).prop_map(|(i, revoke)| Op::Beat { i, revoke }),
        1 => (0..5usize).prop_map(|i| Op::Leave { i }),
        1 => (1_000..30_000i64).prop_map(|ms| Op::Wait { ms }),
        1 => (1..3u8, 1..9i32).prop_map(|(t, partitions)| Op::Grow { t, partitions }),
    ]
}

fn topic_name(t: u8) -> String {
    format!("t{t}")
}

fn run(ops: &[Op]) {
    let mut cg = Cg::new();
    cg.topic("t1", 1, 4);
    let mut clients: Vec<Client> = (0..5)
        .map(|i| {
            // Two subscriptions: "t1" and "t1,t2" (t2 may appear later).
            let topics: &[&str] = if i % 2 == 0 { &["t1"] } else { &["t1", "t2"] };
            Client::new(&format!("m{i}"), topics)
        })
        .collect();
    clients[4].topics.clear();
    clients[4].regex = Some("t[0-9]".into());
    for op in ops {
        match *op {
            Op::Beat { i, revoke } => {
                clients[i].beat(&mut cg, revoke);
            }
            Op::Leave { i } => {
                if clients[i].epoch.is_some() {
                    clients[i].leave(&mut cg);
                }
            }
            Op::Wait { ms } => {
                let until = cg.now + ms;
                for c in clients.iter_mut() {
                    if c.epoch.is_some() && c.last_ok_ms + i64::from(SESSION_MS) <= until {
                        c.lose_all();
                    }
                }
                cg.advance(ms);
            }
            Op::Grow { t, partitions } => {
                let now = cg.topics.get(&topic_name(t)).map_or(0, |i| i.partitions);
                cg.topic(&topic_name(t), t, now.max(partitions));
            }
        }
        assert_disjoint(&clients);
    }
    // Settle: live clients heartbeat and revoke promptly.
    let live: Vec<usize> = (0..clients.len())
        .filter(|&i| clients[i].epoch.is_some())
        .collect();
    for _ in 0..8 {
        for &i in &live {
            clients[i].beat(&mut cg, true);
            assert_disjoint(&clients);
        }
    }
    if live.is_empty() {
        return;
    }
    let d = cg.describe();
    assert_eq!(d.state, "Stable", "{d:#?}");
    let mut expected = 0usize;
    for (name, info) in cg.topics.iter() {
        let subscribed = live.iter().any(|&i| {
            clients[i].topics.contains(name)
                || (clients[i].regex.is_some() && name.starts_with('t'))
        });
        if subscribed {
            expected += info.partitions as usize;
        }
    }
    let consumed: usize = clients.iter().map(|c| count(&c.owned)).sum();
    assert_eq!(
        consumed, expected,
        "every subscribed partition consumed once"
    );
    for &i in &live {
        let m = d
            .members
            .iter()
            .find(|m| m.member_id == clients[i].id)
            .expect("live client is a member");
        assert_eq!(m.assignment, clients[i].owned, "{}", clients[i].id);
        assert_eq!(m.assignment, m.target_assignment);
    }
    let replayed = cg.replayed();
    assert_eq!(
        replayed
            .describe_consumer_groups(&[GROUP.to_string()])
            .remove(0),
        d
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn partitions_are_never_consumed_twice(ops in prop::collection::vec(op(), 1..80)) {
        run(&ops);
    }
}
