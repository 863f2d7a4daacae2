//! Rebuilding idempotent-producer state from a partition's log.
//!
//! The state is rebuilt lazily, the first time a partition sees an
//! idempotent produce after start, by scanning the headers of the batches in
//! the log's tail (at most [`REBUILD_SCAN_OFFSETS`] offsets and
//! [`REBUILD_SCAN_BYTES`] bytes), so startup itself reads no record data.
//! Producers whose last batch is older than that window are treated like
//! expired producers in Kafka: their next sequence is accepted as is.

use weir_protocol::records::BatchHeader;
use weir_storage::Log;

use crate::producer_state::{BatchMeta, PartitionProducers, last_seq};

pub const REBUILD_SCAN_OFFSETS: i64 = 100_000;
pub const REBUILD_SCAN_BYTES: usize = 64 << 20;

pub fn rebuild(log: &Log) -> PartitionProducers {
    let mut state = PartitionProducers::default();
    let end = log.log_end_offset();
    let mut offset = (end - REBUILD_SCAN_OFFSETS).max(log.log_start_offset());
    let mut scanned = 0usize;
    while offset < end && scanned < REBUILD_SCAN_BYTES {
        let Ok(read) = log.read(offset, 1 << 20, end, true) else {
            break;
        };
        let before = offset;
        for region in read.regions {
            let Ok(data) = region.read_to_vec() else {
                return state;
            };
            scanned += data.len();
            let mut pos = 0;
            while let Ok(h) = BatchHeader::parse(&data[pos..]) {
                if pos + h.total_size() > data.len() {
                    break;
                }
                if h.producer_id >= 0 && h.base_sequence >= 0 && !h.is_control() {
                    state.record(
                        h.producer_id,
                        h.producer_epoch,
                        BatchMeta {
                            first_seq: h.base_sequence,
                            last_seq: last_seq(h.base_sequence, h.last_offset_delta + 1),
                            first_offset: h.base_offset,
                            last_offset: h.last_offset(),
                        },
                    );
                }
                offset = offset.max(h.last_offset() + 1);
                pos += h.total_size();
            }
        }
        if offset <= before {
            break;
        }
    }
    state
}
