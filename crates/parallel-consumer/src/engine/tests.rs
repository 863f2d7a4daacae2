//! The scenario table of seed 004, row by row, at the engine level (the
//! same rows run against a broker in `tests/scenarios.rs`), plus the parts
//! beyond it: restored completed sets, metadata back-pressure, failure
//! policy and commit errors.

// Completed sets are compared as lists of ranges.
#![allow(clippy::single_range_in_vec_init)]

use super::*;
use crate::scheduler::Ordering;

fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: p,
    }
}

fn engine(ordering: Ordering, max_concurrency: usize) -> Engine<()> {
    Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering,
            max_concurrency,
            max_buffered_per_partition: 100,
            resume_at_buffered: 50,
            ..SchedulerConfig::default()
        },
        ..EngineConfig::default()
    })
    .unwrap()
}

/// Submitted tasks of `decisions`: (id, task identity).
fn submitted(decisions: Vec<Decision<Task<()>>>) -> Vec<(TaskId, TaskRef)> {
    decisions
        .into_iter()
        .filter_map(|d| match d {
            Decision::Submit { id, payload, .. } => Some((id, payload.task_ref())),
            _ => None,
        })
        .collect()
}

fn find(tasks: &[(TaskId, TaskRef)], offset: i64) -> (TaskId, TaskRef) {
    tasks
        .iter()
        .find(|(_, t)| t.offset == offset)
        .cloned()
        .unwrap_or_else(|| panic!("offset {offset} was not submitted"))
}

fn offsets_of(commits: &[CommitRequest]) -> Vec<(i32, i64)> {
    commits.iter().map(|c| (c.tp.partition, c.offset)).collect()
}

fn deliver_all(e: &mut Engine<()>, p: i32, offsets: impl IntoIterator<Item = i64>) {
    for o in offsets {
        assert_eq!(e.deliver(&tp(p), o, None, (), 0), Delivered::Queued);
    }
}

#[test]
fn row1_unfinished_first_record_holds_the_commit() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=12);
    let tasks = submitted(e.actions());
    assert_eq!(tasks.len(), 3);
    for o in [11, 12] {
        let (id, t) = find(&tasks, o);
        assert!(e.finished(id, &t, Outcome::Success));
    }
    let commits = e.commits();
    assert_eq!(
        offsets_of(&commits),
        vec![(0, 10)],
        "never 13 while 10 runs"
    );
    assert_eq!(
        metadata::decode(&commits[0].metadata, 10).unwrap().runs,
        vec![11..13]
    );
    let s = &e.stats(0)[0];
    assert_eq!((s.position, s.effect_watermark, s.in_flight), (13, 10, 1));
    let (id, t) = find(&tasks, 10);
    e.finished(id, &t, Outcome::Success);
    let commits = e.commits();
    assert_eq!(offsets_of(&commits), vec![(0, 13)]);
    assert_eq!(commits[0].metadata, "");
}

#[test]
fn row2_delivered_but_unsubmitted_record_holds_the_commit() {
    let mut e = engine(Ordering::Partition, 1);
    e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=12);
    for o in [10, 11] {
        let tasks = submitted(e.actions());
        let (id, t) = find(&tasks, o);
        e.finished(id, &t, Outcome::Success);
    }
    // 12 is delivered and waiting, not submitted.
    let s = &e.stats(0)[0];
    assert_eq!((s.waiting, s.in_flight), (1, 1));
    assert_eq!(offsets_of(&e.commits()), vec![(0, 12)]);
}

#[test]
fn row4_failed_commit_is_not_a_checkpoint_and_is_retried() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=12);
    for (id, t) in submitted(e.actions()) {
        e.finished(id, &t, Outcome::Success);
    }
    let commits = e.commits();
    assert_eq!(offsets_of(&commits), vec![(0, 13)]);
    e.commit_failed(&commits, false);
    assert_eq!(e.stats(0)[0].committed, Some(10));
    assert_eq!(e.commits(), commits, "the same commit is proposed again");
    e.commit_succeeded(&commits);
    assert_eq!(e.stats(0)[0].committed, Some(13));
    assert!(e.commits().is_empty());
}

