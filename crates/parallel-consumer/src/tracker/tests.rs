use super::*;
use proptest::prelude::*;

fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: p,
    }
}

// Rows of the scenario table in seed 004, at the tracker level.

#[test]
fn unfinished_record_holds_the_watermark() {
    // 10, 11, 12 delivered; 11 and 12 succeed; 10 still runs.
    let mut p = PartitionTracker::new(10);
    for o in 10..=12 {
        p.deliver(o, 0).unwrap();
    }
    p.complete(11).unwrap();
    p.complete(12).unwrap();
    assert_eq!(p.next_commit(), 10);
    assert_eq!(p.position(), 13);
    assert_eq!(p.in_flight(), 1);
    assert_eq!(p.completed_above_watermark(), vec![11, 12]);
    assert_eq!(p.complete(10).unwrap(), 13);
    assert!(p.completed_above_watermark().is_empty());
}

#[test]
fn delivered_but_unsubmitted_record_holds_the_watermark() {
    // The queue was full, so 12 was delivered but never submitted: it stays
    // in the delivery order as unfinished.
    let mut p = PartitionTracker::new(10);
    for o in 10..=12 {
        p.deliver(o, 0).unwrap();
    }
    p.complete(10).unwrap();
    p.complete(11).unwrap();
    assert_eq!(p.next_commit(), 12);
}

#[test]
fn gaps_in_offsets_are_not_waited_for() {
    // Compaction or control records leave holes: 10, 14, 20 are the records.
    let mut p = PartitionTracker::new(10);
    for o in [10, 14, 20] {
        p.deliver(o, 0).unwrap();
    }
    p.complete(14).unwrap();
    p.complete(10).unwrap();
    assert_eq!(p.next_commit(), 15);
    p.complete(20).unwrap();
    assert_eq!(p.next_commit(), 21);
}

#[test]
fn failed_record_holds_the_watermark_until_retried() {
    let mut p = PartitionTracker::new(0);
    for o in 0..3 {
        p.deliver(o, 0).unwrap();
    }
    assert_eq!(p.fail(0).unwrap(), 1);
    p.complete(1).unwrap();
    p.complete(2).unwrap();
    assert_eq!(p.next_commit(), 0);
    assert_eq!(p.failed(), 1);
    p.retry(0).unwrap();
    assert_eq!(p.fail(0).unwrap(), 1, "a retried record fails afresh");
    p.retry(0).unwrap();
    assert_eq!(p.complete(0).unwrap(), 3);
    assert_eq!(p.failed(), 0);
    assert_eq!(p.in_flight(), 0);
}

#[test]
fn commit_candidate_only_after_progress_and_failed_commit_is_not_checkpointed() {
    // 10, 11, 12 succeed, the commit of 13 fails: the confirmed checkpoint
    // stays 10 and 13 is proposed again.
    let mut a = AssignmentTracker::new();
    let g = a.assign(tp(0), 10);
    assert!(a.commit_candidates().is_empty());
    for o in 10..=12 {
        a.deliver(&tp(0), o, 0).unwrap();
        a.complete(&tp(0), g, o).unwrap();
    }
    assert_eq!(a.commit_candidates(), vec![(tp(0), 13)]);
    // the commit request failed: nothing confirmed
    assert_eq!(a.committed(&tp(0)), Some(10));
    assert_eq!(a.commit_candidates(), vec![(tp(0), 13)]);
    a.commit_confirmed(&tp(0), g, 13);
    assert_eq!(a.committed(&tp(0)), Some(13));
    assert!(a.commit_candidates().is_empty());
}

#[test]
fn revoke_commits_only_the_completed_prefix() {
    // Revoke while 10 is unfinished and 11 completed: commit at most 10.
    let mut a = AssignmentTracker::new();
    let g = a.assign(tp(0), 8);
    for o in 8..=11 {
        a.deliver(&tp(0), o, 0).unwrap();
    }
    a.complete(&tp(0), g, 8).unwrap();
    a.complete(&tp(0), g, 9).unwrap();
    a.complete(&tp(0), g, 11).unwrap();
    assert_eq!(a.revoke(&tp(0)), Some(10));
    assert!(a.partition(&tp(0)).is_none());
}

