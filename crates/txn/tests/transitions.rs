//! Every transition of Kafka's `TransactionState` table: each allowed edge
//! happens through the request that causes it, and every edge the table
//! leaves out is refused by the metadata's `prepare_*` step.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use weir_txn::{ErrorCode, Step, TransitionError, TxnMetadata, TxnResult, TxnState};

use TxnState::*;

/// Kafka's `validPreviousStates`, written out independently of the crate.
const TABLE: &[(TxnState, &[TxnState])] = &[
    (Empty, &[Empty, CompleteCommit, CompleteAbort]),
    (Ongoing, &[Ongoing, Empty, CompleteCommit, CompleteAbort]),
    (PrepareCommit, &[Ongoing]),
    (PrepareAbort, &[Ongoing, PrepareEpochFence]),
    (CompleteCommit, &[PrepareCommit]),
    (CompleteAbort, &[PrepareAbort]),
    (Dead, &[Empty, CompleteAbort, CompleteCommit]),
    (PrepareEpochFence, &[Ongoing]),
];

fn allowed(from: TxnState, to: TxnState) -> bool {
    TABLE
        .iter()
        .find(|(t, _)| *t == to)
        .is_some_and(|(_, prev)| prev.contains(&from))
}

#[test]
fn the_table_is_kafkas() {
    for to in TxnState::ALL {
        for from in TxnState::ALL {
            assert_eq!(to.may_follow(from), allowed(from, to), "{from} -> {to}");
        }
    }
}

/// Metadata resting in `state` (with partitions where the state has them).
fn meta_in(state: TxnState) -> TxnMetadata {
    let mut m = TxnMetadata::new("tx", 7, TIMEOUT_MS, 0);
    m.producer_epoch = 3;
    m.state = state;
    if state != Empty {
        m.start_ms = 10;
    }
    if matches!(state, Ongoing | PrepareCommit | PrepareAbort) {
        m.partitions = parts(&[("t", 0)]);
    }
    m
}

/// The target each `prepare_*` step aims at from `from`, and its outcome.
fn prepare_all(from: TxnState) -> Vec<(TxnState, Result<(), TransitionError>)> {
    let added = parts(&[("t", 1)]);
    let ok = |r: Result<weir_txn::Transit, TransitionError>| r.map(|_| ());
    let mut out = Vec::new();
    let complete_target = if from == PrepareCommit {
        CompleteCommit
    } else {
        CompleteAbort
    };
    out.push((
        Empty,
        ok(meta_in(from)
            .prepare_increment_producer_epoch(TIMEOUT_MS, None, 20)
            .map(|r| r.expect("no expected epoch, no fence"))),
    ));
    out.push((
        Ongoing,
        ok(meta_in(from).prepare_add_partitions(&added, 20)),
    ));
    out.push((
        PrepareCommit,
        ok(meta_in(from).prepare_abort_or_commit(PrepareCommit, 20)),
    ));
    out.push((
        PrepareAbort,
        ok(meta_in(from).prepare_abort_or_commit(PrepareAbort, 20)),
    ));
    out.push((complete_target, ok(meta_in(from).prepare_complete(20))));
    out.push((Dead, ok(meta_in(from).prepare_dead())));
    out.push((
        PrepareEpochFence,
        ok(meta_in(from).prepare_fence_producer_epoch()),
    ));
    out
}

#[test]
fn every_edge_outside_the_table_is_refused_and_every_edge_in_it_prepares() {
    let mut seen = BTreeSet::new();
    for from in TxnState::ALL {
        for (to, r) in prepare_all(from) {
            seen.insert((from, to));
            match r {
                Ok(()) => assert!(allowed(from, to), "{from} -> {to} prepared"),
                Err(TransitionError::NotAllowed { .. }) => {
                    assert!(!allowed(from, to), "{from} -> {to} refused")
                }
                Err(e) => panic!("{from} -> {to}: {e}"),
            }
        }
    }
    // Every edge of the table was tried (CompleteCommit from states other
    // than PrepareCommit is reached through prepare_complete's choice).
    for (to, prev) in TABLE {
        for from in *prev {
            assert!(seen.contains(&(*from, *to)), "{from} -> {to} untested");
        }
    }
}

#[test]
fn a_pending_transition_blocks_another() {
    let mut m = meta_in(Ongoing);
    m.prepare_abort_or_commit(PrepareCommit, 20).unwrap();
    assert!(matches!(
        m.prepare_add_partitions(&parts(&[("t", 5)]), 21),
        Err(TransitionError::AlreadyPending { .. })
    ));
}

// ---------------------------------------------------------------- each edge
// through the coordinator's requests

