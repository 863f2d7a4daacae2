//! The example's idempotent SQLite effects, and row 3 of the seed 004 table
//! (the process dies after the effect, before the offset commit) without a
//! broker: the engine restarts from the committed offset, the record comes
//! again, and the event id absorbs it.

use crate::common::effects::{Applied, Change, EffectStore};
use weir_parallel_consumer::engine::{Delivered, Engine, EngineConfig, Outcome};
use weir_parallel_consumer::record::{Bytes, Record};
use weir_parallel_consumer::scheduler::Decision;
use weir_parallel_consumer::tracker::TopicPartition;

fn record(offset: i64, payload: &str) -> Record {
    Record {
        topic: "payments".into(),
        partition: 0,
        offset,
        payload: Some(Bytes::copy_from_slice(payload.as_bytes())),
        ..Record::default()
    }
}

#[test]
fn the_same_event_has_one_effect() {
    let mut store = EffectStore::open_in_memory().unwrap();
    let change = Change::parse(b"alice:-30").unwrap();
    assert_eq!(
        store.apply("payments-0-10", &change).unwrap(),
        Applied::Done
    );
    assert_eq!(
        store.apply("payments-0-10", &change).unwrap(),
        Applied::Duplicate
    );
    assert_eq!(store.balance("alice").unwrap(), Some(-30));
    assert_eq!(
        store.apply("payments-0-11", &change).unwrap(),
        Applied::Done
    );
    assert_eq!(store.balance("alice").unwrap(), Some(-60));
    assert_eq!(store.processed_events().unwrap(), 2);
}

#[test]
fn bad_payloads_are_errors_and_change_nothing() {
    for p in ["", "alice", ":5", "alice:x", "alice:1.5"] {
        assert!(Change::parse(p.as_bytes()).is_err(), "{p:?}");
    }
    assert_eq!(
        Change::parse(b"bob: 7").unwrap(),
        Change {
            account: "bob".into(),
            delta: 7
        }
    );
}

#[test]
fn effects_survive_reopening_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("balances.db");
    let path = path.to_str().unwrap();
    let change = Change::parse(b"carol:5").unwrap();
    {
        let mut store = EffectStore::open(path).unwrap();
        store.apply("e1", &change).unwrap();
    }
    let mut store = EffectStore::open(path).unwrap();
    assert_eq!(store.apply("e1", &change).unwrap(), Applied::Duplicate);
    assert_eq!(store.balance("carol").unwrap(), Some(5));
}

/// Runs every task of `engine` through `store` (as a worker would).
fn run_all(engine: &mut Engine<Record>, store: &mut EffectStore) -> Vec<Applied> {
    let mut applied = Vec::new();
    loop {
        let tasks: Vec<_> = engine
            .actions()
            .into_iter()
            .filter_map(|d| match d {
                Decision::Submit { id, payload, .. } => Some((id, payload)),
                _ => None,
            })
            .collect();
        if tasks.is_empty() {
            return applied;
        }
        for (id, task) in tasks {
            let record = &task.payload;
            let change = Change::parse(record.payload.as_deref().unwrap()).unwrap();
            applied.push(store.apply(&record.event_id(), &change).unwrap());
            engine.finished(id, &task.task_ref(), Outcome::Success);
        }
    }
}

#[test]
fn row3_crash_between_effect_and_commit_has_no_second_effect() {
    let tp = TopicPartition {
        topic: "payments".into(),
        partition: 0,
    };
    let log = [
        record(10, "alice:-30"),
        record(11, "bob:10"),
        record(12, "alice:5"),
    ];
    let mut store = EffectStore::open_in_memory().unwrap();

    // First owner: committed offset 10; applies all three effects, then
    // dies before its commit of 13 is made.
    let mut first: Engine<Record> = Engine::new(EngineConfig::default()).unwrap();
    first.assign(tp.clone(), Some((10, "")));
    for r in &log {
        first.deliver(
            &tp,
            r.offset,
            r.key.as_deref().map(<[u8]>::to_vec),
            r.clone(),
            0,
        );
    }
    assert_eq!(run_all(&mut first, &mut store), vec![Applied::Done; 3]);
    assert_eq!(first.commits()[0].offset, 13);
    drop(first); // no commit happened: the group still says 10

    // Second owner: resumes at 10, every record comes again.
    let mut second: Engine<Record> = Engine::new(EngineConfig::default()).unwrap();
    second.assign(tp.clone(), Some((10, "")));
    for r in &log {
        assert_eq!(
            second.deliver(
                &tp,
                r.offset,
                r.key.as_deref().map(<[u8]>::to_vec),
                r.clone(),
                0
            ),
            Delivered::Queued
        );
    }
    assert_eq!(
        run_all(&mut second, &mut store),
        vec![Applied::Duplicate; 3]
    );
    assert_eq!(store.balance("alice").unwrap(), Some(-25));
    assert_eq!(store.balance("bob").unwrap(), Some(10));
    assert_eq!(second.commits()[0].offset, 13);
}
