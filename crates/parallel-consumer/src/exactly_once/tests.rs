//! What goes into a transaction, given the engine's state: outputs of the
//! completed prefix only, in input order, never an output of another
//! generation; and a seeded model run of deliveries, completions in any
//! order, committed and aborted transactions and crashes, after which the
//! committed outputs are every input exactly once.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::engine::{Delivered, Engine, EngineConfig, Outcome, Task, TaskRef};
use crate::record::Bytes;
use crate::scheduler::{Decision, Ordering, SchedulerConfig, TaskId};

fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic: "in".into(),
        partition: p,
    }
}

fn engine(ordering: Ordering) -> Engine<()> {
    engine_with(ordering, 1)
}

/// An engine handing out batches of up to `max_batch` records.
fn engine_with(ordering: Ordering, max_batch: usize) -> Engine<()> {
    Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering,
            max_concurrency: 8,
            max_buffered_per_partition: 100,
            resume_at_buffered: 50,
            max_batch,
            ..SchedulerConfig::default()
        },
        completed_set: false,
        ..EngineConfig::default()
    })
    .unwrap()
}

fn out(p: i32, offset: i64) -> OutputRecord {
    OutputRecord::to("out").payload(format!("{p}:{offset}"))
}

fn submitted(decisions: Vec<Decision<Task<()>>>) -> Vec<(TaskId, TaskRef)> {
    decisions
        .into_iter()
        .filter_map(|d| match d {
            Decision::Submit { id, payload, .. } => Some((id, payload.task_ref())),
            _ => None,
        })
        .collect()
}

/// Finishes the task of `offset` and, as the driver does, buffers its
/// output when the engine applied the result.
fn complete(
    e: &mut Engine<()>,
    buffer: &mut OutputBuffer,
    tasks: &[(TaskId, TaskRef)],
    offset: i64,
) -> bool {
    let (id, t) = tasks
        .iter()
        .find(|(_, t)| t.offset == offset)
        .cloned()
        .unwrap_or_else(|| panic!("offset {offset} was not submitted"));
    let applied = e.finished(id, &t, Outcome::Success);
    if applied {
        buffer.insert(
            &t.tp,
            t.generation,
            t.offset,
            vec![out(t.tp.partition, offset)],
        );
    }
    applied
}

/// The submitted tasks grouped by batch (one handler call each), in order.
fn submitted_batches(decisions: Vec<Decision<Task<()>>>) -> Vec<Vec<(TaskId, TaskRef)>> {
    let mut batches: Vec<(TaskId, Vec<(TaskId, TaskRef)>)> = Vec::new();
    for d in decisions {
        if let Decision::Submit {
            id, batch, payload, ..
        } = d
        {
            match batches.last_mut() {
                Some((b, tasks)) if *b == batch && batch != id => {
                    tasks.push((id, payload.task_ref()))
                }
                _ => batches.push((batch, vec![(id, payload.task_ref())])),
            }
        }
    }
    batches.into_iter().map(|(_, tasks)| tasks).collect()
}

/// The input offset an output of [`out`] names.
fn input_of(output: &OutputRecord) -> i64 {
    let text = String::from_utf8(output.payload.clone().unwrap()).unwrap();
    text.split_once(':').unwrap().1.parse().unwrap()
}

fn payloads(plan: &TxnPlan) -> Vec<String> {
    plan.outputs()
        .map(|o| String::from_utf8(o.payload.clone().unwrap()).unwrap())
        .collect()
}

