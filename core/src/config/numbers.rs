//! Numbers from outside the host: durations and counts read from a configuration file
//! (`toolhost.toml`, `models.toml`), the command line, a plugin's metadata or a peer (an HTTP
//! header such as `Retry-After`, a model's usage counts). Every one goes through a conversion
//! here, so none can panic the host (`Duration::from_secs_f64` of `NaN`, an `Instant` plus 1e19
//! seconds) or mean something it does not say (`1e-10` seconds rounding to no deadline at all).
//!
//! Two kinds of conversion:
//!
//! - **checked**, for what a person wrote ([`seconds`], [`millis`], [`whole`]): a value that is
//!   not a finite number, is negative, rounds to zero or is above the bound is refused with a
//!   [`NumberError`] that names the bound; the configuration check turns it into its usual one
//!   line with the file and the key;
//! - **saturating**, for what a peer sends or code computes ([`saturating_seconds`],
//!   [`capped_seconds`], [`later`]): never fails; a value past a bound is the bound.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use toolhost::config::numbers::{self, MAX_DURATION};
//!
//! assert_eq!(numbers::seconds(2.5), Ok(Duration::from_millis(2500)));
//! assert!(numbers::seconds(f64::NAN).is_err());
//! assert!(numbers::seconds(1e-10).is_err()); // rounds to zero
//! assert!(numbers::seconds(1e19).is_err()); // past MAX_DURATION
//! assert_eq!(numbers::saturating_seconds(1e300), Some(MAX_DURATION));
//! assert_eq!(numbers::saturating_seconds(-1.0), Some(Duration::ZERO));
//! assert_eq!(numbers::saturating_seconds(f64::NAN), None);
//! let now = Instant::now();
//! assert_eq!(numbers::later(now, Duration::MAX), numbers::later(now, MAX_DURATION));
//! ```

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

/// The most seconds a duration from outside may be: 1,000,000,000 (about 31 years). Any
/// deadline, cool-down or wait this long is "never" for a running host, and an `Instant`
/// plus this much cannot overflow.
pub const MAX_SECONDS: u64 = 1_000_000_000;

/// [`MAX_SECONDS`] as a duration.
pub const MAX_DURATION: Duration = Duration::from_secs(MAX_SECONDS);

/// The shortest duration a person may write: 1 ms (`0.001` seconds). Anything shorter would
/// round to no time at all (timers count whole milliseconds).
pub const MIN_DURATION: Duration = Duration::from_millis(1);

/// What is wrong with a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NumberErrorKind {
    /// `nan`, `inf` or `-inf`.
    NotFinite,
    /// Below zero, or zero where it must be more.
    TooSmall,
    /// Above zero but rounding to zero (`1e-10` seconds).
    RoundsToZero,
    /// Above the bound.
    TooLarge,
}

/// A number that was refused: what it was, and the bound it broke (the message names it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct NumberError {
    kind: NumberErrorKind,
    message: String,
}

impl NumberError {
    fn new(kind: NumberErrorKind, message: String) -> Self {
        Self { kind, message }
    }

    /// What is wrong.
    pub fn kind(&self) -> NumberErrorKind {
        self.kind
    }
}

/// What a number of seconds must be, as messages say it.
pub const SECONDS_EXPECTED: &str =
    "a number of seconds from 0.001 to 1000000000 (0.5 is half a second)";

/// A number in a message: `nan`, `inf`, `-1`, `1e-10`, `0.5`.
pub(crate) struct Shown(pub(crate) f64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("nan"),
            v if v.is_infinite() && v > 0.0 => f.write_str("inf"),
            v if v.is_infinite() => f.write_str("-inf"),
            0.0 => f.write_str("0"),
            v if v.abs() >= 1e15 || v.abs() < 1e-4 => write!(f, "{v:e}"),
            v => write!(f, "{v}"),
        }
    }
}

fn refuse<T>(kind: NumberErrorKind, message: String) -> Result<T, NumberError> {
    Err(NumberError::new(kind, message))
}

/// A number of seconds a person wrote, greater than 0 (whole or not): at least
/// [`MIN_DURATION`], at most [`MAX_DURATION`] (see [`SECONDS_EXPECTED`]). The error says why
/// not, without the value (the caller shows it as written).
pub fn seconds(value: f64) -> Result<Duration, NumberError> {
    use NumberErrorKind::*;
    if !value.is_finite() {
        return refuse(NotFinite, "not a finite number".into());
    }
    if value <= 0.0 {
        return refuse(TooSmall, "not greater than 0".into());
    }
    if value < MIN_DURATION.as_secs_f64() {
        return refuse(
            RoundsToZero,
            "below 0.001 s, which rounds to no time at all".into(),
        );
    }
    if value > MAX_DURATION.as_secs_f64() {
        let message = format!("above the most, {MAX_SECONDS} s (about 31 years)");
        return refuse(TooLarge, message);
    }
    Duration::try_from_secs_f64(value)
        .or_else(|_| refuse(NotFinite, "not a number of seconds".into()))
}

/// A whole number of milliseconds a person wrote, 0 or more: at most [`MAX_DURATION`].
pub fn millis(value: u64) -> Result<Duration, NumberError> {
    let max = MAX_SECONDS.saturating_mul(1000);
    if value > max {
        let message = format!("above the most, {max} ms (about 31 years)");
        return refuse(NumberErrorKind::TooLarge, message);
    }
    Ok(Duration::from_millis(value))
}

/// A whole number a person wrote, within `min..=max`.
pub fn whole(value: i128, min: u64, max: u64) -> Result<u64, NumberError> {
    if value < i128::from(min) {
        return refuse(NumberErrorKind::TooSmall, format!("below the least, {min}"));
    }
    match u64::try_from(value) {
        Ok(v) if v <= max => Ok(v),
        _ => refuse(NumberErrorKind::TooLarge, format!("above the most, {max}")),
    }
}

