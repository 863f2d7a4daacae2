//! `weir dump-log`: prints `.log`, `.index`, `.timeindex` and `.txnindex`
//! files in the same shape as Kafka's `kafka-dump-log.sh`
//! (DumpLogSegments).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use weir_protocol::records::header::{BATCH_HEADER_LEN, LOG_OVERHEAD};
use weir_protocol::records::{
    BatchHeader, Compression, ControlRecordType, DecompressLimits, RecordBatch,
};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir dump-log weir-data/orders-0/00000000000000000000.log\n  weir dump-log --deep-iteration --print-data-log weir-data/orders-0/00000000000000000000.log\n  weir dump-log --files weir-data/orders-0/00000000000000000000.index,weir-data/orders-0/00000000000000000000.timeindex"
)]
pub struct Args {
    /// Files to dump (.log, .index, .timeindex, .txnindex).
    #[arg(value_name = "FILE")]
    paths: Vec<PathBuf>,
    /// Comma-separated files, as kafka-dump-log.sh takes them.
    #[arg(long, value_delimiter = ',')]
    files: Vec<PathBuf>,
    /// Print every record, not just batch headers.
    #[arg(long)]
    deep_iteration: bool,
    /// Print record keys and values (implies --deep-iteration).
    #[arg(long)]
    print_data_log: bool,
    /// Only check that index entries match the log; print mismatches.
    #[arg(long)]
    verify_index_only: bool,
    /// Only run the index sanity check.
    #[arg(long)]
    index_sanity_check: bool,
    /// Largest batch to read when checking an index entry.
    #[arg(long, default_value_t = 5 * 1024 * 1024)]
    max_message_size: usize,
}

pub fn run(args: Args) -> ExitCode {
    let files: Vec<PathBuf> = args
        .paths
        .iter()
        .chain(args.files.iter())
        .cloned()
        .collect();
    if files.is_empty() {
        eprintln!("weir dump-log: no files given");
        return ExitCode::from(2);
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut mismatches: Vec<(PathBuf, Vec<(i64, i64)>)> = Vec::new();
    let mut failed = false;
    for f in &files {
        let r = dump_file(&args, f, &mut out, &mut mismatches);
        if let Err(e) = r {
            eprintln!("weir dump-log: {}: {e}", f.display());
            failed = true;
        }
    }
    for (file, list) in &mismatches {
        eprintln!("Mismatches in :{}", file.display());
        for (index_offset, log_offset) in list {
            eprintln!("  Index offset: {index_offset}, log offset: {log_offset}");
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn dump_file(
    args: &Args,
    file: &Path,
    out: &mut impl Write,
    mismatches: &mut Vec<(PathBuf, Vec<(i64, i64)>)>,
) -> anyhow::Result<()> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let base_offset: i64 = name
        .split('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    writeln!(out, "Dumping {}", file.display())?;
    if name.ends_with(".log") {
        dump_log(args, file, base_offset, out)
    } else if name.ends_with(".index") {
        dump_index(args, file, base_offset, out, mismatches)
    } else if name.ends_with(".timeindex") {
        dump_time_index(args, file, base_offset, out)
    } else if name.ends_with(".txnindex") {
        dump_txn_index(file, base_offset, out)
    } else {
        eprintln!("Ignoring unknown file {}", file.display());
        Ok(())
    }
}

/// Prints the aborted transactions of a `.txnindex` as Kafka does; a file
/// that does not end with whole, valid entries is an error (after the
/// entries before the damage).
fn dump_txn_index(path: &Path, base_offset: i64, out: &mut impl Write) -> anyhow::Result<()> {
    let bytes = std::fs::read(path)?;
    let (entries, damage) = weir_storage::txn_index::parse(&bytes, base_offset);
    for t in entries {
        writeln!(
            out,
            "version: {} producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            weir_storage::txn_index::ENTRY_VERSION,
            t.producer_id,
            t.first_offset,
            t.last_offset,
            t.last_stable_offset
        )?;
    }
    match damage {
        None => Ok(()),
        Some(reason) => anyhow::bail!("damaged transaction index: {reason}"),
    }
}

/// Batches of a log file read one at a time with positional reads.
struct LogReader {
    file: File,
    len: u64,
}

impl LogReader {
    fn open(path: &Path) -> io::Result<LogReader> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(LogReader { file, len })
    }

    /// The batch at `pos`: `Ok(None)` at the end or on a torn tail.
    fn batch_at(&self, pos: u64) -> io::Result<Option<(BatchHeader, Vec<u8>)>> {
        if pos + BATCH_HEADER_LEN as u64 > self.len {
            return Ok(None);
        }
        let mut head = [0u8; BATCH_HEADER_LEN];
        self.file.read_exact_at(&mut head, pos)?;
        let Ok(h) = BatchHeader::parse(&head) else {
            return Ok(None);
        };
        let size = h.total_size() as u64;
        if pos + size > self.len {
            return Ok(None);
        }
        let mut buf = vec![0u8; size as usize];
        self.file.read_exact_at(&mut buf, pos)?;
        Ok(Some((h, buf)))
    }

    /// First batch at or after `pos` whose last offset is ≥ `offset`.
    fn find(&self, mut pos: u64, offset: i64) -> io::Result<Option<(u64, BatchHeader, Vec<u8>)>> {
        while let Some((h, b)) = self.batch_at(pos)? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h, b)));
            }
            pos += h.total_size() as u64;
        }
        Ok(None)
    }
}

