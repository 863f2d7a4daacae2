//! What the handler receives, retry timing and dead-letter headers (pure).

use std::sync::Arc;
use std::time::Duration;

pub use bytes::Bytes;

/// Header that, when present, names the event for idempotency.
pub const EVENT_ID_HEADER: &str = "event-id";

/// Headers added to a dead-lettered record (besides the original ones).
pub const DLT_TOPIC: &str = "weir.dlt.topic";
pub const DLT_PARTITION: &str = "weir.dlt.partition";
pub const DLT_OFFSET: &str = "weir.dlt.offset";
pub const DLT_ATTEMPTS: &str = "weir.dlt.attempts";
pub const DLT_ERROR: &str = "weir.dlt.error";

/// Longest error text copied into a dead-letter header.
pub const MAX_DLT_ERROR_BYTES: usize = 1024;

/// One consumed record, owned (workers outlive the poll that returned it).
/// Cloning is cheap: the topic name, key and value are shared
/// (reference-counted), only the headers are copied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Bytes>,
    pub payload: Option<Bytes>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Create or log-append time, milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
}

impl Record {
    /// A stable identity for idempotent effects: the `event-id` header when
    /// it is UTF-8, otherwise `topic-partition-offset`. (topic-partition-offset
    /// changes if the topic is recreated or mirrored; producers that need a
    /// lasting identity set the header.)
    pub fn event_id(&self) -> String {
        self.headers
            .iter()
            .find(|(k, _)| k == EVENT_ID_HEADER)
            .and_then(|(_, v)| v.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{}-{}-{}", self.topic, self.partition, self.offset))
    }

    /// The headers of the dead-letter copy: the original headers, then why
    /// and where from.
    pub fn dead_letter_headers(
        &self,
        attempts: u32,
        error: &str,
    ) -> Vec<(String, Option<Vec<u8>>)> {
        let mut error = error.as_bytes();
        if error.len() > MAX_DLT_ERROR_BYTES {
            let mut end = MAX_DLT_ERROR_BYTES;
            // Cut on a character boundary.
            while end > 0 && (error[end] & 0xc0) == 0x80 {
                end -= 1;
            }
            error = &error[..end];
        }
        let mut h = self.headers.clone();
        h.push((DLT_TOPIC.into(), Some(self.topic.as_bytes().to_vec())));
        h.push((
            DLT_PARTITION.into(),
            Some(self.partition.to_string().into_bytes()),
        ));
        h.push((
            DLT_OFFSET.into(),
            Some(self.offset.to_string().into_bytes()),
        ));
        h.push((DLT_ATTEMPTS.into(), Some(attempts.to_string().into_bytes())));
        h.push((DLT_ERROR.into(), Some(error.to_vec())));
        h
    }
}

/// How often and how long to retry a failing handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based) before the
    /// next one, or `None` when no attempt is left. Doubles each time, capped.
    pub fn backoff(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 1u32
            .checked_shl(attempt.saturating_sub(1))
            .unwrap_or(u32::MAX);
        Some(
            self.initial_backoff
                .checked_mul(factor)
                .unwrap_or(self.max_backoff)
                .min(self.max_backoff),
        )
    }
}

/// What happens to a record whose handler failed every attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Stop the partition: the record holds the watermark, nothing after it
    /// is submitted, the partition stays paused (visible in the stats).
    #[default]
    StopPartition,
    /// Write the record to `topic` with [`Record::dead_letter_headers`]; once
    /// the broker acknowledged it, the record counts as completed. If the
    /// write fails the partition stops.
    DeadLetter { topic: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            topic: "orders".into(),
            partition: 3,
            offset: 42,
            headers: vec![("trace".into(), Some(b"x".to_vec()))],
            ..Record::default()
        }
    }

    #[test]
    fn event_id_prefers_the_header() {
        let mut r = record();
        assert_eq!(r.event_id(), "orders-3-42");
        r.headers
            .push((EVENT_ID_HEADER.into(), Some(b"evt-7".to_vec())));
        assert_eq!(r.event_id(), "evt-7");
        r.headers.last_mut().unwrap().1 = Some(vec![0xff]);
        assert_eq!(r.event_id(), "orders-3-42", "non-UTF-8 header ignored");
    }

    #[test]
    fn dead_letter_headers_say_where_from_and_why() {
        let h = record().dead_letter_headers(4, "db down");
        let get = |k: &str| {
            h.iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.clone())
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(get("trace").as_deref(), Some("x"));
        assert_eq!(get(DLT_TOPIC).as_deref(), Some("orders"));
        assert_eq!(get(DLT_PARTITION).as_deref(), Some("3"));
        assert_eq!(get(DLT_OFFSET).as_deref(), Some("42"));
        assert_eq!(get(DLT_ATTEMPTS).as_deref(), Some("4"));
        assert_eq!(get(DLT_ERROR).as_deref(), Some("db down"));
    }

    #[test]
    fn long_error_is_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_DLT_ERROR_BYTES);
        let h = record().dead_letter_headers(1, &long);
        let e = h.last().unwrap().1.clone().unwrap();
        assert!(e.len() <= MAX_DLT_ERROR_BYTES);
        assert!(String::from_utf8(e).is_ok());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
        };
        let waits: Vec<_> = (1..=5).map(|a| p.backoff(a)).collect();
        assert_eq!(
            waits,
            vec![
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(350)),
                Some(Duration::from_millis(350)),
                None
            ]
        );
        let huge = RetryPolicy {
            max_attempts: u32::MAX,
            ..p
        };
        assert_eq!(huge.backoff(200), Some(Duration::from_millis(350)));
        let once = RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        };
        assert_eq!(once.backoff(1), None);
    }
}
