//! Exactly-once mode, the pure part: what the next transaction carries.
//!
//! In exactly-once mode (consume-transform-produce) a handler returns the
//! output records of its input record. They are not written at once: a
//! record's outputs wait in the [`OutputBuffer`] until the commit watermark
//! has passed the record, and then go out in one transaction together with
//! the new committed offsets ([`OutputBuffer::plan`]). So a transaction
//! holds exactly the outputs of the records below the offsets it commits:
//!
//! - a crash before the commit loses both the outputs (aborted) and the
//!   offsets (not committed): the records run again;
//! - a record completed above the watermark (an earlier one still runs)
//!   keeps its outputs here and is not committed, so the commit metadata
//!   carries no completed set in this mode
//!   ([`crate::engine::EngineConfig::completed_set`]);
//! - a batch (one handler call for several records) is all or nothing: its
//!   outputs wait under its last record, and a commit offset that would
//!   fall inside a batch's span (past its first record, not past its last:
//!   under key order another key's record between them may still run) is
//!   lowered to the batch's first record, so no transaction commits part
//!   of a batch's records, nor its outputs without all of them.
//!
//! Invariants of an [`OutputBuffer`], per partition:
//! - every entry belongs to the partition's current generation (an insert
//!   of a newer generation drops the older entries; a plan drops entries of
//!   any generation but the request's);
//! - an entry is keyed by its last record and spans from its first
//!   (`first <= last`; a single record: both the same);
//! - a plan's commit offset never falls inside a waiting entry's span
//!   (`first < offset <= last`); the plan takes every entry below its commit
//!   offset and leaves every entry at or above it, and lists a partition's
//!   outputs in input-offset order (a record's own outputs in the order the
//!   handler returned them).
//!
//! ```
//! use weir_parallel_consumer::engine::CommitRequest;
//! use weir_parallel_consumer::exactly_once::{OutputBuffer, OutputRecord};
//! use weir_parallel_consumer::tracker::TopicPartition;
//!
//! let tp = TopicPartition { topic: "in".into(), partition: 0 };
//! let mut buffer = OutputBuffer::default();
//! // 10 and 12 completed, 11 still runs: the watermark is 11.
//! buffer.insert(&tp, 1, 10, vec![OutputRecord::to("out").payload("a")]);
//! buffer.insert(&tp, 1, 12, vec![OutputRecord::to("out").payload("c")]);
//! let request = CommitRequest { tp: tp.clone(), generation: 1, offset: 11, metadata: String::new() };
//! let plan = buffer.plan(vec![request]);
//! assert_eq!(plan.output_count(), 1); // only 10's output: 12 is above the commit
//! assert_eq!(buffer.records(), 1);
//! ```

use std::collections::{BTreeMap, HashMap};

use crate::engine::CommitRequest;
use crate::record::Record;
use crate::tracker::TopicPartition;

/// A record a transform handler asks to write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputRecord {
    pub topic: String,
    /// `None`: the producer's partitioner picks (by key).
    pub partition: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Create time, milliseconds since the epoch (`None`: the producer's
    /// clock).
    pub timestamp_ms: Option<i64>,
}

impl OutputRecord {
    /// An empty record for `topic`.
    pub fn to(topic: impl Into<String>) -> Self {
        OutputRecord {
            topic: topic.into(),
            ..OutputRecord::default()
        }
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    pub fn header(mut self, key: impl Into<String>, value: Option<Vec<u8>>) -> Self {
        self.headers.push((key.into(), value));
        self
    }

    pub fn timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// The dead-letter copy of `record` for `topic` (exactly-once mode
    /// writes it in the transaction, like any output): the original key,
    /// value and timestamp, and [`Record::dead_letter_headers`].
    pub fn dead_letter(topic: &str, record: &Record, attempts: u32, error: &str) -> Self {
        OutputRecord {
            topic: topic.to_string(),
            partition: None,
            key: record.key.as_deref().map(<[u8]>::to_vec),
            payload: record.payload.as_deref().map(<[u8]>::to_vec),
            headers: record.dead_letter_headers(attempts, error),
            timestamp_ms: record.timestamp_ms,
        }
    }

    /// Bytes of key, value and headers (what the buffer holds).
    pub fn size_bytes(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum();
        self.key.as_ref().map_or(0, Vec::len) + self.payload.as_ref().map_or(0, Vec::len) + headers
    }
}

/// The outputs of one completed record, or of one batch (`first` is then
/// its first record; the entry is keyed by its last).
#[derive(Debug)]
struct Pending {
    first: i64,
    outputs: Vec<OutputRecord>,
}

#[derive(Debug, Default)]
struct PartOutputs {
    generation: u64,
    /// Completed records (and batches) not yet in a transaction: last
    /// offset → outputs.
    by_offset: BTreeMap<i64, Pending>,
    /// [`OutputRecord::size_bytes`] summed over `by_offset`.
    bytes: usize,
}

/// Outputs of completed records waiting for the watermark, per partition.
/// See the module documentation for its invariants; besides, `bytes` is
/// always the sum of the partitions' bytes.
#[derive(Debug, Default)]
pub struct OutputBuffer {
    parts: HashMap<TopicPartition, PartOutputs>,
    bytes: usize,
}

fn size_of(outputs: &[OutputRecord]) -> usize {
    outputs.iter().map(OutputRecord::size_bytes).sum()
}

/// One partition's share of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedPartition {
    /// The offset the transaction commits for the partition.
    pub commit: CommitRequest,
    /// `(input offset, output)` below `commit.offset`, in input order.
    pub outputs: Vec<(i64, OutputRecord)>,
}

/// What one transaction carries: for each partition, its new committed
/// offset and the outputs of the records below it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxnPlan {
    /// Sorted by partition.
    pub parts: Vec<PlannedPartition>,
}

