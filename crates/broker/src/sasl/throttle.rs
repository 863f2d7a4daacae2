//! How long a failed authentication waits before its answer goes out and
//! the connection closes: Kafka's `connection.failed.authentication.delay.ms`
//! (default 100 ms), and, weir's addition, doubled for every further
//! failure from the same client address within a minute, up to 32 times
//! the base. A client guessing passwords from one address gets slower and
//! slower answers; one mistyped password costs the base delay.
//!
//! Pure: the caller passes the time. The table is bounded: addresses
//! without a failure for a minute are forgotten, and at most
//! [`MAX_ADDRESSES`] are kept (the oldest go first).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// A failure older than this no longer counts.
pub const WINDOW_MS: i64 = 60_000;
/// The delay grows to at most this many times the base.
pub const MAX_FACTOR: u64 = 32;
/// Addresses tracked at most.
pub const MAX_ADDRESSES: usize = 10_000;

/// Recent failures per client address.
#[derive(Debug, Default)]
pub struct FailureDelays {
    /// address → (failures in the current streak, time of the last one)
    recent: Mutex<HashMap<IpAddr, (u32, i64)>>,
}

impl FailureDelays {
    /// Records a failed authentication from `ip` at `now_ms`; how long to
    /// delay its answer (`base_ms` = `connection.failed.authentication.delay.ms`;
    /// 0 turns the delay off).
    pub fn failed(&self, ip: IpAddr, now_ms: i64, base_ms: u64) -> u64 {
        if base_ms == 0 {
            return 0;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= MAX_ADDRESSES && !recent.contains_key(&ip) {
            recent.retain(|_, (_, last)| now_ms - *last < WINDOW_MS);
            if recent.len() >= MAX_ADDRESSES
                && let Some(oldest) = recent
                    .iter()
                    .min_by_key(|(_, (_, last))| *last)
                    .map(|(k, _)| *k)
            {
                recent.remove(&oldest);
            }
        }
        let entry = recent.entry(ip).or_insert((0, now_ms));
        if now_ms - entry.1 >= WINDOW_MS {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now_ms;
        let factor = 1u64 << (entry.0 - 1).min(MAX_FACTOR.trailing_zeros());
        base_ms.saturating_mul(factor)
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.recent.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn repeated_failures_from_one_address_wait_longer_up_to_a_cap() {
        let d = FailureDelays::default();
        let delays: Vec<u64> = (0..8).map(|i| d.failed(ip(1), 1_000 + i, 100)).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 3200, 3200]);
        // another address starts at the base
        assert_eq!(d.failed(ip(2), 1_010, 100), 100);
        // a minute without failures starts over
        assert_eq!(d.failed(ip(1), 1_007 + WINDOW_MS, 100), 100);
        // no base, no delay
        assert_eq!(d.failed(ip(3), 1_000, 0), 0);
    }

    #[test]
    fn the_table_stays_bounded() {
        let d = FailureDelays::default();
        for i in 0..(MAX_ADDRESSES as u32 + 50) {
            let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            d.failed(addr, i64::from(i), 100);
        }
        assert!(d.tracked() <= MAX_ADDRESSES, "{}", d.tracked());
    }
}
