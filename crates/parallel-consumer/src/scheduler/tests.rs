use super::*;
use proptest::prelude::*;

fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: p,
    }
}

fn config(ordering: Ordering, max_concurrency: usize) -> SchedulerConfig {
    SchedulerConfig {
        ordering,
        max_concurrency,
        max_buffered_per_partition: 100,
        resume_at_buffered: 50,
        ..SchedulerConfig::default()
    }
}

/// (id, partition, payload) of the submits in `decisions`.
fn submits(decisions: &[Decision<i64>]) -> Vec<(TaskId, i32, i64)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Submit {
                id, tp, payload, ..
            } => Some((*id, tp.partition, *payload)),
            _ => None,
        })
        .collect()
}

fn key(k: &str) -> Option<Vec<u8>> {
    Some(k.as_bytes().to_vec())
}

#[test]
fn config_is_validated() {
    let mut c = config(Ordering::Key, 0);
    assert_eq!(
        c.validate(),
        Err(ConfigError::Zero {
            name: "max_concurrency"
        })
    );
    c.max_concurrency = 1;
    c.resume_at_buffered = 100;
    assert!(matches!(
        Scheduler::<()>::new(c),
        Err(ConfigError::ResumeNotBelowMax { .. })
    ));
}

#[test]
fn partition_mode_runs_one_per_partition() {
    let mut s = Scheduler::new(config(Ordering::Partition, 10)).unwrap();
    s.add_partition(tp(0));
    s.add_partition(tp(1));
    for o in 0..3 {
        s.push(&tp(0), None, o).unwrap();
        s.push(&tp(1), None, 100 + o).unwrap();
    }
    let d = s.decide();
    let sub = submits(&d);
    assert_eq!(
        sub.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>(),
        vec![(0, 0), (1, 100)]
    );
    assert!(submits(&s.decide()).is_empty(), "both partitions busy");
    s.finished(sub[0].0);
    assert_eq!(
        submits(&s.decide()).iter().map(|s| s.2).collect::<Vec<_>>(),
        vec![1]
    );
}

#[test]
fn key_mode_serializes_each_key_and_keeps_its_order() {
    let mut s = Scheduler::new(config(Ordering::Key, 10)).unwrap();
    s.add_partition(tp(0));
    // offsets 0..5 with keys a b a c b
    for (o, k) in [(0, "a"), (1, "b"), (2, "a"), (3, "c"), (4, "b")] {
        s.push(&tp(0), key(k), o).unwrap();
    }
    let mut running: Vec<(TaskId, i64)> = Vec::new();
    let mut order = Vec::new();
    // One round submits one per partition; loop until nothing more runs.
    loop {
        let sub = submits(&s.decide());
        if sub.is_empty() {
            break;
        }
        running.extend(sub.iter().map(|s| (s.0, s.2)));
        order.extend(sub.iter().map(|s| s.2));
    }
    assert_eq!(order, vec![0, 1, 3], "a, b, c run; the second a and b wait");
    // Finish the first "a": the second "a" (offset 2) may run, "b" still busy.
    s.finished(running[0].0);
    assert_eq!(
        submits(&s.decide()).iter().map(|s| s.2).collect::<Vec<_>>(),
        vec![2]
    );
    s.finished(running[1].0);
    assert_eq!(
        submits(&s.decide()).iter().map(|s| s.2).collect::<Vec<_>>(),
        vec![4]
    );
}

#[test]
fn key_mode_orders_null_keys_like_one_key() {
    let mut s = Scheduler::new(config(Ordering::Key, 10)).unwrap();
    s.add_partition(tp(0));
    s.push(&tp(0), None, 0).unwrap();
    s.push(&tp(0), None, 1).unwrap();
    s.push(&tp(0), key("x"), 2).unwrap();
    let mut all = Vec::new();
    loop {
        let sub = submits(&s.decide());
        if sub.is_empty() {
            break;
        }
        all.extend(sub.iter().map(|s| s.2));
    }
    assert_eq!(all, vec![0, 2]);
}

#[test]
fn same_key_in_different_partitions_runs_in_parallel() {
    let mut s = Scheduler::new(config(Ordering::Key, 10)).unwrap();
    s.add_partition(tp(0));
    s.add_partition(tp(1));
    s.push(&tp(0), key("k"), 0).unwrap();
    s.push(&tp(1), key("k"), 1).unwrap();
    assert_eq!(submits(&s.decide()).len(), 2);
}