impl TxnPlan {
    /// Nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn output_count(&self) -> usize {
        self.parts.iter().map(|p| p.outputs.len()).sum()
    }

    /// Drops the partitions that carry no output and an offset already
    /// committed (`confirmed`: the partition's last confirmed commit), which
    /// a batch still straddling the watermark leaves.
    pub fn without_unmoved(mut self, confirmed: impl Fn(&TopicPartition) -> Option<i64>) -> Self {
        self.parts
            .retain(|p| !p.outputs.is_empty() || confirmed(&p.commit.tp) != Some(p.commit.offset));
        self
    }

    /// The commits, one per partition.
    pub fn commits(&self) -> Vec<CommitRequest> {
        self.parts.iter().map(|p| p.commit.clone()).collect()
    }

    /// Every output in the order it is produced: partition by partition,
    /// each in input-offset order.
    pub fn outputs(&self) -> impl Iterator<Item = &OutputRecord> {
        self.parts
            .iter()
            .flat_map(|p| p.outputs.iter().map(|(_, o)| o))
    }
}

impl OutputBuffer {
    /// Keeps the outputs of `offset`, completed under `generation`. A newer
    /// generation than the buffered one replaces the partition's entries
    /// (they belonged to an assignment or run that is gone); an older one is
    /// ignored.
    pub fn insert(
        &mut self,
        tp: &TopicPartition,
        generation: u64,
        offset: i64,
        outputs: Vec<OutputRecord>,
    ) {
        self.insert_batch(tp, generation, offset, offset, outputs);
    }

    /// Keeps the outputs of a batch whose records span `first..=last`
    /// (keyed by `last`), completed under `generation`, as
    /// [`OutputBuffer::insert`]. Until a plan's offset passes `last`, no
    /// plan commits an offset past `first`.
    pub fn insert_batch(
        &mut self,
        tp: &TopicPartition,
        generation: u64,
        first: i64,
        last: i64,
        outputs: Vec<OutputRecord>,
    ) {
        let first = first.min(last);
        let part = self.parts.entry(tp.clone()).or_default();
        if generation < part.generation {
            return;
        }
        if generation > part.generation {
            self.bytes -= part.bytes;
            *part = PartOutputs {
                generation,
                ..PartOutputs::default()
            };
        }
        let added = size_of(&outputs);
        if let Some(replaced) = part.by_offset.insert(last, Pending { first, outputs }) {
            let removed = size_of(&replaced.outputs);
            part.bytes -= removed;
            self.bytes -= removed;
        }
        part.bytes += added;
        self.bytes += added;
        self.check();
    }

    /// Forgets `tp` (revoked, lost or rewound).
    pub fn drop_partition(&mut self, tp: &TopicPartition) {
        if let Some(part) = self.parts.remove(tp) {
            self.bytes -= part.bytes;
        }
        self.check();
    }

    fn check(&self) {
        debug_assert_eq!(
            self.bytes,
            self.parts.values().map(|p| p.bytes).sum::<usize>()
        );
    }

    /// Completed records whose outputs wait, over all partitions.
    pub fn records(&self) -> usize {
        self.parts.values().map(|p| p.by_offset.len()).sum()
    }

    /// Bytes of the waiting outputs ([`OutputRecord::size_bytes`]), over
    /// all partitions.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The next transaction for `requests` (the engine's commits: the new
    /// watermark of every partition that moved). A request's offset inside
    /// a waiting batch's span is lowered to the batch's first record (the
    /// plan may then commit an offset the engine already confirmed: see
    /// [`TxnPlan::without_unmoved`]). Takes the outputs below each
    /// (lowered) offset out of the buffer; entries of another generation
    /// than the request's are dropped.
    pub fn plan(&mut self, mut requests: Vec<CommitRequest>) -> TxnPlan {
        requests.sort_by(|a, b| a.tp.cmp(&b.tp));
        let parts = requests
            .into_iter()
            .map(|mut commit| {
                let outputs = match self.parts.get_mut(&commit.tp) {
                    Some(part) if part.generation == commit.generation => {
                        commit.offset = outside_batches(&part.by_offset, commit.offset);
                        let above = part.by_offset.split_off(&commit.offset);
                        let below = std::mem::replace(&mut part.by_offset, above);
                        let taken: usize = below.values().map(|p| size_of(&p.outputs)).sum();
                        part.bytes -= taken;
                        self.bytes -= taken;
                        below
                            .into_iter()
                            .flat_map(|(offset, p)| p.outputs.into_iter().map(move |o| (offset, o)))
                            .collect()
                    }
                    Some(_) => {
                        self.drop_partition(&commit.tp);
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                debug_assert!(
                    outputs.iter().all(|(offset, _)| *offset < commit.offset),
                    "an output above the committed offset"
                );
                debug_assert!(
                    self.parts
                        .get(&commit.tp)
                        .is_none_or(|p| p.by_offset.values().all(|e| e.first >= commit.offset)),
                    "an output below the committed offset left behind, or a batch split"
                );
                PlannedPartition { commit, outputs }
            })
            .collect();
        self.check();
        TxnPlan { parts }
    }
}

/// The highest offset at or below `offset` that no entry's span straddles
/// (`first < offset <= last`). Walking the entries from the highest last
/// offset down, the bound only falls, so an entry whose last offset is
/// below the bound reached so far ends the walk: every later one is lower.
fn outside_batches(by_offset: &BTreeMap<i64, Pending>, mut offset: i64) -> i64 {
    for (last, pending) in by_offset.iter().rev() {
        if *last < offset {
            break;
        }
        offset = offset.min(pending.first);
    }
    offset
}

#[cfg(test)]
mod tests;
