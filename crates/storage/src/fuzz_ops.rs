//! Stateful fuzzing of the storage engine: a byte string is decoded into a
//! sequence of operations on one partition of a [`LogManager`] (append,
//! reads, high watermark, DeleteRecords, truncation through the manager,
//! flush, time ticks that roll and flush, retention, checkpoints, clean
//! restarts, crashes, and injected write/sync failures), run on
//! [`MemStorage`] under [`FaultyStorage`], and checked against a plain list
//! of batches.
//!
//! Used by the cargo-fuzz target `fuzz/fuzz_targets/storage_ops.rs` and by
//! the seeded smoke test `crates/storage/tests/fuzz_ops.rs`.
//!
//! Checked after every operation:
//! - `log_start <= hw <= leo` and `recovery_point <= leo`, and all three
//!   offsets equal the model's;
//! - reading the whole log from the log start returns exactly the model's
//!   batches (bytes included), and a read at a chosen offset returns what
//!   the model says it should;
//! - after a crash (only synced bytes, everything written, or torn unsynced
//!   writes) every batch below the recovery point the log reported before
//!   the crash is still there; what comes after is a prefix of the model's
//!   batches, possibly followed by batches of appends that failed (never
//!   acknowledged, so allowed to appear);
//! - after a clean restart, everything is there.
//!
//! An operation failing with an injected fault is followed by a crash or,
//! for a failed append or flush, by going on (as the broker does after a
//! full disk); any error without an injected fault is a failure.
//!
//! ```
//! // Runs a short sequence; an input never panics unless the engine is wrong.
//! weir_storage::fuzz_ops::run(&[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
//! ```

use crate::backend::{CrashMode, FaultyStorage, MemStorage, Storage};
use crate::retention::Retention;
use crate::testing::{TestRecord, batch_with};
use crate::{Log, LogConfig, LogManager, LogManagerConfig, StorageError, TopicPartition};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use weir_protocol::records::BatchHeader;

/// Why a run failed: the message and the operations up to the failure.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub ops: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.message)?;
        writeln!(f, "operations ({}):", self.ops.len())?;
        for (i, op) in self.ops.iter().enumerate() {
            writeln!(f, "  {i:3}: {op}")?;
        }
        Ok(())
    }
}

/// Reads bytes for decisions; returns zeros once the input is used up.
struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Bytes<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
}

#[derive(Debug, Clone, Copy)]
enum Crash {
    LoseUnsynced,
    KeepWritten,
    Torn(u64),
}

impl Crash {
    fn decode(b: &mut Bytes<'_>) -> Crash {
        match b.u8() % 3 {
            0 => Crash::LoseUnsynced,
            1 => Crash::KeepWritten,
            _ => Crash::Torn(u64::from(b.u16())),
        }
    }
    fn mode(self) -> CrashMode {
        match self {
            Crash::LoseUnsynced => CrashMode::LoseUnsynced,
            Crash::KeepWritten => CrashMode::KeepWritten,
            Crash::Torn(seed) => CrashMode::Torn { seed },
        }
    }
}

/// One operation, decoded from the input.
#[derive(Debug, Clone)]
enum Op {
    /// Batches of (records, value bytes).
    Append(Vec<(usize, usize)>),
    Read {
        at: u8,
        max_bytes: usize,
        min_one: bool,
    },
    SetHighWatermark(u8),
    DeleteRecords(u8),
    Truncate(u8),
    Flush,
    /// Advance the clock by this many ms and tick the manager.
    Tick(i64),
    /// Retention with `retention.bytes` = this.
    Retention(i64),
    Checkpoint,
    CleanRestart,
    Crash(Crash),
    /// Let this many writes succeed, then fail every write.
    FailWritesAfter(u64),
    FailSyncs,
}

