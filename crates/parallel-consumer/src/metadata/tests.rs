// Completed sets are compared as lists of ranges.
#![allow(clippy::single_range_in_vec_init)]
use super::*;
use proptest::prelude::*;

#[test]
fn empty_set_is_no_metadata() {
    let e = encode(10, &[], DEFAULT_MAX_METADATA_BYTES);
    assert_eq!(e.text, "");
    assert!(e.complete);
    let d = decode("", 10).unwrap();
    assert!(d.is_empty());
    assert_eq!(d.base, 10);
}

#[test]
fn known_encoding() {
    // base 10, runs [11, 13) and [20, 21):
    // body = 0a | 01 01 | 07 00 -> base64url "CgEBBwA"
    let e = encode(10, &[11, 12, 20], 4096);
    assert_eq!(e.text, "wpc1:CgEBBwA");
    assert!(e.complete);
    let d = decode(&e.text, 10).unwrap();
    assert_eq!(d.runs, vec![11..13, 20..21]);
    assert!(!d.contains(10));
    assert!(d.contains(11) && d.contains(12) && d.contains(20));
    assert!(!d.contains(13) && !d.contains(19) && !d.contains(21));
}

#[test]
fn set_of_another_commit_is_rejected() {
    let e = encode(10, &[12], 4096);
    assert_eq!(
        decode(&e.text, 11),
        Err(MetadataError::WrongBase {
            expected: 11,
            found: 10
        })
    );
}

#[test]
fn foreign_and_corrupt_metadata_are_errors() {
    assert_eq!(decode("hello", 0), Err(MetadataError::NotOurs));
    assert!(matches!(
        decode("wpc1:C*", 10),
        Err(MetadataError::BadBase64 { .. })
    ));
    assert!(matches!(
        decode("wpc1:CgEBB", 10),
        Err(MetadataError::BadBase64 { .. })
    ));
    // base 10, then a gap varint with its continuation bit set and no end.
    let mut text = String::from(PREFIX);
    base64url::encode(&[10, 0x81], &mut text);
    assert_eq!(
        decode(&text, 10),
        Err(MetadataError::TruncatedVarint { position: 1 })
    );
    // An eleven-byte varint.
    let mut text = String::from(PREFIX);
    base64url::encode(&[0xff; 11], &mut text);
    assert!(matches!(
        decode(&text, 10),
        Err(MetadataError::VarintOverflow { .. })
    ));
    // A run that ends past i64::MAX.
    let mut body = Vec::new();
    varint::put_unsigned_varlong(&mut body, 10);
    varint::put_unsigned_varlong(&mut body, 1);
    varint::put_unsigned_varlong(&mut body, i64::MAX as u64);
    let mut text = String::from(PREFIX);
    base64url::encode(&body, &mut text);
    assert_eq!(
        decode(&text, 10),
        Err(MetadataError::OffsetOverflow { run: 0 })
    );
}

#[test]
fn size_bound_keeps_the_lowest_runs() {
    // Every other offset completed: one run each.
    let completed: Vec<i64> = (0..2000).map(|i| 1001 + 2 * i).collect();
    let e = encode(1000, &completed, 100);
    assert!(!e.complete);
    assert!(e.text.len() <= 100, "{} bytes", e.text.len());
    let d = decode(&e.text, 1000).unwrap();
    assert!(!d.runs.is_empty());
    // What is kept is a prefix of the real runs.
    let all = runs_of(1000, &completed);
    assert_eq!(d.runs[..], all[..d.runs.len()]);
    // A bound too small for even one run gives no metadata.
    let e = encode(1000, &completed, 6);
    assert_eq!(e.text, "");
    assert!(!e.complete);
}

#[test]
fn forget_below_drops_passed_runs() {
    let mut d = decode(&encode(0, &[2, 3, 7, 9], 4096).text, 0).unwrap();
    d.forget_below(4);
    assert_eq!(d.runs, vec![7..8, 9..10]);
    d.forget_below(9);
    assert_eq!(d.runs, vec![9..10]);
}

#[test]
fn non_canonical_base64_is_rejected() {
    // "CgEBBwA" with the unused low bits of its last character set.
    assert_eq!(
        decode("wpc1:CgEBBwB", 10),
        Err(MetadataError::BadBase64 { position: 11 })
    );
    assert!(matches!(
        decode("wpc1:CgEBBwA=", 10),
        Err(MetadataError::BadBase64 { .. })
    ));
}

proptest! {
    #[test]
    fn round_trip_within_bound(
        base in 0i64..(1 << 40),
        steps in proptest::collection::vec((1i64..300, any::<bool>()), 0..400),
        max_bytes in 8usize..600,
    ) {
        let mut completed = Vec::new();
        let mut o = base;
        for (step, done) in steps {
            o += step;
            if done {
                completed.push(o);
            }
        }
        let e = encode(base, &completed, max_bytes);
        prop_assert!(e.text.len() <= max_bytes);
        let d = decode(&e.text, base).unwrap();
        let all = runs_of(base, &completed);
        if e.complete {
            prop_assert_eq!(&d.runs, &all);
        } else {
            prop_assert!(d.runs.len() < all.len());
            prop_assert_eq!(&d.runs[..], &all[..d.runs.len()]);
        }
        // Membership agrees with the input for everything kept.
        let kept_end = d.runs.last().map_or(base, |r| r.end);
        for &c in completed.iter().filter(|&&c| c < kept_end) {
            prop_assert!(d.contains(c));
        }
    }

    #[test]
    fn decoding_garbage_never_panics(text in "wpc1:[A-Za-z0-9_-]{0,64}", committed in any::<i64>()) {
        if let Ok(d) = decode(&text, committed) {
            prop_assert_eq!(d.base, committed);
            for w in d.runs.windows(2) {
                prop_assert!(w[0].end <= w[1].start);
            }
            for r in &d.runs {
                prop_assert!(r.start >= committed && r.start < r.end);
            }
        }
    }
}
