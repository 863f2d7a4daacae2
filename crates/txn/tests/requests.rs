//! The answers of each request as Kafka's coordinator gives them: error
//! codes and their order, retries, fencing, KIP-360 recovery, epoch
//! exhaustion, failed writes, partition ownership, and what a reload
//! rebuilds.

use crate::common;

use common::*;
use weir_txn::{
    ErrorCode, ListFilter, PartitionStatus, ProducerIdAndEpoch, Step, TxnConfig, TxnResult,
    TxnState, WriteDone,
};

use ErrorCode::{
    ConcurrentTransactions, CoordinatorLoadInProgress, CoordinatorNotAvailable,
    InvalidProducerIdMapping, InvalidRequest, InvalidTransactionTimeout, InvalidTxnState,
    NotCoordinator, NotLeaderOrFollower, ProducerFenced, TransactionAbortable,
    TransactionalIdNotFound,
};

fn pe(producer_id: i64, epoch: i16) -> ProducerIdAndEpoch {
    ProducerIdAndEpoch { producer_id, epoch }
}

#[test]
fn init_producer_id_checks_its_arguments() {
    let mut h = Harness::with(TxnConfig {
        state_topic_partitions: 4,
        max_timeout_ms: 1_000,
        ..TxnConfig::default()
    });
    let now = h.now;
    assert_eq!(
        h.c.init_producer_id("", 500, None, Some(1), now),
        Err(InvalidRequest)
    );
    for bad in [0, -1, 1_001] {
        assert_eq!(
            h.c.init_producer_id("tx", bad, None, Some(1), now),
            Err(InvalidTransactionTimeout),
            "timeout {bad}"
        );
    }
    assert!(matches!(
        h.c.init_producer_id("tx", 1_000, None, Some(1), now),
        Ok(Step::Write(_))
    ));
}

#[test]
fn requests_follow_partition_ownership() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    let part = h.c.partition_for("tx");
    h.c.begin_load(part, 3);
    assert_eq!(h.c.partition_status(part), PartitionStatus::Loading);
    assert_eq!(h.init("tx"), Err(CoordinatorLoadInProgress));
    assert_eq!(h.add("tx", p, &[("a", 0)]), Err(CoordinatorLoadInProgress));
    assert_eq!(
        h.end("tx", p, TxnResult::Commit).0,
        Err(CoordinatorLoadInProgress)
    );
    assert_eq!(h.c.describe("tx"), Err(CoordinatorLoadInProgress));
    assert_eq!(
        h.c.list(&ListFilter::default(), h.now),
        Err(CoordinatorLoadInProgress)
    );
    h.c.complete_load(part, h.now);
    assert_eq!(h.c.coordinator_epoch(part), Some(3));
    // Loaded from nothing: the id is unknown to this load.
    assert_eq!(h.add("tx", p, &[("a", 0)]), Err(InvalidProducerIdMapping));
    h.c.unload(part);
    assert_eq!(h.c.partition_status(part), PartitionStatus::NotOwned);
    assert_eq!(h.init("tx"), Err(NotCoordinator));
    assert_eq!(h.c.describe("tx"), Err(NotCoordinator));
    assert_eq!(h.c.coordinator_epoch(part), None);
    assert_eq!(
        h.c.list(&ListFilter::default(), h.now).map(|l| l.0.len()),
        Ok(0)
    );
}

