//! The consumer context: rebalance callbacks run on the owner thread (inside
//! `poll`) and act on the same engine the poll loop uses.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::events::ConsumerEvent;
use super::{Shared, commit, ownership_error, txn};
use crate::tracker::TopicPartition;

pub(crate) struct PcContext {
    pub shared: std::sync::Arc<Shared>,
}

impl ClientContext for PcContext {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::error!(error = %error, reason, "kafka client error");
        self.shared.emit(|| ConsumerEvent::Client { error });
    }
}

pub(crate) fn partitions_of(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    tpl.elements()
        .iter()
        .map(|e| TopicPartition::new(e.topic(), e.partition()))
        .collect()
}

impl PcContext {
    /// A normal revoke: stop submitting, wait (bounded) for in-flight work,
    /// commit the completed prefix. On a lost assignment: commit nothing.
    fn revoke(&self, consumer: &BaseConsumer<PcContext>, tps: &[TopicPartition], lost: bool) {
        let shared = &self.shared;
        // Only partitions this consumer tracks (closing the consumer revokes
        // partitions whose state is already gone).
        let tps: Vec<TopicPartition> = {
            let engine = shared.lock_engine();
            tps.iter()
                .filter(|tp| engine.generation(tp).is_some())
                .cloned()
                .collect()
        };
        let tps = tps.as_slice();
        if tps.is_empty() {
            return;
        }
        // Handlers of these partitions may stop early: their results only
        // count if they arrive before the revoke ends. The engine stops
        // handing out their records first (workers take records from it
        // too), then their tokens fire.
        if lost {
            let mut engine = shared.lock_engine();
            for tp in tps {
                engine.lost(tp);
            }
            drop(engine);
            shared.cancel(tps);
            shared.forget_outputs(tps);
            tracing::warn!(partitions = ?tps, "assignment lost: nothing committed");
            shared.emit(|| ConsumerEvent::PartitionsLost {
                partitions: tps.to_vec(),
            });
            return;
        }
        {
            let mut engine = shared.lock_engine();
            for tp in tps {
                engine.revoking(tp);
            }
        }
        shared.cancel(tps);
        let deadline = Instant::now() + shared.config.revoke_timeout;
        loop {
            if shared.lock_engine().running_for(tps) == 0 {
                break;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() || !shared.apply_one_result(remaining) {
                break;
            }
        }
        let (requests, abandoned) = {
            let mut engine = shared.lock_engine();
            let abandoned = engine.running_for(tps);
            let requests: Vec<_> = tps
                .iter()
                .filter_map(|tp| engine.revoke_finish(tp))
                .collect();
            (requests, abandoned)
        };
        if abandoned > 0 {
            tracing::warn!(
                partitions = ?tps, abandoned,
                "revoke: in-flight work did not finish in time; it will run again on the new owner"
            );
        }
        if let Some(t) = &shared.txn {
            // Kafka's rule for a transactional consumer: before the
            // partitions go, commit what is completed (with its outputs) and
            // drop the rest. No transaction is open here: they run between
            // polls and this callback runs inside one.
            match txn::commit_leaving(consumer, t, requests, tps) {
                Ok((_, None)) => {}
                Ok((_, Some(e))) => {
                    tracing::warn!(partitions = ?tps, error = %e, "revoke: transaction aborted; the new owner runs the records again");
                    shared.emit(|| ConsumerEvent::TransactionAborted { error: e });
                }
                Err(e) => shared.fail(e),
            }
            return;
        }
        if !requests.is_empty() {
            for (request, result) in requests.iter().zip(commit(consumer, &requests)) {
                match result {
                    Ok(()) => {
                        tracing::info!(commit = ?request, "revoke: committed completed prefix")
                    }
                    Err(e) => {
                        tracing::warn!(commit = ?request, error = %e, "revoke: commit failed");
                        let ownership = ownership_error(&e);
                        shared.commit_failed(request, e, ownership);
                    }
                }
            }
        }
    }

    fn assign(&self, consumer: &BaseConsumer<PcContext>, tpl: &TopicPartitionList) {
        let shared = &self.shared;
        let tps = partitions_of(tpl);
        let committed = match consumer
            .committed_offsets(tpl.clone(), shared.config.committed_fetch_timeout)
        {
            Ok(list) => Some(list),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "cannot read committed offsets: tracking starts at the first delivered record"
                );
                None
            }
        };
        let mut engine = shared.lock_engine();
        for tp in &tps {
            let found = committed
                .as_ref()
                .and_then(|list| list.find_partition(&tp.topic, tp.partition))
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) if o >= 0 => {
                        // librdkafka's accessor panics on metadata that is not
                        // UTF-8 (another client may have written it): treat
                        // that as foreign metadata.
                        let meta = catch_unwind(AssertUnwindSafe(|| e.metadata().to_string()))
                            .unwrap_or_else(|_| "\u{0}non-utf8".to_string());
                        Some((o, meta))
                    }
                    _ => None,
                });
            let generation =
                engine.assign(tp.clone(), found.as_ref().map(|(o, m)| (*o, m.as_str())));
            tracing::info!(
                topic = %tp.topic, partition = tp.partition, generation,
                committed = ?found.as_ref().map(|(o, _)| *o), "assigned"
            );
        }
        drop(engine);
        // A partition paused under an earlier assignment starts unpaused.
        if let Err(e) = consumer.resume(tpl) {
            tracing::debug!(error = %e, "resume after assign");
        }
    }
}

impl ConsumerContext for PcContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                let tps = partitions_of(tpl);
                self.revoke(consumer, &tps, consumer.assignment_lost());
            }
            Rebalance::Assign(_) => {}
            Rebalance::Error(e) => {
                // librdkafka drops the assignment after an error: whether it
                // is still ours is unknown, so commit nothing.
                let owned = self.shared.lock_engine().owned();
                tracing::error!(error = %e, "rebalance error: dropping the assignment");
                self.revoke(consumer, &owned, true);
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            self.assign(consumer, tpl);
            // The group generation is new and whatever is still owned
            // (cooperative) is confirmed ours under it.
            let mut engine = self.shared.lock_engine();
            let owned = engine.owned();
            engine.ownership_confirmed(&owned);
        }
    }

    /// The answer to a periodic commit sent with [`super::CommitMode::Async`]
    /// (the other commits wait for their answer and read it themselves).
    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        self.shared.async_commit_answered(&result, offsets);
    }
}