/// Commits sent without waiting can be answered out of the order the
/// engine reads them in: an older answer never moves the checkpoint back.
#[test]
fn an_older_commit_confirmed_late_does_not_move_the_checkpoint_back() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=12);
    let tasks = submitted(e.actions());
    let (id, t) = find(&tasks, 10);
    e.finished(id, &t, Outcome::Success);
    let older = e.commits();
    assert_eq!(offsets_of(&older), vec![(0, 11)]);
    for o in [11, 12] {
        let (id, t) = find(&tasks, o);
        e.finished(id, &t, Outcome::Success);
    }
    let newer = e.commits();
    assert_eq!(offsets_of(&newer), vec![(0, 13)]);
    e.commit_succeeded(&newer);
    e.commit_succeeded(&older);
    assert_eq!(e.stats(0)[0].committed, Some(13));
    assert!(e.commits().is_empty(), "nothing to commit again");
}

#[test]
fn row5_key_mode_does_not_run_a_later_record_of_the_same_key_first() {
    let mut e = engine(Ordering::Key, 8);
    e.assign(tp(0), Some((10, "")));
    e.deliver(&tp(0), 10, Some(b"acct-1".to_vec()), (), 0);
    e.deliver(&tp(0), 11, Some(b"acct-1".to_vec()), (), 0);
    e.deliver(&tp(0), 12, Some(b"acct-2".to_vec()), (), 0);
    let tasks = submitted(e.actions());
    let running: Vec<i64> = tasks.iter().map(|(_, t)| t.offset).collect();
    assert_eq!(running, vec![10, 12], "11 waits for 10 (same key)");
    let (id, t) = find(&tasks, 10);
    e.finished(id, &t, Outcome::Success);
    assert_eq!(submitted(e.actions())[0].1.offset, 11);
}

#[test]
fn row6_revoke_commits_only_the_completed_prefix() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=12);
    let tasks = submitted(e.actions());
    e.revoking(&tp(0));
    // In-flight work finishes during the revoke wait: 11 completes, 10 not.
    assert_eq!(e.running_for(&[tp(0)]), 3);
    let (id, t) = find(&tasks, 11);
    assert!(e.finished(id, &t, Outcome::Success));
    assert_eq!(e.running_for(&[tp(0)]), 2);
    // Nothing new is delivered or submitted for a revoking partition.
    assert_eq!(e.deliver(&tp(0), 13, None, (), 0), Delivered::NotOwned);
    assert!(submitted(e.actions()).is_empty());
    let commit = e.revoke_finish(&tp(0)).unwrap();
    assert_eq!(commit.offset, 10);
    assert_eq!(
        metadata::decode(&commit.metadata, 10).unwrap().runs,
        vec![11..12]
    );
    assert!(e.owned().is_empty());
    // A late result after the revoke is discarded.
    let (id, t) = find(&tasks, 10);
    assert!(!e.finished(id, &t, Outcome::Success));
    assert_eq!(e.running(), 1);
}

#[test]
fn row7_lost_partition_commits_nothing_and_late_results_are_stale() {
    let mut e = engine(Ordering::Unordered, 8);
    let g1 = e.assign(tp(0), Some((10, "")));
    deliver_all(&mut e, 0, 10..=11);
    let tasks = submitted(e.actions());
    e.lost(&tp(0));
    assert!(e.commits().is_empty());
    // Reassigned (a new generation) before the old worker reports.
    let g2 = e.assign(tp(0), Some((10, "")));
    assert_ne!(g1, g2);
    deliver_all(&mut e, 0, 10..=11);
    for (id, t) in &tasks {
        assert!(
            !e.finished(*id, t, Outcome::Success),
            "stale result applied"
        );
    }
    assert_eq!(e.stats(0)[0].effect_watermark, 10);
    assert_eq!(e.stats(0)[0].stale_results, 2);
    assert!(e.commits().is_empty());
}

