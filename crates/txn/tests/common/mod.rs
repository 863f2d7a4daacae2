//! Helpers shared by the tests: a coordinator whose writes are made
//! durable on request, with a log of what was written per partition.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use weir_txn::{
    ErrorCode, MarkerJob, ProducerIdAndEpoch, Step, TopicPartition, TxnConfig, TxnCoordinator,
    TxnRecord, TxnResult, Write, WriteDone,
};

pub const TIMEOUT_MS: i32 = 60_000;

pub fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

pub fn parts(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter().map(|(t, p)| tp(t, *p)).collect()
}

/// A coordinator, a clock, a producer id source and the records made
/// durable, per `__transaction_state` partition.
pub struct Harness {
    pub c: TxnCoordinator,
    pub now: i64,
    pub next_producer_id: i64,
    pub log: BTreeMap<i32, Vec<TxnRecord>>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with(TxnConfig {
            state_topic_partitions: 4,
            ..TxnConfig::default()
        })
    }

    pub fn with(config: TxnConfig) -> Harness {
        Harness {
            c: TxnCoordinator::new(config),
            now: 1_000,
            next_producer_id: 1_000,
            log: BTreeMap::new(),
        }
    }

    /// Makes `w` durable (`ok`) or fails it, as the broker would.
    pub fn finish(&mut self, w: Write, ok: bool) -> WriteDone {
        if ok {
            self.log.entry(w.partition).or_default().push(w.record);
            self.c.write_completed(w.id, Ok(()), self.now)
        } else {
            self.c
                .write_completed(w.id, Err(ErrorCode::NotEnoughReplicas), self.now)
        }
    }

    /// A request's step, its write made durable: the answer.
    pub fn settle(
        &mut self,
        step: Result<Step, ErrorCode>,
    ) -> (Result<ProducerIdAndEpoch, ErrorCode>, Option<MarkerJob>) {
        match step {
            Err(e) => (Err(e), None),
            Ok(Step::Done(p)) => (Ok(p), None),
            Ok(Step::NeedProducerId) => panic!("a producer id was needed"),
            Ok(Step::Write(w)) => {
                let done = self.finish(w, true);
                (
                    done.answer.expect("a request write is answered"),
                    done.markers,
                )
            }
        }
    }

    /// InitProducerId, with a producer id when one is needed.
    pub fn init_step(
        &mut self,
        id: &str,
        expected: Option<ProducerIdAndEpoch>,
    ) -> Result<Step, ErrorCode> {
        match self
            .c
            .init_producer_id(id, TIMEOUT_MS, expected, None, self.now)
        {
            Ok(Step::NeedProducerId) => {
                let pid = self.next_producer_id;
                self.next_producer_id += 1;
                self.c
                    .init_producer_id(id, TIMEOUT_MS, expected, Some(pid), self.now)
            }
            other => other,
        }
    }

    pub fn init(&mut self, id: &str) -> Result<ProducerIdAndEpoch, ErrorCode> {
        let step = self.init_step(id, None);
        self.settle(step).0
    }

    pub fn add(
        &mut self,
        id: &str,
        p: ProducerIdAndEpoch,
        list: &[(&str, i32)],
    ) -> Result<ProducerIdAndEpoch, ErrorCode> {
        let step = self
            .c
            .add_partitions(id, p.producer_id, p.epoch, &parts(list), self.now);
        self.settle(step).0
    }

    /// EndTxn made durable: the answer and the markers to send.
    pub fn end(
        &mut self,
        id: &str,
        p: ProducerIdAndEpoch,
        result: TxnResult,
    ) -> (Result<ProducerIdAndEpoch, ErrorCode>, Option<MarkerJob>) {
        let step = self.c.end_txn(id, p.producer_id, p.epoch, result, self.now);
        self.settle(step)
    }

    /// Every marker of `job` written, and the completion made durable.
    pub fn write_markers(&mut self, job: &MarkerJob) {
        for tp in &job.partitions {
            self.c.marker_written(job, tp);
        }
        let w = self.c.complete_markers(job).expect("a completion");
        let done = self.finish(w, true);
        assert_eq!(done, WriteDone::default());
    }

    /// A fresh coordinator loaded from the log (what a restart does).
    pub fn reloaded(&self) -> (TxnCoordinator, Vec<MarkerJob>) {
        let mut c = TxnCoordinator::new(self.c.config().clone());
        let mut jobs = Vec::new();
        for p in 0..self.c.config().state_topic_partitions {
            c.begin_load(p, 1);
            for r in self.log.get(&p).into_iter().flatten() {
                c.replay(p, &r.key, r.value.as_deref()).expect("replay");
            }
            jobs.extend(c.complete_load(p, self.now));
        }
        (c, jobs)
    }
}
