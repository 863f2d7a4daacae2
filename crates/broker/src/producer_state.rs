//! Idempotent-producer state: per producer id and partition, the epoch and
//! the last [`MAX_TRACKED_BATCHES`] batches appended (sequence range and
//! offsets), used to reject sequence gaps and to answer retried batches with
//! their original offsets. Pure logic: no I/O, no clock.
//!
//! Rules (as Kafka's `ProducerStateManager`):
//! - no state for the producer id (new, or expired): any sequence is
//!   accepted and starts the state;
//! - an epoch lower than the known one is fenced (INVALID_PRODUCER_EPOCH);
//! - a higher epoch must start at sequence 0;
//! - same epoch: a batch equal to one of the last five is a duplicate;
//!   otherwise its first sequence must be last sequence + 1 (wrapping at
//!   `i32::MAX`), else OUT_OF_ORDER_SEQUENCE_NUMBER.

use std::collections::{HashMap, VecDeque};

/// How many recent batches per producer and partition are remembered for
/// de-duplication (Kafka: 5, the client's max in-flight requests).
pub const MAX_TRACKED_BATCHES: usize = 5;

/// One appended batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// Max timestamp of the batch (Kafka expires idle producers by it).
    pub timestamp: i64,
}

/// What to do with an incoming batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqCheck {
    /// Append it.
    Append,
    /// Already appended: acknowledge with the original offsets.
    Duplicate(BatchMeta),
    /// A gap or reordering.
    OutOfOrder { expected: i32, got: i32 },
    /// The producer's epoch is older than the current one.
    Fenced { current: i16, got: i16 },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
}

/// State of all producers for one partition.
#[derive(Debug, Clone, Default)]
pub struct PartitionProducers {
    producers: HashMap<i64, ProducerEntry>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX { 0 } else { seq + 1 }
}

/// The last sequence of a batch starting at `first` with `count` records.
pub fn last_seq(first: i32, count: i32) -> i32 {
    let span = (count.max(1) - 1) as i64;
    ((first as i64 + span) % (i32::MAX as i64 + 1)) as i32
}

impl PartitionProducers {
    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> SeqCheck {
        let Some(e) = self.producers.get(&producer_id) else {
            return SeqCheck::Append;
        };
        if epoch < e.epoch {
            return SeqCheck::Fenced {
                current: e.epoch,
                got: epoch,
            };
        }
        if epoch > e.epoch {
            return if first_seq == 0 {
                SeqCheck::Append
            } else {
                SeqCheck::OutOfOrder {
                    expected: 0,
                    got: first_seq,
                }
            };
        }
        if let Some(b) = e
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SeqCheck::Duplicate(*b);
        }
        match e.batches.back() {
            None => SeqCheck::Append,
            Some(last) if next_seq(last.last_seq) == first_seq => SeqCheck::Append,
            Some(last) => SeqCheck::OutOfOrder {
                expected: next_seq(last.last_seq),
                got: first_seq,
            },
        }
    }

    /// Records an appended batch (after [`PartitionProducers::check`]
    /// returned `Append`, or while rebuilding from the log).
    pub fn record(&mut self, producer_id: i64, epoch: i16, batch: BatchMeta) {
        let e = self.producers.entry(producer_id).or_default();
        if epoch != e.epoch {
            e.batches.clear();
            e.epoch = epoch;
        }
        e.batches.push_back(batch);
        while e.batches.len() > MAX_TRACKED_BATCHES {
            e.batches.pop_front();
        }
    }

    /// Every producer with its state, in producer id order.
    pub fn entries(&self) -> Vec<(i64, &ProducerEntry)> {
        let mut v: Vec<_> = self.producers.iter().map(|(k, e)| (*k, e)).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Drops state of batches at or after `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        for e in self.producers.values_mut() {
            e.batches.retain(|b| b.last_offset < offset);
        }
        self.producers.retain(|_, e| !e.batches.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(first_seq: i32, last_seq: i32, first_offset: i64) -> BatchMeta {
        BatchMeta {
            first_seq,
            last_seq,
            first_offset,
            last_offset: first_offset + (last_seq - first_seq) as i64,
            timestamp: 0,
        }
    }

    #[test]
    fn sequence_table() {
        let mut p = PartitionProducers::default();
        assert_eq!(p.check(7, 0, 0, 4), SeqCheck::Append);
        p.record(7, 0, b(0, 4, 100));
        assert_eq!(p.check(7, 0, 5, 9), SeqCheck::Append);
        p.record(7, 0, b(5, 9, 105));
        // retry of either batch
        assert_eq!(p.check(7, 0, 0, 4), SeqCheck::Duplicate(b(0, 4, 100)));
        assert_eq!(p.check(7, 0, 5, 9), SeqCheck::Duplicate(b(5, 9, 105)));
        // gap
        assert_eq!(
            p.check(7, 0, 11, 12),
            SeqCheck::OutOfOrder {
                expected: 10,
                got: 11
            }
        );
        // fenced
        p.record(7, 2, b(0, 0, 200));
        assert_eq!(p.check(7, 1, 1, 1), SeqCheck::Fenced { current: 2, got: 1 });
        // new epoch must start at 0
        assert_eq!(
            p.check(7, 3, 5, 5),
            SeqCheck::OutOfOrder {
                expected: 0,
                got: 5
            }
        );
        assert_eq!(p.check(7, 3, 0, 5), SeqCheck::Append);
        // unknown producer: any sequence
        assert_eq!(p.check(8, 0, 42, 42), SeqCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_deduplicated() {
        let mut p = PartitionProducers::default();
        for i in 0..7 {
            p.record(1, 0, b(i, i, i as i64));
        }
        assert_eq!(p.check(1, 0, 2, 2), SeqCheck::Duplicate(b(2, 2, 2)));
        assert_eq!(
            p.check(1, 0, 1, 1),
            SeqCheck::OutOfOrder {
                expected: 7,
                got: 1
            }
        );
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(last_seq(i32::MAX, 2), 0);
        let mut p = PartitionProducers::default();
        p.record(1, 0, b(i32::MAX - 1, i32::MAX, 0));
        assert_eq!(p.check(1, 0, 0, 3), SeqCheck::Append);
    }

    #[test]
    fn truncation_forgets_later_batches() {
        let mut p = PartitionProducers::default();
        p.record(1, 0, b(0, 0, 10));
        p.record(1, 0, b(1, 1, 11));
        p.truncate_to(11);
        assert_eq!(p.check(1, 0, 1, 1), SeqCheck::Append);
    }
}