#[test]
fn only_the_completed_prefix_goes_into_the_transaction_in_input_order() {
    let mut e = engine(Ordering::Unordered);
    let mut buffer = OutputBuffer::default();
    e.assign(tp(0), Some((10, "")));
    for o in 10..15 {
        assert_eq!(e.deliver(&tp(0), o, None, (), 0), Delivered::Queued);
    }
    let tasks = submitted(e.actions());
    // Completed out of order; 12 still runs.
    for o in [14, 11, 10, 13] {
        assert!(complete(&mut e, &mut buffer, &tasks, o));
    }
    let plan = buffer.plan(e.commits());
    assert_eq!(plan.commits().len(), 1);
    assert_eq!(plan.parts[0].commit.offset, 12);
    assert_eq!(payloads(&plan), ["0:10", "0:11"]);
    assert_eq!(buffer.records(), 2, "13 and 14 wait above the watermark");
    e.commit_succeeded(&plan.commits());

    assert!(e.commits().is_empty(), "nothing moved");
    assert!(complete(&mut e, &mut buffer, &tasks, 12));
    let plan = buffer.plan(e.commits());
    assert_eq!(plan.parts[0].commit.offset, 15);
    assert_eq!(payloads(&plan), ["0:12", "0:13", "0:14"]);
    assert_eq!(buffer.records(), 0);
}

#[test]
fn commits_carry_no_completed_set_and_a_stored_one_is_not_honoured() {
    let mut e = engine(Ordering::Unordered);
    // Metadata of an at-least-once commit saying 11 was done.
    let stored = crate::metadata::encode(10, &[11], 4096).text;
    e.assign(tp(0), Some((10, stored.as_str())));
    for o in 10..13 {
        assert_eq!(
            e.deliver(&tp(0), o, None, (), 0),
            Delivered::Queued,
            "{o} must run: its outputs were never written"
        );
    }
    let tasks = submitted(e.actions());
    let mut buffer = OutputBuffer::default();
    assert!(complete(&mut e, &mut buffer, &tasks, 12));
    let commits = e.commits();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0].offset, 10);
    assert_eq!(commits[0].metadata, "", "12 is done but not committed");
}

#[test]
fn a_record_without_outputs_still_moves_the_offset() {
    let mut e = engine(Ordering::Partition);
    let mut buffer = OutputBuffer::default();
    e.assign(tp(0), Some((0, "")));
    assert_eq!(e.deliver(&tp(0), 0, None, (), 0), Delivered::Queued);
    let tasks = submitted(e.actions());
    let (id, t) = tasks[0].clone();
    assert!(e.finished(id, &t, Outcome::Success));
    buffer.insert(&t.tp, t.generation, 0, Vec::new());
    let plan = buffer.plan(e.commits());
    assert_eq!(plan.output_count(), 0);
    assert_eq!(plan.commits()[0].offset, 1);
}

#[test]
fn partitions_are_planned_in_order_each_with_its_own_outputs() {
    let mut e = engine(Ordering::Unordered);
    let mut buffer = OutputBuffer::default();
    for p in [2, 0, 1] {
        e.assign(tp(p), Some((0, "")));
        for o in 0..2 {
            assert_eq!(e.deliver(&tp(p), o, None, (), 0), Delivered::Queued);
        }
    }
    let tasks = submitted(e.actions());
    for (id, t) in tasks {
        assert!(e.finished(id, &t, Outcome::Success));
        buffer.insert(
            &t.tp,
            t.generation,
            t.offset,
            vec![out(t.tp.partition, t.offset)],
        );
    }
    let plan = buffer.plan(e.commits());
    assert_eq!(payloads(&plan), ["0:0", "0:1", "1:0", "1:1", "2:0", "2:1"]);
}

