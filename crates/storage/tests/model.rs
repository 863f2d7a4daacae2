//! Model-based property test: random sequences of appends, reads by offset
//! and by timestamp, truncations, DeleteRecords, flushes, clean restarts and
//! crashes, checked against a plain in-memory list of batches.

use crate::common;
use common::*;
use proptest::prelude::*;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;
use weir_storage::backend::{CrashMode, MemStorage, Storage};
use weir_storage::{Log, OpenOptions, record_timestamps};

#[derive(Debug, Clone)]
enum Op {
    /// Batches (records, value size, timestamp); `true`: through
    /// `append_shared` (stored as sent, offsets written over the copy).
    Append(Vec<(usize, usize, i64)>, bool),
    Read {
        at: f64,
        max_bytes: usize,
        min_one: bool,
        /// Read below this fraction of the way to the LEO (a high watermark).
        below: Option<f64>,
    },
    ReadTs(i64),
    Truncate(f64),
    DeleteRecords(f64),
    Flush,
    CleanRestart,
    CrashKeepWritten,
    CrashLoseUnsynced,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::collection::vec((1usize..5, 0usize..120, 0i64..1000), 1..4), any::<bool>())
            .prop_map(|(spec, shared)| Op::Append(spec, shared)),
        4 => (0.0..1.0f64, 1usize..3000, any::<bool>(), prop::option::of(0.0..1.0f64))
            .prop_map(|(at, max_bytes, min_one, below)| Op::Read { at, max_bytes, min_one, below }),
        2 => (-10i64..1100).prop_map(Op::ReadTs),
        1 => (0.0..1.0f64).prop_map(Op::Truncate),
        1 => (0.0..1.0f64).prop_map(Op::DeleteRecords),
        1 => Just(Op::Flush),
        1 => Just(Op::CleanRestart),
        1 => Just(Op::CrashKeepWritten),
        1 => Just(Op::CrashLoseUnsynced),
    ]
}

