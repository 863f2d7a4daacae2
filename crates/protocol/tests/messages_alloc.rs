//! Decoding never allocates more than the input can justify
//! (CVE-2022-34917): a declared length is checked against the remaining
//! bytes before anything is allocated for it.
//!
//! A counting global allocator measures what each decode allocates on the
//! current thread.

use bytes::{Bytes, BytesMut};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use weir_protocol::codec::arbitrary::{Random, Rng};
use weir_protocol::messages::group_coordinator::*;
use weir_protocol::messages::metadata::*;
use weir_protocol::messages::transaction_coordinator::*;
use weir_protocol::messages::*;
use weir_protocol::{Decodable, DecodeError, Encodable, FrameError, Message};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static TOTAL: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn count(size: usize) {
    // try_with: thread-locals may be gone while a thread shuts down.
    let _ = ON.try_with(|on| {
        if on.get() {
            let _ = TOTAL.try_with(|t| t.set(t.get() + size));
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

// SAFETY: forwards every call unchanged to the system allocator; the
// counting only touches const-initialised thread-locals, which never
// allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f`, returning its result with the (total, largest) bytes it
/// allocated on this thread.
fn measure<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    TOTAL.with(|t| t.set(0));
    LARGEST.with(|l| l.set(0));
    ON.with(|o| o.set(true));
    let r = f();
    ON.with(|o| o.set(false));
    (r, TOTAL.with(Cell::get), LARGEST.with(Cell::get))
}

#[test]
fn huge_declared_array_is_rejected_without_allocating() {
    // Metadata v0 body: topics array of 2^31 - 1 elements (the largest an
    // int32 can declare), then 4 bytes where the first topic would start.
    let body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 1, b'a', 0]);
    let (r, total, largest) = measure(|| MetadataRequest::decode(&mut body.clone(), 0));
    assert_eq!(
        r,
        Err(DecodeError::LengthTooLarge {
            declared: 0x7fff_ffff,
            remaining: 4
        })
    );
    eprintln!("2^31-element array: {total} bytes allocated, largest {largest}");
    assert!(largest <= 64, "largest allocation {largest}");
    assert!(total <= 256, "total allocation {total}");

    // The same in a flexible version: compact length 2^31 (uvarint of n+1).
    let mut body = BytesMut::new();
    weir_protocol::varint::put_unsigned_varint(&mut body, (1u32 << 31) + 1);
    body.extend_from_slice(&[0; 4]);
    let body = body.freeze();
    let (r, total, largest) = measure(|| MetadataRequest::decode(&mut body.clone(), 12));
    assert!(
        matches!(
            r,
            Err(DecodeError::LengthTooLarge {
                declared: 0x8000_0000,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(largest <= 64 && total <= 256, "{total} / {largest}");
}

#[test]
fn huge_declared_lengths_in_a_frame_are_rejected() {
    // Request header v1 (Metadata v0) with a client id, then the body above.
    let frame = Bytes::from_static(&[
        0, 3, 0, 0, // api key 3 (Metadata), version 0
        0, 0, 0, 9, // correlation id
        0, 1, b'c', // client id "c"
        0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let (r, total, largest) = measure(|| weir_protocol::frame::decode_request(frame.clone()));
    assert!(
        matches!(
            r,
            Err(FrameError::Decode(DecodeError::LengthTooLarge { .. }))
        ),
        "{r:?}"
    );
    assert!(largest <= 64 && total <= 256, "{total} / {largest}");

    // A string declaring 32767 bytes with 2 left, and bytes declaring 2^31-1.
    let body = Bytes::from_static(&[0x7f, 0xff, b'a', b'b']);
    let (r, _, largest) = measure(|| weir_protocol::codec::rt::get_str(&mut body.clone(), false));
    assert!(matches!(r, Err(DecodeError::LengthTooLarge { .. })) && largest == 0);
    let body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 1]);
    let (r, _, largest) = measure(|| weir_protocol::codec::rt::get_bytes(&mut body.clone(), false));
    assert!(matches!(r, Err(DecodeError::LengthTooLarge { .. })) && largest == 0);
}

/// Largest allocated-bytes / encoded-bytes ratio of decoding, with the
/// message and version where it happened.
#[derive(Default)]
struct Worst {
    ratio: f64,
    what: String,
    pairs: usize,
}

fn ratio_of<T>(worst: &mut Worst)
where
    T: Message + Encodable + Decodable + Random,
{
    let (lo, hi) = T::VALID_VERSIONS;
    for version in lo..=hi {
        for case in 0..16u64 {
            let mut rng = Rng(0xa110c ^ (u64::from(version as u16) << 32) ^ case);
            let value = T::random(&mut rng, version);
            let mut buf = BytesMut::new();
            value.encode(&mut buf, version).expect("encode");
            let bytes = buf.freeze();
            let (r, total, _) = measure(|| T::decode(&mut bytes.clone(), version));
            assert!(r.is_ok());
            // Frame size: the body plus the 4-byte size prefix and the
            // smallest request header (8 bytes).
            let ratio = total as f64 / (bytes.len() + 12) as f64;
            if ratio > worst.ratio {
                worst.ratio = ratio;
                worst.what = format!("{} v{version} ({} bytes -> {total})", T::NAME, bytes.len());
            }
        }
        worst.pairs += 1;
    }
}

macro_rules! all {
    ($($t:ident),* $(,)?) => {{
        let mut worst = Worst::default();
        $( ratio_of::<$t>(&mut worst); )*
        worst
    }};
}

#[test]
fn allocation_per_input_byte_is_bounded() {
    let w = weir_protocol::__weir_all_messages!(all);
    eprintln!(
        "largest allocated/frame-size ratio over {} (message, version) pairs: {:.1} at {}",
        w.pairs, w.ratio, w.what
    );
    assert!(w.pairs > 600);
    // Each decoded item costs at most its in-memory size per byte it
    // consumed; the widest struct per byte of minimal encoding sets this.
    assert!(w.ratio < 200.0, "ratio {}", w.ratio);
    for w in [
        weir_protocol::__weir_all_group_coordinator_records!(all),
        weir_protocol::__weir_all_transaction_coordinator_records!(all),
        weir_protocol::__weir_all_metadata_records!(all),
    ] {
        eprintln!(
            "coordinator records: largest ratio {:.1} at {}",
            w.ratio, w.what
        );
        assert!(w.ratio < 200.0, "ratio {}", w.ratio);
    }
}

/// The worst case over *all* inputs, not just random ones: an array item
/// costs `size_of::<T>()` bytes of memory and at least `T::min_len(version)`
/// bytes of input, and nothing else is allocated per input byte that is
/// larger (strings: one byte per byte; bytes/records: none, they are
/// slices). So decoding allocates at most this ratio times the frame size,
/// plus a constant.
#[test]
fn worst_case_allocation_ratio_is_bounded() {
    let mut worst = (0.0f64, String::new());
    let mut checked = 0;
    let layouts = [
        weir_protocol::messages::__ALL_LAYOUTS,
        weir_protocol::messages::group_coordinator::__ALL_LAYOUTS,
        weir_protocol::messages::transaction_coordinator::__ALL_LAYOUTS,
        weir_protocol::messages::metadata::__ALL_LAYOUTS,
    ];
    for (message, structs) in layouts.iter().flat_map(|l| l.iter()) {
        // The top-level struct (first) is allocated once per frame, not
        // per input byte. Only the versions in which a struct can occur.
        for (name, (lo, hi), size, min_len) in structs.iter().skip(1) {
            for version in *lo..=*hi {
                let min = min_len(version);
                assert!(min >= 1, "{name} v{version}");
                let ratio = *size as f64 / min as f64;
                checked += 1;
                if ratio > worst.0 {
                    worst = (
                        ratio,
                        format!("{message}: {name} v{version} ({size} bytes per {min})"),
                    );
                }
            }
        }
    }
    // Unknown tagged fields: a RawTaggedField per two bytes at least.
    let tagged = std::mem::size_of::<weir_protocol::RawTaggedField>() as f64 / 2.0;
    eprintln!(
        "worst-case allocated/input ratio over {checked} (struct, version) pairs: {:.1} at {}; \
         unknown tagged fields: {tagged:.1}",
        worst.0, worst.1
    );
    assert!(worst.0 < 64.0 && tagged < 64.0);
}
