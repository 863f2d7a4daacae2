//! Offsets committed inside transactions (TxnOffsetCommit): pending until
//! the producer's marker, committed on COMMIT unless a later commit of the
//! same partition is in the log, dropped on ABORT; OffsetFetch with
//! `require_stable` answers UNSTABLE_OFFSET_COMMIT meanwhile; replay of the
//! log (batches and markers) rebuilds the same state; deletion and expiry
//! keep pending offsets consistent.

use crate::common;

use common::*;
use weir_group::records::{RecordKey, decode_key};
use weir_group::{
    CommitPartition, ErrorCode, GroupConfig, GroupCoordinator, GroupState, LeaveRequest,
    LeavingMember, OffsetCommitRequest, OffsetFetchGroup, Output, PartitionStatus,
    TxnOffsetCommitRequest,
};

const PID: i64 = 4000;
const EPOCH: i16 = 3;

fn parts(list: &[(&str, i32, i64)]) -> Vec<CommitPartition> {
    list.iter()
        .map(|&(t, p, o)| CommitPartition {
            topic: t.into(),
            partition: p,
            offset: o,
            leader_epoch: -1,
            metadata: Some(format!("m{o}")),
        })
        .collect()
}

fn txn(group: &str, producer_id: i64, list: &[(&str, i32, i64)]) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: group.into(),
        producer_id,
        producer_epoch: EPOCH,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: parts(list),
    }
}

fn plain(group: &str, list: &[(&str, i32, i64)]) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: None,
        api_version: 9,
        partitions: parts(list),
    }
}

/// Commits inside a transaction; the request-level error or the
/// per-partition results.
fn txn_commit(h: &mut Harness, req: &TxnOffsetCommitRequest) -> Result<Vec<ErrorCode>, ErrorCode> {
    let (results, out) = h.coord.commit_txn_offsets(req, h.now)?;
    h.absorb(out);
    Ok(results.iter().map(|r| r.error).collect())
}

fn plain_commit(h: &mut Harness, req: &OffsetCommitRequest) {
    let (res, out) = h.coord.commit_offsets(req, h.now);
    assert!(res.iter().all(|r| r.error == ErrorCode::None), "{res:?}");
    h.absorb(out);
}

fn committed(c: &GroupCoordinator, group: &str, p: i32) -> Option<i64> {
    c.committed(group, "t", p).map(|c| c.offset)
}

/// OffsetFetch of ("t", p) with and without `require_stable`:
/// (plain answer's offset, stable answer's (offset, error)).
fn fetch_both(c: &GroupCoordinator, group: &str, p: i32) -> (i64, (i64, ErrorCode)) {
    let req = [OffsetFetchGroup {
        group_id: group.into(),
        partitions: Some(vec![("t".into(), p)]),
    }];
    let plain = &c.fetch_offsets(&req)[0].partitions[0];
    let stable = &c.fetch_stable_offsets(&req)[0].partitions[0];
    assert_eq!(plain.error, ErrorCode::None);
    (plain.offset, (stable.offset, stable.error))
}