#[test]
fn late_result_after_lost_partition_is_discarded() {
    let mut a = AssignmentTracker::new();
    let g1 = a.assign(tp(0), 10);
    a.deliver(&tp(0), 10, 0).unwrap();
    a.lost(&tp(0));
    assert!(a.commit_candidates().is_empty());
    // Reassigned later (new generation): the old worker's result arrives.
    let g2 = a.assign(tp(0), 10);
    assert_ne!(g1, g2);
    a.deliver(&tp(0), 10, 5).unwrap();
    assert_eq!(a.complete(&tp(0), g1, 10).unwrap(), ResultOutcome::Stale);
    assert_eq!(a.fail(&tp(0), g1, 10).unwrap(), None);
    assert_eq!(a.partition(&tp(0)).unwrap().next_commit(), 10);
    assert_eq!(
        a.complete(&tp(0), g2, 10).unwrap(),
        ResultOutcome::Applied { next_commit: 11 }
    );
}

#[test]
fn confirmation_from_an_old_generation_is_ignored() {
    let mut a = AssignmentTracker::new();
    let g1 = a.assign(tp(0), 0);
    a.revoke(&tp(0));
    let _g2 = a.assign(tp(0), 0);
    a.commit_confirmed(&tp(0), g1, 5);
    assert_eq!(a.committed(&tp(0)), Some(0));
}

#[test]
fn bad_feeds_are_typed_errors() {
    let mut p = PartitionTracker::new(5);
    assert_eq!(
        p.deliver(4, 0),
        Err(TrackerError::BelowWatermark {
            offset: 4,
            next_commit: 5
        })
    );
    p.deliver(6, 0).unwrap();
    assert_eq!(
        p.deliver(6, 0),
        Err(TrackerError::OutOfOrder { offset: 6, last: 6 })
    );
    assert_eq!(p.complete(5), Err(TrackerError::NotDelivered { offset: 5 }));
    p.complete(6).unwrap();
    assert_eq!(p.complete(6), Err(TrackerError::NotDelivered { offset: 6 }));
}

#[test]
fn oldest_unfinished_age() {
    let mut p = PartitionTracker::new(0);
    p.deliver(0, 100).unwrap();
    p.deliver(3, 250).unwrap();
    assert_eq!(p.oldest_unfinished_age_ms(1000), Some(900));
    p.complete(0).unwrap();
    assert_eq!(p.oldest_unfinished_age_ms(1000), Some(750));
    p.complete(3).unwrap();
    assert_eq!(p.oldest_unfinished_age_ms(1000), None);
}

#[derive(Debug, Clone)]
enum Op {
    Complete(usize),
    Fail(usize),
    Retry(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<usize>().prop_map(Op::Complete),
        1 => any::<usize>().prop_map(Op::Fail),
        1 => any::<usize>().prop_map(Op::Retry),
    ]
}

proptest! {
    /// Random gaps, random completion order, failures and retries: the commit
    /// candidate never passes an unfinished delivered offset, never moves
    /// backwards, and equals the model's longest completed prefix.
    #[test]
    fn watermark_matches_model(
        start in 0i64..1000,
        gaps in proptest::collection::vec(1i64..5, 1..60),
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let mut offsets = Vec::new();
        let mut o = start;
        for g in gaps {
            offsets.push(o);
            o += g;
        }
        let mut p = PartitionTracker::new(start);
        for &o in &offsets {
            p.deliver(o, 0).unwrap();
        }
        let mut done = vec![false; offsets.len()];
        let mut failed = vec![false; offsets.len()];
        let mut last = p.next_commit();
        for op in ops {
            match op {
                Op::Complete(i) => {
                    let i = i % offsets.len();
                    if failed[i] { continue; }
                    let r = p.complete(offsets[i]);
                    if done[i] && offsets[i] < p.next_commit() {
                        prop_assert!(r.is_err());
                    }
                    done[i] = true;
                }
                Op::Fail(i) => {
                    let i = i % offsets.len();
                    if done[i] { continue; }
                    p.fail(offsets[i]).unwrap();
                    failed[i] = true;
                }
                Op::Retry(i) => {
                    let i = i % offsets.len();
                    if !failed[i] { continue; }
                    p.retry(offsets[i]).unwrap();
                    failed[i] = false;
                }
            }
            let prefix = done.iter().take_while(|d| **d).count();
            let expected = if prefix == 0 { start } else { offsets[prefix - 1] + 1 };
            prop_assert_eq!(p.next_commit(), expected);
            prop_assert!(p.next_commit() >= last);
            last = p.next_commit();
            for (i, &o) in offsets.iter().enumerate() {
                if !done[i] {
                    prop_assert!(p.next_commit() <= o);
                }
            }
            prop_assert_eq!(p.failed(), failed.iter().filter(|f| **f).count());
            prop_assert_eq!(
                p.in_flight(),
                (0..offsets.len()).filter(|&i| !done[i] && !failed[i]).count()
            );
        }
    }
}
