//! Commit metadata: the completed offsets above the commit watermark.
//!
//! A commit stores `next_commit` (everything below is done). Records above
//! it may already be done too; without more information a new owner re-runs
//! them. The committed offset's metadata string carries that set so that a
//! new owner (after a restart or a rebalance) can skip them.
//!
//! Text format (all of it must fit the broker's `offset.metadata.max.bytes`,
//! 4096 by default):
//!
//! ```text
//! "wpc1:" base64url-without-padding(body)
//! body = uvarint(base) { uvarint(gap) uvarint(len - 1) }*
//! ```
//!
//! base64url is [`weir_protocol::base64url`] (RFC 4648 §5, strict); uvarint
//! is the unsigned 64-bit varint of [`weir_protocol::varint`].
//!
//! `base` is the committed offset the set belongs to; each run is
//! `[start, start + len)` with `start = cursor + gap`, where the cursor starts
//! at `base` and moves to the end of each run. Runs are ascending and do not
//! overlap. A set whose base differs from the committed offset it was read
//! with is ignored (someone else committed since).
//!
//! Dropping runs from the end is always safe: a new owner only re-runs more
//! records. So when the set does not fit the size bound the encoder keeps
//! the lowest runs and reports that it is incomplete; the driver then stops
//! fetching that partition (back-pressure) until the watermark catches up.

use std::ops::Range;
use weir_protocol::base64url;
use weir_protocol::varint::{self, VarintError};

/// Prefix (and version) of the metadata string.
pub const PREFIX: &str = "wpc1:";

/// Kafka's default `offset.metadata.max.bytes`.
pub const DEFAULT_MAX_METADATA_BYTES: usize = 4096;

/// Why a metadata string could not be read. Metadata comes from the broker
/// and may have been written by any client, so none of this is fatal: the
/// caller treats it as "no completed set" and re-runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata does not start with {PREFIX:?}")]
    NotOurs,
    #[error("invalid base64url text at byte {position}")]
    BadBase64 { position: usize },
    #[error("truncated varint at byte {position}")]
    TruncatedVarint { position: usize },
    #[error("varint too long at byte {position}")]
    VarintOverflow { position: usize },
    #[error("offset out of range in run {run}")]
    OffsetOverflow { run: usize },
    #[error("the set belongs to committed offset {found}, not {expected}")]
    WrongBase { expected: i64, found: i64 },
}

/// A decoded set of completed offsets above `base`, as ascending disjoint
/// half-open ranges, all at or above `base`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompletedSet {
    pub base: i64,
    pub runs: Vec<Range<i64>>,
}

impl CompletedSet {
    /// Whether `offset` is in the set.
    pub fn contains(&self, offset: i64) -> bool {
        let i = self.runs.partition_point(|r| r.end <= offset);
        self.runs.get(i).is_some_and(|r| r.start <= offset)
    }