#[test]
fn pending_until_commit_marker() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    plain_commit(&mut h, &plain("g", &[("t", 0, 10)]));
    assert_eq!(
        txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20), ("t", 1, 5)])),
        Ok(vec![ErrorCode::None; 2])
    );
    // Written as a transactional batch of the producer.
    assert!(matches!(
        h.batches.last(),
        Some(Logged::Batch { transaction: Some(PID), records, .. }) if records.len() == 2
    ));
    // Pending: the old committed offset stays visible, stable fetches wait.
    assert_eq!(
        fetch_both(&h.coord, "g", 0),
        (10, (-1, ErrorCode::UnstableOffsetCommit))
    );
    assert_eq!(
        fetch_both(&h.coord, "g", 1),
        (-1, (-1, ErrorCode::UnstableOffsetCommit))
    );
    assert_eq!(h.coord.open_txn_producers(p), vec![PID]);
    assert_eq!(
        h.coord
            .pending_txn_offset(PID, "g", "t", 0)
            .map(|c| c.offset),
        Some(20)
    );
    // The same transaction may commit again before it ends: the later
    // offset is the one that counts.
    assert_eq!(
        txn_commit(&mut h, &txn("g", PID, &[("t", 0, 25)])),
        Ok(vec![ErrorCode::None])
    );
    // A marker of another producer, or on another partition, changes
    // nothing.
    let other = (p + 1) % h.config.offsets_topic_partitions;
    assert_eq!(h.marker(other, PID, true).groups, 0);
    assert_eq!(h.marker(p, PID + 1, true).groups, 0);
    assert_eq!(committed(&h.coord, "g", 0), Some(10));

    let done = h.marker(p, PID, true);
    assert_eq!((done.groups, done.committed, done.dropped), (1, 2, 0));
    assert_eq!(fetch_both(&h.coord, "g", 0), (25, (25, ErrorCode::None)));
    assert_eq!(fetch_both(&h.coord, "g", 1), (5, (5, ErrorCode::None)));
    assert_eq!(
        h.coord.committed("g", "t", 0).unwrap().metadata,
        "m25",
        "the metadata of the transactional commit"
    );
    assert!(h.coord.open_txn_producers(p).is_empty());
    // A marker seen again (a replay raced with the report) is a no-op.
    assert_eq!(h.marker(p, PID, false).groups, 0);
    assert_eq!(committed(&h.coord, "g", 0), Some(25));
}

#[test]
fn abort_marker_drops_pending_offsets() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    plain_commit(&mut h, &plain("g", &[("t", 0, 10)]));
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20), ("t", 1, 5)])).unwrap();
    let done = h.marker(p, PID, false);
    assert_eq!((done.groups, done.committed, done.dropped), (1, 0, 2));
    assert_eq!(fetch_both(&h.coord, "g", 0), (10, (10, ErrorCode::None)));
    assert_eq!(fetch_both(&h.coord, "g", 1), (-1, (-1, ErrorCode::None)));
    // The producer's next transaction starts from a clean slate.
    txn_commit(&mut h, &txn("g", PID, &[("t", 1, 7)])).unwrap();
    h.marker(p, PID, true);
    assert_eq!(committed(&h.coord, "g", 0), Some(10));
    assert_eq!(committed(&h.coord, "g", 1), Some(7));
    assert_replays_to_live(&h, "g", &[0, 1]);
}

/// Kafka keeps the commit that is latest in the log when transactional and
/// plain commits of one partition interleave.
#[test]
fn later_plain_commit_wins_over_committed_transaction() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    // txn(0) < plain(0) in the log: the plain commit stays.
    // plain(1) < txn(1): the transaction's offset replaces it.
    plain_commit(&mut h, &plain("g", &[("t", 1, 100)]));
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20), ("t", 1, 21)])).unwrap();
    plain_commit(&mut h, &plain("g", &[("t", 0, 30)]));
    assert_eq!(committed(&h.coord, "g", 0), Some(30));
    assert_eq!(
        fetch_both(&h.coord, "g", 0),
        (30, (-1, ErrorCode::UnstableOffsetCommit))
    );
    let done = h.marker(p, PID, true);
    assert_eq!((done.committed, done.dropped), (1, 1));
    assert_eq!(committed(&h.coord, "g", 0), Some(30), "later plain commit");
    assert_eq!(committed(&h.coord, "g", 1), Some(21), "later txn commit");
    assert_replays_to_live(&h, "g", &[0, 1]);
}

#[test]
fn producers_complete_independently() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 1)])).unwrap();
    txn_commit(&mut h, &txn("g", PID + 1, &[("t", 0, 2), ("t", 1, 2)])).unwrap();
    txn_commit(&mut h, &txn("h", PID, &[("t", 0, 3)])).unwrap();
    h.marker(p, PID + 1, true);
    // Still unstable: the first producer's offset for t-0 is pending.
    assert_eq!(
        fetch_both(&h.coord, "g", 0),
        (2, (-1, ErrorCode::UnstableOffsetCommit))
    );
    assert_eq!(fetch_both(&h.coord, "g", 1), (2, (2, ErrorCode::None)));
    assert_replays_to_live(&h, "g", &[0, 1]);
    // The first producer commits after the second: its record is earlier
    // in the log, so the second producer's offset stays.
    let ph = h.coord.partition_for("h");
    if ph != p {
        h.marker(ph, PID, true);
    }
    let done = h.marker(p, PID, true);
    assert_eq!(done.dropped, 1);
    assert_eq!(fetch_both(&h.coord, "g", 0), (2, (2, ErrorCode::None)));
    assert_eq!(committed(&h.coord, "h", 0), Some(3));
    assert_replays_to_live(&h, "g", &[0, 1]);
}