#[test]
fn a_rewind_makes_earlier_outputs_and_late_results_stale() {
    let mut e = engine(Ordering::Unordered);
    let mut buffer = OutputBuffer::default();
    e.assign(tp(0), Some((5, "")));
    for o in 5..8 {
        e.deliver(&tp(0), o, None, (), 0);
    }
    let old = submitted(e.actions());
    assert!(complete(&mut e, &mut buffer, &old, 5));
    // A transaction with 5's output aborted: run from 5 again.
    let plan = buffer.plan(e.commits());
    assert_eq!(payloads(&plan), ["0:5"]);
    let (generation, offset) = e.rewind(&tp(0)).expect("rewound");
    buffer.drop_partition(&tp(0));
    assert_eq!(offset, 5, "back to the last confirmed commit");
    assert!(e.commits().iter().all(|c| c.offset == 5));
    // 6 and 7 of the old run finish late: discarded.
    assert!(!complete(&mut e, &mut buffer, &old, 6));
    assert!(!complete(&mut e, &mut buffer, &old, 7));
    assert_eq!(buffer.records(), 0);
    for o in 5..8 {
        assert_eq!(e.deliver(&tp(0), o, None, (), 0), Delivered::Queued);
    }
    let new = submitted(e.actions());
    assert!(complete(&mut e, &mut buffer, &new, 5));
    // An output of the old generation arriving now is ignored.
    buffer.insert(&tp(0), generation - 1, 6, vec![out(0, 6)]);
    assert_eq!(buffer.records(), 1);
    for o in 6..8 {
        assert!(complete(&mut e, &mut buffer, &new, o));
    }
    let plan = buffer.plan(e.commits());
    assert_eq!(plan.parts[0].commit.generation, generation);
    assert_eq!(payloads(&plan), ["0:5", "0:6", "0:7"]);
}

#[test]
fn a_rewind_without_a_commit_goes_back_to_the_first_delivered_record() {
    let mut e = engine(Ordering::Unordered);
    e.assign(tp(0), None);
    assert_eq!(e.rewind(&tp(0)), None, "nothing delivered, nothing to run");
    e.deliver(&tp(0), 40, None, (), 0);
    e.deliver(&tp(0), 41, None, (), 0);
    assert_eq!(e.rewind(&tp(0)).map(|(_, o)| o), Some(40));
}

/// [`OutputBuffer::bytes`] recomputed from what a plan of everything
/// would take.
fn bytes_by_hand(buffer: &OutputBuffer) -> usize {
    buffer
        .parts
        .values()
        .flat_map(|p| p.by_offset.values().flat_map(|e| &e.outputs))
        .map(OutputRecord::size_bytes)
        .sum()
}

#[test]
fn waiting_bytes_follow_inserts_plans_and_drops() {
    let mut buffer = OutputBuffer::default();
    let big = |n: usize| OutputRecord::to("out").key("k").payload(vec![0u8; n]);
    buffer.insert(&tp(0), 1, 0, vec![big(10), big(20)]);
    buffer.insert(&tp(0), 1, 1, vec![big(5)]);
    buffer.insert(&tp(1), 1, 0, vec![big(100)]);
    assert_eq!(buffer.bytes(), 11 + 21 + 6 + 101);
    // The same offset again (a result applied twice) replaces, not adds.
    buffer.insert(&tp(0), 1, 1, vec![big(7)]);
    assert_eq!(buffer.bytes(), bytes_by_hand(&buffer));
    let request = |p: i32, generation: u64, offset: i64| CommitRequest {
        tp: tp(p),
        generation,
        offset,
        metadata: String::new(),
    };
    buffer.plan(vec![request(0, 1, 1)]);
    assert_eq!(buffer.bytes(), 8 + 101);
    buffer.insert(&tp(1), 2, 5, vec![big(1)]);
    assert_eq!(
        buffer.bytes(),
        8 + 2,
        "a newer generation replaced partition 1"
    );
    buffer.drop_partition(&tp(0));
    assert_eq!(buffer.bytes(), 2);
    buffer.plan(vec![request(1, 3, 9)]);
    assert_eq!(buffer.bytes(), 0);
    assert_eq!(bytes_by_hand(&buffer), 0);
}

fn request(p: i32, generation: u64, offset: i64) -> CommitRequest {
    CommitRequest {
        tp: tp(p),
        generation,
        offset,
        metadata: String::new(),
    }
}