#[test]
fn row8_full_buffer_pauses_without_giving_up_the_partition() {
    let mut e: Engine<()> = Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering: Ordering::Partition,
            max_concurrency: 1,
            max_buffered_per_partition: 3,
            resume_at_buffered: 1,
            ..SchedulerConfig::default()
        },
        ..EngineConfig::default()
    })
    .unwrap();
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..3);
    let d = e.actions();
    assert!(d.contains(&Decision::Pause(tp(0))));
    assert!(e.stats(0)[0].paused);
    assert_eq!(e.owned(), vec![tp(0)]);
}

#[test]
fn restored_completed_set_is_not_run_again() {
    let meta = metadata::encode(10, &[11, 12, 14], 4096).text;
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, &meta)));
    assert_eq!(e.deliver(&tp(0), 10, None, (), 0), Delivered::Queued);
    assert_eq!(e.deliver(&tp(0), 11, None, (), 0), Delivered::Skipped);
    assert_eq!(e.deliver(&tp(0), 12, None, (), 0), Delivered::Skipped);
    assert_eq!(e.deliver(&tp(0), 13, None, (), 0), Delivered::Queued);
    assert_eq!(e.deliver(&tp(0), 14, None, (), 0), Delivered::Skipped);
    let tasks = submitted(e.actions());
    assert_eq!(
        tasks.iter().map(|(_, t)| t.offset).collect::<Vec<_>>(),
        vec![10, 13]
    );
    // Already confirmed as it was: no commit until something moves.
    assert!(e.commits().is_empty());
    let (id, t) = find(&tasks, 10);
    e.finished(id, &t, Outcome::Success);
    assert_eq!(offsets_of(&e.commits()), vec![(0, 13)]);
    let (id, t) = find(&tasks, 13);
    e.finished(id, &t, Outcome::Success);
    assert_eq!(offsets_of(&e.commits()), vec![(0, 15)]);
    assert_eq!(e.stats(0)[0].skipped, 3);
}

#[test]
fn metadata_of_another_commit_or_client_is_ignored() {
    let meta = metadata::encode(10, &[11], 4096).text;
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((12, &meta)));
    e.assign(tp(1), Some((5, "written by another client")));
    assert_eq!(e.deliver(&tp(0), 12, None, (), 0), Delivered::Queued);
    let stats = e.stats(0);
    assert!(matches!(
        stats[0].metadata_error,
        Some(MetadataError::WrongBase { .. })
    ));
    assert_eq!(stats[1].metadata_error, Some(MetadataError::NotOurs));
}

#[test]
fn metadata_that_would_not_fit_pauses_the_partition() {
    let mut e: Engine<()> = Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering: Ordering::Unordered,
            max_concurrency: 100,
            max_buffered_per_partition: 100,
            resume_at_buffered: 50,
            ..SchedulerConfig::default()
        },
        max_metadata_bytes: 16,
        ..EngineConfig::default()
    })
    .unwrap();
    e.assign(tp(0), Some((0, "")));
    // Offsets 0..40; every other one completes: many runs.
    deliver_all(&mut e, 0, 0..40);
    let tasks = submitted(e.actions());
    for (id, t) in tasks.iter().filter(|(_, t)| t.offset % 2 == 1) {
        e.finished(*id, t, Outcome::Success);
    }
    let d = e.actions();
    assert!(d.contains(&Decision::Pause(tp(0))), "{d:?}");
    // The commit still carries what fits (a prefix of the set).
    let c = &e.commits()[0];
    assert!(c.metadata.len() <= 16);
    assert_eq!(c.offset, 0);
    // Completing the rest lets the watermark through: resumed.
    for (id, t) in tasks.iter().filter(|(_, t)| t.offset % 2 == 0) {
        e.finished(*id, t, Outcome::Success);
    }
    assert!(e.actions().contains(&Decision::Resume(tp(0))));
    assert_eq!(offsets_of(&e.commits()), vec![(0, 40)]);
}