#[test]
fn add_partitions_errors_in_kafkas_order() {
    let mut h = Harness::new();
    assert_eq!(
        h.add("unknown", pe(1, 0), &[("a", 0)]),
        Err(InvalidProducerIdMapping)
    );
    let p = h.init("tx").unwrap();
    assert_eq!(
        h.add("tx", pe(p.producer_id + 1, p.epoch), &[("a", 0)]),
        Err(InvalidProducerIdMapping)
    );
    // a wrong producer id wins over a wrong epoch
    assert_eq!(
        h.add("tx", pe(p.producer_id + 1, p.epoch + 1), &[("a", 0)]),
        Err(InvalidProducerIdMapping)
    );
    assert_eq!(
        h.add("tx", pe(p.producer_id, p.epoch + 1), &[("a", 0)]),
        Err(ProducerFenced)
    );
    assert_eq!(h.add("tx", p, &[("a", 0)]), Ok(p));
    // already in the transaction: answered without a write
    assert_eq!(
        h.c.add_partitions("tx", p.producer_id, p.epoch, &parts(&[("a", 0)]), h.now),
        Ok(Step::Done(p))
    );
    // a write in flight
    let Ok(Step::Write(w)) =
        h.c.add_partitions("tx", p.producer_id, p.epoch, &parts(&[("b", 0)]), h.now)
    else {
        panic!()
    };
    assert_eq!(h.add("tx", p, &[("c", 0)]), Err(ConcurrentTransactions));
    assert_eq!(h.init("tx"), Err(ConcurrentTransactions));
    assert_eq!(
        h.end("tx", p, TxnResult::Commit).0,
        Err(ConcurrentTransactions)
    );
    h.finish(w, true);
    // markers being written
    let (_, job) = h.end("tx", p, TxnResult::Commit);
    assert_eq!(h.add("tx", p, &[("c", 0)]), Err(ConcurrentTransactions));
    h.write_markers(&job.unwrap());
    assert_eq!(h.add("tx", p, &[("c", 0)]), Ok(p));
    assert_eq!(h.add("", p, &[("c", 0)]), Err(InvalidRequest));
}

#[test]
fn end_txn_retries_and_wrong_directions() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    // no transaction
    assert_eq!(h.end("tx", p, TxnResult::Commit).0, Err(InvalidTxnState));
    assert_eq!(h.end("tx", p, TxnResult::Abort).0, Err(InvalidTxnState));
    assert_eq!(
        h.end("tx", pe(p.producer_id + 1, p.epoch), TxnResult::Commit)
            .0,
        Err(InvalidProducerIdMapping)
    );
    assert_eq!(
        h.end("tx", pe(p.producer_id, p.epoch + 1), TxnResult::Commit)
            .0,
        Err(ProducerFenced)
    );
    assert_eq!(
        h.end("unknown", p, TxnResult::Commit).0,
        Err(InvalidProducerIdMapping)
    );
    for (result, other) in [
        (TxnResult::Commit, TxnResult::Abort),
        (TxnResult::Abort, TxnResult::Commit),
    ] {
        h.add("tx", p, &[("a", 0)]).unwrap();
        let (answer, job) = h.end("tx", p, result);
        assert_eq!(answer, Ok(p));
        let job = job.unwrap();
        // markers being written: either direction is told to retry
        assert_eq!(h.end("tx", p, result).0, Err(ConcurrentTransactions));
        assert_eq!(h.end("tx", p, other).0, Err(ConcurrentTransactions));
        h.write_markers(&job);
        // completed: the same direction succeeds again, the other is wrong
        assert_eq!(h.end("tx", p, result).0, Ok(p));
        assert_eq!(h.end("tx", p, other).0, Err(InvalidTxnState));
    }
}

#[test]
fn end_txn_in_prepare_without_markers_in_flight() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let (_, job) = h.end("tx", p, TxnResult::Commit);
    let job = job.unwrap();
    // a partition leader refused the markers for good
    h.c.markers_cancelled(&job);
    assert!(!h.c.markers_wanted(&job));
    assert_eq!(h.c.complete_markers(&job), None);
    // Kafka keeps the completion pending: the id waits for a reload
    assert_eq!(
        h.end("tx", p, TxnResult::Commit).0,
        Err(ConcurrentTransactions)
    );
    let (reloaded, jobs) = h.reloaded();
    assert_eq!(jobs.len(), 1, "a reload resumes the markers");
    assert_eq!(jobs[0].result, TxnResult::Commit);
    assert_eq!(
        reloaded.metadata("tx").unwrap().pending,
        Some(TxnState::CompleteCommit)
    );
}