/// Key order, batches of up to 3: key a's records 0 and 2 run as one batch
/// while key b's record 1 runs alone. The batch finished first: the
/// engine's watermark is 1, but committing 1 would commit record 0 without
/// the batch's outputs (they wait under 2), and a crash then would run 2
/// alone and lose 0's share. The plan stays at 0 (already committed: no
/// transaction), and once 1 is done everything goes in one.
#[test]
fn a_batch_straddling_the_watermark_holds_the_commit_at_its_first_record() {
    let mut e = Engine::new(EngineConfig {
        scheduler: SchedulerConfig {
            ordering: Ordering::Key,
            max_concurrency: 8,
            max_batch: 3,
            ..SchedulerConfig::default()
        },
        completed_set: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut buffer = OutputBuffer::default();
    e.assign(tp(0), Some((0, "")));
    for (o, key) in [(0, "a"), (1, "b"), (2, "a")] {
        let key = Some(key.as_bytes().to_vec());
        assert_eq!(e.deliver(&tp(0), o, key, (), 0), Delivered::Queued);
    }
    let tasks = submitted(e.actions());
    assert_eq!(tasks.len(), 3);
    let task = |o: i64| tasks.iter().find(|(_, t)| t.offset == o).unwrap().clone();
    for o in [0, 2] {
        let (id, t) = task(o);
        assert!(e.finished(id, &t, Outcome::Success));
    }
    let (_, t) = task(2);
    buffer.insert_batch(&t.tp, t.generation, 0, 2, vec![out(0, 0), out(0, 2)]);
    assert_eq!(e.commits()[0].offset, 1, "the engine's watermark");
    let plan = buffer.plan(e.commits());
    assert_eq!(
        plan.parts[0].commit.offset, 0,
        "lowered to the batch's first"
    );
    assert_eq!(plan.output_count(), 0);
    assert!(
        plan.without_unmoved(|tp| e.confirmed(tp)).is_empty(),
        "0 is already committed"
    );
    assert_eq!(buffer.records(), 1, "the batch still waits");

    let (id, t) = task(1);
    assert!(e.finished(id, &t, Outcome::Success));
    buffer.insert(&t.tp, t.generation, 1, vec![out(0, 1)]);
    let plan = buffer
        .plan(e.commits())
        .without_unmoved(|tp| e.confirmed(tp));
    assert_eq!(plan.parts[0].commit.offset, 3);
    assert_eq!(payloads(&plan), ["0:1", "0:0", "0:2"]);
    assert_eq!(buffer.records(), 0);
}

/// Spans that overlap chain: lowering the offset under one batch can put
/// it inside an earlier one, which lowers it again.
#[test]
fn overlapping_batches_lower_the_commit_to_the_first_of_them() {
    let mut buffer = OutputBuffer::default();
    buffer.insert_batch(&tp(0), 1, 3, 5, vec![out(0, 3)]);
    buffer.insert_batch(&tp(0), 1, 4, 8, vec![out(0, 4)]);
    buffer.insert(&tp(0), 1, 2, vec![out(0, 2)]);
    buffer.insert(&tp(0), 1, 9, vec![out(0, 9)]);
    let plan = buffer.plan(vec![request(0, 1, 6)]);
    assert_eq!(plan.parts[0].commit.offset, 3);
    assert_eq!(payloads(&plan), ["0:2"]);
    assert_eq!(buffer.records(), 3);
    // Past both spans (9 is above and alone): both go, 9 stays.
    let plan = buffer.plan(vec![request(0, 1, 9)]);
    assert_eq!(plan.parts[0].commit.offset, 9);
    assert_eq!(payloads(&plan), ["0:3", "0:4"]);
    assert_eq!(buffer.records(), 1);
    // A plan that moved keeps its partition even without outputs.
    let plan = buffer
        .plan(vec![request(0, 1, 9)])
        .without_unmoved(|_| Some(3));
    assert_eq!(plan.commits()[0].offset, 9);
}

#[test]
fn a_plan_for_another_generation_takes_nothing() {
    let mut buffer = OutputBuffer::default();
    buffer.insert(&tp(0), 3, 0, vec![out(0, 0)]);
    let request = CommitRequest {
        tp: tp(0),
        generation: 4,
        offset: 1,
        metadata: String::new(),
    };
    let plan = buffer.plan(vec![request]);
    assert_eq!(plan.output_count(), 0);
    assert_eq!(buffer.records(), 0, "the stale entry is dropped");
}

#[test]
fn dead_letter_output_keeps_the_record_and_says_why() {
    let record = Record {
        topic: "in".into(),
        partition: 2,
        offset: 9,
        key: Some(Bytes::from_static(b"k")),
        payload: Some(Bytes::from_static(b"v")),
        timestamp_ms: Some(77),
        ..Record::default()
    };
    let o = OutputRecord::dead_letter("dead", &record, 3, "bad input");
    assert_eq!(o.topic, "dead");
    assert_eq!(
        (o.key.as_deref(), o.payload.as_deref()),
        (Some(&b"k"[..]), Some(&b"v"[..]))
    );
    assert_eq!(o.timestamp_ms, Some(77));
    assert!(
        o.headers
            .contains(&(crate::record::DLT_OFFSET.into(), Some(b"9".to_vec())))
    );
    assert_eq!(
        o.size_bytes(),
        2 + o
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
    );
}

#[derive(Debug, Clone)]
enum Op {
    Deliver(i32),
    Actions,
    Finish(usize),
    Transaction { commit: bool },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i32..2).prop_map(Op::Deliver),
        3 => Just(Op::Actions),
        6 => any::<usize>().prop_map(Op::Finish),
        2 => prop::bool::weighted(0.75).prop_map(|commit| Op::Transaction { commit }),
        1 => Just(Op::Crash),
    ]
}