/// A finite number a person wrote, within `min..=max`.
pub fn finite(value: f64, min: f64, max: f64) -> Result<f64, NumberError> {
    use NumberErrorKind::*;
    match value {
        v if !v.is_finite() => refuse(NotFinite, "not a finite number".into()),
        v if v < min => refuse(TooSmall, format!("below the least, {}", Shown(min))),
        v if v > max => refuse(TooLarge, format!("above the most, {}", Shown(max))),
        v => Ok(v),
    }
}

/// A number of seconds a peer sent (a `Retry-After` header): `None` if it is not a number
/// (`nan`), zero if it is negative, [`MAX_DURATION`] if it is larger (`inf`, `1e300`).
pub fn saturating_seconds(value: f64) -> Option<Duration> {
    if value.is_nan() {
        return None;
    }
    let capped = value.clamp(0.0, MAX_DURATION.as_secs_f64());
    Some(Duration::try_from_secs_f64(capped).unwrap_or(MAX_DURATION))
}

/// A duration from a plugin's metadata or the host's own settings, at most [`MAX_DURATION`].
pub fn capped(duration: Duration) -> Duration {
    duration.min(MAX_DURATION)
}

/// A whole number of seconds (a plugin's declared `timeout_seconds`), at most
/// [`MAX_DURATION`].
pub fn capped_seconds(seconds: u64) -> Duration {
    Duration::from_secs(seconds.min(MAX_SECONDS))
}

/// A point in time that can be moved later by a duration without overflowing.
pub trait Later: Copy {
    /// `self + duration`, if it can be represented.
    fn checked_later(self, duration: Duration) -> Option<Self>;
}

impl Later for Instant {
    fn checked_later(self, duration: Duration) -> Option<Self> {
        self.checked_add(duration)
    }
}

impl Later for SystemTime {
    fn checked_later(self, duration: Duration) -> Option<Self> {
        self.checked_add(duration)
    }
}

impl Later for tokio::time::Instant {
    fn checked_later(self, duration: Duration) -> Option<Self> {
        self.checked_add(duration)
    }
}

/// `at + after`, with `after` capped at [`MAX_DURATION`]: never panics (where even that does not
/// fit, a day later, else `at` itself).
pub fn later<T: Later>(at: T, after: Duration) -> T {
    at.checked_later(capped(after))
        .or_else(|| at.checked_later(Duration::from_secs(86_400)))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_seconds_refuse_every_extreme_and_name_the_bound() {
        for (value, kind) in [
            (f64::NAN, NumberErrorKind::NotFinite),
            (f64::INFINITY, NumberErrorKind::NotFinite),
            (f64::NEG_INFINITY, NumberErrorKind::NotFinite),
            (-0.0, NumberErrorKind::TooSmall),
            (0.0, NumberErrorKind::TooSmall),
            (-1.0, NumberErrorKind::TooSmall),
            (1e-300, NumberErrorKind::RoundsToZero),
            (1e-10, NumberErrorKind::RoundsToZero),
            (1e300, NumberErrorKind::TooLarge),
            (1e19, NumberErrorKind::TooLarge),
            (u64::MAX as f64, NumberErrorKind::TooLarge),
        ] {
            let error = seconds(value).expect_err("refused");
            assert_eq!(error.kind(), kind, "{value}: {error}");
        }
        assert!(seconds(1e19)
            .unwrap_err()
            .to_string()
            .contains("1000000000 s"));
        assert_eq!(seconds(0.001), Ok(MIN_DURATION));
        assert_eq!(seconds(1e9), Ok(MAX_DURATION));
        assert_eq!(
            millis(u64::MAX).unwrap_err().kind(),
            NumberErrorKind::TooLarge
        );
        assert_eq!(millis(0), Ok(Duration::ZERO));
    }

    #[test]
    fn saturating_conversions_never_fail_and_stay_within_the_bound() {
        for value in [f64::INFINITY, 1e300, 1e19, u64::MAX as f64] {
            assert_eq!(saturating_seconds(value), Some(MAX_DURATION), "{value}");
        }
        for value in [f64::NEG_INFINITY, -1.0, -0.0, 0.0] {
            assert_eq!(saturating_seconds(value), Some(Duration::ZERO), "{value}");
        }
        assert_eq!(saturating_seconds(f64::NAN), None);
        assert_eq!(saturating_seconds(1e-300), Some(Duration::ZERO));
        assert_eq!(capped_seconds(u64::MAX), MAX_DURATION);
        let now = Instant::now();
        assert_eq!(later(now, Duration::MAX), now + MAX_DURATION);
        let wall = SystemTime::now();
        assert_eq!(later(wall, Duration::MAX), wall + MAX_DURATION);
        let tokio_now = tokio::time::Instant::now();
        assert_eq!(later(tokio_now, Duration::MAX), tokio_now + MAX_DURATION);
    }

    #[test]
    fn whole_and_finite_numbers_within_their_range() {
        assert_eq!(whole(5, 1, 10), Ok(5));
        assert_eq!(
            whole(0, 1, 10).unwrap_err().kind(),
            NumberErrorKind::TooSmall
        );
        let huge = i128::from(u64::MAX) + 1;
        let error = whole(huge, 1, u64::MAX).unwrap_err();
        assert_eq!(error.kind(), NumberErrorKind::TooLarge);
        assert!(finite(f64::NAN, 0.0, 2.0).is_err());
        assert_eq!(
            finite(2.5, 0.0, 2.0).unwrap_err().to_string(),
            "above the most, 2"
        );
        assert_eq!(finite(0.7, 0.0, 2.0), Ok(0.7));
    }
}
