//! Builders for record batches, for tests and examples (not used by the log).

use weir_protocol::records::header::{self, BATCH_HEADER_LEN};
use weir_protocol::varint;

/// (key, value, timestamp) of one record.
pub type TestRecord<'a> = (Option<&'a [u8]>, &'a [u8], i64);

/// An uncompressed magic-2 batch with one record per value, all with
/// timestamp `ts`, base offset 0, no producer id, valid CRC.
pub fn batch(values: &[&[u8]], ts: i64) -> Vec<u8> {
    let records: Vec<TestRecord<'_>> = values.iter().map(|v| (None, *v, ts)).collect();
    batch_with(&records)
}

/// An uncompressed magic-2 batch of (key, value, timestamp) records.
pub fn batch_with(records: &[TestRecord<'_>]) -> Vec<u8> {
    let base_ts = records.first().map_or(-1, |r| r.2);
    let max_ts = records.iter().map(|r| r.2).max().unwrap_or(-1);
    let mut body = Vec::new();
    for (i, (key, value, ts)) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.push(0u8);
        varint::put_varlong(&mut rec, ts - base_ts);
        varint::put_varint(&mut rec, i as i32);
        match key {
            Some(k) => {
                varint::put_varint(&mut rec, k.len() as i32);
                rec.extend_from_slice(k);
            }
            None => varint::put_varint(&mut rec, -1),
        }
        varint::put_varint(&mut rec, value.len() as i32);
        rec.extend_from_slice(value);
        varint::put_varint(&mut rec, 0);
        varint::put_varint(&mut body, rec.len() as i32);
        body.extend_from_slice(&rec);
    }
    let mut b = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&((BATCH_HEADER_LEN - 12 + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    header::write_crc(&mut b);
    b
}

/// Position and header of every batch of a segment file's bytes, walking
/// the batch lengths (tests that damage a segment at a chosen batch).
/// Panics on bytes that are not whole batches.
pub fn batch_layout(bytes: &[u8]) -> Vec<(usize, weir_protocol::records::BatchHeader)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < bytes.len() {
        let h = weir_protocol::records::BatchHeader::parse(&bytes[p..]).expect("a batch header");
        out.push((p, h));
        p += h.total_size();
    }
    out
}