#[derive(Debug, Clone)]
struct MBatch {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Model {
    batches: Vec<MBatch>,
    log_start: i64,
    rp: i64,
}

impl Model {
    fn leo(&self) -> i64 {
        self.batches.last().map_or(self.log_start, |b| b.last + 1)
    }
    fn truncate(&mut self, offset: i64) {
        self.batches.retain(|b| b.last < offset);
        if offset <= self.log_start {
            self.log_start = offset;
            self.batches.clear();
        }
        if self.leo() < self.log_start {
            self.batches.clear();
        }
        self.rp = self.leo();
    }
}

fn open(m: &MemStorage, model: &Model, clean: bool) -> Log {
    let s: Arc<dyn Storage> = Arc::new(m.clone());
    Log::open(
        s,
        &segment_dir(),
        tp(),
        small_config(),
        OpenOptions {
            recovery_point: model.rp,
            log_start: model.log_start,
            clean_shutdown: clean,
            verify_flushed: false,
            now_ms: 0,
        },
    )
    .unwrap()
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let (mut m, s) = mem();
    let mut log = new_log(s, small_config());
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append(spec, shared) => {
                let mut req = Vec::new();
                for (i, (n, size, ts)) in spec.iter().enumerate() {
                    req.extend(make_batch(*n, *size, *ts, i as u8));
                }
                let info = if shared {
                    let info = log.append_shared(&req, 0).unwrap().0;
                    // what the log stores: each batch with its assigned base offset
                    let (mut p, mut next) = (0, info.base_offset);
                    while p < req.len() {
                        let h = BatchHeader::parse(&req[p..]).unwrap();
                        req[p..p + 8].copy_from_slice(&next.to_be_bytes());
                        next += h.last_offset_delta as i64 + 1;
                        p += h.total_size();
                    }
                    info
                } else {
                    log.append(&mut req, 0).unwrap()
                };
                prop_assert_eq!(info.base_offset, model.leo());
                let mut p = 0;
                while p < req.len() {
                    let h = BatchHeader::parse(&req[p..]).unwrap();
                    let bytes = req[p..p + h.total_size()].to_vec();
                    model.batches.push(MBatch {
                        base: h.base_offset,
                        last: h.last_offset(),
                        bytes,
                    });
                    p += h.total_size();
                }
            }
            Op::Read {
                at,
                max_bytes,
                min_one,
                below,
            } => {
                let (start, leo) = (model.log_start, model.leo());
                let off = start + ((leo - start) as f64 * at) as i64;
                let max_offset = below.map_or(i64::MAX, |f| off + ((leo - off) as f64 * f) as i64);
                let r = log.read(off, max_bytes, max_offset, min_one).unwrap();
                let mut want = Vec::new();
                for b in model.batches.iter().filter(|b| b.last >= off) {
                    if b.last >= max_offset {
                        break;
                    }
                    if want.len() + b.bytes.len() > max_bytes && !(want.is_empty() && min_one) {
                        break;
                    }
                    want.extend_from_slice(&b.bytes);
                    if want.len() >= max_bytes {
                        break;
                    }
                }
                let mut got = Vec::new();
                for region in &r.regions {
                    got.extend(region.read_to_vec().unwrap());
                }
                prop_assert_eq!(got.len(), r.total_bytes);
                prop_assert!(got == want, "read at {} max {}", off, max_bytes);
                prop_assert!(log.read(leo + 1, 10, i64::MAX, true).is_err());
                if start > 0 {
                    prop_assert!(log.read(start - 1, 10, i64::MAX, true).is_err());
                }
            }
            Op::ReadTs(ts) => {
                let want = model
                    .batches
                    .iter()
                    .flat_map(|b| record_timestamps(&b.bytes).unwrap())
                    .find(|&(o, t)| t >= ts && o >= model.log_start);
                prop_assert_eq!(log.offset_for_timestamp(ts).unwrap(), want);
            }
            Op::Truncate(at) => {
                let off = (model.leo() as f64 * at) as i64;
                log.truncate_to(off).unwrap();
                // A batch straddling the cut goes whole.
                model.truncate(off);
            }
            Op::DeleteRecords(at) => {
                log.set_high_watermark(log.log_end_offset());
                let (start, leo) = (model.log_start, model.leo());
                let off = start + ((leo - start) as f64 * at) as i64;
                let got = log.delete_records_before(off).unwrap();
                model.log_start = model.log_start.max(off);
                prop_assert_eq!(got, model.log_start);
            }
            Op::Flush => {
                log.flush().unwrap();
                model.rp = model.leo();
            }
            Op::CleanRestart => {
                log.close().unwrap();
                drop(log);
                log = open(&m, &model, true);
                model.rp = model.leo();
            }
            Op::CrashKeepWritten => {
                drop(log);
                m = m.crash(CrashMode::KeepWritten);
                log = open(&m, &model, false);
                model.rp = model.leo();
            }
            Op::CrashLoseUnsynced => {
                drop(log);
                m = m.crash(CrashMode::LoseUnsynced);
                log = open(&m, &model, false);
                let rp = model.rp;
                model.batches.retain(|b| b.last < rp);
                if model.leo() < model.log_start {
                    // All that survived is below the log start: empty log there.
                    model.batches.clear();
                }
                model.rp = model.leo();
            }
        }
        prop_assert_eq!(log.log_end_offset(), model.leo(), "LEO");
        prop_assert_eq!(log.log_start_offset(), model.log_start, "log start");
        prop_assert_eq!(log.recovery_point(), model.rp, "recovery point");
        let bases = log.segment_base_offsets();
        prop_assert!(bases.windows(2).all(|w| w[0] < w[1]));
        for b in &model.batches {
            prop_assert_eq!(BatchHeader::parse(&b.bytes).unwrap().base_offset, b.base);
        }
    }
    Ok(())
}

proptest! {
    // PROPTEST_CASES=N runs more cases.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    ))]
    #[test]
    fn log_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