    /// Drops runs that end at or below `offset` (no longer needed once the
    /// consumer is past them).
    pub fn forget_below(&mut self, offset: i64) {
        let i = self.runs.partition_point(|r| r.end <= offset);
        self.runs.drain(..i);
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// The result of encoding: the metadata text and whether it holds the whole
/// set (false: only a prefix of the runs fit the size bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub text: String,
    pub complete: bool,
}

/// Groups ascending offsets into runs of consecutive integers. Offsets below
/// `base` and duplicates are ignored.
pub fn runs_of(base: i64, completed: &[i64]) -> Vec<Range<i64>> {
    let mut runs: Vec<Range<i64>> = Vec::new();
    for &o in completed {
        if o < base || o == i64::MAX {
            continue;
        }
        match runs.last_mut() {
            Some(r) if o < r.end => {}
            Some(r) if o == r.end => r.end = o + 1,
            _ => runs.push(o..o + 1),
        }
    }
    runs
}

/// Encodes the completed offsets above `base` (ascending) into at most
/// `max_bytes` bytes of metadata text. An empty set encodes as the empty
/// string (no metadata), which is complete.
pub fn encode(base: i64, completed: &[i64], max_bytes: usize) -> Encoded {
    let runs = runs_of(base, completed);
    if runs.is_empty() || base < 0 {
        return Encoded {
            text: String::new(),
            complete: runs.is_empty(),
        };
    }
    let mut body = Vec::new();
    varint::put_unsigned_varlong(&mut body, base as u64);
    if text_len(body.len()) > max_bytes {
        return Encoded {
            text: String::new(),
            complete: false,
        };
    }
    let mut cursor = base;
    let mut complete = true;
    for r in &runs {
        let mut next = Vec::with_capacity(20);
        varint::put_unsigned_varlong(&mut next, (r.start - cursor) as u64);
        varint::put_unsigned_varlong(&mut next, (r.end - r.start - 1) as u64);
        if text_len(body.len() + next.len()) > max_bytes {
            complete = false;
            break;
        }
        body.extend_from_slice(&next);
        cursor = r.end;
    }
    if body.len() == varint::unsigned_varlong_len(base as u64) {
        // Not even one run fit: no metadata at all.
        return Encoded {
            text: String::new(),
            complete,
        };
    }
    let mut text = String::with_capacity(text_len(body.len()));
    text.push_str(PREFIX);
    base64url::encode(&body, &mut text);
    Encoded { text, complete }
}

/// Decodes metadata written by [`encode`] for the committed offset
/// `committed`. The empty string is the empty set.
pub fn decode(text: &str, committed: i64) -> Result<CompletedSet, MetadataError> {
    if text.is_empty() {
        return Ok(CompletedSet {
            base: committed,
            runs: Vec::new(),
        });
    }
    let encoded = text.strip_prefix(PREFIX).ok_or(MetadataError::NotOurs)?;
    let body = base64url::decode(encoded.as_bytes()).map_err(|e| MetadataError::BadBase64 {
        position: PREFIX.len() + e.position(),
    })?;
    let mut pos = 0;
    let base = get_uvarint(&body, &mut pos)?;
    let base = i64::try_from(base).map_err(|_| MetadataError::OffsetOverflow { run: 0 })?;
    if base != committed {
        return Err(MetadataError::WrongBase {
            expected: committed,
            found: base,
        });
    }
    // Each run takes at least two bytes, so this never over-allocates.
    let mut runs = Vec::with_capacity((body.len() - pos) / 2);
    let mut cursor = base;
    while pos < body.len() {
        let run = runs.len();
        let gap = get_uvarint(&body, &mut pos)?;
        let len_minus_one = get_uvarint(&body, &mut pos)?;
        let start = i64::try_from(gap)
            .ok()
            .and_then(|g| cursor.checked_add(g))
            .ok_or(MetadataError::OffsetOverflow { run })?;
        let end = i64::try_from(len_minus_one)
            .ok()
            .and_then(|l| start.checked_add(l))
            .and_then(|e| e.checked_add(1))
            .ok_or(MetadataError::OffsetOverflow { run })?;
        runs.push(start..end);
        cursor = end;
    }
    Ok(CompletedSet { base, runs })
}

fn text_len(body_len: usize) -> usize {
    PREFIX.len() + base64url::encoded_len(body_len)
}

/// Reads one unsigned varint at `pos` (at most 10 bytes, no overflow) and
/// moves `pos` past it.
fn get_uvarint(buf: &[u8], pos: &mut usize) -> Result<u64, MetadataError> {
    let position = *pos;
    let (v, n) = varint::read_unsigned_varlong(&buf[position..]).map_err(|e| match e {
        VarintError::Incomplete => MetadataError::TruncatedVarint { position },
        _ => MetadataError::VarintOverflow { position },
    })?;
    *pos += n;
    Ok(v)
}

/// Fuzz entry point (cargo-fuzz target `commit_metadata` and the smoke
/// test): the first 8 bytes are the committed offset, the rest the
/// metadata text. Whatever decodes must be a well-formed set: runs
/// ascending, disjoint, non-empty and at or above the base.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let committed = i64::from_be_bytes(*head);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if let Ok(set) = decode(text, committed) {
        let mut prev = set.base;
        for r in &set.runs {
            assert!(
                r.start >= prev && r.start < r.end,
                "bad run {r:?} after {prev}"
            );
            prev = r.end;
        }
    }
}

#[cfg(test)]
mod tests;
