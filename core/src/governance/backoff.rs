//! Retry delays: exponential backoff with jitter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The backoff's settings (`backoff_ms`, `backoff_max_ms` in `toolhost.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry (before jitter).
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay before retry `retry` (1 for the first): `first × 2^(retry-1)`, at most `max`,
    /// then a random point between half of it and all of it ("equal jitter"), so that callers
    /// failing together do not retry together.
    pub fn delay(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(30);
        let full = self.first.saturating_mul(1 << exponent).min(self.max);
        let half = full / 2;
        half + half.mul_f64(random_unit())
    }
}

/// A number in [0, 1) from a shared xorshift generator (jitter needs no better).
fn random_unit() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0x9E37_79B9_7F4A_7C15, |d| d.as_nanos() as u64)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_with_jitter_up_to_the_cap() {
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_millis(350),
        };
        for _ in 0..100 {
            let first = backoff.delay(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let second = backoff.delay(2);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200));
            let capped = backoff.delay(9);
            assert!(capped >= Duration::from_millis(175) && capped <= Duration::from_millis(350));
        }
    }
}