impl Op {
    fn decode(b: &mut Bytes<'_>) -> Op {
        match b.u8() % 16 {
            0..=4 => {
                let n = 1 + usize::from(b.u8() % 3);
                Op::Append(
                    (0..n)
                        .map(|_| (1 + usize::from(b.u8() % 4), usize::from(b.u8() % 160)))
                        .collect(),
                )
            }
            5 => Op::Read {
                at: b.u8(),
                max_bytes: 1 + usize::from(b.u16() % 4096),
                min_one: b.u8().is_multiple_of(2),
            },
            6 => Op::SetHighWatermark(b.u8()),
            7 => Op::DeleteRecords(b.u8()),
            8 => Op::Truncate(b.u8()),
            9 => Op::Flush,
            10 => Op::Tick(i64::from(b.u8()) * 4),
            11 => Op::Retention(i64::from(b.u16() % 8192)),
            12 => Op::Checkpoint,
            13 => Op::CleanRestart,
            14 => Op::Crash(Crash::decode(b)),
            _ => match b.u8() % 3 {
                0 => Op::FailSyncs,
                n => Op::FailWritesAfter(u64::from(b.u8() % 8) * u64::from(n)),
            },
        }
    }
}

/// A batch as the model knows it: offsets and the stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MBatch {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

#[derive(Debug)]
struct Model {
    /// Every batch from offset 0 on that the log may hold, below the log
    /// start too (a crash can bring an older, checkpointed log start back).
    batches: Vec<MBatch>,
    log_start: i64,
    hw: i64,
    /// The range of log start offsets the checkpoint file may hold (it is
    /// written by checkpoints, retention and shutdown, also by ones that
    /// failed part-way; a crash brings back a value in this range or
    /// between it and `log_start`).
    checkpointed_start: (i64, i64),
    /// Every batch with `last < durable` survives any crash: the largest
    /// recovery point the log reported (lowered by truncations).
    durable: i64,
    /// Batches of appends that failed: never acknowledged, they may still
    /// show up after a restart, after the acknowledged ones.
    unacked: Vec<Vec<u8>>,
    /// The LEO when it lies past the last batch: a crash took the unflushed
    /// tail of a segment, and the empty segment rolled after it stays (its
    /// base offset is the LEO; the lost offsets are a gap).
    gap_end: i64,
}

impl Model {
    fn leo(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.log_start, |b| (b.last + 1).max(self.log_start))
            .max(self.gap_end)
    }
    fn visible(&self) -> impl Iterator<Item = &MBatch> {
        let start = self.log_start;
        self.batches.iter().filter(move |b| b.last >= start)
    }
    fn truncate(&mut self, offset: i64) {
        let before = self.batches.len();
        self.batches.retain(|b| b.last < offset);
        // A cut batch ends the log at its base; a cut in the gap keeps the
        // gap up to the cut.
        self.gap_end = if self.batches.len() < before {
            i64::MIN
        } else {
            self.gap_end.min(offset)
        };
        if offset <= self.log_start {
            self.log_start = offset;
            self.batches.clear();
        }
        if self.leo() < self.log_start {
            self.batches.clear();
        }
        self.hw = self.hw.min(self.leo());
    }
}

struct Engine {
    mem: MemStorage,
    faulty: FaultyStorage,
    mgr: LogManager,
    log: Arc<Log>,
    config: LogConfig,
    now: i64,
    faults_armed: bool,
    model: Model,
    trace: Vec<String>,
}

fn data_dir() -> PathBuf {
    PathBuf::from("/data")
}

fn tp() -> TopicPartition {
    TopicPartition::new("fuzz", 0)
}

fn open_manager(
    storage: Arc<dyn Storage>,
    config: &LogConfig,
    now: i64,
) -> Result<LogManager, StorageError> {
    let mut cfg = LogManagerConfig::with_storage(vec![data_dir()], storage);
    cfg.default_log_config = config.clone();
    // Checkpoints come from the operations only, so the model knows them.
    cfg.checkpoint_interval_ms = i64::MAX;
    LogManager::open(cfg, now)
}

