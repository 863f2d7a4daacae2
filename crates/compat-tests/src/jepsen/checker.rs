//! The checker: a pure function from what the clients saw during the run
//! ([`History`]) and what the log holds afterwards (the final read, every
//! partition from its start to its high watermark) to a [`Report`].
//!
//! Anomalies, each of which must be zero with acks=all, an ISR of at least
//! two and unclean election off:
//!
//! - **lost**: acknowledged, absent from the final log;
//! - **duplicated**: one value at more than one position of the final log
//!   (the producer is idempotent and every value is sent once);
//! - **wrong offset**: acknowledged at `(partition, offset)`, found in the
//!   final log only elsewhere;
//! - **read, then lost**: a consumer read `value` at `(partition, offset)`
//!   and the final log holds something else there, or nothing (the record
//!   was served above the high watermark and later truncated);
//! - **unknown**: a value the producer never sent.
//!
//! A record whose send failed (a timeout, say) may or may not be in the log:
//! that is indeterminate, not an anomaly, and counted on its own. An
//! acknowledgement without an offset (librdkafka's "implicit ack": a later
//! batch of the idempotent producer succeeded while this one was queued
//! for a retry, so it was written, but the client never learned where;
//! the delivery report says offset -1001) is checked for loss and
//! duplicates, not for its offset, and counted too.

use std::collections::{BTreeMap, HashMap};

/// The payload of the `n`-th record the producer sends.
pub fn value_of(n: u64) -> String {
    format!("w-{n}")
}

/// `n` of a payload `w-<n>`.
pub fn parse_value(payload: &str) -> Option<u64> {
    payload.strip_prefix("w-")?.parse().ok()
}

/// A delivery report that said the record is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    pub value: u64,
    pub partition: i32,
    pub offset: i64,
}

/// A record read back (by a consumer during the run, or by the final read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub payload: String,
}

/// What the clients saw during the run.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Values `0..sent` were handed to the producer.
    pub sent: u64,
    pub acked: Vec<Acked>,
    /// Values whose delivery report was an error.
    pub failed: Vec<u64>,
    /// Every record the consumers read while the nemesis ran (repeats
    /// included: a consumer reset to the start reads again).
    pub consumer_reads: Vec<Read>,
}

/// Counts and the anomalies themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub sent: u64,
    pub acked: usize,
    pub failed: usize,
    /// Sent, with neither an acknowledgement nor an error.
    pub unresolved: u64,
    pub final_records: usize,
    pub consumer_reads: usize,
    /// Failed sends that are in the final log anyway (allowed).
    pub failed_but_present: usize,
    /// Acknowledgements without an offset (offset not checked).
    pub acked_without_offset: usize,
    pub lost: Vec<Acked>,
    /// A value and every position it has in the final log.
    pub duplicated: Vec<(u64, Vec<(i32, i64)>)>,
    /// An acknowledgement and where the value really is.
    pub wrong_offset: Vec<(Acked, Vec<(i32, i64)>)>,
    /// A consumer's read and what the final log holds at its position.
    pub read_then_lost: Vec<(Read, Option<String>)>,
    /// Records (final log or consumer reads) with a value never sent.
    pub unknown: Vec<Read>,
}

impl Report {
    /// The number of anomalies of all kinds.
    pub fn anomalies(&self) -> usize {
        self.lost.len()
            + self.duplicated.len()
            + self.wrong_offset.len()
            + self.read_then_lost.len()
            + self.unknown.len()
    }

    /// Up to `n` examples of each anomaly kind, one per line.
    pub fn examples(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.lost.iter().take(n).map(|a| {
            format!(
                "lost: {} acknowledged at {}@{}",
                value_of(a.value),
                a.partition,
                a.offset
            )
        }));
        out.extend(
            self.duplicated
                .iter()
                .take(n)
                .map(|(v, at)| format!("duplicated: {} at {at:?}", value_of(*v))),
        );
        out.extend(self.wrong_offset.iter().take(n).map(|(a, at)| {
            format!(
                "wrong offset: {} acknowledged at {}@{}, in the log at {at:?}",
                value_of(a.value),
                a.partition,
                a.offset
            )
        }));
        out.extend(self.read_then_lost.iter().take(n).map(|(r, now)| {
            format!(
                "read, then lost: {} read at {}@{}, the log now holds {now:?} there",
                r.payload, r.partition, r.offset
            )
        }));
        out.extend(self.unknown.iter().take(n).map(|r| {
            format!(
                "unknown value {:?} at {}@{}",
                r.payload, r.partition, r.offset
            )
        }));
        out
    }
}

