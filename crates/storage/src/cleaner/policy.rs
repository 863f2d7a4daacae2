//! The cleaner's choice of what to clean: a pure function of log summaries.

use crate::config::TopicPartition;

/// What the policy knows of one compacted log.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanCandidate {
    pub tp: TopicPartition,
    /// Bytes of segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the dirty, cleanable segments (first dirty offset to the
    /// cleanable end: never the active segment nor records younger than
    /// `min.compaction.lag.ms`).
    pub dirty_bytes: u64,
    /// Earliest timestamp in the cleanable dirty section, if known.
    pub oldest_dirty_timestamp: Option<i64>,
    pub min_cleanable_dirty_ratio: f64,
    pub max_compaction_lag_ms: i64,
}

impl CleanCandidate {
    pub fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }
    /// The oldest dirty record is older than `max.compaction.lag.ms`.
    pub fn lag_exceeded(&self, now_ms: i64) -> bool {
        self.oldest_dirty_timestamp
            .is_some_and(|ts| ts >= 0 && now_ms.saturating_sub(ts) > self.max_compaction_lag_ms)
    }
    pub fn cleanable(&self, now_ms: i64) -> bool {
        self.dirty_bytes > 0
            && (self.dirty_ratio() >= self.min_cleanable_dirty_ratio || self.lag_exceeded(now_ms))
    }
}

/// The index of the dirtiest cleanable candidate (ties: the first).
pub fn choose(candidates: &[CleanCandidate], now_ms: i64) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        if !c.cleanable(now_ms) {
            continue;
        }
        let r = c.dirty_ratio();
        if best.is_none_or(|(_, b)| r > b) {
            best = Some((i, r));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, clean: u64, dirty: u64, oldest: Option<i64>) -> CleanCandidate {
        CleanCandidate {
            tp: TopicPartition::new(name, 0),
            clean_bytes: clean,
            dirty_bytes: dirty,
            oldest_dirty_timestamp: oldest,
            min_cleanable_dirty_ratio: 0.5,
            max_compaction_lag_ms: 1_000,
        }
    }

    #[test]
    fn choice_table() {
        // (candidates, now, expected choice)
        let cases: Vec<(Vec<CleanCandidate>, i64, Option<&str>)> = vec![
            (vec![], 0, None),
            // Below the ratio, lag not exceeded.
            (vec![c("a", 60, 40, Some(0))], 500, None),
            // At the ratio.
            (vec![c("a", 50, 50, Some(0))], 500, Some("a")),
            // Below the ratio but the oldest dirty record is too old.
            (vec![c("a", 90, 10, Some(0))], 1_001, Some("a")),
            // Lag exactly at the limit is not exceeded.
            (vec![c("a", 90, 10, Some(0))], 1_000, None),
            // Nothing dirty: never, whatever the lag.
            (vec![c("a", 90, 0, Some(0))], 10_000, None),
            // The dirtiest wins.
            (
                vec![
                    c("a", 40, 60, None),
                    c("b", 10, 90, None),
                    c("c", 30, 70, None),
                ],
                0,
                Some("b"),
            ),
            // A lagging log competes by ratio with the others.
            (
                vec![c("a", 90, 10, Some(0)), c("b", 40, 60, None)],
                5_000,
                Some("b"),
            ),
            // Never-cleaned log: all dirty.
            (vec![c("a", 0, 100, None)], 0, Some("a")),
        ];
        for (i, (cands, now, want)) in cases.into_iter().enumerate() {
            let got = choose(&cands, now).map(|j| cands[j].tp.topic.as_str());
            assert_eq!(got, want, "case {i}");
        }
    }
}