fn make_batch(spec: &[(usize, usize)], now: i64, tag: usize) -> Vec<u8> {
    let mut req = Vec::new();
    for (i, &(n, size)) in spec.iter().enumerate() {
        let value = vec![(tag + i) as u8; size];
        let recs: Vec<TestRecord<'_>> = (0..n)
            .map(|r| (None, value.as_slice(), now + r as i64))
            .collect();
        req.extend(batch_with(&recs));
    }
    req
}

/// Splits the bytes of consecutive batches.
fn split_batches(bytes: &[u8]) -> Result<Vec<MBatch>, String> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < bytes.len() {
        let h = BatchHeader::parse(&bytes[p..]).map_err(|e| format!("batch header at {p}: {e}"))?;
        let end = p + h.total_size();
        if end > bytes.len() {
            return Err(format!(
                "batch at {p} runs past the read ({end} > {})",
                bytes.len()
            ));
        }
        out.push(MBatch {
            base: h.base_offset,
            last: h.last_offset(),
            bytes: bytes[p..end].to_vec(),
        });
        p = end;
    }
    Ok(out)
}

/// Bytes after the base offset: what identifies a batch whatever offset it got.
fn body(b: &[u8]) -> &[u8] {
    b.get(8..).unwrap_or(&[])
}

macro_rules! check {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}

impl Engine {
    fn new(config_bytes: &mut Bytes<'_>) -> Result<Engine, String> {
        let segment_bytes = [300, 700, 2048, 8192][usize::from(config_bytes.u8() % 4)];
        let flush_messages = [1, 4, u64::MAX, u64::MAX][usize::from(config_bytes.u8() % 4)];
        let b = config_bytes.u8();
        let config = LogConfig {
            segment_bytes,
            // Small enough that a full index rolls the segment now and then.
            segment_index_bytes: [8 * 1024, 96][usize::from(b % 2)],
            index_interval_bytes: [1, 256][usize::from(b / 2 % 2)],
            segment_ms: [i64::MAX / 4, 300][usize::from(b / 4 % 2)],
            flush_messages,
            message_timestamp_after_max_ms: i64::MAX,
            file_delete_delay_ms: 0,
            ..LogConfig::default()
        };
        let mem = MemStorage::new();
        let faulty = FaultyStorage::new(mem.clone());
        let now = 1_000_000;
        let mgr = open_manager(Arc::new(faulty.clone()), &config, now)
            .map_err(|e| format!("open: {e}"))?;
        let log = mgr
            .create_log(&tp(), [7; 16], config.clone())
            .map_err(|e| format!("create: {e}"))?;
        Ok(Engine {
            mem,
            faulty,
            mgr,
            log,
            config,
            now,
            faults_armed: false,
            model: Model {
                batches: Vec::new(),
                log_start: 0,
                hw: 0,
                checkpointed_start: (0, 0),
                durable: 0,
                unacked: Vec::new(),
                gap_end: i64::MIN,
            },
            trace: Vec::new(),
        })
    }

    fn heal(&mut self) {
        self.faulty.heal();
        self.faults_armed = false;
    }

    /// Runs one operation; `Err` is a broken property.
    fn step(&mut self, op: Op, b: &mut Bytes<'_>) -> Result<(), String> {
        match self.apply(&op) {
            Ok(()) => {}
            Err(e) if e.starts_with(FATAL) => return Err(e),
            Err(e) => {
                check!(
                    self.faults_armed,
                    "{op:?} failed without an injected fault: {e}"
                );
                self.heal();
                if matches!(
                    op,
                    Op::CleanRestart | Op::Checkpoint | Op::Retention(_) | Op::Truncate(_)
                ) {
                    // The checkpoint may or may not have been written.
                    let (lo, hi) = self.model.checkpointed_start;
                    let now = [self.model.log_start, self.log.log_start_offset()];
                    self.model.checkpointed_start =
                        (lo.min(now[0]).min(now[1]), hi.max(now[0]).max(now[1]));
                }
                let go_on = matches!(op, Op::Append(_) | Op::Flush) && b.u8().is_multiple_of(2);
                if go_on {
                    self.trace.push(format!("  -> failed ({e}); going on"));
                } else {
                    let crash = Crash::decode(b);
                    self.trace
                        .push(format!("  -> failed ({e}); crash {crash:?}"));
                    self.crash(crash, false)?;
                }
            }
        }
        self.check()
    }