/// Compares the history with the final log.
pub fn check(history: &History, final_log: &[Read]) -> Report {
    let known = |r: &Read| parse_value(&r.payload).filter(|&n| n < history.sent);
    let mut at: HashMap<(i32, i64), &str> = HashMap::new();
    let mut positions: BTreeMap<u64, Vec<(i32, i64)>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for r in final_log {
        at.insert((r.partition, r.offset), &r.payload);
        match known(r) {
            Some(n) => positions
                .entry(n)
                .or_default()
                .push((r.partition, r.offset)),
            None => unknown.push(r.clone()),
        }
    }
    let mut lost = Vec::new();
    let mut wrong_offset = Vec::new();
    for a in &history.acked {
        match positions.get(&a.value) {
            None => lost.push(*a),
            Some(found) if a.offset >= 0 && !found.contains(&(a.partition, a.offset)) => {
                wrong_offset.push((*a, found.clone()));
            }
            Some(_) => {}
        }
    }
    let duplicated = positions
        .iter()
        .filter(|(_, found)| found.len() > 1)
        .map(|(n, found)| (*n, found.clone()))
        .collect();
    let mut read_then_lost = Vec::new();
    for r in &history.consumer_reads {
        if known(r).is_none() {
            unknown.push(r.clone());
            continue;
        }
        let now = at.get(&(r.partition, r.offset)).copied();
        if now != Some(r.payload.as_str()) {
            read_then_lost.push((r.clone(), now.map(str::to_string)));
        }
    }
    let failed_but_present = history
        .failed
        .iter()
        .filter(|n| positions.contains_key(n))
        .count();
    let resolved = (history.acked.len() + history.failed.len()) as u64;
    Report {
        sent: history.sent,
        acked: history.acked.len(),
        failed: history.failed.len(),
        unresolved: history.sent.saturating_sub(resolved),
        final_records: final_log.len(),
        consumer_reads: history.consumer_reads.len(),
        failed_but_present,
        acked_without_offset: history.acked.iter().filter(|a| a.offset < 0).count(),
        lost,
        duplicated,
        wrong_offset,
        read_then_lost,
        unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, offset: i64, n: u64) -> Read {
        Read {
            partition,
            offset,
            payload: value_of(n),
        }
    }

    fn ack(n: u64, partition: i32, offset: i64) -> Acked {
        Acked {
            value: n,
            partition,
            offset,
        }
    }

    /// Values 0..4 acknowledged at 0@0, 1@0, 0@1, 1@1, read back there.
    fn clean() -> (History, Vec<Read>) {
        let acked = vec![ack(0, 0, 0), ack(1, 1, 0), ack(2, 0, 1), ack(3, 1, 1)];
        let log: Vec<Read> = acked
            .iter()
            .map(|a| rec(a.partition, a.offset, a.value))
            .collect();
        let history = History {
            sent: 5,
            acked,
            failed: vec![4],
            consumer_reads: log.clone(),
        };
        (history, log)
    }

    #[test]
    fn a_clean_run_has_no_anomaly() {
        let (h, log) = clean();
        let r = check(&h, &log);
        assert_eq!(r.anomalies(), 0, "{r:?}");
        assert_eq!((r.sent, r.acked, r.failed, r.unresolved), (5, 4, 1, 0));
        assert_eq!((r.final_records, r.consumer_reads), (4, 4));
    }

    #[test]
    fn each_anomaly_is_counted_where_it_belongs() {
        type Case = (&'static str, fn(&mut History, &mut Vec<Read>), [usize; 5]);
        // [lost, duplicated, wrong offset, read then lost, unknown]
        let cases: &[Case] = &[
            (
                "acked record missing",
                |_, log| drop(log.remove(3)),
                [1, 0, 0, 1, 0],
            ),
            (
                "acked record twice",
                |_, log| log.push(rec(0, 2, 2)),
                [0, 1, 0, 0, 0],
            ),
            (
                "acked record elsewhere",
                |_, log| {
                    log.retain(|r| r.payload != value_of(3));
                    log.push(rec(0, 2, 3));
                },
                [0, 0, 1, 1, 0],
            ),
            (
                "consumer read above the high watermark",
                |h, _| h.consumer_reads.push(rec(1, 2, 4)),
                [0, 0, 0, 1, 0],
            ),
            (
                "consumer read a value later replaced",
                |h, _| h.consumer_reads.push(rec(1, 1, 4)),
                [0, 0, 0, 1, 0],
            ),
            (
                "a value never sent",
                |_, log| log.push(rec(0, 2, 99)),
                [0, 0, 0, 0, 1],
            ),
            (
                "a failed send present in the log",
                |_, log| log.push(rec(0, 2, 4)),
                [0, 0, 0, 0, 0],
            ),
            (
                "an acknowledgement without an offset",
                |h, _| h.acked[3].offset = -1001,
                [0, 0, 0, 0, 0],
            ),
            (
                "an acknowledgement without an offset, lost",
                |h, log| {
                    h.acked[3].offset = -1001;
                    log.remove(3);
                    h.consumer_reads.clear();
                },
                [1, 0, 0, 0, 0],
            ),
            (
                "an unacknowledged read then lost",
                |h, _| h.consumer_reads.push(rec(0, 5, 4)),
                [0, 0, 0, 1, 0],
            ),
        ];
        for (name, change, want) in cases {
            let (mut h, mut log) = clean();
            change(&mut h, &mut log);
            let r = check(&h, &log);
            let got = [
                r.lost.len(),
                r.duplicated.len(),
                r.wrong_offset.len(),
                r.read_then_lost.len(),
                r.unknown.len(),
            ];
            assert_eq!(&got, want, "{name}: {r:?}");
            assert_eq!(r.examples(10).len(), r.anomalies(), "{name}");
        }
    }

    #[test]
    fn failed_but_present_and_unresolved_are_counted() {
        let (mut h, mut log) = clean();
        log.push(rec(0, 2, 4));
        h.sent = 7;
        let r = check(&h, &log);
        assert_eq!((r.failed_but_present, r.unresolved), (1, 2));
        assert_eq!(r.anomalies(), 0);
    }

    #[test]
    fn values_round_trip() {
        assert_eq!(parse_value(&value_of(12345)), Some(12345));
        assert_eq!(parse_value("x-1"), None);
        assert_eq!(parse_value("w-"), None);
    }
}