#[test]
fn unordered_is_bounded_by_global_concurrency() {
    let mut s = Scheduler::new(config(Ordering::Unordered, 3)).unwrap();
    s.add_partition(tp(0));
    s.add_partition(tp(1));
    for o in 0..5 {
        s.push(&tp(0), key("same"), o).unwrap();
        s.push(&tp(1), None, 10 + o).unwrap();
    }
    let sub = submits(&s.decide());
    assert_eq!(sub.len(), 3);
    assert_eq!(s.running(), 3);
    assert!(submits(&s.decide()).is_empty());
    s.finished(sub[1].0);
    assert_eq!(submits(&s.decide()).len(), 1);
}

#[test]
fn round_robin_does_not_starve_a_partition() {
    let mut s = Scheduler::new(config(Ordering::Unordered, 1)).unwrap();
    s.add_partition(tp(0));
    s.add_partition(tp(1));
    for o in 0..3 {
        s.push(&tp(0), None, o).unwrap();
        s.push(&tp(1), None, 10 + o).unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..4 {
        let sub = submits(&s.decide());
        assert_eq!(sub.len(), 1);
        seen.push(sub[0].1);
        s.finished(sub[0].0);
    }
    assert_eq!(seen, vec![0, 1, 0, 1]);
}

#[test]
fn full_buffer_pauses_and_drained_buffer_resumes() {
    let mut s = Scheduler::new(SchedulerConfig {
        ordering: Ordering::Partition,
        max_concurrency: 1,
        max_buffered_per_partition: 4,
        resume_at_buffered: 1,
        ..SchedulerConfig::default()
    })
    .unwrap();
    s.add_partition(tp(0));
    for o in 0..3 {
        s.push(&tp(0), None, o).unwrap();
    }
    let d = s.decide();
    assert!(!d.contains(&Decision::Pause(tp(0))));
    let mut id = submits(&d)[0].0;
    s.push(&tp(0), None, 3).unwrap();
    let d = s.decide();
    assert!(d.contains(&Decision::Pause(tp(0))), "{d:?}");
    assert!(s.is_paused(&tp(0)));
    // Records that arrive while paused (already fetched) are still kept.
    assert!(s.push(&tp(0), None, 4).is_ok());
    assert_eq!(s.buffered(&tp(0)), 5);
    // Drain to 2: still paused (hysteresis); at 1: resumed.
    for expected_buffered in [4, 3, 2] {
        s.finished(id);
        let d = s.decide();
        assert_eq!(s.buffered(&tp(0)), expected_buffered);
        assert!(!d.contains(&Decision::Resume(tp(0))));
        id = submits(&d)[0].0;
    }
    s.finished(id);
    let d = s.decide();
    assert_eq!(s.buffered(&tp(0)), 1);
    assert!(d.contains(&Decision::Resume(tp(0))));
    assert!(!s.is_paused(&tp(0)));
}

#[test]
fn held_partition_is_paused_but_still_runs() {
    let mut s = Scheduler::new(config(Ordering::Unordered, 4)).unwrap();
    s.add_partition(tp(0));
    s.push(&tp(0), None, 0).unwrap();
    s.set_held(&tp(0), true);
    let d = s.decide();
    assert!(d.contains(&Decision::Pause(tp(0))));
    assert_eq!(submits(&d).len(), 1);
    s.set_held(&tp(0), false);
    assert!(s.decide().contains(&Decision::Resume(tp(0))));
}

#[test]
fn stopped_partition_submits_nothing_and_stays_paused() {
    let mut s = Scheduler::new(config(Ordering::Unordered, 4)).unwrap();
    s.add_partition(tp(0));
    s.push(&tp(0), None, 0).unwrap();
    s.stop(&tp(0));
    let d = s.decide();
    assert!(submits(&d).is_empty());
    assert!(d.contains(&Decision::Pause(tp(0))));
    assert!(s.is_stopped(&tp(0)));
    assert!(s.decide().is_empty());
}

#[test]
fn removed_partition_drops_waiting_and_keeps_running_counted() {
    let mut s = Scheduler::new(config(Ordering::Key, 2)).unwrap();
    s.add_partition(tp(0));
    s.push(&tp(0), key("k"), 0).unwrap();
    s.push(&tp(0), key("k"), 1).unwrap();
    let sub = submits(&s.decide());
    assert_eq!(sub.len(), 1);
    assert_eq!(s.remove_partition(&tp(0)), vec![1]);
    assert_eq!(s.running(), 1, "the old task still occupies a worker");
    // Reassigned: the same key waits for the old task, which may still be
    // writing its effect.
    s.add_partition(tp(0));
    s.push(&tp(0), key("k"), 1).unwrap();
    assert!(submits(&s.decide()).is_empty());
    s.finished(sub[0].0);
    assert_eq!(s.running(), 0);
    assert_eq!(
        s.buffered(&tp(0)),
        1,
        "old task not counted in the new buffer"
    );
    assert_eq!(submits(&s.decide()).len(), 1);
    assert_eq!(s.push(&tp(9), None, 5), Err(5));
}

#[derive(Debug, Clone)]
enum Op {
    Push { partition: i32, key: Option<u8> },
    Finish(usize),
    Decide,
    Revoke(i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i32..3, proptest::option::of(0u8..4))
            .prop_map(|(partition, key)| Op::Push { partition, key }),
        3 => any::<usize>().prop_map(Op::Finish),
        3 => Just(Op::Decide),
        1 => (0i32..3).prop_map(Op::Revoke),
    ]
}