    /// Applies `op` to the log and, on success, to the model. An `Err` is
    /// the engine's error (injected or not; `step` decides).
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        let m = &mut self.model;
        match op {
            Op::Append(spec) => {
                let mut req = make_batch(spec, self.now, self.trace.len());
                let sent = req.clone();
                let too_large = req.len() as u64 > self.config.segment_bytes;
                match self.log.append(&mut req, self.now) {
                    Err(StorageError::RecordListTooLarge { .. }) if too_large => {}
                    Ok(_) | Err(_) if too_large => {
                        return Err(fatal(format!(
                            "an append of {} bytes into {}-byte segments was not refused as too large",
                            sent.len(),
                            self.config.segment_bytes
                        )));
                    }
                    Ok(info) => {
                        let leo = m.leo();
                        let batches = split_batches(&req)?;
                        let first = batches.first().map_or(-1, |b| b.base);
                        if info.base_offset != leo || first != leo {
                            return Err(fatal(format!(
                                "append got base offset {} (stored {first}), model LEO {leo}",
                                info.base_offset
                            )));
                        }
                        m.batches.extend(batches);
                    }
                    Err(e) => {
                        let sent = split_batches(&sent)?;
                        // Appended but not flushed (the flush the policy asks
                        // for failed): in the log, not acknowledged.
                        let leo = m.leo();
                        if self.log.log_end_offset() > leo {
                            let got = read_all(&self.log, leo).map_err(fatal)?;
                            if got.len() != sent.len()
                                || got
                                    .iter()
                                    .zip(&sent)
                                    .any(|(g, s)| body(&g.bytes) != body(&s.bytes))
                                || got.first().map(|g| g.base) != Some(leo)
                            {
                                return Err(fatal(format!(
                                    "a failed append ({e}) left the log at LEO {}, not with its batches from {leo}",
                                    self.log.log_end_offset()
                                )));
                            }
                            m.batches.extend(got);
                        } else {
                            m.unacked.extend(sent.into_iter().map(|b| b.bytes));
                        }
                        return Err(e.to_string());
                    }
                }
            }
            Op::Read {
                at,
                max_bytes,
                min_one,
            } => {
                let (start, leo) = (m.log_start, m.leo());
                let off = start + (leo - start) * i64::from(*at) / 255;
                let r = self
                    .log
                    .read(off, *max_bytes, m.hw, *min_one)
                    .map_err(|e| fatal(format!("read at {off}: {e}")))?;
                let mut want = Vec::new();
                for b in m.visible().filter(|b| b.last >= off) {
                    if b.last >= m.hw
                        || (want.len() + b.bytes.len() > *max_bytes
                            && !(want.is_empty() && *min_one))
                    {
                        break;
                    }
                    want.extend_from_slice(&b.bytes);
                    if want.len() >= *max_bytes {
                        break;
                    }
                }
                let mut got = Vec::new();
                for region in &r.regions {
                    got.extend(
                        region
                            .read_to_vec()
                            .map_err(|e| fatal(format!("read region: {e}")))?,
                    );
                }
                if got != want {
                    return Err(fatal(format!(
                        "read at {off} (max {max_bytes} bytes, below {}) returned {} bytes, the model {}",
                        m.hw,
                        got.len(),
                        want.len()
                    )));
                }
            }
            Op::SetHighWatermark(at) => {
                let hw = m.log_start + (m.leo() - m.log_start) * i64::from(*at) / 255;
                self.log.set_high_watermark(hw);
                m.hw = hw;
            }
            Op::DeleteRecords(at) => {
                let off = m.log_start + (m.hw - m.log_start) * i64::from(*at) / 255;
                let got = self
                    .log
                    .delete_records_before(off)
                    .map_err(|e| fatal(format!("delete records before {off}: {e}")))?;
                m.log_start = m.log_start.max(off);
                if got != m.log_start {
                    return Err(fatal(format!(
                        "delete records before {off}: log start {got}, model {}",
                        m.log_start
                    )));
                }
            }
            Op::Truncate(at) => {
                let off = m.leo() * i64::from(*at) / 255;
                let truncates = off < m.leo();
                if truncates {
                    m.durable = m.durable.min(off);
                }
                self.mgr
                    .truncate_to(&tp(), off)
                    .map_err(|e| e.to_string())?;
                if truncates {
                    m.truncate(off);
                    // The cut is made durable, and the dir's checkpoints
                    // are rewritten.
                    m.durable = m.leo();
                    m.checkpointed_start = (m.log_start, m.log_start);
                }
            }
            Op::Flush => {
                self.log.flush().map_err(|e| e.to_string())?;
                if self.log.recovery_point() != m.leo() {
                    return Err(fatal(format!(
                        "after a flush the recovery point is {}, LEO {}",
                        self.log.recovery_point(),
                        m.leo()
                    )));
                }
            }
            Op::Tick(ms) => {
                self.now += ms;
                self.mgr.tick(self.now).map_err(|e| e.to_string())?;
            }
            Op::Retention(bytes) => {
                let mut cfg = self.config.clone();
                cfg.retention_bytes = *bytes;
                self.log.set_config(cfg);
                let before = m.log_start;
                let report = Retention::new().run(&self.mgr, self.now);
                self.log.set_config(self.config.clone());
                let report = report.map_err(|e| e.to_string())?;
                let start = self.log.log_start_offset();
                let bases = self.log.segment_base_offsets();
                if start < before || start > m.hw.max(before) {
                    return Err(fatal(format!(
                        "retention moved the log start from {before} to {start} (high watermark {})",
                        m.hw
                    )));
                }
                if report.segments_deleted > 0 {
                    if bases.first() != Some(&start) && start != before {
                        return Err(fatal(format!(
                            "retention: log start {start}, segments {bases:?}"
                        )));
                    }
                    m.log_start = start;
                    m.checkpointed_start = (start, start);
                    m.hw = m.hw.max(start);
                }
            }
            Op::Checkpoint => {
                self.mgr.checkpoint().map_err(|e| e.to_string())?;
                m.checkpointed_start = (m.log_start, m.log_start);
            }
            Op::CleanRestart => {
                self.mgr.shutdown().map_err(|e| e.to_string())?;
                m.checkpointed_start = (m.log_start, m.log_start);
                m.durable = m.leo();
                self.reopen(self.mem.clone())?;
                self.adopt(true, None)?;
            }
            Op::Crash(c) => {
                self.crash(*c, true)?;
            }
            Op::FailWritesAfter(n) => {
                self.faulty.fail_writes_after(*n);
                self.faults_armed = true;
            }
            Op::FailSyncs => {
                self.faulty.set_fail_sync(true);
                self.faults_armed = true;
            }
        }
        let rp = self.log.recovery_point();
        self.model.durable = self.model.durable.max(rp);
        Ok(())
    }

    /// Reopens the manager on `mem` (healed, no faults).
    fn reopen(&mut self, mem: MemStorage) -> Result<(), String> {
        self.mem = mem;
        self.faulty = FaultyStorage::new(self.mem.clone());
        self.faults_armed = false;
        let mgr = open_manager(Arc::new(self.faulty.clone()), &self.config, self.now)
            .map_err(|e| fatal(format!("reopen: {e}")))?;
        let failed = mgr.failed_logs();
        if !failed.is_empty() {
            return Err(fatal(format!(
                "reopen: partitions failed to open: {failed:?}"
            )));
        }
        self.log = mgr
            .get(&tp())
            .ok_or_else(|| fatal("reopen: the partition is gone".to_string()))?;
        self.mgr = mgr;
        Ok(())
    }

    /// Simulates a crash now, reopens, and checks what survived.
    /// `cleanly_reached`: the crash follows a successful operation (with
    /// everything written kept, every acknowledged batch must survive).
    fn crash(&mut self, c: Crash, cleanly_reached: bool) -> Result<(), String> {
        let before = files(&self.mem);
        let image = self.mem.crash(c.mode());
        self.trace
            .push(format!("     files before the crash: {before}"));
        self.trace
            .push(format!("     files after the crash:  {}", files(&image)));
        self.reopen(image)?;
        let keep_all = cleanly_reached && matches!(c, Crash::KeepWritten);
        self.adopt(keep_all, Some(()))
    }

    /// Compares the reopened log with the model and makes the model what
    /// survived. `all`: every acknowledged batch must be there.
    /// `crashed`: the log start may be any value between the checkpointed
    /// one and the model's.
    fn adopt(&mut self, all: bool, crashed: Option<()>) -> Result<(), String> {
        let m = &mut self.model;
        let start = self.log.log_start_offset();
        let leo = self.log.log_end_offset();
        let (lo, hi) = if crashed.is_some() {
            (
                m.log_start.min(m.checkpointed_start.0),
                m.log_start.max(m.checkpointed_start.1),
            )
        } else {
            (m.log_start, m.log_start)
        };
        if !(lo <= start && start <= hi) {
            return Err(fatal(format!(
                "after reopening the log start is {start}, expected within [{lo}, {hi}]"
            )));
        }
        let got = read_all(&self.log, start).map_err(fatal)?;
        let want: Vec<&MBatch> = m.batches.iter().filter(|b| b.last >= start).collect();
        let mut k = 0;
        while k < got.len() && k < want.len() && got[k] == *want[k] {
            k += 1;
        }
        // What follows the matching prefix must be batches of failed appends.
        for g in &got[k..] {
            if !m.unacked.iter().any(|u| body(u) == body(&g.bytes)) {
                return Err(fatal(format!(
                    "after reopening, the batch at {}..={} is neither the model's ({}) nor a failed append's",
                    g.base,
                    g.last,
                    want.get(k)
                        .map_or("none".to_string(), |w| format!("{}..={}", w.base, w.last))
                )));
            }
        }
        let lost: Vec<String> = want[k..]
            .iter()
            .filter(|w| all || w.last < m.durable)
            .map(|w| format!("{}..={}", w.base, w.last))
            .collect();
        if !lost.is_empty() {
            return Err(fatal(format!(
                "after reopening, batches are lost: {lost:?} (durable below {}, {} batches survived of {}, log start {start}, LEO {leo})",
                m.durable,
                k,
                want.len()
            )));
        }
        // The model becomes what survived.
        let mut batches: Vec<MBatch> = m
            .batches
            .iter()
            .filter(|b| b.last < start)
            .cloned()
            .collect();
        batches.extend(got);
        m.batches = batches;
        m.gap_end = i64::MIN;
        if crashed.is_some() && m.leo() < leo {
            m.gap_end = leo;
        }
        m.log_start = start;
        m.hw = self.log.high_watermark();
        m.durable = self.log.recovery_point();
        if m.leo() != leo {
            return Err(fatal(format!(
                "after reopening LEO is {leo}, its batches end at {}",
                m.leo()
            )));
        }
        Ok(())
    }

    /// The invariants and the full read, after every operation.
    fn check(&self) -> Result<(), String> {
        let m = &self.model;
        let log = &self.log;
        let (start, hw, leo, rp) = (
            log.log_start_offset(),
            log.high_watermark(),
            log.log_end_offset(),
            log.recovery_point(),
        );
        check!(
            start <= hw && hw <= leo,
            "offsets out of order: log start {start}, hw {hw}, LEO {leo}"
        );
        check!(rp <= leo, "recovery point {rp} above LEO {leo}");
        check!(
            (start, hw, leo) == (m.log_start, m.hw, m.leo()),
            "log (start, hw, leo) = {:?}, model {:?}",
            (start, hw, leo),
            (m.log_start, m.hw, m.leo())
        );
        let bases = log.segment_base_offsets();
        check!(
            bases.windows(2).all(|w| w[0] < w[1]),
            "segment bases not increasing: {bases:?}"
        );
        let got = read_all(log, start)?;
        let want: Vec<&MBatch> = m.visible().collect();
        check!(
            got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| g == *w),
            "the log's batches {:?} differ from the model's {:?}",
            got.iter()
                .map(|b| (b.base, b.last, b.bytes.len()))
                .collect::<Vec<_>>(),
            want.iter()
                .map(|b| (b.base, b.last, b.bytes.len()))
                .collect::<Vec<_>>()
        );
        Ok(())
    }
}

