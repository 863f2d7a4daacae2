//! Kafka's murmur2 key hash (`org.apache.kafka.common.utils.Utils.murmur2`),
//! written here independently of the broker so tests can check that a keyed
//! record sits on the partition a Java producer would have chosen.

/// The 32-bit murmur2 hash exactly as Kafka's Java client computes it.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    // Java hashes with an int length; keys in tests are far below 2 GiB.
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if let Some(&first) = rest.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's default partitioner picks for a non-null key:
/// `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    ((murmur2(key) & 0x7fff_ffff) as u32) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn matches_kafka_java_vectors() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input),
                *expected,
                "murmur2({:?})",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn partition_is_in_range_and_positive() {
        for i in 0..1000 {
            let key = format!("key-{i}");
            assert!(partition_for_key(key.as_bytes(), 7) < 7);
        }
    }
}