#[test]
fn tracked_bound_pauses_the_partition() {
    let mut e: Engine<()> = Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering: Ordering::Unordered,
            max_concurrency: 100,
            max_buffered_per_partition: 100,
            resume_at_buffered: 50,
            ..SchedulerConfig::default()
        },
        max_tracked_per_partition: 5,
        ..EngineConfig::default()
    })
    .unwrap();
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..4);
    let mut tasks = submitted(e.actions());
    // 1..4 complete (one contiguous run: metadata is tiny), 0 is stuck: one
    // record buffered, four tracked.
    for (id, t) in tasks.iter().filter(|(_, t)| t.offset > 0) {
        e.finished(*id, t, Outcome::Success);
    }
    assert!(!e.actions().contains(&Decision::Pause(tp(0))));
    deliver_all(&mut e, 0, 4..5);
    let d = e.actions();
    assert!(d.contains(&Decision::Pause(tp(0))), "{d:?}");
    tasks.extend(submitted(d));
    let (id, t) = find(&tasks, 4);
    e.finished(id, &t, Outcome::Success);
    assert!(
        e.stats(0)[0].paused,
        "still paused: 0 holds five tracked records"
    );
    let s = &e.stats(0)[0];
    assert_eq!((s.tracked, s.in_flight), (5, 1));
    let (id, t) = find(&tasks, 0);
    e.finished(id, &t, Outcome::Success);
    assert!(e.actions().contains(&Decision::Resume(tp(0))));
    assert_eq!(e.stats(0)[0].tracked, 0);
}

#[test]
fn final_failure_stops_the_partition_and_holds_the_watermark() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..3);
    let tasks = submitted(e.actions());
    let (id, t) = find(&tasks, 0);
    assert!(e.finished(id, &t, Outcome::Failed { attempts: 3 }));
    for o in [1, 2] {
        let (id, t) = find(&tasks, o);
        e.finished(id, &t, Outcome::Success);
    }
    deliver_all(&mut e, 0, 3..4);
    let d = e.actions();
    assert!(d.contains(&Decision::Pause(tp(0))));
    assert!(submitted(d).is_empty(), "a stopped partition runs nothing");
    let s = &e.stats(0)[0];
    assert!(s.stopped);
    assert_eq!((s.failed, s.effect_watermark), (1, 0));
    assert_eq!(e.commits()[0].offset, 0, "the failed record is not skipped");
}

#[test]
fn dead_lettered_record_lets_the_watermark_pass() {
    let mut e = engine(Ordering::Partition, 8);
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..2);
    let (id, t) = submitted(e.actions()).remove(0);
    e.finished(id, &t, Outcome::DeadLettered { attempts: 3 });
    let (id, t) = submitted(e.actions()).remove(0);
    e.finished(id, &t, Outcome::Success);
    assert_eq!(offsets_of(&e.commits()), vec![(0, 2)]);
    assert!(!e.stats(0)[0].stopped);
}

#[test]
fn ownership_error_stops_commits_until_ownership_is_confirmed() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..1);
    for (id, t) in submitted(e.actions()) {
        e.finished(id, &t, Outcome::Success);
    }
    let commits = e.commits();
    e.commit_failed(&commits, true);
    assert!(e.commits().is_empty());
    assert!(e.stats(0)[0].commits_stopped);
    // A later rebalance confirms the partition is still ours (cooperative).
    e.ownership_confirmed(&[tp(0)]);
    assert_eq!(offsets_of(&e.commits()), vec![(0, 1)]);
    e.commit_failed(&e.commits(), true);
    assert!(e.commits().is_empty());
    // A normal revoke: still ours until the callback returns, so the
    // completed prefix is committed.
    e.revoking(&tp(0));
    assert_eq!(e.revoke_finish(&tp(0)).map(|c| c.offset), Some(1));
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..1);
    for (id, t) in submitted(e.actions()) {
        e.finished(id, &t, Outcome::Success);
    }
    assert_eq!(offsets_of(&e.commits()), vec![(0, 1)]);
}

