//! murmur2 against vectors published by independent implementations.

use weir_protocol::partitioner::{murmur2, partition_for_key, to_positive};

/// Hashes from Apache Kafka's `UtilsTest.testMurmur2`
/// (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java),
/// as reproduced in the murmur2 test suites of several independent clients.
const KAFKA_UTILS_TEST: &[(&[u8], i32)] = &[
    (b"21", -973_932_308),
    (b"foobar", -790_332_482),
    (b"a-little-bit-long-string", -985_981_536),
    (b"a-little-bit-longer-string", -1_486_304_829),
    (
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        -58_897_971,
    ),
    (b"abc", 479_470_107),
];

/// librdkafka's Java-compatible `rd_murmur2` unit test vectors
/// (src/rdmurmur2.c), covering every tail length and the empty key.
const LIBRDKAFKA: &[(&[u8], u32)] = &[
    (b"kafka", 0xd067_cf64),
    (b"giberish123456789", 0x8f55_2b0c),
    (b"1234", 0x9fc9_7b14),
    (b"234", 0xe7c0_09ca),
    (b"34", 0x8739_30da),
    (b"4", 0x5a4b_5ca1),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x7842_4f1c),
    (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62_b377),
    (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4_e09e),
    (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8_b43f),
    (b"", 0x106e_08d9),
];

/// kafka-python's `test_murmur2_java_compatibility`
/// (dpkp/kafka-python, test/test_partitioner.py): partitions among 1000,
/// "compare with output from Kafka's ... Partitioner".
const KAFKA_PYTHON_1000: &[(&[u8], u32)] = &[
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
];

#[test]
fn kafka_utils_test_vectors() {
    for (key, expected) in KAFKA_UTILS_TEST {
        assert_eq!(
            murmur2(key),
            *expected,
            "{:?}",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn librdkafka_vectors() {
    for (key, expected) in LIBRDKAFKA {
        assert_eq!(
            murmur2(key) as u32,
            *expected,
            "{:?}",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn kafka_python_partitions() {
    for (key, expected) in KAFKA_PYTHON_1000 {
        assert_eq!(partition_for_key(key, 1000), Some(*expected), "{key:?}");
    }
}

#[test]
fn to_positive_clears_only_the_sign_bit() {
    assert_eq!(to_positive(i32::MIN), 0);
    assert_eq!(to_positive(-1), i32::MAX);
    assert_eq!(to_positive(5), 5);
    assert_eq!(to_positive(-790_332_482), 1_357_151_166);
    assert_eq!(partition_for_key(b"foobar", 50), Some(16));
    assert_eq!(partition_for_key(b"foobar", 0), None);
    assert_eq!(partition_for_key(b"anything", 1), Some(0));
}
