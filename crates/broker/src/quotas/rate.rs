//! A rate measured over sampled time windows and the throttle time that
//! brings it back under a quota: Kafka's `Rate` over a `SampledStat`
//! (`quota.window.num` samples of `quota.window.size.seconds`) and
//! `QuotaUtils.throttleTime`. Pure: every call takes `now_ms`.

/// `quota.window.num` windows of `quota.window.size.seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowConfig {
    /// How many windows are kept (at least 1).
    pub samples: u32,
    /// The length of one window in milliseconds (at least 1).
    pub window_ms: i64,
}

impl WindowConfig {
    /// Kafka's defaults: 11 windows of one second.
    pub const DEFAULT: WindowConfig = WindowConfig {
        samples: 11,
        window_ms: 1000,
    };

    /// The longest throttle time handed out: all windows together. Beyond
    /// that the excess has left the measured span anyway.
    pub fn max_throttle_ms(&self) -> i64 {
        i64::from(self.samples).saturating_mul(self.window_ms)
    }
}

/// One window: when it started and what was recorded in it.
#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: i64,
    value: f64,
}

/// The recorded values of the last `samples` windows. Invariant: at most
/// `config.samples` samples; `current` indexes the newest one when any.
#[derive(Debug, Clone)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    pub fn new() -> Rate {
        Rate {
            samples: Vec::new(),
            current: 0,
        }
    }

    /// Adds `value` at `now_ms` (a negative value takes back an earlier
    /// record). A new window starts when the current one is `window_ms`
    /// old; it replaces the oldest once all `samples` are in use.
    pub fn record(&mut self, config: WindowConfig, value: f64, now_ms: i64) {
        let samples = config.samples.max(1) as usize;
        let complete = match self.samples.get(self.current) {
            Some(s) => now_ms >= s.start_ms.saturating_add(config.window_ms),
            None => true,
        };
        if complete {
            if self.samples.len() < samples {
                self.samples.push(Sample {
                    start_ms: now_ms,
                    value: 0.0,
                });
                self.current = self.samples.len() - 1;
            } else {
                self.current = (self.current + 1) % self.samples.len();
                if let Some(s) = self.samples.get_mut(self.current) {
                    *s = Sample {
                        start_ms: now_ms,
                        value: 0.0,
                    };
                }
            }
        }
        if let Some(s) = self.samples.get_mut(self.current) {
            s.value += value;
        }
    }

    /// Forgets windows that started `samples * window_ms` or longer ago
    /// (they restart empty at `now_ms`, as Kafka resets them).
    fn purge(&mut self, config: WindowConfig, now_ms: i64) {
        let expire = config.max_throttle_ms();
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= expire {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The span the rate is measured over, in milliseconds: from the start
    /// of the oldest window to now, but never less than `samples - 1` full
    /// windows, so a client's first burst is not measured over a few
    /// milliseconds.
    pub fn window_size_ms(&mut self, config: WindowConfig, now_ms: i64) -> i64 {
        self.purge(config, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest).max(0);
        let full = elapsed / config.window_ms.max(1);
        let min_full = i64::from(config.samples.max(1)) - 1;
        if full < min_full {
            elapsed += (min_full - full) * config.window_ms;
        }
        elapsed.max(1)
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, config: WindowConfig, now_ms: i64) -> f64 {
        let span = self.window_size_ms(config, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (span as f64 / 1000.0)
    }
}

impl Default for Rate {
    fn default() -> Self {
        Rate::new()
    }
}

/// How long a client over its quota waits (Kafka's
/// `QuotaUtils.boundedThrottleTime`): the time over which the excess
/// would have been within the quota, `(observed - quota) / quota *
/// window`, capped at [`WindowConfig::max_throttle_ms`]; 0 when the
/// observed rate is within the quota.
pub fn throttle_time_ms(observed: f64, quota: f64, window_ms: i64, config: WindowConfig) -> i64 {
    if observed.is_nan() || observed <= quota || quota <= 0.0 {
        return 0;
    }
    let t = ((observed - quota) / quota * window_ms as f64).round();
    let max = config.max_throttle_ms();
    if t >= max as f64 {
        max
    } else {
        (t as i64).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: WindowConfig = WindowConfig::DEFAULT;

    #[test]
    fn a_first_burst_is_measured_over_all_but_one_window() {
        let mut r = Rate::new();
        r.record(CFG, 10_000.0, 5_000);
        // 10 full windows assumed: 10 s
        assert_eq!(r.window_size_ms(CFG, 5_000), 10_000);
        assert!((r.measure(CFG, 5_000) - 1_000.0).abs() < 1e-9);
        // 300 ms later: 10.3 s
        assert_eq!(r.window_size_ms(CFG, 5_300), 10_300);
    }

    #[test]
    fn windows_roll_and_old_ones_expire() {
        let mut r = Rate::new();
        for s in 0..11 {
            r.record(CFG, 100.0, s * 1000);
        }
        // 11 windows of 100: 1100 over 10.5 s
        let rate = r.measure(CFG, 10_500);
        assert!((rate - 1100.0 / 10.5).abs() < 1e-9, "{rate}");
        // the 12th window replaces the first one
        r.record(CFG, 100.0, 11_000);
        let total_after: f64 = r.samples.iter().map(|s| s.value).sum();
        assert_eq!(total_after, 1100.0);
        // a long silence forgets everything
        assert_eq!(r.measure(CFG, 60_000), 0.0);
    }

    #[test]
    fn unrecording_takes_a_value_back() {
        let mut r = Rate::new();
        r.record(CFG, 5_000.0, 0);
        r.record(CFG, -5_000.0, 10);
        assert_eq!(r.measure(CFG, 20), 0.0);
    }

    #[test]
    fn throttle_time_is_the_excess_over_the_quota_in_window_time() {
        // twice the quota over a 10 s span: wait 10 s
        assert_eq!(throttle_time_ms(2_000.0, 1_000.0, 10_000, CFG), 10_000);
        // 10% over on 10.5 s: 1050 ms
        assert_eq!(throttle_time_ms(1_100.0, 1_000.0, 10_500, CFG), 1_050);
        // within the quota, or exactly at it
        assert_eq!(throttle_time_ms(999.0, 1_000.0, 10_000, CFG), 0);
        assert_eq!(throttle_time_ms(1_000.0, 1_000.0, 10_000, CFG), 0);
        // capped at all windows together
        assert_eq!(throttle_time_ms(1e9, 1_000.0, 10_000, CFG), 11_000);
        let small = WindowConfig {
            samples: 2,
            window_ms: 500,
        };
        assert_eq!(throttle_time_ms(1e9, 1.0, 500, small), 1_000);
    }

    #[test]
    fn a_producer_over_its_quota_is_throttled_by_kafkas_arithmetic() {
        // quota 1000 B/s; 20_000 bytes at t=0 measure 2000 B/s over 10 s
        let mut r = Rate::new();
        r.record(CFG, 20_000.0, 0);
        let observed = r.measure(CFG, 0);
        let span = r.window_size_ms(CFG, 0);
        assert_eq!(throttle_time_ms(observed, 1_000.0, span, CFG), 10_000);
        // the burst is forgotten once all windows have passed
        assert_eq!(r.measure(CFG, 11_000), 0.0);
    }
}