#[test]
fn kip_360_recovery_with_the_current_and_the_last_epoch() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    // the producer names itself: bumped, the old epoch remembered
    let step = h.init_step("tx", Some(p));
    let q = h.settle(step).0.unwrap();
    assert_eq!((q.producer_id, q.epoch), (p.producer_id, p.epoch + 1));
    assert_eq!(h.c.metadata("tx").unwrap().last_producer_epoch, p.epoch);
    // a retry of that request (its answer was lost): no second bump
    let step = h.init_step("tx", Some(p));
    assert_eq!(h.settle(step).0, Ok(q));
    // any other epoch, or another producer id, is fenced
    assert_eq!(
        h.init_step("tx", Some(pe(p.producer_id, p.epoch + 5))),
        Err(ProducerFenced)
    );
    assert_eq!(
        h.init_step("tx", Some(pe(p.producer_id + 7, q.epoch))),
        Err(ProducerFenced)
    );
    // a new session without a producer forgets the last epoch: the old
    // producer's retry is fenced
    let r = h.init("tx").unwrap();
    assert_eq!(r.epoch, q.epoch + 1);
    assert_eq!(h.init_step("tx", Some(p)), Err(ProducerFenced));
    assert_eq!(
        h.c.init_producer_id(
            "tx",
            TIMEOUT_MS,
            Some(pe(r.producer_id, r.epoch)),
            None,
            h.now
        )
        .map(|s| matches!(s, Step::Write(_))),
        Ok(true)
    );
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    let mut h = Harness::new();
    let first = h.init("tx").unwrap();
    let mut last = first;
    while !weir_txn::is_epoch_exhausted(last.epoch) {
        last = h.init("tx").unwrap();
    }
    assert_eq!(last.epoch, i16::MAX - 1);
    assert_eq!(last.producer_id, first.producer_id);
    // the producer names its exhausted epoch: a new producer id
    assert_eq!(
        h.c.init_producer_id("tx", TIMEOUT_MS, Some(last), None, h.now),
        Ok(Step::NeedProducerId)
    );
    let step = h.init_step("tx", Some(last));
    let fresh = h.settle(step).0.unwrap();
    assert_ne!(fresh.producer_id, first.producer_id);
    assert_eq!(fresh.epoch, 0);
    let m = h.c.metadata("tx").unwrap();
    assert_eq!(m.previous_producer_id, first.producer_id);
    assert_eq!(m.last_producer_epoch, i16::MAX - 1);
    // the previous producer id is written, so a reload keeps it
    let (reloaded, _) = h.reloaded();
    assert_eq!(
        reloaded.metadata("tx").unwrap().previous_producer_id,
        first.producer_id
    );
    // its retry (the answer was lost) names the old producer: valid, since
    // that was the previous id with an exhausted epoch; no new bump
    let step = h.init_step("tx", Some(last));
    assert_eq!(h.settle(step).0, Ok(fresh));
}

#[test]
fn a_failed_fence_is_not_bumped_twice() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let Ok(Step::Write(w)) = h.init_step("tx", None) else {
        panic!()
    };
    let done = h.finish(w, false);
    assert_eq!(done.answer, Some(Err(CoordinatorNotAvailable)));
    let m = h.c.metadata("tx").unwrap();
    // the bump is in effect although unwritten: the old producer is fenced
    assert_eq!(
        (m.state, m.producer_epoch, m.pending),
        (TxnState::Ongoing, p.epoch + 1, None)
    );
    assert!(m.has_failed_epoch_fence);
    assert_eq!(h.add("tx", p, &[("b", 0)]), Err(ProducerFenced));
    // the retry fences with the same epoch
    let step = h.init_step("tx", None);
    let (answer, job) = h.settle(step);
    assert_eq!(answer, Err(ConcurrentTransactions));
    let job = job.unwrap();
    assert_eq!(job.producer_epoch, p.epoch + 1);
    h.write_markers(&job);
    assert!(!h.c.metadata("tx").unwrap().has_failed_epoch_fence);
    assert_eq!(h.init("tx").unwrap().epoch, p.epoch + 2);
}