/// One partition of the model: its log (offsets with gaps, as compaction
/// or transaction markers leave them), the consumer's position in it and
/// the committed offset.
#[derive(Debug)]
struct Source {
    log: Vec<i64>,
    next: usize,
    committed: i64,
    /// Outputs committed by transactions, in the order they were written.
    written: Vec<i64>,
}

impl Source {
    fn seek(&mut self, offset: i64) {
        self.next = self.log.partition_point(|o| *o < offset);
    }
}

struct Run {
    e: Engine<()>,
    buffer: OutputBuffer,
    /// Handler calls running: a batch's tasks in offset order.
    running: Vec<Vec<(TaskId, TaskRef)>>,
}

impl Run {
    fn start(ordering: Ordering, max_batch: usize, sources: &mut HashMap<i32, Source>) -> Run {
        let mut e = engine_with(ordering, max_batch);
        for (p, s) in sources.iter_mut() {
            e.assign(tp(*p), Some((s.committed, "")));
            s.seek(s.committed);
        }
        Run {
            e,
            buffer: OutputBuffer::default(),
            running: Vec::new(),
        }
    }

    fn deliver(&mut self, p: i32, s: &mut Source) {
        if let Some(&o) = s.log.get(s.next) {
            assert_eq!(
                self.e.deliver(&tp(p), o, Some(vec![(o % 3) as u8]), (), 0),
                Delivered::Queued
            );
            s.next += 1;
        }
    }

    fn finish(&mut self, i: usize) {
        if self.running.is_empty() {
            return;
        }
        // As the driver applies a batch's reports: each record finished,
        // the batch's outputs with its last record, spanning from its first.
        let batch = self.running.remove(i % self.running.len());
        let first = batch[0].1.offset;
        for (n, (id, t)) in batch.iter().enumerate() {
            if !self.e.finished(*id, t, Outcome::Success) {
                continue;
            }
            if n + 1 < batch.len() {
                self.buffer
                    .insert(&t.tp, t.generation, t.offset, Vec::new());
            } else {
                let outputs = batch
                    .iter()
                    .map(|(_, r)| out(r.tp.partition, r.offset))
                    .collect();
                self.buffer
                    .insert_batch(&t.tp, t.generation, first, t.offset, outputs);
            }
        }
        assert_eq!(self.buffer.bytes(), bytes_by_hand(&self.buffer));
    }

