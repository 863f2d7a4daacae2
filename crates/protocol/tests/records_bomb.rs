//! Decompression bombs: tiny batches that would inflate past 1 GiB must fail
//! with `DecompressedTooLarge` while the process allocates only about the
//! configured limit (cf. CVE-2023-34455 in snappy-java).
//!
//! A counting global allocator measures the peak heap use of each decode.
//! Everything runs in one test so no other test's allocations overlap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, LENGTH_OFFSET, RECORDS_COUNT_OFFSET,
};
use weir_protocol::records::{
    Compression, DecompressLimits, RecordBatch, RecordBatchBuilder, RecordsError,
};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged and only
// updates two counters.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let now = CURRENT.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const GIB: usize = 1 << 30;
const MIB: usize = 1 << 20;

/// A batch with one declared record whose records section is `section`
/// (already compressed with `codec`).
fn batch_with_section(codec: Compression, section: &[u8]) -> RecordBatch {
    let empty = RecordBatchBuilder::new(Compression::None).build().unwrap();
    let mut b = empty.as_bytes().to_vec();
    b.truncate(BATCH_HEADER_LEN);
    b.extend_from_slice(section);
    let len = (b.len() - 12) as i32;
    b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
    b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&(codec.id() as i16).to_be_bytes());
    b[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&1i32.to_be_bytes());
    header::write_crc(&mut b);
    RecordBatch::from_bytes(Bytes::from(b)).unwrap()
}

/// `copies` concatenated streams, each inflating to `chunk` zero bytes.
fn repeated_streams(codec: Compression, chunk: usize, copies: usize) -> Vec<u8> {
    let zeros = vec![0u8; chunk];
    let mut one = Vec::new();
    match codec {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(&mut one, flate2::Compression::best());
            e.write_all(&zeros).unwrap();
            e.finish().unwrap();
        }
        Compression::Lz4 => return lz4_single_frame(chunk, copies),
        Compression::Zstd => {
            one = zstd::encode_all(&zeros[..], 19).unwrap();
        }
        _ => unreachable!(),
    }
    one.repeat(copies)
}

/// One LZ4 frame (Java reads a single frame) of `copies` identical
/// independent blocks, each inflating to `chunk` zero bytes.
fn lz4_single_frame(chunk: usize, copies: usize) -> Vec<u8> {
    use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
    assert_eq!(chunk, 4 * MIB);
    let info = FrameInfo::new()
        .block_size(BlockSize::Max4MB)
        .block_mode(BlockMode::Independent);
    let mut one = Vec::new();
    let mut e = FrameEncoder::with_frame_info(info, &mut one);
    e.write_all(&vec![0u8; chunk]).unwrap();
    e.finish().unwrap();
    // magic(4) FLG BD HC, then [u32 LE size][block], then the 0 end mark.
    let header = &one[..7];
    let size = u32::from_le_bytes(one[7..11].try_into().unwrap()) as usize;
    let block = &one[7..11 + (size & 0x7fff_ffff)];
    assert_eq!(one.len(), 7 + block.len() + 4, "expected a single block");
    let mut frame = header.to_vec();
    for _ in 0..copies {
        frame.extend_from_slice(block);
    }
    frame.extend_from_slice(&0u32.to_le_bytes());
    frame
}

/// A raw snappy block whose preamble declares `declared` bytes, followed by
/// a literal of one byte: the decoder must refuse before allocating.
fn snappy_declaring(declared: u32) -> Vec<u8> {
    let mut v = Vec::new();
    let mut n = declared;
    while n >= 0x80 {
        v.push((n as u8) | 0x80);
        n >>= 7;
    }
    v.push(n as u8);
    v.extend_from_slice(&[0x00, b'x']);
    v
}

fn decode_peak(
    batch: &RecordBatch,
    limits: &DecompressLimits,
) -> (Result<usize, RecordsError>, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let result = batch.collect_records(limits).map(|r| r.len());
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (result, peak)
}

#[test]
fn bombs_fail_with_bounded_memory() {
    let limits = DecompressLimits::default(); // 64 MiB
    // Peak allowed: twice the limit (output buffer growth plus decoder
    // state). Far below the 1 GiB the bombs inflate to.
    let budget = 2 * limits.max_bytes;

    let mut cases: Vec<(&str, Compression, Vec<u8>)> = Vec::new();
    // gzip members and zstd frames may be concatenated: 64 × 16 MiB.
    for codec in [Compression::Gzip, Compression::Zstd] {
        cases.push((codec.name(), codec, repeated_streams(codec, 16 * MIB, 64)));
    }
    // One lz4 frame of 256 × 4 MiB blocks.
    cases.push(("lz4", Compression::Lz4, lz4_single_frame(4 * MIB, 256)));
    // Unframed snappy declaring 2 GiB.
    cases.push((
        "snappy raw",
        Compression::Snappy,
        snappy_declaring(2 * GIB as u32),
    ));
    // xerial framing: a block declaring 1 GiB.
    let mut xerial = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    let block = snappy_declaring(GIB as u32);
    xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
    xerial.extend_from_slice(&block);
    cases.push(("snappy xerial big block", Compression::Snappy, xerial));
    // xerial framing: 2100 honest 32 KiB blocks (66 MiB): the bound is on
    // the total, not per block.
    let honest = snap::raw::Encoder::new()
        .compress_vec(&[0u8; 32 * 1024])
        .unwrap();
    let mut many = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    for _ in 0..2100 {
        many.extend_from_slice(&(honest.len() as u32).to_be_bytes());
        many.extend_from_slice(&honest);
    }
    cases.push(("snappy xerial many blocks", Compression::Snappy, many));

    for (name, codec, section) in cases {
        assert!(
            section.len() < 64 * MIB,
            "{name}: bomb input should be small"
        );
        let batch = batch_with_section(codec, &section);
        drop(section);
        batch.validate_crc().unwrap();
        let (result, peak) = decode_peak(&batch, &limits);
        assert_eq!(
            result,
            Err(RecordsError::DecompressedTooLarge {
                codec,
                limit: limits.max_bytes
            }),
            "{name}"
        );
        assert!(peak < budget, "{name}: peak heap {peak} bytes");
        eprintln!(
            "{name}: {} byte batch, peak heap {:.1} MiB",
            batch.size(),
            peak as f64 / MIB as f64
        );

        // A small limit fails the same way, with even less memory.
        let small = DecompressLimits { max_bytes: MIB };
        let (result, peak) = decode_peak(&batch, &small);
        assert!(
            matches!(result, Err(RecordsError::DecompressedTooLarge { .. })),
            "{name}: {result:?}"
        );
        assert!(
            peak < 40 * MIB,
            "{name}: peak heap {peak} bytes with a 1 MiB limit"
        );
    }
}
