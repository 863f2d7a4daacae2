//! The Java client's key partitioner: `toPositive(murmur2(key)) % n`.
//!
//! Keyed records must land on the partition a Java producer would choose,
//! or per-key ordering and compaction break when producers are mixed
//! (librdkafka's default, CRC32, does not match; its `murmur2_random` does).
//!
//! ```
//! use weir_protocol::partitioner::{murmur2, partition_for_key};
//! assert_eq!(murmur2(b"foobar"), -790_332_482);
//! assert_eq!(partition_for_key(b"foobar", 50), Some(16));
//! ```

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// 32-bit MurmurHash2 with Kafka's seed, bit-for-bit equal to
/// `org.apache.kafka.common.utils.Utils.murmur2` (little-endian 4-byte
/// blocks, Java's wrapping int arithmetic and unsigned shifts).
pub fn murmur2(data: &[u8]) -> i32 {
    let mut h = SEED ^ data.len() as u32;
    let (blocks, tail) = data.as_chunks::<4>();
    for block in blocks {
        let mut k = u32::from_le_bytes(*block);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // Java's fall-through switch over length % 4.
    let tail = match *tail {
        [a, b, c] => Some((u32::from(c) << 16) ^ (u32::from(b) << 8) ^ u32::from(a)),
        [a, b] => Some((u32::from(b) << 8) ^ u32::from(a)),
        [a] => Some(u32::from(a)),
        _ => None,
    };
    if let Some(tail) = tail {
        h ^= tail;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`, which would
/// overflow on `i32::MIN`).
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// Partition of a keyed record among `num_partitions`, as the Java
/// producer's built-in partitioner picks it. `None` when there are no
/// partitions.
pub fn partition_for_key(key: &[u8], num_partitions: u32) -> Option<u32> {
    if num_partitions == 0 {
        return None;
    }
    Some(to_positive(murmur2(key)) as u32 % num_partitions)
}