    /// Plans a transaction and commits or aborts it, as the driver does.
    fn transaction(
        &mut self,
        commit: bool,
        sources: &mut HashMap<i32, Source>,
    ) -> Result<(), TestCaseError> {
        let plan = self
            .buffer
            .plan(self.e.commits())
            .without_unmoved(|tp| self.e.confirmed(tp));
        for part in &plan.parts {
            let s = &sources[&part.commit.tp.partition];
            let want: Vec<i64> = s
                .log
                .iter()
                .copied()
                .filter(|o| *o >= s.committed && *o < part.commit.offset)
                .collect();
            // A batch's outputs come with its last record: sorted, they
            // are the inputs between the commits.
            let mut got: Vec<i64> = part.outputs.iter().map(|(_, o)| input_of(o)).collect();
            got.sort();
            prop_assert_eq!(got, want, "the plan is not the records between the commits");
        }
        if commit {
            for part in &plan.parts {
                let s = sources.get_mut(&part.commit.tp.partition).unwrap();
                s.written
                    .extend(part.outputs.iter().map(|(_, o)| input_of(o)));
                s.committed = part.commit.offset;
            }
            self.e.commit_succeeded(&plan.commits());
        } else {
            for part in &plan.parts {
                let p = part.commit.tp.partition;
                self.buffer.drop_partition(&part.commit.tp);
                if let Some((_, offset)) = self.e.rewind(&part.commit.tp) {
                    prop_assert_eq!(offset, sources[&p].committed);
                    sources.get_mut(&p).unwrap().seek(offset);
                }
            }
        }
        Ok(())
    }
}

proptest! {
    /// Exactly once over the pure layer: whatever the order of completions,
    /// aborted transactions (rewind) and crashes (a new engine from the
    /// committed offsets, buffered outputs lost), the outputs committed per
    /// partition are its input offsets, each once, in order: in input
    /// order with one record per call, in each key's order with batches
    /// (a batch's outputs go with its last record).
    #[test]
    fn committed_outputs_are_every_input_once_in_order(
        ordering in prop_oneof![Just(Ordering::Partition), Just(Ordering::Key), Just(Ordering::Unordered)],
        max_batch in 1usize..5,
        gaps in proptest::collection::vec(0i64..3, 2..40),
        ops in proptest::collection::vec(op(), 0..300),
    ) {
        let mut sources: HashMap<i32, Source> = HashMap::new();
        for p in 0..2 {
            let mut offset = 0;
            let log = gaps
                .iter()
                .map(|g| {
                    offset += g + p as i64;
                    let o = offset;
                    offset += 1;
                    o
                })
                .collect();
            sources.insert(p, Source { log, next: 0, committed: 0, written: Vec::new() });
        }
        let mut run = Run::start(ordering, max_batch, &mut sources);
        for op in ops {
            match op {
                Op::Deliver(p) => {
                    let s = sources.get_mut(&p).unwrap();
                    run.deliver(p, s);
                }
                Op::Actions => run.running.extend(submitted_batches(run.e.actions())),
                Op::Finish(i) => run.finish(i),
                Op::Transaction { commit } => run.transaction(commit, &mut sources)?,
                Op::Crash => run = Run::start(ordering, max_batch, &mut sources),
            }
        }
        // Drain: everything delivered and finished, then one transaction.
        loop {
            for p in 0..2 {
                let s = sources.get_mut(&p).unwrap();
                while s.next < s.log.len() {
                    run.deliver(p, s);
                }
            }
            run.running.extend(submitted_batches(run.e.actions()));
            if run.running.is_empty() {
                break;
            }
            while !run.running.is_empty() {
                run.finish(0);
            }
        }
        run.transaction(true, &mut sources)?;
        for s in sources.values() {
            if max_batch == 1 {
                prop_assert_eq!(&s.written, &s.log, "not every input exactly once, in order");
            }
            let mut sorted = s.written.clone();
            sorted.sort();
            prop_assert_eq!(&sorted, &s.log, "not every input exactly once");
            if ordering == Ordering::Key {
                for key in 0..3 {
                    let of_key: Vec<i64> = s.written.iter().copied().filter(|o| o % 3 == key).collect();
                    prop_assert!(of_key.windows(2).all(|w| w[0] < w[1]), "key {} out of order: {:?}", key, s.written);
                }
            }
        }
    }
}