/// Replay reads transactional batches as pending and applies markers in
/// log order; a transaction with no marker yet stays pending after the
/// load and completes with a marker written afterwards.
#[test]
fn replay_keeps_transactions_without_marker_pending() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    plain_commit(&mut h, &plain("g", &[("t", 0, 10)]));
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20)])).unwrap();
    txn_commit(&mut h, &txn("g", PID + 1, &[("t", 1, 7)])).unwrap();
    h.marker(p, PID + 1, false);
    let mut r = h.replayed();
    assert_eq!(
        fetch_both(&r, "g", 0),
        (10, (-1, ErrorCode::UnstableOffsetCommit))
    );
    assert_eq!(fetch_both(&r, "g", 1), (-1, (-1, ErrorCode::None)));
    assert_eq!(r.open_txn_producers(p), vec![PID]);
    // The marker arrives after the load.
    let done = r.complete_txn(p, PID, true);
    assert_eq!(done.committed, 1);
    assert_eq!(fetch_both(&r, "g", 0), (20, (20, ErrorCode::None)));
}

#[test]
fn validation_table() {
    let mut h = Harness::no_delay();
    let sub = subscription(&["t"]);
    let (t, m) = h.join_new("g", "c1", &[("range", &sub)]);
    assert_eq!(h.join_resp(t).generation_id, 1);
    let with = |generation: i32, member: &str, instance: Option<&str>| TxnOffsetCommitRequest {
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: instance.map(str::to_string),
        ..txn("g", PID, &[("t", 0, 5)])
    };
    // The group is CompletingRebalance: unlike OffsetCommit, the state
    // is not checked.
    assert_eq!(
        h.coord.group_state("g"),
        Some((GroupState::CompletingRebalance, 1))
    );
    let cases: Vec<(TxnOffsetCommitRequest, Result<Vec<ErrorCode>, ErrorCode>)> = vec![
        (with(1, &m, None), Ok(vec![ErrorCode::None])),
        (with(0, &m, None), Err(ErrorCode::IllegalGeneration)),
        (with(2, &m, None), Err(ErrorCode::IllegalGeneration)),
        (with(1, "ghost", None), Err(ErrorCode::UnknownMemberId)),
        (with(-1, "ghost", None), Err(ErrorCode::UnknownMemberId)),
        (with(1, &m, Some("nobody")), Err(ErrorCode::UnknownMemberId)),
        // v0-2 carry no member: accepted even though the group has members.
        (with(-1, "", None), Ok(vec![ErrorCode::None])),
        // An unknown group with a generation cannot be current.
        (
            TxnOffsetCommitRequest {
                generation_id: 1,
                member_id: "x".into(),
                ..txn("other", PID, &[("t", 0, 5)])
            },
            Err(ErrorCode::IllegalGeneration),
        ),
        // Without one it becomes a standalone group.
        (
            txn("simple", PID, &[("t", 0, 5)]),
            Ok(vec![ErrorCode::None]),
        ),
    ];
    for (i, (req, want)) in cases.iter().enumerate() {
        let before = h.log().len();
        let got = txn_commit(&mut h, req);
        assert_eq!(&got, want, "case {i}");
        let wrote = h.log().len() - before;
        assert_eq!(wrote, usize::from(got.is_ok()), "case {i}: records written");
    }
    assert!(h.coord.group_state("other").is_none());
    assert_eq!(h.coord.group_state("simple"), Some((GroupState::Empty, 0)));
    // Oversized metadata is refused per partition.
    let mut req = txn("simple", PID, &[("t", 0, 6), ("t", 1, 7)]);
    req.partitions[0].metadata = Some("x".repeat(4097));
    assert_eq!(
        txn_commit(&mut h, &req),
        Ok(vec![ErrorCode::OffsetMetadataTooLarge, ErrorCode::None])
    );
    // A group served elsewhere, or still loading.
    let p = h.coord.partition_for("g");
    let _ = h.coord.begin_load(p);
    assert_eq!(
        txn_commit(&mut h, &txn("g", PID, &[("t", 0, 5)])),
        Err(ErrorCode::CoordinatorLoadInProgress)
    );
    let _ = h.coord.unload(p);
    assert_eq!(
        txn_commit(&mut h, &txn("g", PID, &[("t", 0, 5)])),
        Err(ErrorCode::NotCoordinator)
    );
    assert!(
        h.coord.open_txn_producers(p).is_empty(),
        "dropped with the partition"
    );
}