#[test]
fn confirmation_for_an_older_generation_is_ignored() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((0, "")));
    deliver_all(&mut e, 0, 0..1);
    for (id, t) in submitted(e.actions()) {
        e.finished(id, &t, Outcome::Success);
    }
    let old = e.commits();
    e.lost(&tp(0));
    e.assign(tp(0), Some((0, "")));
    e.commit_succeeded(&old);
    assert_eq!(e.stats(0)[0].committed, Some(0));
}

#[test]
fn without_a_committed_offset_tracking_starts_at_the_first_record() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), None);
    assert!(e.commits().is_empty());
    assert_eq!(e.stats(0)[0].committed, None);
    deliver_all(&mut e, 0, 42..44);
    // Committing the first delivered offset is a valid restart point.
    assert_eq!(offsets_of(&e.commits()), vec![(0, 42)]);
    for (id, t) in submitted(e.actions()) {
        e.finished(id, &t, Outcome::Success);
    }
    assert_eq!(offsets_of(&e.commits()), vec![(0, 44)]);
}

#[test]
fn records_below_the_watermark_are_rejected() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((10, "")));
    assert!(matches!(
        e.deliver(&tp(0), 9, None, (), 0),
        Delivered::Rejected(TrackerError::BelowWatermark { .. })
    ));
    assert_eq!(e.deliver(&tp(5), 9, None, (), 0), Delivered::NotOwned);
}

#[test]
fn oldest_unfinished_age_is_reported() {
    let mut e = engine(Ordering::Unordered, 8);
    e.assign(tp(0), Some((0, "")));
    e.deliver(&tp(0), 0, None, (), 1_000);
    e.deliver(&tp(0), 1, None, (), 1_500);
    assert_eq!(e.stats(4_000)[0].oldest_unfinished_age_ms, Some(3_000));
}

