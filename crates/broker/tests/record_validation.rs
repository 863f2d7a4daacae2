//! Produce validation over the wire: batches whose header and CRC are sound
//! but whose records are not are refused (INVALID_RECORD or CORRUPT_MESSAGE,
//! as Kafka answers), nothing is appended, and the connection stays usable.
//!
//! Every bad batch has a correct CRC (recomputed after the damage), so the
//! CRC check alone cannot catch it.

use crate::common;

use common::*;
use weir_protocol::records::compression::compress;
use weir_protocol::records::header::{
    self, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET,
    RECORDS_COUNT_OFFSET,
};

const CORRUPT_MESSAGE: i16 = 2;
const INVALID_RECORD: i16 = 87;
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

/// `batch(values)` with its records section replaced by `section`, the
/// given codec id, record count and lastOffsetDelta; length and CRC fixed.
fn rebatch(section: &[u8], codec_id: u8, count: i32, last_offset_delta: i32) -> Bytes {
    let mut b = batch(&["template"], now_ms()).to_vec();
    b.truncate(BATCH_HEADER_LEN);
    b.extend_from_slice(section);
    let len = (b.len() - 12) as i32;
    b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
    b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&(codec_id as i16).to_be_bytes());
    b[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
    b[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    header::write_crc(&mut b);
    Bytes::from(b)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The records section of a valid one-record batch, uncompressed.
fn one_record_section() -> Vec<u8> {
    batch(&["only"], now_ms())[BATCH_HEADER_LEN..].to_vec()
}

/// Decompressed: one record whose value is `GIB - 1` zero bytes (its header
/// count is the last zero). Compressed: a stream for the record's prefix,
/// then 64 streams of 16 MiB of zeros (gzip members and zstd frames may be
/// concatenated).
fn bomb(codec: Compression) -> Vec<u8> {
    let value_len = (GIB - 1) as i32;
    let mut fields = vec![0u8, 0, 0, 1]; // attributes, ts delta, offset delta, null key
    put_varint(&mut fields, value_len);
    let body_len = fields.len() + value_len as usize + 1;
    let mut prefix = Vec::new();
    put_varint(&mut prefix, body_len as i32);
    prefix.extend_from_slice(&fields);
    let stream = |data: &[u8]| {
        let mut out = Vec::new();
        compress(codec, data, &mut out).unwrap();
        out
    };
    let mut out = stream(&prefix);
    out.extend_from_slice(&stream(&vec![0u8; 16 * MIB]).repeat(64));
    out
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn cases() -> Vec<(&'static str, Bytes, i16)> {
    let mut cases = Vec::new();

    // Garbage where the records should be; the CRC covers it.
    let garbage: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8 | 0x80).collect();
    cases.push((
        "garbage records section",
        rebatch(&garbage, 0, 1, 0),
        INVALID_RECORD,
    ));

    // One record claiming to be a thousand (and taking a thousand offsets).
    cases.push((
        "count 1000 for one record",
        rebatch(&one_record_section(), 0, 1000, 999),
        INVALID_RECORD,
    ));
    // The count alone inflated: offsets and count disagree.
    cases.push((
        "count 1000, lastOffsetDelta 0",
        rebatch(&one_record_section(), 0, 1000, 0),
        INVALID_RECORD,
    ));

    cases.push((
        "codec 7",
        rebatch(&one_record_section(), 7, 1, 0),
        CORRUPT_MESSAGE,
    ));

    let random: Vec<u8> = (0..300u32).map(|i| (i * 131 % 256) as u8).collect();
    cases.push((
        "random bytes flagged zstd",
        rebatch(&random, 4, 1, 0),
        CORRUPT_MESSAGE,
    ));

    let mut zstd_one = Vec::new();
    compress(Compression::Zstd, &one_record_section(), &mut zstd_one).unwrap();
    cases.push((
        "zstd with a lying count",
        rebatch(&zstd_one, 4, 2, 1),
        INVALID_RECORD,
    ));

    for codec in [Compression::Zstd, Compression::Gzip] {
        let section = bomb(codec);
        assert!(
            section.len() < 2 * MIB,
            "{codec:?} bomb is {} bytes",
            section.len()
        );
        let name = match codec {
            Compression::Zstd => "1 GiB zstd bomb",
            _ => "1 GiB gzip bomb",
        };
        cases.push((name, rebatch(&section, codec.id(), 1, 0), CORRUPT_MESSAGE));
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_batches_are_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    // Room for the 1 MB gzip bomb in one batch.
    assert_eq!(
        create_topic(&mut c, "checked", 1, &[("max.message.bytes", "8388608")]).await,
        NONE
    );
    assert_eq!(
        produce(&mut c, "checked", 0, batch(&["first"], now_ms()), 1).await,
        (NONE, 0)
    );
    // Every case is tried (and every failure listed) before the verdict.
    let mut failures = Vec::new();
    for (name, records, code) in cases() {
        let leo = list_offset(&mut c, "checked", -1).await.1;
        let answer = produce(&mut c, "checked", 0, records, 1).await;
        if answer != (code, -1) {
            failures.push(format!(
                "{name}: answered {answer:?}, expected ({code}, -1)"
            ));
        }
        let after = list_offset(&mut c, "checked", -1).await.1;
        if after != leo {
            failures.push(format!(
                "{name}: log end offset moved from {leo} to {after}"
            ));
        }
        // The same connection still takes a valid batch, at the next offset.
        let valid = produce(&mut c, "checked", 0, batch(&["after", name], now_ms()), 1).await;
        if valid != (NONE, after) {
            failures.push(format!("{name}: valid produce after answered {valid:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_batches_with_every_codec_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "codecs", 1, &[]).await, NONE);
    let mut next = 0;
    for codec in Compression::ALL {
        let mut builder = RecordBatchBuilder::new(codec);
        for i in 0..20 {
            builder
                .push(
                    now_ms(),
                    Some(Bytes::from(format!("k{i}"))),
                    Some(Bytes::from(vec![b'x'; 1000 + i])),
                    vec![],
                )
                .unwrap();
        }
        let records = builder.build().unwrap().into_bytes();
        assert_eq!(
            produce(&mut c, "codecs", 0, records, 1).await,
            (NONE, next),
            "{codec:?}"
        );
        next += 20;
    }
    assert_eq!(list_offset(&mut c, "codecs", -1).await.1, next);
    b.shutdown().await.unwrap();
}
