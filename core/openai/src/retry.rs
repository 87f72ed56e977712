//! When and how long to wait before asking again: 429, 5xx and connection errors are retried
//! with a doubling backoff (with jitter), and a server's `Retry-After` is honoured.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use toolhost::config::numbers::saturating_seconds;

/// The longest wait a `Retry-After` may ask for; a longer one fails the request instead.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The longest wait the backoff reaches by itself.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whether a request that got `status` is worth sending again.
pub(crate) fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
}

/// The wait the server asked for: `retry-after-ms` (OpenAI's), else `Retry-After` in seconds
/// (a date form is not read: the backoff applies). Through the host's saturating conversion:
/// `NaN` or text is not a wait (the backoff applies), a negative one is none, `inf` or `1e300`
/// is the longest ([`MAX_DURATION`](toolhost::config::numbers::MAX_DURATION)), so more than
/// [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    let number = |name: &str| {
        let value = header(name)?.parse::<f64>().ok()?;
        (!value.is_nan()).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return saturating_seconds(ms / 1e3);
    }
    saturating_seconds(number("retry-after")?)
}

/// The wait before retry `attempt` (1 for the first): what the server asked for, else
/// `initial` doubled each time, capped, with up to a quarter of jitter so clients that failed
/// together do not come back together.
pub(crate) fn backoff(attempt: u32, initial: Duration, asked: Option<Duration>) -> Duration {
    if let Some(asked) = asked {
        return asked;
    }
    let doubled = initial.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    let wait = doubled.min(MAX_BACKOFF);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    wait + wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_is_read_in_milliseconds_or_seconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), None);
        let max = toolhost::config::numbers::MAX_DURATION;
        for (name, value, wait) in [
            ("retry-after-ms", "1e300", Some(max)),
            ("retry-after-ms", "inf", Some(max)),
            ("retry-after-ms", "-5", Some(Duration::ZERO)),
            ("retry-after-ms", "NaN", None),
            ("retry-after", "NaN", None),
            ("retry-after", "-inf", Some(Duration::ZERO)),
            ("retry-after", "18446744073709551615", Some(max)),
            ("retry-after", "1e-300", Some(Duration::ZERO)),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(name, HeaderValue::from_static(value));
            assert_eq!(retry_after(&headers), wait, "{name}: {value}");
        }
    }

    #[test]
    fn the_backoff_doubles_within_its_jitter_and_obeys_the_server() {
        let initial = Duration::from_millis(100);
        for attempt in 1..=4 {
            let base = initial * (1 << (attempt - 1));
            let wait = backoff(attempt, initial, None);
            assert!(
                wait >= base && wait <= base + base / 4,
                "{attempt}: {wait:?}"
            );
        }
        assert!(backoff(30, initial, None) <= MAX_BACKOFF + MAX_BACKOFF / 4);
        let asked = Some(Duration::from_secs(3));
        assert_eq!(backoff(1, initial, asked), Duration::from_secs(3));
        assert!(retryable(StatusCode::TOO_MANY_REQUESTS) && retryable(StatusCode::BAD_GATEWAY));
        assert!(!retryable(StatusCode::UNAUTHORIZED) && !retryable(StatusCode::BAD_REQUEST));
    }
}