#[test]
fn failed_writes_change_nothing() {
    let mut h = Harness::new();
    // a new id whose first write fails stays known without an epoch (as in
    // Kafka), and the retry works
    let Ok(Step::Write(w)) = h.init_step("tx", None) else {
        panic!()
    };
    assert_eq!(
        h.finish(w, false).answer,
        Some(Err(CoordinatorNotAvailable))
    );
    assert_eq!(h.c.metadata("tx").unwrap().producer_epoch, -1);
    let p = h.init("tx").unwrap();
    assert_eq!(p.epoch, 0);
    let Ok(Step::Write(w)) =
        h.c.add_partitions("tx", p.producer_id, p.epoch, &parts(&[("a", 0)]), h.now)
    else {
        panic!()
    };
    let done = h.c.write_completed(w.id, Err(NotLeaderOrFollower), h.now);
    assert_eq!(done.answer, Some(Err(NotCoordinator)));
    let m = h.c.metadata("tx").unwrap();
    assert_eq!(
        (m.state, m.pending, m.partitions.len()),
        (TxnState::Empty, None, 0)
    );
    // a failed EndTxn leaves the transaction open
    h.add("tx", p, &[("a", 0)]).unwrap();
    let Ok(Step::Write(w)) =
        h.c.end_txn("tx", p.producer_id, p.epoch, TxnResult::Commit, h.now)
    else {
        panic!()
    };
    let done = h.finish(w, false);
    assert_eq!(done.markers, None);
    assert_eq!(h.c.metadata("tx").unwrap().state, TxnState::Ongoing);
    // an unknown write id answers nothing
    assert_eq!(
        h.c.write_completed(weir_txn::WriteId(999_999), Ok(()), h.now),
        WriteDone::default()
    );
}

#[test]
fn a_failed_completion_is_retried() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let (_, job) = h.end("tx", p, TxnResult::Abort);
    let job = job.unwrap();
    h.c.marker_written(&job, &tp("a", 0));
    let w = h.c.complete_markers(&job).unwrap();
    let done = h.finish(w, false);
    assert!(done.retry_completion);
    assert_eq!(h.c.metadata("tx").unwrap().state, TxnState::PrepareAbort);
    let w = h.c.complete_markers(&job).expect("again");
    h.finish(w, true);
    assert_eq!(h.c.metadata("tx").unwrap().state, TxnState::CompleteAbort);
    assert_eq!(h.c.complete_markers(&job), None, "done");
}

#[test]
fn writes_and_markers_of_an_earlier_load_are_stale() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let (_, job) = h.end("tx", p, TxnResult::Commit);
    let job = job.unwrap();
    let Ok(Step::Write(w)) = h.init_step("other", None) else {
        panic!()
    };
    // both partitions move away and back (reloaded from the log)
    let reloaded_log = h.log.clone();
    for part in [h.c.partition_for("tx"), h.c.partition_for("other")] {
        h.c.begin_load(part, 9);
        for r in reloaded_log.get(&part).into_iter().flatten() {
            h.c.replay(part, &r.key, r.value.as_deref()).unwrap();
        }
        let jobs = h.c.complete_load(part, h.now);
        if part == h.c.partition_for("tx") {
            assert_eq!(jobs.len(), 1);
            assert_eq!(jobs[0].coordinator_epoch, 9);
        }
    }
    assert!(!h.c.markers_wanted(&job), "a job of the earlier load");
    h.c.marker_written(&job, &tp("a", 0));
    assert_eq!(h.c.complete_markers(&job), None);
    let done = h.c.write_completed(w.id, Ok(()), h.now);
    assert_eq!(done.answer, Some(Err(NotCoordinator)));
    assert!(
        h.c.metadata("other").is_none(),
        "the stale write did nothing"
    );
}