#[test]
fn static_member_is_fenced_by_instance_id() {
    let mut h = Harness::no_delay();
    let mut join = join_req("g", "", "c1", &[("range", b"")]);
    join.group_instance_id = Some("i1".into());
    let t = h.join(join);
    let m = h.join_resp(t).member_id.clone();
    let generation = h.join_resp(t).generation_id;
    let req = |member: &str| TxnOffsetCommitRequest {
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: Some("i1".into()),
        ..txn("g", PID, &[("t", 0, 5)])
    };
    assert_eq!(
        txn_commit(&mut h, &req("old-id")),
        Err(ErrorCode::FencedInstanceId)
    );
    assert_eq!(txn_commit(&mut h, &req(&m)), Ok(vec![ErrorCode::None]));
}

#[test]
fn failed_append_leaves_nothing_pending() {
    let mut h = Harness::no_delay();
    let (_, out) = h
        .coord
        .commit_txn_offsets(&txn("g", PID, &[("t", 0, 5)]), h.now)
        .unwrap();
    assert!(
        matches!(&out[..], [Output::Append { transaction: Some(t), .. }] if t.producer_id == PID && t.producer_epoch == EPOCH)
    );
    h.absorb_with(out, |_| false);
    assert!(!h.coord.has_pending_txn_offset("g", "t", 0));
    assert!(h.coord.group_state("g").is_none(), "created group undone");
    assert!(h.batches.is_empty());
}

#[test]
fn delete_groups_tombstones_pending_offsets() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    plain_commit(&mut h, &plain("g", &[("t", 0, 10)]));
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20), ("t", 1, 21)])).unwrap();
    let before = h.log().len();
    let (res, out) = h.coord.delete_groups(&["g".into()], h.now);
    assert_eq!(res[0].1, ErrorCode::None);
    h.absorb(out);
    let tombstones: Vec<RecordKey> = h.log()[before..]
        .iter()
        .map(|(_, k, v)| {
            assert!(v.is_none());
            decode_key(k).unwrap()
        })
        .collect();
    let offset_key = |partition| RecordKey::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition,
    };
    assert_eq!(
        tombstones,
        vec![
            offset_key(0),
            offset_key(1),
            RecordKey::GroupMetadata { group: "g".into() }
        ]
    );
    assert!(h.coord.group_state("g").is_none());
    assert!(h.coord.open_txn_producers(p).is_empty());
    // The transaction commits afterwards: nothing comes back.
    assert_eq!(h.marker(p, PID, true).groups, 0);
    assert_eq!(fetch_both(&h.coord, "g", 1), (-1, (-1, ErrorCode::None)));
    let r = h.replayed();
    assert!(r.group_state("g").is_none());
    assert_eq!(committed(&r, "g", 1), None);
}