mod model {
    use std::collections::{HashMap, HashSet};

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Deliver { p: i32, gap: i64 },
        Actions,
        Finish { i: usize, success: bool },
        Commit { ok: bool },
        Revoke(i32),
        Lost(i32),
        Assign(i32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0i32..2, 0i64..3).prop_map(|(p, gap)| Op::Deliver { p, gap }),
            4 => Just(Op::Actions),
            5 => (any::<usize>(), prop::bool::weighted(0.9))
                .prop_map(|(i, success)| Op::Finish { i, success }),
            2 => any::<bool>().prop_map(|ok| Op::Commit { ok }),
            1 => (0i32..2).prop_map(Op::Revoke),
            1 => (0i32..2).prop_map(Op::Lost),
            2 => (0i32..2).prop_map(Op::Assign),
        ]
    }

    #[derive(Debug, Default)]
    struct Part {
        owned: bool,
        generation: u64,
        start: i64,
        next_offset: i64,
        delivered: Vec<i64>,
        done: HashSet<i64>,
        confirmed: i64,
    }

    impl Part {
        fn prefix(&self) -> i64 {
            let mut w = self.start;
            for o in &self.delivered {
                if !self.done.contains(o) {
                    break;
                }
                w = o + 1;
            }
            w
        }
    }

    fn check_request(parts: &HashMap<i32, Part>, c: &CommitRequest) -> Result<(), TestCaseError> {
        let m = &parts[&c.tp.partition];
        prop_assert_eq!(c.offset, m.prefix(), "commit is not the completed prefix");
        let set = metadata::decode(&c.metadata, c.offset).unwrap();
        for r in &set.runs {
            for o in r.clone() {
                prop_assert!(
                    o > c.offset && m.done.contains(&o),
                    "metadata claims {} done",
                    o
                );
            }
        }
        Ok(())
    }

    proptest! {
        /// Random deliveries, results (including late ones from older
        /// generations), commits, revokes, losses and reassignments against a
        /// model: commits are always the completed prefix of the current
        /// generation, metadata only names completed records, stale results
        /// never apply, generations are never reused.
        #[test]
        fn engine_matches_model(
            ordering in prop_oneof![Just(Ordering::Partition), Just(Ordering::Key), Just(Ordering::Unordered)],
            ops in proptest::collection::vec(op(), 0..250),
        ) {
            let mut e = engine(ordering, 3);
            let mut parts: HashMap<i32, Part> = HashMap::new();
            let mut generations = HashSet::new();
            for p in 0..2 {
                let g = e.assign(tp(p), Some((0, "")));
                generations.insert(g);
                parts.insert(p, Part { owned: true, generation: g, ..Part::default() });
            }
            let mut running: Vec<(TaskId, TaskRef)> = Vec::new();
            for op in ops {
                match op {
                    Op::Deliver { p, gap } => {
                        let m = parts.get_mut(&p).unwrap();
                        if !m.owned {
                            prop_assert_eq!(e.deliver(&tp(p), m.next_offset, None, (), 0), Delivered::NotOwned);
                            continue;
                        }
                        let o = m.next_offset + gap;
                        let key = Some(vec![(o % 3) as u8]);
                        prop_assert_eq!(e.deliver(&tp(p), o, key, (), 0), Delivered::Queued);
                        m.delivered.push(o);
                        m.next_offset = o + 1;
                    }
                    Op::Actions => {
                        running.extend(submitted(e.actions()));
                    }
                    Op::Finish { i, success } => {
                        if running.is_empty() {
                            continue;
                        }
                        let (id, t) = running.remove(i % running.len());
                        let m = parts.get_mut(&t.tp.partition).unwrap();
                        let current = m.owned && m.generation == t.generation;
                        let outcome = if success { Outcome::Success } else { Outcome::Failed { attempts: 1 } };
                        let applied = e.finished(id, &t, outcome);
                        prop_assert_eq!(applied, current, "stale result applied or current one dropped");
                        if applied && success {
                            m.done.insert(t.offset);
                        }
                    }
                    Op::Commit { ok } => {
                        let requests = e.commits();
                        for c in &requests {
                            check_request(&parts, c)?;
                        }
                        if ok {
                            e.commit_succeeded(&requests);
                            for c in &requests {
                                parts.get_mut(&c.tp.partition).unwrap().confirmed = c.offset;
                            }
                        } else {
                            e.commit_failed(&requests, false);
                        }
                    }
                    Op::Revoke(p) => {
                        if !parts[&p].owned {
                            continue;
                        }
                        e.revoking(&tp(p));
                        let c = e.revoke_finish(&tp(p));
                        if let Some(c) = &c {
                            check_request(&parts, c)?;
                        }
                        let m = parts.get_mut(&p).unwrap();
                        if let Some(c) = c {
                            m.confirmed = c.offset;
                        }
                        m.owned = false;
                    }
                    Op::Lost(p) => {
                        e.lost(&tp(p));
                        parts.get_mut(&p).unwrap().owned = false;
                    }
                    Op::Assign(p) => {
                        if parts[&p].owned {
                            continue;
                        }
                        let m = parts.get_mut(&p).unwrap();
                        let g = e.assign(tp(p), Some((m.confirmed, "")));
                        prop_assert!(generations.insert(g), "generation {} reused", g);
                        *m = Part {
                            owned: true,
                            generation: g,
                            start: m.confirmed,
                            next_offset: m.confirmed,
                            confirmed: m.confirmed,
                            ..Part::default()
                        };
                    }
                }
                for s in e.stats(0) {
                    let m = &parts[&s.partition];
                    prop_assert!(m.owned);
                    prop_assert_eq!(s.effect_watermark, m.prefix());
                    prop_assert_eq!(s.committed, Some(m.confirmed));
                    prop_assert!(s.committed.unwrap() <= s.effect_watermark);
                    prop_assert!(s.effect_watermark <= s.position);
                }
                prop_assert!(e.running() <= 3);
            }
        }
    }
}