#[test]
fn a_reload_rebuilds_every_transactional_id() {
    let mut h = Harness::new();
    let a = h.init("a").unwrap();
    h.add("a", a, &[("t", 0), ("t", 1), ("u", 0)]).unwrap();
    let b = h.init("b").unwrap();
    h.add("b", b, &[("t", 0)]).unwrap();
    let (_, job) = h.end("b", b, TxnResult::Commit);
    h.write_markers(&job.unwrap());
    let c = h.init("c").unwrap();
    h.add("c", c, &[("t", 2)]).unwrap();
    let (_, job) = h.end("c", c, TxnResult::Abort);
    let job = job.unwrap();
    h.init("d").unwrap();
    let (reloaded, jobs) = h.reloaded();
    for id in ["a", "b", "c", "d"] {
        let (x, y) = (h.c.metadata(id).unwrap(), reloaded.metadata(id).unwrap());
        assert_eq!(
            (
                x.producer_id,
                x.producer_epoch,
                x.state,
                &x.partitions,
                x.timeout_ms,
                x.start_ms
            ),
            (
                y.producer_id,
                y.producer_epoch,
                y.state,
                &y.partitions,
                y.timeout_ms,
                y.start_ms
            ),
            "{id}"
        );
    }
    assert_eq!(jobs.len(), 1, "c is resumed");
    assert_eq!(
        (
            jobs[0].transactional_id.as_str(),
            jobs[0].result,
            &jobs[0].partitions
        ),
        ("c", TxnResult::Abort, &job.partitions)
    );
}

#[test]
fn replay_skips_what_is_not_a_transaction_record() {
    let mut h = Harness::new();
    let part = h.c.partition_for("tx");
    h.c.begin_load(part, 1);
    assert_eq!(h.c.replay(part, &[0, 1, 0, 0], Some(&[1, 2])), Ok(()));
    assert!(h.c.replay(part, &[0], None).is_err());
    let other = (0..4).find(|&p| p != part).unwrap();
    let key = weir_txn::records::encode_key("tx");
    assert!(matches!(
        h.c.replay(other, &key, None),
        Err(weir_txn::ReplayError::NotLoading(_))
    ));
    h.c.begin_load(other, 1);
    assert!(matches!(
        h.c.replay(other, &key, None),
        Err(weir_txn::ReplayError::WrongPartition { .. })
    ));
}

