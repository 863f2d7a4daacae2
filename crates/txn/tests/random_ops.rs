//! Random sequences of requests, write outcomes (in any order, some
//! failing), markers, timer ticks and partition reloads, checking after
//! every step:
//!
//! * one write in flight per transactional id at most, and only while it
//!   has a pending state;
//! * the producer epochs handed out and written never go down, a producer
//!   id changes only to a new one at epoch 0, and the epoch in effect is
//!   never below the written one (a fence bump is in effect before it is
//!   written; if it never is, a reload forgets it, as in Kafka: no client
//!   was ever given it);
//! * a request of a producer session that is not the live one (the last
//!   InitProducerId answer, until a fence) is never accepted;
//! * markers of a commit come only from an accepted EndTxn(commit); a
//!   fence or timeout only ever aborts;
//! * replaying the records written so far rebuilds every transactional id
//!   that has no transition in flight.
//!
//! The metadata's own invariants are debug assertions in the crate; they
//! fire here too.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use weir_txn::{
    ErrorCode, MarkerJob, ProducerIdAndEpoch, Step, TxnConfig, TxnResult, TxnState, Write,
};

const IDS: [&str; 3] = ["a", "b", "c"];
const CLIENT_TIMEOUT_MS: i32 = 10_000;

#[derive(Clone, Debug)]
enum Session {
    Live,
    Stale(usize),
}

#[derive(Clone, Debug)]
enum Op {
    Init {
        id: usize,
        expected: Option<Session>,
    },
    Add {
        id: usize,
        session: Session,
        partition: i32,
    },
    End {
        id: usize,
        session: Session,
        commit: bool,
    },
    Finish {
        pick: usize,
        ok: bool,
    },
    Markers {
        pick: usize,
        all: bool,
    },
    Tick {
        advance_ms: i64,
    },
    Reload {
        partition: i32,
    },
}

fn session() -> impl Strategy<Value = Session> {
    prop_oneof![4 => Just(Session::Live), 1 => (0usize..8).prop_map(Session::Stale)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..3, prop::option::weighted(0.3, session()))
            .prop_map(|(id, expected)| Op::Init { id, expected }),
        5 => (0usize..3, session(), 0i32..4)
            .prop_map(|(id, session, partition)| Op::Add { id, session, partition }),
        3 => (0usize..3, session(), any::<bool>())
            .prop_map(|(id, session, commit)| Op::End { id, session, commit }),
        8 => (any::<usize>(), prop::bool::weighted(0.85))
            .prop_map(|(pick, ok)| Op::Finish { pick, ok }),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(pick, all)| Op::Markers { pick, all }),
        2 => prop_oneof![Just(0i64), 0i64..2_000, 5_000i64..30_000, Just(200_000)]
            .prop_map(|advance_ms| Op::Tick { advance_ms }),
        1 => (0i32..2).prop_map(|partition| Op::Reload { partition }),
    ]
}

/// What an in-flight write was for.
#[derive(Clone, Debug)]
enum Cause {
    Init(usize),
    Add(usize),
    End(usize, TxnResult),
    /// A timer's write (timeout fence or expiration).
    Timer(usize),
    Complete(usize),
}

struct Sim {
    h: Harness,
    in_flight: Vec<(Write, Cause)>,
    jobs: Vec<MarkerJob>,
    /// Per id: every producer session ever answered; the live one.
    sessions: Vec<Vec<ProducerIdAndEpoch>>,
    live: Vec<Option<ProducerIdAndEpoch>>,
    /// Per id: the producer last seen in its metadata.
    seen: Vec<Option<ProducerIdAndEpoch>>,
    producer_ids_handed_out: Vec<i64>,
}

fn id_of(name: &str) -> usize {
    IDS.iter().position(|i| *i == name).expect("one of IDS")
}

impl Sim {
    fn new() -> Sim {
        Sim {
            h: Harness::with(TxnConfig {
                state_topic_partitions: 2,
                max_timeout_ms: 60_000,
                transactional_id_expiration_ms: 100_000,
                abort_timed_out_interval_ms: 1_000,
                remove_expired_interval_ms: 10_000,
            }),
            in_flight: Vec::new(),
            jobs: Vec::new(),
            sessions: vec![Vec::new(); IDS.len()],
            live: vec![None; IDS.len()],
            seen: vec![None; IDS.len()],
            producer_ids_handed_out: Vec::new(),
        }
    }

