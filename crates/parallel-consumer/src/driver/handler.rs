//! What a handler receives besides its record ([`HandlerContext`]), how it
//! says whether a failure is worth retrying ([`HandlerError`]), and the
//! per-attempt retry delay ([`RetryDelay`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// A boxed error of a handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a handler attempt failed.
///
/// Any `std::error::Error + Send + Sync + 'static` converts into
/// [`HandlerError::Retriable`] (so `?` retries by default); say
/// [`HandlerError::terminal`] for a failure that no retry can fix (a
/// malformed record, a rejected request), which goes straight to the
/// failure policy.
///
/// ```
/// use weir_parallel_consumer::driver::HandlerError;
///
/// fn parse(payload: &[u8]) -> Result<u64, HandlerError> {
///     let text = std::str::from_utf8(payload).map_err(HandlerError::terminal)?;
///     text.trim().parse::<u64>().map_err(HandlerError::terminal)
/// }
/// assert!(parse(b"12").is_ok());
/// assert!(matches!(parse(b"x"), Err(HandlerError::Terminal(_))));
/// ```
#[derive(Debug)]
pub enum HandlerError {
    /// Retried per the retry policy; once no attempt is left, the failure
    /// policy decides (dead-letter or stop the partition).
    Retriable(BoxError),
    /// Not retried: the failure policy decides at once.
    Terminal(BoxError),
}

impl HandlerError {
    pub fn retriable(e: impl Into<BoxError>) -> HandlerError {
        HandlerError::Retriable(e.into())
    }

    pub fn terminal(e: impl Into<BoxError>) -> HandlerError {
        HandlerError::Terminal(e.into())
    }

    pub fn is_terminal(&self) -> bool {
        matches!(self, HandlerError::Terminal(_))
    }

    /// The error inside.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        match self {
            HandlerError::Retriable(e) | HandlerError::Terminal(e) => e.as_ref(),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error(), f)
    }
}

// Like `anyhow::Error`, `HandlerError` is not itself a `std::error::Error`,
// so every error type converts into it (retriable) without overlapping
// `From<T> for T`.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(e: E) -> HandlerError {
        HandlerError::Retriable(Box::new(e))
    }
}

/// A cancellation signal shared by the tasks of one partition assignment:
/// fired when the partition is revoked or lost, when the consumer aborts,
/// and for tasks still running when a shutdown's drain deadline passes.
/// Cloning shares the signal.
#[derive(Clone)]
pub struct CancellationToken(Arc<watch::Sender<bool>>);

impl CancellationToken {
    pub fn new() -> CancellationToken {
        CancellationToken(Arc::new(watch::Sender::new(false)))
    }

    /// Fires the signal (again: no effect).
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the signal fired.
    pub async fn cancelled(&self) {
        let mut rx = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close.
        let _ = rx.wait_for(|fired| *fired).await;
    }
}

impl Default for CancellationToken {
    fn default() -> Self {
        CancellationToken::new()
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// What a handler knows about the current attempt.
#[derive(Debug, Clone)]
pub struct HandlerContext {
    attempt: u32,
    generation: u64,
    cancel: CancellationToken,
}

impl HandlerContext {
    pub(crate) fn new(attempt: u32, generation: u64, cancel: CancellationToken) -> Self {
        HandlerContext {
            attempt,
            generation,
            cancel,
        }
    }

    /// The attempt number: 1 for the first try, 2 for the first retry...
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The generation of the partition assignment the record was delivered
    /// under (as in [`crate::engine::PartitionStats::generation`]); it
    /// changes with each assignment of the partition to this consumer.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the partition was revoked or lost (or the consumer is
    /// stopping without waiting for this record).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the record's partition is revoked or lost. The
    /// record's result only counts if the partition is still owned when
    /// it arrives; a handler that gives up should return an error (it is
    /// not retried once cancelled, and runs again on the new owner).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The token itself (to hand to other tasks).
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel
    }
}

/// The wait before retry attempt `n + 1` after attempt `n` failed
/// (`n` is 1-based), replacing [`crate::record::RetryPolicy`]'s exponential
/// backoff; the policy's `max_attempts` still bounds the attempts.
#[derive(Clone)]
pub struct RetryDelay(Arc<dyn Fn(u32) -> Duration + Send + Sync>);

impl RetryDelay {
    pub fn new(f: impl Fn(u32) -> Duration + Send + Sync + 'static) -> RetryDelay {
        RetryDelay(Arc::new(f))
    }

    /// The wait after failed attempt `attempt`.
    pub fn delay(&self, attempt: u32) -> Duration {
        (self.0)(attempt)
    }
}

impl fmt::Debug for RetryDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryDelay(fn)")
    }
}

/// Two delays are equal when they are the same function object.
impl PartialEq for RetryDelay {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RetryDelay {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_convert_to_retriable_and_terminal_is_explicit() {
        let e: HandlerError = std::io::Error::other("db down").into();
        assert!(!e.is_terminal());
        assert_eq!(e.to_string(), "db down");
        let t = HandlerError::terminal("bad record");
        assert!(t.is_terminal());
        assert_eq!(t.to_string(), "bad record");
    }

    #[test]
    fn a_token_fires_once_for_every_clone() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let token = CancellationToken::new();
        let clone = token.clone();
        assert!(!clone.is_cancelled());
        let waiter = rt.spawn(async move { clone.cancelled().await });
        token.cancel();
        rt.block_on(waiter).unwrap();
        assert!(token.is_cancelled());
        // Already fired: completes at once.
        rt.block_on(token.cancelled());
    }
}