fn timestamp_type(h: &BatchHeader) -> &'static str {
    if h.is_log_append_time() {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`.
fn last_sequence(h: &BatchHeader) -> i32 {
    if h.base_sequence == -1 {
        return -1;
    }
    let delta = h.last_offset_delta;
    if h.base_sequence > i32::MAX - delta {
        delta - (i32::MAX - h.base_sequence) - 1
    } else {
        h.base_sequence + delta
    }
}

fn compression_name(h: &BatchHeader) -> String {
    match Compression::from_id(h.compression()) {
        Ok(c) => c.name().to_string(),
        Err(_) => format!("unknown({})", h.compression()),
    }
}

/// The batch line, exactly as DumpLogSegments.printBatchLevel prints it.
fn batch_line(h: &BatchHeader, bytes: &[u8], position: u64) -> String {
    let valid = h.verify_crc(bytes).is_ok();
    let horizon = if h.has_delete_horizon() {
        format!("OptionalLong[{}]", h.base_timestamp)
    } else {
        "OptionalLong.empty".to_string()
    };
    format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} \
         deleteHorizonMs: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        h.base_offset,
        h.last_offset(),
        h.records_count,
        h.base_sequence,
        last_sequence(h),
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        horizon,
        position,
        timestamp_type(h),
        h.max_timestamp,
        h.total_size(),
        h.magic,
        compression_name(h),
        h.crc,
        valid
    )
}

fn dump_log(
    args: &Args,
    path: &Path,
    base_offset: i64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(out, "Log starting offset: {base_offset}")?;
    let reader = LogReader::open(path)?;
    let deep = args.deep_iteration || args.print_data_log;
    let mut pos = 0u64;
    // The first damage met: a batch failing its CRC (a corrupt length
    // fails it too, and misplaces every batch after it) or offsets that go
    // backwards. The broker stops reads there (docs/storage-format.md).
    let mut damage: Option<String> = None;
    let mut expected = base_offset;
    while let Some((h, bytes)) = reader.batch_at(pos)? {
        writeln!(out, "{}", batch_line(&h, &bytes, pos))?;
        let problem = if let Err(e) = h.verify_crc(&bytes) {
            Some(e.to_string())
        } else if h.base_offset < expected {
            Some(format!(
                "base offset {} is below the expected {expected}",
                h.base_offset
            ))
        } else {
            None
        };
        if let Some(reason) = problem {
            writeln!(
                out,
                "Damage at position {pos} (offset {expected} expected): {reason}"
            )?;
            damage.get_or_insert(format!("position {pos} (offset {expected}): {reason}"));
        } else if deep {
            print_records(args, &h, bytes, out)?;
        }
        expected = expected.max(h.last_offset() + 1);
        pos += h.total_size() as u64;
    }
    let trailing = reader.len - pos;
    if trailing > 0 {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        writeln!(out, "Found {trailing} invalid bytes at the end of {name}")?;
    }
    match damage {
        Some(d) => anyhow::bail!("damaged at {d}"),
        None => Ok(()),
    }
}

fn print_records(
    args: &Args,
    h: &BatchHeader,
    bytes: Vec<u8>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let batch = RecordBatch::from_bytes(bytes.into())?;
    let records = batch.collect_records(&DecompressLimits::default())?;
    for (i, r) in records.iter().enumerate() {
        let ts = if h.is_log_append_time() {
            h.max_timestamp
        } else {
            r.timestamp(h.base_timestamp)
        };
        let key_size = r.key.as_ref().map_or(-1, |k| k.len() as i64);
        let value_size = r.value.as_ref().map_or(-1, |v| v.len() as i64);
        let sequence = if h.base_sequence == -1 {
            -1
        } else {
            h.base_sequence.wrapping_add(r.offset_delta)
        };
        let header_keys: Vec<&str> = r.headers.iter().map(|h| h.key.as_str()).collect();
        let mut line = format!(
            "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
            r.offset(h.base_offset),
            timestamp_type(h),
            ts,
            key_size,
            value_size,
            sequence,
            header_keys.join(",")
        );
        if h.is_control() {
            match batch.control_type(&DecompressLimits::default()) {
                Ok(ControlRecordType::Commit | ControlRecordType::Abort) if i == 0 => {
                    if let Ok(m) = batch.end_txn_marker(&DecompressLimits::default()) {
                        line.push_str(&format!(
                            " endTxnMarker: {} coordinatorEpoch: {}",
                            format!("{:?}", m.kind).to_uppercase(),
                            m.coordinator_epoch
                        ));
                    }
                }
                Ok(t) => line.push_str(&format!(
                    " controlType: {}",
                    format!("{t:?}").to_uppercase()
                )),
                Err(_) => line.push_str(" controlType: UNKNOWN"),
            }
        } else if args.print_data_log {
            if let Some(k) = &r.key {
                line.push_str(&format!(" key: {}", String::from_utf8_lossy(k)));
            }
            if let Some(v) = &r.value {
                line.push_str(&format!(" payload: {}", String::from_utf8_lossy(v)));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    path.with_file_name(format!("{stem}{suffix}"))
}

fn dump_index(
    args: &Args,
    path: &Path,
    base_offset: i64,
    out: &mut impl Write,
    mismatches: &mut Vec<(PathBuf, Vec<(i64, i64)>)>,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path)?;
    if args.index_sanity_check {
        match weir_storage::index::parse_offset_index(&bytes) {
            Ok(_) => writeln!(out, "{} passed sanity check.", path.display())?,
            Err(e) => writeln!(out, "{} failed sanity check: {e}", path.display())?,
        }
        return Ok(());
    }
    let log = LogReader::open(&sibling(path, ".log"))?;
    let mut found = Vec::new();
    for (i, e) in bytes.chunks_exact(8).enumerate() {
        let rel = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let position = i32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        let offset = base_offset + rel as i64;
        // A preallocated file ends in zero entries: stop at the first.
        if offset == base_offset && i > 0 {
            break;
        }
        let first_last = match log.batch_at(position as u64)? {
            Some((h, _)) if h.total_size() <= args.max_message_size + LOG_OVERHEAD => {
                h.last_offset()
            }
            _ => -1,
        };
        if first_last != offset {
            found.push((offset, first_last));
        }
        if !args.verify_index_only {
            writeln!(out, "offset: {offset} position: {position}")?;
        }
    }
    if !found.is_empty() {
        mismatches.push((path.to_path_buf(), found));
    }
    Ok(())
}

fn dump_time_index(
    args: &Args,
    path: &Path,
    base_offset: i64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path)?;
    if args.index_sanity_check {
        match weir_storage::index::parse_time_index(&bytes) {
            Ok(_) => writeln!(out, "{} passed sanity check.", path.display())?,
            Err(e) => writeln!(out, "{} failed sanity check: {e}", path.display())?,
        }
        return Ok(());
    }
    let log = LogReader::open(&sibling(path, ".log"))?;
    let index = std::fs::read(sibling(path, ".index")).unwrap_or_default();
    let index: Vec<(i64, u64)> = index
        .chunks_exact(8)
        .map(|e| {
            let rel = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            let pos = i32::from_be_bytes([e[4], e[5], e[6], e[7]]);
            (base_offset + rel as i64, pos as u64)
        })
        .take_while(|&(o, p)| !(o == base_offset && p == 0))
        .collect();
    let mut prev_ts = -1i64;
    let mut errors = Vec::new();
    for (i, e) in bytes.chunks_exact(12).enumerate() {
        let ts = i64::from_be_bytes(e[..8].try_into()?);
        let rel = i32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        let offset = base_offset + rel as i64;
        if ts == 0 && offset == base_offset && i > 0 {
            break;
        }
        let start = index
            .iter()
            .rev()
            .find(|&&(o, _)| o <= offset)
            .map_or(0, |&(_, p)| p);
        match log.find(start, offset)? {
            None => errors.push(format!("Indexed offset: {offset}, found log offset: -1")),
            Some((_, h, _)) if h.last_offset() != offset => errors.push(format!(
                "Indexed offset: {offset}, found log offset: {}",
                h.last_offset()
            )),
            Some(_) => {
                if prev_ts >= ts {
                    errors.push(format!(
                        "Found timestamp {ts} which is not larger than the previous one {prev_ts}"
                    ));
                }
            }
        }
        if !args.verify_index_only {
            writeln!(out, "timestamp: {ts} offset: {offset}")?;
        }
        prev_ts = ts;
    }
    if !errors.is_empty() {
        eprintln!("Found timestamp mismatch in :{}", path.display());
        for e in errors {
            eprintln!("  {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_line_has_kafka_shape() {
        let b = weir_storage::testing::batch(&[b"a", b"b"], 1234);
        let h = BatchHeader::parse(&b).unwrap();
        let line = batch_line(&h, &b, 42);
        let want = format!(
            "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 \
             producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false isControl: false \
             deleteHorizonMs: OptionalLong.empty position: 42 CreateTime: 1234 size: {} magic: 2 \
             compresscodec: none crc: {} isvalid: true",
            b.len(),
            h.crc
        );
        assert_eq!(line, want);
        let mut bad = b.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(batch_line(&h, &bad, 0).ends_with("isvalid: false"));
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        let b = weir_storage::testing::batch(&[b"a", b"b", b"c"], 0);
        let mut h = BatchHeader::parse(&b).unwrap();
        h.base_sequence = 5;
        assert_eq!(last_sequence(&h), 7);
        h.base_sequence = i32::MAX - 1;
        assert_eq!(last_sequence(&h), 0);
    }
}