#[test]
fn empty_to_empty_by_init_producer_id() {
    let mut h = Harness::new();
    let p0 = h.init("tx").unwrap();
    assert_eq!(p0.epoch, 0);
    let p1 = h.init("tx").unwrap();
    assert_eq!((p1.producer_id, p1.epoch), (p0.producer_id, 1));
    assert_eq!(h.c.metadata("tx").unwrap().state, Empty);
}

#[test]
fn empty_ongoing_prepare_complete_commit_then_empty_again() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    // Empty -> Ongoing
    assert_eq!(h.add("tx", p, &[("a", 0)]), Ok(p));
    let m = h.c.metadata("tx").unwrap();
    assert_eq!((m.state, m.start_ms), (Ongoing, h.now));
    // Ongoing -> Ongoing (more partitions)
    h.now += 5;
    assert_eq!(h.add("tx", p, &[("a", 1), ("b", 0)]), Ok(p));
    assert_eq!(h.c.metadata("tx").unwrap().partitions.len(), 3);
    assert_eq!(
        h.c.metadata("tx").unwrap().start_ms,
        h.now - 5,
        "start kept"
    );
    // Ongoing -> PrepareCommit
    let (answer, job) = h.end("tx", p, TxnResult::Commit);
    assert_eq!(answer, Ok(p));
    let job = job.expect("markers");
    assert_eq!(job.result, TxnResult::Commit);
    assert_eq!(job.partitions.len(), 3);
    assert_eq!(h.c.metadata("tx").unwrap().state, PrepareCommit);
    // PrepareCommit -> CompleteCommit once every marker is written
    let mut marked = job.partitions.iter();
    h.c.marker_written(&job, marked.next().unwrap());
    assert_eq!(h.c.complete_markers(&job), None, "markers missing");
    for tp in marked {
        h.c.marker_written(&job, tp);
    }
    let w = h.c.complete_markers(&job).unwrap();
    assert_eq!(h.c.complete_markers(&job), None, "one completion at a time");
    h.finish(w, true);
    let m = h.c.metadata("tx").unwrap();
    assert_eq!((m.state, m.partitions.len()), (CompleteCommit, 0));
    assert_eq!(h.c.gauges(h.now).commits, 1);
    // CompleteCommit -> Ongoing (the next transaction, same epoch)
    h.now += 5;
    assert_eq!(h.add("tx", p, &[("a", 0)]), Ok(p));
    assert_eq!(h.c.metadata("tx").unwrap().start_ms, h.now, "a new start");
    // ... -> CompleteAbort -> Empty (CompleteAbort -> Empty by InitProducerId)
    let (_, job) = h.end("tx", p, TxnResult::Abort);
    h.write_markers(&job.unwrap());
    assert_eq!(h.c.metadata("tx").unwrap().state, CompleteAbort);
    let p2 = h.init("tx").unwrap();
    assert_eq!(p2.epoch, p.epoch + 1);
    assert_eq!(h.c.metadata("tx").unwrap().state, Empty);
}

#[test]
fn complete_commit_to_empty_and_complete_abort_to_ongoing() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    let (_, job) = h.end("tx", p, TxnResult::Commit);
    h.write_markers(&job.unwrap());
    // CompleteCommit -> Empty
    let p = h.init("tx").unwrap();
    assert_eq!(h.c.metadata("tx").unwrap().state, Empty);
    h.add("tx", p, &[("a", 0)]).unwrap();
    let (_, job) = h.end("tx", p, TxnResult::Abort);
    h.write_markers(&job.unwrap());
    // CompleteAbort -> Ongoing
    assert_eq!(h.add("tx", p, &[("b", 0)]), Ok(p));
    assert_eq!(h.c.metadata("tx").unwrap().state, Ongoing);
}

#[test]
fn ongoing_to_prepare_abort_by_epoch_fence_on_timeout() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    assert!(h.c.tick(h.now).is_empty(), "the first tick schedules");
    h.now += i64::from(TIMEOUT_MS) + 1;
    assert!(
        h.c.abort_timed_out(h.now - 2).is_empty(),
        "not yet past the timeout"
    );
    let writes = h.c.abort_timed_out(h.now);
    assert_eq!(writes.len(), 1);
    // Ongoing -> PrepareEpochFence -> PrepareAbort: the bump is in effect
    // at once, before the write.
    let m = h.c.metadata("tx").unwrap();
    assert_eq!((m.state, m.pending), (Ongoing, Some(PrepareAbort)));
    assert_eq!(m.producer_epoch, p.epoch + 1);
    let w = writes.into_iter().next().unwrap();
    let done = h.finish(w, true);
    assert_eq!(done.answer, None, "nobody waits for a timeout");
    let job = done.markers.expect("abort markers");
    assert_eq!(
        (job.result, job.producer_epoch),
        (TxnResult::Abort, p.epoch + 1)
    );
    assert_eq!(h.c.metadata("tx").unwrap().state, PrepareAbort);
    // The fenced producer is refused.
    assert_eq!(h.add("tx", p, &[("b", 0)]), Err(ErrorCode::ProducerFenced));
    assert_eq!(
        h.end("tx", p, TxnResult::Commit).0,
        Err(ErrorCode::ProducerFenced)
    );
    h.write_markers(&job);
    assert_eq!(h.c.metadata("tx").unwrap().state, CompleteAbort);
    let g = h.c.gauges(h.now);
    assert_eq!((g.aborts, g.timeouts, g.open), (1, 1, 0));
}