#[test]
fn describe_and_list_with_filters() {
    let mut h = Harness::new();
    let a = h.init("a").unwrap();
    h.add("a", a, &[("t", 0)]).unwrap();
    let started = h.now;
    let b = h.init("b").unwrap();
    h.now += 10_000;
    let d = h.c.describe("a").unwrap();
    assert_eq!(
        (
            d.producer_id,
            d.producer_epoch,
            d.state,
            d.timeout_ms,
            d.start_ms
        ),
        (
            a.producer_id,
            a.epoch,
            TxnState::Ongoing,
            TIMEOUT_MS,
            started
        )
    );
    assert_eq!(d.partitions, parts(&[("t", 0)]));
    assert_eq!(h.c.describe("b").unwrap().start_ms, -1);
    assert_eq!(h.c.describe("nope"), Err(TransactionalIdNotFound));
    assert_eq!(h.c.describe(""), Err(InvalidRequest));
    let names = |f: ListFilter| {
        let (l, unknown) = h.c.list(&f, h.now).unwrap();
        let mut ids: Vec<String> = l.into_iter().map(|t| t.transactional_id).collect();
        ids.sort();
        (ids, unknown)
    };
    assert_eq!(names(ListFilter::default()).0, ["a", "b"]);
    let by_state = ListFilter {
        states: vec!["Ongoing".into(), "Bogus".into()],
        ..ListFilter::default()
    };
    assert_eq!(
        names(by_state),
        (vec!["a".to_string()], vec!["Bogus".to_string()])
    );
    let only_unknown = ListFilter {
        states: vec!["Bogus".into()],
        ..ListFilter::default()
    };
    assert!(names(only_unknown).0.is_empty(), "no state matches");
    let by_producer = ListFilter {
        producer_ids: vec![b.producer_id],
        ..ListFilter::default()
    };
    assert_eq!(names(by_producer).0, ["b"]);
    // running longer than 5 s: a, and b, whose start (-1) is "long ago"
    // as Kafka compares it
    let long = ListFilter {
        duration_ms: 5_000,
        ..ListFilter::default()
    };
    assert_eq!(names(long).0, ["a", "b"]);
    let longer = ListFilter {
        duration_ms: 20_000,
        states: vec!["Ongoing".into()],
        ..ListFilter::default()
    };
    assert!(names(longer).0.is_empty());
    let g = h.c.gauges(h.now);
    assert_eq!(
        (g.transactional_ids, g.open, g.oldest_open_age_ms),
        (2, 1, 10_000)
    );
}

#[test]
fn verify_only_answers_per_partition() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let v =
        h.c.verify_partitions("tx", p.producer_id, p.epoch, &parts(&[("a", 0), ("a", 1)]))
            .unwrap();
    assert_eq!(
        v,
        vec![
            (tp("a", 0), ErrorCode::None),
            (tp("a", 1), TransactionAbortable)
        ]
    );
    assert_eq!(
        h.c.verify_partitions("tx", p.producer_id, p.epoch + 1, &parts(&[("a", 0)])),
        Err(ProducerFenced)
    );
    assert_eq!(
        h.c.verify_partitions("tx", p.producer_id + 1, p.epoch, &parts(&[("a", 0)])),
        Err(InvalidProducerIdMapping)
    );
    assert_eq!(
        h.c.verify_partitions("nope", 1, 0, &parts(&[("a", 0)])),
        Err(InvalidProducerIdMapping)
    );
    let _ = h.end("tx", p, TxnResult::Commit);
    assert_eq!(
        h.c.verify_partitions("tx", p.producer_id, p.epoch, &parts(&[("a", 0)])),
        Err(ConcurrentTransactions)
    );
}

#[test]
fn tick_runs_each_timer_at_its_interval() {
    let mut h = Harness::with(TxnConfig {
        state_topic_partitions: 4,
        abort_timed_out_interval_ms: 100,
        remove_expired_interval_ms: 1_000,
        transactional_id_expiration_ms: 500,
        ..TxnConfig::default()
    });
    assert_eq!(h.c.next_deadline(), None);
    let p = h.init("tx").unwrap();
    let step = h.c.init_producer_id("short", 50, None, Some(77), h.now);
    let Ok(Step::Write(w)) = step else { panic!() };
    let q = h.finish(w, true).answer.unwrap().unwrap();
    h.add("short", q, &[("a", 0)]).unwrap();
    assert!(h.c.tick(h.now).is_empty());
    assert_eq!(h.c.next_deadline(), Some(h.now + 100));
    h.now += 99;
    assert!(h.c.tick(h.now).is_empty(), "not due");
    h.now += 1;
    let w = h.c.tick(h.now);
    assert_eq!(w.len(), 1, "the short transaction timed out");
    let done = h.finish(w.into_iter().next().unwrap(), true);
    h.write_markers(&done.markers.unwrap());
    h.now += 900;
    let w = h.c.tick(h.now);
    // both ids are idle and older than 500 ms
    assert_eq!(w.len(), 2);
    let _ = p;
}