    fn session(&self, id: usize, s: &Session) -> ProducerIdAndEpoch {
        match s {
            Session::Live => self.live[id].unwrap_or(ProducerIdAndEpoch {
                producer_id: 1,
                epoch: 0,
            }),
            Session::Stale(i) => {
                let all = &self.sessions[id];
                if all.is_empty() {
                    ProducerIdAndEpoch {
                        producer_id: 999,
                        epoch: 3,
                    }
                } else {
                    all[i % all.len()]
                }
            }
        }
    }

    /// A request was accepted (a write or an immediate answer): it must
    /// come from the live session.
    fn check_accepted(&self, id: usize, p: ProducerIdAndEpoch, what: &str) {
        assert_eq!(
            Some(p),
            self.live[id],
            "{what} of {} accepted from a session that is not the live one",
            IDS[id]
        );
    }

    fn apply(&mut self, op: &Op) {
        let now = self.h.now;
        match op {
            Op::Init { id, expected } => {
                let expected = expected.as_ref().map(|s| self.session(*id, s));
                let step = match self.h.c.init_producer_id(
                    IDS[*id],
                    CLIENT_TIMEOUT_MS,
                    expected,
                    None,
                    now,
                ) {
                    Ok(Step::NeedProducerId) => {
                        let pid = self.h.next_producer_id;
                        self.h.next_producer_id += 1;
                        self.producer_ids_handed_out.push(pid);
                        self.h.c.init_producer_id(
                            IDS[*id],
                            CLIENT_TIMEOUT_MS,
                            expected,
                            Some(pid),
                            now,
                        )
                    }
                    other => other,
                };
                match step {
                    Ok(Step::Write(w)) => self.in_flight.push((w, Cause::Init(*id))),
                    Ok(other) => panic!("InitProducerId answered {other:?}"),
                    Err(_) => {}
                }
            }
            Op::Add {
                id,
                session,
                partition,
            } => {
                let p = self.session(*id, session);
                let parts = parts(&[("t", *partition)]);
                match self
                    .h
                    .c
                    .add_partitions(IDS[*id], p.producer_id, p.epoch, &parts, now)
                {
                    Ok(Step::Write(w)) => {
                        self.check_accepted(*id, p, "AddPartitions");
                        self.in_flight.push((w, Cause::Add(*id)));
                    }
                    Ok(Step::Done(q)) => {
                        self.check_accepted(*id, p, "AddPartitions");
                        assert_eq!(q, p);
                    }
                    Ok(Step::NeedProducerId) => panic!("AddPartitions needs no producer id"),
                    Err(_) => {}
                }
            }
            Op::End {
                id,
                session,
                commit,
            } => {
                let p = self.session(*id, session);
                let result = TxnResult::from_committed(*commit);
                match self
                    .h
                    .c
                    .end_txn(IDS[*id], p.producer_id, p.epoch, result, now)
                {
                    Ok(Step::Write(w)) => {
                        self.check_accepted(*id, p, "EndTxn");
                        self.in_flight.push((w, Cause::End(*id, result)));
                    }
                    Ok(Step::Done(_)) => self.check_accepted(*id, p, "EndTxn"),
                    Ok(Step::NeedProducerId) => panic!("EndTxn needs no producer id"),
                    Err(_) => {}
                }
            }
            Op::Finish { pick, ok } => {
                if self.in_flight.is_empty() {
                    return;
                }
                let (w, cause) = self.in_flight.remove(pick % self.in_flight.len());
                let done = self.h.finish(w, *ok);
                match cause {
                    Cause::Init(id) => {
                        let answer = done.answer.expect("InitProducerId is answered");
                        if let Ok(p) = answer {
                            if let Some(last) = self.sessions[id].last() {
                                assert!(
                                    p.producer_id != last.producer_id || p.epoch >= last.epoch,
                                    "{}: an older epoch handed out",
                                    IDS[id]
                                );
                            }
                            self.sessions[id].push(p);
                            self.live[id] = Some(p);
                        }
                        if let Some(job) = &done.markers {
                            assert_eq!(job.result, TxnResult::Abort, "a fence aborts");
                            assert_eq!(answer, Err(ErrorCode::ConcurrentTransactions));
                        }
                    }
                    Cause::Add(_) => assert!(done.answer.is_some()),
                    Cause::End(_, result) => {
                        assert!(done.answer.is_some());
                        if let Some(job) = &done.markers {
                            assert_eq!(job.result, result, "the markers EndTxn asked for");
                        }
                    }
                    Cause::Timer(_) => {
                        assert_eq!(done.answer, None);
                        if let Some(job) = &done.markers {
                            assert_eq!(job.result, TxnResult::Abort, "a timeout aborts");
                        }
                    }
                    Cause::Complete(id) => {
                        assert_eq!(done.answer, None);
                        if done.retry_completion {
                            // asked again on the next Markers step
                            let _ = id;
                        }
                    }
                }
                if let Some(job) = done.markers {
                    self.jobs.push(job);
                }
            }
            Op::Markers { pick, all } => {
                if self.jobs.is_empty() {
                    return;
                }
                let i = pick % self.jobs.len();
                let job = self.jobs[i].clone();
                if !self.h.c.markers_wanted(&job) {
                    self.jobs.remove(i);
                    return;
                }
                let targets: Vec<_> = if *all {
                    job.partitions.iter().cloned().collect()
                } else {
                    job.partitions.iter().take(1).cloned().collect()
                };
                for tp in &targets {
                    self.h.c.marker_written(&job, tp);
                }
                if let Some(w) = self.h.c.complete_markers(&job) {
                    let id = id_of(&job.transactional_id);
                    self.in_flight.push((w, Cause::Complete(id)));
                }
            }
            Op::Tick { advance_ms } => {
                self.h.now += advance_ms;
                for w in self.h.c.tick(self.h.now) {
                    let id = self
                        .h
                        .c
                        .all_metadata()
                        .find(|m| {
                            self.h.c.partition_for(&m.transactional_id) == w.partition
                                && weir_txn::records::encode_key(&m.transactional_id)
                                    == w.record.key
                        })
                        .map(|m| id_of(&m.transactional_id))
                        .expect("a timer writes for a known id");
                    self.in_flight.push((w, Cause::Timer(id)));
                }
            }
            Op::Reload { partition } => {
                // Leadership moved away and back: writes in flight there
                // fail (the log refuses the old leader), then the log is
                // replayed.
                let (stale, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
                    .into_iter()
                    .partition(|(w, _)| w.partition == *partition);
                self.in_flight = keep;
                for (w, _) in stale {
                    let done =
                        self.h
                            .c
                            .write_completed(w.id, Err(ErrorCode::NotLeaderOrFollower), now);
                    assert_eq!(done.markers, None);
                }
                self.h.c.begin_load(*partition, 1);
                for r in self.h.log.get(partition).into_iter().flatten() {
                    self.h
                        .c
                        .replay(*partition, &r.key, r.value.as_deref())
                        .expect("replay");
                }
                self.jobs.extend(self.h.c.complete_load(*partition, now));
                // An unwritten fence is forgotten: the session it fenced
                // is live again.
                for (id, name) in IDS.iter().enumerate() {
                    let current = self.h.c.metadata(name).map(|m| ProducerIdAndEpoch {
                        producer_id: m.producer_id,
                        epoch: m.producer_epoch,
                    });
                    if current.is_some() && self.sessions[id].last().copied() == current {
                        self.live[id] = current;
                    }
                }
            }
        }
    }

    fn check(&mut self) {
        // one write in flight per id, only with a pending state
        let mut per_id: BTreeMap<usize, usize> = BTreeMap::new();
        for (_, cause) in &self.in_flight {
            let id = match cause {
                Cause::Init(i) | Cause::Add(i) | Cause::End(i, _) | Cause::Timer(i) => *i,
                Cause::Complete(i) => *i,
            };
            *per_id.entry(id).or_default() += 1;
        }
        for (id, n) in per_id {
            assert!(n <= 1, "{} has {n} writes in flight", IDS[id]);
            let m = self.h.c.metadata(IDS[id]).expect("an id with a write");
            assert!(
                m.pending.is_some(),
                "{} writes without a pending state",
                IDS[id]
            );
        }
        let (reloaded, _) = self.h.reloaded();
        for (id, name) in IDS.iter().enumerate() {
            let written = reloaded.metadata(name).map(|m| ProducerIdAndEpoch {
                producer_id: m.producer_id,
                epoch: m.producer_epoch,
            });
            match (self.seen[id], written) {
                (Some(before), Some(now)) if before.producer_id == now.producer_id => {
                    assert!(
                        now.epoch >= before.epoch,
                        "{name}: the written epoch went down"
                    );
                }
                (_, Some(now)) => {
                    assert!(
                        now.epoch == 0 || self.seen[id].is_none(),
                        "{name}: a new producer id starts at 0"
                    );
                    assert!(
                        self.producer_ids_handed_out.contains(&now.producer_id),
                        "{name}: a producer id nobody handed out"
                    );
                }
                _ => {}
            }
            self.seen[id] = written;
            let Some(m) = self.h.c.metadata(name) else {
                continue;
            };
            let now = ProducerIdAndEpoch {
                producer_id: m.producer_id,
                epoch: m.producer_epoch,
            };
            if let Some(w) = written
                && w.producer_id == now.producer_id
            {
                assert!(
                    now.epoch >= w.epoch,
                    "{name}: in effect below the written epoch"
                );
            }
            // the live session ends when the epoch moves on without it (a
            // fence, in effect before it is written)
            if self.live[id].is_some_and(|l| l != now) {
                self.live[id] = None;
            }
        }
        // the log rebuilds every id at rest
        for m in self.h.c.all_metadata() {
            if m.pending.is_some() || m.has_failed_epoch_fence || m.producer_epoch < 0 {
                continue;
            }
            let r = reloaded
                .metadata(&m.transactional_id)
                .unwrap_or_else(|| panic!("{} missing after a replay", m.transactional_id));
            assert_eq!(
                (
                    r.producer_id,
                    r.producer_epoch,
                    r.state,
                    &r.partitions,
                    r.timeout_ms,
                    r.start_ms
                ),
                (
                    m.producer_id,
                    m.producer_epoch,
                    m.state,
                    &m.partitions,
                    m.timeout_ms,
                    m.start_ms
                ),
                "{} differs after a replay",
                m.transactional_id
            );
        }
        for r in reloaded.all_metadata() {
            assert!(
                self.h.c.metadata(&r.transactional_id).is_some(),
                "{} is in the log but forgotten",
                r.transactional_id
            );
        }
    }
}

fn run(ops: &[Op]) {
    let mut sim = Sim::new();
    for op in ops {
        sim.apply(op);
        sim.check();
    }
    // Drain: every write completes, every marker is written; nothing is
    // left open except transactions no one ended.
    // The picks rotate: a job the coordinator still wants but that cannot
    // complete yet (an earlier transaction's job whose identity, producer
    // id, epoch and result, equals the pending one's, as in Kafka) must
    // not keep the pending job from ever being picked.
    for i in 0..1_000 {
        if sim.in_flight.is_empty() && sim.jobs.is_empty() {
            break;
        }
        sim.apply(&Op::Finish { pick: i, ok: true });
        sim.apply(&Op::Markers { pick: i, all: true });
        sim.check();
    }
    assert!(sim.in_flight.is_empty() && sim.jobs.is_empty(), "drained");
    for m in sim.h.c.all_metadata() {
        assert!(
            !matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort),
            "{} stuck in {}",
            m.transactional_id,
            m.state
        );
        assert_eq!(sim.h.c.writes_in_flight(), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_the_invariants(ops in prop::collection::vec(op(), 1..150)) {
        run(&ops);
    }
}

/// A long fixed scenario, so the interesting interleavings are exercised
/// even when proptest's cases stay short.
#[test]
fn a_long_run_with_a_fixed_seed() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    for _ in 0..20 {
        let ops = prop::collection::vec(op(), 400..500)
            .new_tree(&mut runner)
            .expect("ops")
            .current();
        run(&ops);
    }
}