#[test]
fn ongoing_to_prepare_abort_by_epoch_fence_on_init_producer_id() {
    let mut h = Harness::new();
    let p = h.init("tx").unwrap();
    h.add("tx", p, &[("a", 0)]).unwrap();
    // A new session while a transaction is open: the old one is aborted
    // with a bumped epoch, the client is told to retry.
    let step = h.init_step("tx", None);
    let (answer, job) = h.settle(step);
    assert_eq!(answer, Err(ErrorCode::ConcurrentTransactions));
    let job = job.expect("abort markers");
    assert_eq!(job.producer_epoch, p.epoch + 1);
    assert_eq!(
        h.init("tx"),
        Err(ErrorCode::ConcurrentTransactions),
        "markers pending"
    );
    h.write_markers(&job);
    let p2 = h.init("tx").unwrap();
    assert_eq!(
        (p2.producer_id, p2.epoch),
        (p.producer_id, p.epoch + 2),
        "fence bump, then the new session's"
    );
    assert_eq!(h.add("tx", p, &[("a", 0)]), Err(ErrorCode::ProducerFenced));
}

#[test]
fn empty_and_complete_states_to_dead_by_expiration() {
    let config = weir_txn::TxnConfig {
        state_topic_partitions: 4,
        transactional_id_expiration_ms: 1_000,
        ..weir_txn::TxnConfig::default()
    };
    let mut h = Harness::with(config);
    let p = h.init("empty").unwrap();
    let _ = p;
    let q = h.init("committed").unwrap();
    h.add("committed", q, &[("a", 0)]).unwrap();
    let (_, job) = h.end("committed", q, TxnResult::Commit);
    h.write_markers(&job.unwrap());
    let r = h.init("aborted").unwrap();
    h.add("aborted", r, &[("a", 0)]).unwrap();
    let (_, job) = h.end("aborted", r, TxnResult::Abort);
    h.write_markers(&job.unwrap());
    let s = h.init("open").unwrap();
    h.add("open", s, &[("a", 0)]).unwrap();
    h.now += 1_000;
    let writes = h.c.expire_transactional_ids(h.now);
    assert_eq!(writes.len(), 3, "the open transaction does not expire");
    for id in ["empty", "committed", "aborted"] {
        assert_eq!(h.c.metadata(id).unwrap().pending, Some(Dead));
    }
    for w in writes {
        assert_eq!(w.record.value, None, "a tombstone");
        h.finish(w, true);
    }
    for id in ["empty", "committed", "aborted"] {
        assert!(h.c.metadata(id).is_none(), "{id} forgotten");
        assert_eq!(h.c.describe(id), Err(ErrorCode::TransactionalIdNotFound));
    }
    assert_eq!(h.c.metadata("open").unwrap().state, Ongoing);
    // The tombstones make the replay forget them too.
    let (reloaded, _) = h.reloaded();
    assert!(reloaded.metadata("committed").is_none());
    assert_eq!(reloaded.metadata("open").unwrap().state, Ongoing);
}

#[test]
fn a_failed_expiration_keeps_the_id() {
    let config = weir_txn::TxnConfig {
        state_topic_partitions: 4,
        transactional_id_expiration_ms: 1_000,
        ..weir_txn::TxnConfig::default()
    };
    let mut h = Harness::with(config);
    h.init("tx").unwrap();
    h.now += 1_000;
    let w = h.c.expire_transactional_ids(h.now).pop().unwrap();
    h.finish(w, false);
    let m = h.c.metadata("tx").unwrap();
    assert_eq!((m.state, m.pending), (Empty, None));
}

#[test]
fn new_transactional_id_needs_a_producer_id() {
    let mut h = Harness::new();
    assert_eq!(
        h.c.init_producer_id("tx", TIMEOUT_MS, None, None, h.now),
        Ok(Step::NeedProducerId)
    );
    assert!(h.c.metadata("tx").is_none(), "nothing created without one");
}