const FATAL: &str = "broken: ";

/// Marks an error that is a broken property even with a fault injected.
fn fatal(e: String) -> String {
    format!("{FATAL}{e}")
}

/// The partition's files with their sizes, for failure reports.
fn files(mem: &MemStorage) -> String {
    let dir = data_dir().join(tp().to_string());
    let Ok(list) = mem.list_dir(&dir) else {
        return "(no partition dir)".to_string();
    };
    list.iter()
        .filter(|(_, is_dir)| !is_dir)
        .map(|(name, _)| {
            let len = mem.read_all(&dir.join(name)).map_or(0, |b| b.len());
            format!("{}={len}", name.trim_start_matches('0'))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every batch of the log from `from` to its end, through `Log::read`.
fn read_all(log: &Log, from: i64) -> Result<Vec<MBatch>, String> {
    let leo = log.log_end_offset();
    let mut out = Vec::new();
    let mut next = from;
    while next < leo {
        let r = log
            .read(next, 1 << 16, i64::MAX, true)
            .map_err(|e| format!("read at {next} (LEO {leo}): {e}"))?;
        if r.regions.is_empty() {
            // Nothing from `next` on: a gap up to the LEO (the caller
            // compares with the model).
            break;
        }
        for region in &r.regions {
            let bytes = region
                .read_to_vec()
                .map_err(|e| format!("read at {next}: {e}"))?;
            for b in split_batches(&bytes)? {
                BatchHeader::parse(&b.bytes)
                    .and_then(|h| h.verify_crc(&b.bytes))
                    .map_err(|e| format!("batch {}..={} read back: {e}", b.base, b.last))?;
                if b.last < next && !out.is_empty() {
                    return Err(format!("read at {next} went backwards to {}", b.last));
                }
                next = b.last + 1;
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// At most this many operations per input.
pub const MAX_OPS: usize = 200;

/// Which operations a run may use.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `LogManager::truncate_to` (replication truncation; not yet used by
    /// the broker). Without it, a truncation in the input becomes a flush.
    pub truncate: bool,
    /// Injected write and sync failures. Without them, a fault in the
    /// input becomes a flush.
    pub faults: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            truncate: true,
            faults: true,
        }
    }
}

/// Decodes `data` into operations and runs them against a model. `Err`
/// says which property broke and lists the operations so far.
pub fn run(data: &[u8]) -> Result<(), Failure> {
    run_with(data, Options::default())
}

/// [`run`] with a choice of operations.
pub fn run_with(data: &[u8], options: Options) -> Result<(), Failure> {
    let mut b = Bytes { data, pos: 0 };
    let mut engine = Engine::new(&mut b).map_err(|message| Failure {
        message,
        ops: Vec::new(),
    })?;
    while !b.done() && engine.trace.len() < MAX_OPS {
        let op = match Op::decode(&mut b) {
            Op::Truncate(_) if !options.truncate => Op::Flush,
            Op::FailWritesAfter(_) | Op::FailSyncs if !options.faults => Op::Flush,
            op => op,
        };
        engine.trace.push(format!("{op:?}"));
        let result = engine.step(op, &mut b);
        let log = &engine.log;
        engine.trace.push(format!(
            "     [log start {}, hw {}, LEO {}, recovery point {}; model durable below {}]",
            log.log_start_offset(),
            log.high_watermark(),
            log.log_end_offset(),
            log.recovery_point(),
            engine.model.durable
        ));
        if let Err(message) = result {
            return Err(Failure {
                message,
                ops: std::mem::take(&mut engine.trace),
            });
        }
    }
    Ok(())
}