#[test]
fn offset_delete_tombstones_pending_offsets() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    txn_commit(&mut h, &txn("g", PID, &[("t", 0, 20), ("t", 1, 21)])).unwrap();
    let (e, res, out) = h.coord.delete_offsets("g", &[("t".into(), 0)], h.now);
    assert_eq!(e, ErrorCode::None);
    assert_eq!(res[0].error, ErrorCode::None);
    assert_eq!(out.len(), 1, "a tombstone for the pending offset");
    h.absorb(out);
    assert!(!h.coord.has_pending_txn_offset("g", "t", 0));
    assert!(h.coord.has_pending_txn_offset("g", "t", 1));
    h.marker(p, PID, true);
    assert_eq!(committed(&h.coord, "g", 0), None);
    assert_eq!(committed(&h.coord, "g", 1), Some(21));
    assert_replays_to_live(&h, "g", &[0, 1]);
}

#[test]
fn pending_offsets_hold_off_expiry() {
    let retention = 60_000;
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        offsets_retention_ms: retention,
        offsets_retention_check_interval_ms: 1_000,
        ..GroupConfig::default()
    });
    let p = h.coord.partition_for("s");
    plain_commit(&mut h, &plain("s", &[("t", 0, 10), ("t", 1, 10)]));
    txn_commit(&mut h, &txn("s", PID, &[("t", 0, 20)])).unwrap();
    txn_commit(&mut h, &txn("only-txn", PID, &[("t", 0, 1)])).unwrap();
    h.advance(retention + 1_000);
    // t-1 expired; t-0 has a pending offset and stays, as does the group.
    assert_eq!(committed(&h.coord, "s", 1), None);
    assert_eq!(committed(&h.coord, "s", 0), Some(10));
    assert!(h.coord.group_state("s").is_some());
    assert!(
        h.coord.group_state("only-txn").is_some(),
        "a group with only pending offsets is not removed"
    );
    let po = h.coord.partition_for("only-txn");
    h.marker(p, PID, true);
    if po != p {
        h.marker(po, PID, true);
    }
    assert_eq!(committed(&h.coord, "s", 0), Some(20));
    assert_eq!(committed(&h.coord, "only-txn", 0), Some(1));
    assert_replays_to_live(&h, "s", &[0, 1]);
}

/// A transactional commit for a group whose members later leave, and a
/// replay that interleaves group metadata with transactional batches.
#[test]
fn group_metadata_and_transactions_replay_together() {
    let mut h = Harness::no_delay();
    let p = h.coord.partition_for("g");
    let sub = subscription(&["t"]);
    let (_, m) = h.join_new("g", "c1", &[("range", &sub)]);
    let s = h.sync(sync_req("g", 1, &m, &[(&m, b"t-0")]));
    assert_eq!(h.sync_resp(s).error, ErrorCode::None);
    let req = TxnOffsetCommitRequest {
        generation_id: 1,
        member_id: m.clone(),
        ..txn("g", PID, &[("t", 0, 42)])
    };
    assert_eq!(txn_commit(&mut h, &req), Ok(vec![ErrorCode::None]));
    let (_, out) = h.coord.leave_group(
        &LeaveRequest {
            group_id: "g".into(),
            members: vec![LeavingMember {
                member_id: m,
                group_instance_id: None,
            }],
        },
        h.now,
    );
    h.absorb(out);
    let r = h.replayed();
    assert_eq!(r.group_state("g"), Some((GroupState::Empty, 2)));
    assert!(r.has_pending_txn_offset("g", "t", 0));
    h.marker(p, PID, true);
    assert_replays_to_live(&h, "g", &[0]);
    assert_eq!(committed(&h.coord, "g", 0), Some(42));
}

/// Replaying the harness log gives the live coordinator's committed and
/// pending offsets for these partitions of topic "t".
fn assert_replays_to_live(h: &Harness, group: &str, partitions: &[i32]) {
    let r = h.replayed();
    for &p in partitions {
        assert_eq!(
            r.committed(group, "t", p),
            h.coord.committed(group, "t", p),
            "{group} t-{p} committed"
        );
        assert_eq!(
            r.has_pending_txn_offset(group, "t", p),
            h.coord.has_pending_txn_offset(group, "t", p),
            "{group} t-{p} pending"
        );
        for producer_id in [PID, PID + 1] {
            assert_eq!(
                r.pending_txn_offset(producer_id, group, "t", p),
                h.coord.pending_txn_offset(producer_id, group, "t", p),
                "{group} t-{p} pending for {producer_id}"
            );
        }
    }
}

