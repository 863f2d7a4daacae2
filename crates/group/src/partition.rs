//! Mapping of group ids to `__consumer_offsets` partitions, as Kafka does it.

/// Java's `String.hashCode()`: `h = 31 * h + c` over UTF-16 code units,
/// with 32-bit wrapping arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition that stores `group_id`:
/// `Utils.abs(hashCode) % partitions`, where Kafka's `Utils.abs(x)` is
/// `Math.abs(x)`, except that `Integer.MIN_VALUE` gives 0 (it is not a mask:
/// that is `Utils.toPositive`, the record partitioner's).
///
/// `partitions` must be positive (validated by `GroupConfig::validate`);
/// a non-positive count maps everything to partition 0.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    if partitions <= 0 {
        return 0;
    }
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_table() {
        // Values of "...".hashCode() in Java.
        let cases: &[(&str, i32)] = &[
            ("", 0),
            ("a", 97),
            ("ab", 3105),
            ("hello", 99_162_322),
            ("console-consumer-12345", 158_455_506),
            ("polygenelubricants", i32::MIN),
            ("consumer-0", -166_239_207),
        ];
        for &(s, want) in cases {
            assert_eq!(java_string_hash(s), want, "hash of {s:?}");
        }
    }

    #[test]
    fn partition_table() {
        // Utils.abs maps MIN_VALUE to 0, not to a negative partition.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 22);
        assert_eq!(partition_for("console-consumer-12345", 50), 6);
        // Negative hash: negated, not masked (the mask would give 41).
        assert_eq!(partition_for("consumer-0", 50), 7);
        assert_eq!(partition_for("x", 0), 0);
    }
}