fn ordering() -> impl Strategy<Value = Ordering> {
    prop_oneof![
        Just(Ordering::Partition),
        Just(Ordering::Key),
        Just(Ordering::Unordered)
    ]
}

proptest! {
    /// Random pushes, finishes and revokes: concurrency and locks hold, and
    /// within a lock tasks start in delivery order.
    #[test]
    fn invariants_hold(
        ordering in ordering(),
        max_concurrency in 1usize..5,
        ops in proptest::collection::vec(op(), 0..300),
    ) {
        let mut s = Scheduler::new(SchedulerConfig {
            ordering,
            max_concurrency,
            max_buffered_per_partition: 6,
            resume_at_buffered: 2,
            ..SchedulerConfig::default()
        }).unwrap();
        for p in 0..3 {
            s.add_partition(tp(p));
        }
        // payload = (partition, key, sequence number per partition)
        let mut seq = 0i64;
        let mut running: Vec<(TaskId, i32, Option<u8>, i64)> = Vec::new();
        let mut last_started: HashMap<(i32, Option<u8>), i64> = HashMap::new();
        let mut paused: HashSet<i32> = HashSet::new();
        let mut payload_key: HashMap<i64, (i32, Option<u8>)> = HashMap::new();
        for op in ops {
            match op {
                Op::Push { partition, key } => {
                    seq += 1;
                    payload_key.insert(seq, (partition, key));
                    s.push(&tp(partition), key.map(|k| vec![k]), seq).unwrap();
                }
                Op::Finish(i) => {
                    if !running.is_empty() {
                        let (id, ..) = running.remove(i % running.len());
                        s.finished(id);
                    }
                }
                Op::Revoke(p) => {
                    s.remove_partition(&tp(p));
                    s.add_partition(tp(p));
                    paused.remove(&p);
                    // Order is only promised within one incarnation.
                    last_started.retain(|(lp, _), _| *lp != p);
                }
                Op::Decide => {
                    for d in s.decide() {
                        match d {
                            Decision::Submit { id, tp, payload, .. } => {
                                let (p, k) = payload_key[&payload];
                                prop_assert_eq!(p, tp.partition);
                                let lock_key = match ordering {
                                    Ordering::Partition => Some((p, None)),
                                    Ordering::Key => Some((p, k)),
                                    Ordering::Unordered => None,
                                };
                                if let Some(lk) = lock_key {
                                    prop_assert!(
                                        !running.iter().any(|r| match ordering {
                                            Ordering::Partition => r.1 == p,
                                            _ => r.1 == p && r.2 == k,
                                        }),
                                        "two tasks hold one lock"
                                    );
                                    if let Some(prev) = last_started.insert(lk, payload) {
                                        prop_assert!(prev < payload, "lock order broken");
                                    }
                                }
                                running.push((id, p, k, payload));
                            }
                            Decision::Pause(tp) => {
                                prop_assert!(paused.insert(tp.partition), "paused twice");
                            }
                            Decision::Resume(tp) => {
                                prop_assert!(paused.remove(&tp.partition), "resumed while not paused");
                            }
                        }
                    }
                    prop_assert!(s.running() <= max_concurrency);
                    prop_assert_eq!(s.running(), running.len());
                    for p in 0..3 {
                        let b = s.buffered(&tp(p));
                        if b >= 6 {
                            prop_assert!(paused.contains(&p));
                        }
                        if b <= 2 {
                            prop_assert!(!paused.contains(&p));
                        }
                    }
                }
            }
        }
        // Draining: finishing everything eventually runs every waiting record.
        loop {
            for (id, ..) in running.drain(..) {
                s.finished(id);
            }
            let sub: Vec<_> = s.decide().into_iter().filter_map(|d| match d {
                Decision::Submit { id, tp, payload, .. } => Some((id, tp.partition, None, payload)),
                _ => None,
            }).collect();
            if sub.is_empty() {
                break;
            }
            running.extend(sub);
        }
        for p in 0..3 {
            prop_assert_eq!(s.waiting(&tp(p)), 0);
        }
    }
}

