//! What `validate_records` costs in memory: nothing for an uncompressed
//! batch, a bounded window for a compressed one, and under twice the
//! decompression bound for a 1 GiB bomb shaped like a real record (zeros
//! would fail at the first record; this one makes the validator read on).
//!
//! A counting global allocator measures allocations made on the current
//! thread while a flag is on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use weir_protocol::records::compression::compress;
use weir_protocol::records::{
    BatchHeader, Compression, DecompressLimits, RecordBatchBuilder, RecordsError, validate_records,
};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(grow: isize, new_allocation: bool) {
    // try_with: thread-locals may be gone while a thread shuts down.
    let _ = ON.try_with(|on| {
        if on.get() {
            if new_allocation {
                let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            }
            let _ = CURRENT.try_with(|c| {
                c.set(c.get() + grow);
                let _ = PEAK.try_with(|p| p.set(p.get().max(c.get())));
            });
        }
    });
}

// SAFETY: forwards every call unchanged to the system allocator; the
// counting only touches const-initialised thread-locals, which never
// allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize, true);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize, true);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        track(new_size as isize - layout.size() as isize, false);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize), false);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// (result, allocations, peak bytes) of one validation on this thread.
fn measured(
    h: &BatchHeader,
    section: &[u8],
    limits: &DecompressLimits,
) -> (Result<(), RecordsError>, usize, usize) {
    COUNT.set(0);
    CURRENT.set(0);
    PEAK.set(0);
    ON.set(true);
    let result = validate_records(h, section, limits);
    ON.set(false);
    (result, COUNT.get(), PEAK.get() as usize)
}

/// 16 records of 1 KiB values with a header each: a 16 KiB batch.
fn realistic(codec: Compression) -> (BatchHeader, Vec<u8>) {
    let mut b = RecordBatchBuilder::new(codec);
    for i in 0..16 {
        b.push(
            1_700_000_000_000 + i,
            Some(Bytes::from(format!("key-{i}"))),
            Some(Bytes::from(vec![(i % 7) as u8; 1024])),
            vec![weir_protocol::records::RecordHeader {
                key: "trace-id".into(),
                value: Some(Bytes::from_static(b"0123456789abcdef")),
            }],
        )
        .unwrap();
    }
    let batch = b.build().unwrap();
    (*batch.header(), batch.records_section().to_vec())
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// One record whose value is `GIB - 1` zero bytes, as a stream for the
/// record's prefix followed by 64 streams of 16 MiB zeros.
fn record_shaped_bomb(codec: Compression) -> Vec<u8> {
    let value_len = (GIB - 1) as i32;
    let mut fields = vec![0u8, 0, 0, 1]; // attributes, ts delta, offset delta, null key
    put_varint(&mut fields, value_len);
    let mut prefix = Vec::new();
    put_varint(&mut prefix, (fields.len() + value_len as usize + 1) as i32);
    prefix.extend_from_slice(&fields);
    let mut out = Vec::new();
    compress(codec, &prefix, &mut out).unwrap();
    let mut zeros = Vec::new();
    compress(codec, &vec![0u8; 16 * MIB], &mut zeros).unwrap();
    out.extend_from_slice(&zeros.repeat(64));
    out
}

#[test]
fn uncompressed_validation_allocates_nothing() {
    let (h, section) = realistic(Compression::None);
    let (result, allocations, _) = measured(&h, &section, &DecompressLimits::default());
    assert_eq!(result, Ok(()));
    assert_eq!(allocations, 0);
}

#[test]
fn compressed_validation_holds_a_small_window() {
    for codec in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
        let (h, section) = realistic(codec);
        let (result, _, peak) = measured(&h, &section, &DecompressLimits::default());
        assert_eq!(result, Ok(()), "{codec:?}");
        // The 32 KiB window plus the decoder's own state (zstd's window
        // is the largest, sized by the frame: 2 MiB at level 3 without a
        // content size).
        assert!(peak < 4 * MIB, "{codec:?}: peak {peak} bytes");
    }
}

#[test]
fn record_shaped_bombs_stop_at_the_bound() {
    let limits = DecompressLimits::default();
    for codec in [Compression::Gzip, Compression::Zstd] {
        let section = record_shaped_bomb(codec);
        assert!(
            section.len() < 2 * MIB,
            "{codec:?}: {} bytes",
            section.len()
        );
        let mut h = realistic(Compression::None).0;
        h.attributes = codec.id() as i16;
        h.records_count = 1;
        h.last_offset_delta = 0;
        let (result, _, peak) = measured(&h, &section, &limits);
        assert_eq!(
            result,
            Err(RecordsError::DecompressedTooLarge {
                codec,
                limit: limits.max_bytes
            }),
            "{codec:?}"
        );
        assert!(peak < 2 * limits.max_bytes, "{codec:?}: peak {peak} bytes");
        let small = DecompressLimits { max_bytes: MIB };
        let (result, _, peak) = measured(&h, &section, &small);
        assert!(
            matches!(result, Err(RecordsError::DecompressedTooLarge { .. })),
            "{codec:?}: {result:?}"
        );
        assert!(peak < 8 * MIB, "{codec:?}: peak {peak} bytes, 1 MiB bound");
    }
}