/// Seeded random interleavings of plain and transactional commits of
/// three producers, their markers, OffsetDelete, DeleteGroups, expiry and
/// failed appends. After every step the live coordinator agrees with a
/// model that reads the harness log the simple way (plain records and
/// tombstones in order, a producer's records applied at its COMMIT marker
/// when later than the committed one), and at the end a replay of the log
/// agrees with both. Rerun a failing seed with `WEIR_TXN_SEED=<seed>`.
#[test]
fn random_interleavings_match_a_log_model() {
    let seeds: Vec<u64> = match std::env::var("WEIR_TXN_SEED") {
        Ok(s) => vec![s.parse().expect("WEIR_TXN_SEED must be a u64")],
        Err(_) => (1..=200).collect(),
    };
    for seed in seeds {
        let result = std::panic::catch_unwind(|| random_run(seed, 300));
        if result.is_err() {
            panic!("random transaction scenario failed; rerun with WEIR_TXN_SEED={seed}");
        }
    }
}

fn random_run(seed: u64, steps: usize) {
    let mut state = seed;
    let mut next = move |n: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    };
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 50_000,
        offsets_retention_check_interval_ms: 1_000,
        ..GroupConfig::default()
    });
    h.random_failures = Some((seed ^ 0x7e57, 8));
    let p = h.coord.partition_for("g");
    let mut offset = 0;
    let mut model = LogModel::default();
    let mut seen = 0;
    for step in 0..steps {
        offset += 1;
        let producer = PID + next(3) as i64;
        let partition = next(3) as i32;
        match next(12) {
            0..=2 => {
                let (res, out) = h
                    .coord
                    .commit_offsets(&plain("g", &[("t", partition, offset)]), h.now);
                assert_eq!(res[0].error, ErrorCode::None);
                h.absorb(out);
            }
            3..=6 => {
                let second = (partition + 1) % 3;
                let req = txn(
                    "g",
                    producer,
                    &[("t", partition, offset), ("t", second, offset)],
                );
                txn_commit(&mut h, &req).expect("accepted");
            }
            7 | 8 => {
                h.marker(p, producer, next(2) == 0);
            }
            9 => {
                let (_, _, out) = h
                    .coord
                    .delete_offsets("g", &[("t".into(), partition)], h.now);
                h.absorb(out);
            }
            10 => {
                let (_, out) = h.coord.delete_groups(&["g".into()], h.now);
                h.absorb(out);
            }
            _ => h.advance(next(40_000) as i64),
        }
        model.read(&h.batches[seen..], p);
        seen = h.batches.len();
        for k in 0..3 {
            let live = (
                committed(&h.coord, "g", k),
                h.coord.has_pending_txn_offset("g", "t", k),
            );
            let want = (model.committed(k), model.pending(k));
            assert_eq!(
                live, want,
                "seed {seed} step {step}: t-{k} (committed, pending)"
            );
        }
    }
    let r = h.replayed();
    for k in 0..3 {
        assert_eq!(r.committed("g", "t", k), h.coord.committed("g", "t", k));
        for producer_id in PID..PID + 3 {
            assert_eq!(
                r.pending_txn_offset(producer_id, "g", "t", k),
                h.coord.pending_txn_offset(producer_id, "g", "t", k),
                "seed {seed}: t-{k} pending for {producer_id}"
            );
        }
    }
}

/// Committed and pending offsets of group "g", topic "t", read from the
/// harness log of one `__consumer_offsets` partition in order (the model
/// the random interleavings are checked against).
#[derive(Default)]
struct LogModel {
    /// partition -> (offset, record position)
    committed: std::collections::BTreeMap<i32, (i64, i64)>,
    /// (producer, partition) -> (offset, record position)
    pending: std::collections::BTreeMap<(i64, i32), (i64, i64)>,
}