#[test]
fn a_user_pause_holds_through_an_empty_buffer_until_resumed() {
    let mut s = Scheduler::new(config(Ordering::Unordered, 4)).unwrap();
    s.add_partition(tp(0));
    s.push(&tp(0), None, 1).unwrap();
    s.set_user_paused(&tp(0), true);
    let d = s.decide();
    assert!(submits(&d).is_empty(), "a paused partition's record ran");
    assert!(d.contains(&Decision::Pause(tp(0))));
    // The buffer is far below the resume level: flow control alone would
    // resume; the user pause holds.
    for _ in 0..3 {
        assert!(s.decide().is_empty());
    }
    assert!(s.is_paused(&tp(0)));
    s.set_user_paused(&tp(0), false);
    let d = s.decide();
    assert_eq!(submits(&d).len(), 1);
    assert!(d.contains(&Decision::Resume(tp(0))));
}

/// (batch, payloads) of the submits in `decisions`, batch by batch.
fn batches(decisions: &[Decision<i64>]) -> Vec<(TaskId, Vec<i64>)> {
    let mut out: Vec<(TaskId, Vec<i64>)> = Vec::new();
    for d in decisions {
        if let Decision::Submit { batch, payload, .. } = d {
            match out.last_mut() {
                Some((b, v)) if b == batch => v.push(*payload),
                _ => out.push((*batch, vec![*payload])),
            }
        }
    }
    out
}

fn batch_config(ordering: Ordering, max_concurrency: usize, max_batch: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_batch,
        ..config(ordering, max_concurrency)
    }
}

#[test]
fn a_key_order_batch_holds_one_key_in_order() {
    let mut s = Scheduler::new(batch_config(Ordering::Key, 10, 3)).unwrap();
    s.add_partition(tp(0));
    for (o, k) in [(0, "a"), (1, "b"), (2, "a"), (3, "a"), (4, "b"), (5, "a")] {
        s.push(&tp(0), key(k), o).unwrap();
    }
    let got: Vec<Vec<i64>> = batches(&s.decide()).into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, vec![vec![0, 2, 3], vec![1, 4]]);
    // Key a's lock is held until its batch's last record finished: 5 waits.
    let ids: Vec<TaskId> = s.running.keys().copied().collect();
    let mut ids = ids;
    ids.sort();
    s.finished(ids[0]);
    s.finished(ids[1]);
    assert!(submits(&s.decide()).is_empty(), "a's batch still runs");
    s.finished(ids[2]);
    assert_eq!(
        batches(&s.decide())
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        vec![vec![5]]
    );
}

#[test]
fn a_partition_order_batch_is_the_next_records_and_counts_once() {
    let mut s = Scheduler::new(batch_config(Ordering::Partition, 1, 4)).unwrap();
    s.add_partition(tp(0));
    s.add_partition(tp(1));
    for o in 0..6 {
        s.push(&tp(0), None, o).unwrap();
    }
    s.push(&tp(1), None, 100).unwrap();
    let first = batches(&s.decide());
    assert_eq!(first.len(), 1, "concurrency 1: one handler call");
    assert_eq!(first[0].1, vec![0, 1, 2, 3]);
    for id in s.running.keys().copied().collect::<Vec<_>>() {
        s.finished(id);
    }
    let next: Vec<Vec<i64>> = batches(&s.decide()).into_iter().map(|(_, v)| v).collect();
    assert_eq!(next, vec![vec![100]], "round robin moves on to partition 1");
}