impl LogModel {
    /// Reads further entries of the log.
    fn read(&mut self, batches: &[Logged], offsets_partition: i32) {
        let m = self;
        for b in batches {
            match b {
                Logged::Batch {
                    partition,
                    base_offset,
                    transaction,
                    records,
                } if *partition == offsets_partition => {
                    for ((k, v), pos) in records.iter().zip(*base_offset..) {
                        let RecordKey::OffsetCommit {
                            group, partition, ..
                        } = decode_key(k).unwrap()
                        else {
                            continue;
                        };
                        assert_eq!(group, "g");
                        match (v, transaction) {
                            (None, _) => {
                                m.committed.remove(&partition);
                                m.pending.retain(|&(_, q), _| q != partition);
                            }
                            (Some(v), None) => {
                                let o = weir_group::records::decode_offset_commit_value(v);
                                m.committed.insert(partition, (o.unwrap().offset, pos));
                            }
                            (Some(v), Some(pid)) => {
                                let o = weir_group::records::decode_offset_commit_value(v);
                                m.pending
                                    .insert((*pid, partition), (o.unwrap().offset, pos));
                            }
                        }
                    }
                }
                Logged::Marker {
                    partition,
                    producer_id,
                    committed,
                    ..
                } if *partition == offsets_partition => {
                    let mine: Vec<(i32, (i64, i64))> = m
                        .pending
                        .iter()
                        .filter(|((pid, _), _)| pid == producer_id)
                        .map(|(&(_, q), &v)| (q, v))
                        .collect();
                    m.pending.retain(|(pid, _), _| pid != producer_id);
                    if *committed {
                        for (q, (o, pos)) in mine {
                            if m.committed.get(&q).is_none_or(|&(_, cur)| pos > cur) {
                                m.committed.insert(q, (o, pos));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn committed(&self, partition: i32) -> Option<i64> {
        self.committed.get(&partition).map(|&(o, _)| o)
    }

    fn pending(&self, partition: i32) -> bool {
        self.pending.keys().any(|&(_, q)| q == partition)
    }
}

/// A partition replayed into a coordinator of its own and adopted
/// (`adopt_load`: the broker replays a partition that way so the requests
/// of its groups are answered COORDINATOR_LOAD_IN_PROGRESS meanwhile)
/// serves what a load in place serves: committed offsets, and offsets
/// pending in a transaction that the producer's marker then commits. The
/// other partitions are untouched, and a load that an unload cancelled
/// adopts nothing.
#[test]
fn a_partition_replayed_elsewhere_is_adopted() {
    let mut h = Harness::no_delay();
    let a = "adopted";
    let pa = h.coord.partition_for(a);
    let b = (0..)
        .map(|i| format!("kept-{i}"))
        .find(|g| h.coord.partition_for(g) != pa)
        .unwrap();
    plain_commit(&mut h, &plain(a, &[("t", 0, 5)]));
    assert_eq!(
        txn_commit(&mut h, &txn(a, PID, &[("t", 1, 7)])),
        Ok(vec![ErrorCode::None])
    );
    plain_commit(&mut h, &plain(&b, &[("t", 0, 9)]));
    let in_place = h.replayed();

    let _ = h.coord.begin_load(pa);
    assert_eq!(committed(&h.coord, a, 0), None, "dropped while loading");
    assert!(h.coord.adopt_load(pa, h.replayed()));
    assert_eq!(h.coord.partition_status(pa), PartitionStatus::Active);
    for p in [0, 1] {
        assert_eq!(
            fetch_both(&h.coord, a, p),
            fetch_both(&in_place, a, p),
            "t-{p}"
        );
    }
    assert_eq!(
        fetch_both(&h.coord, a, 1).1.1,
        ErrorCode::UnstableOffsetCommit
    );
    assert_eq!(h.coord.open_txn_producers(pa), vec![PID]);
    h.coord.complete_txn(pa, PID, true);
    assert_eq!(committed(&h.coord, a, 1), Some(7));
    assert_eq!(committed(&h.coord, &b, 0), Some(9));

    let _ = h.coord.begin_load(pa);
    let _ = h.coord.unload(pa);
    assert!(!h.coord.adopt_load(pa, h.replayed()));
    assert_eq!(h.coord.partition_status(pa), PartitionStatus::NotOwned);
    assert_eq!(committed(&h.coord, a, 0), None);
}
