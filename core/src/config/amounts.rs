//! The numbers of `toolhost.toml`, each a type that checks its range while it is read (see
//! `tables.rs`): its `expecting` text is what the error message says is expected.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

/// A whole number of MiB, at least what a worker needs to start
/// ([`MIN_WORKER_MEMORY_MB`](super::MIN_WORKER_MEMORY_MB)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mebibytes(pub u64);

impl<'de> Deserialize<'de> for Mebibytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let what = "a whole number of MiB, enough for a worker to start";
        Whole {
            min: super::MIN_WORKER_MEMORY_MB,
            max: 1 << 40,
            what,
        }
        .read(d)
        .map(Self)
    }
}

/// A whole number of seconds, 1 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WholeSeconds(pub u64);

impl<'de> Deserialize<'de> for WholeSeconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let what = "a whole number of seconds";
        Whole {
            min: 1,
            max: 1 << 40,
            what,
        }
        .read(d)
        .map(Self)
    }
}

/// A number of seconds greater than 0, whole or not (`0.5`): at least 1 ms, at most
/// [`MAX_SECONDS`](super::numbers::MAX_SECONDS) (see [`numbers::seconds`](super::numbers::seconds)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seconds(pub Duration);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SecondsVisitor)
    }
}

struct SecondsVisitor;

impl SecondsVisitor {
    fn checked<E: de::Error>(value: f64) -> Result<Seconds, E> {
        super::numbers::seconds(value).map(Seconds).map_err(|e| {
            E::custom(format!(
                "expected {}: {e}",
                super::numbers::SECONDS_EXPECTED
            ))
        })
    }
}

impl Visitor<'_> for SecondsVisitor {
    type Value = Seconds;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(super::numbers::SECONDS_EXPECTED)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Seconds, E> {
        Self::checked(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Seconds, E> {
        Self::checked(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Seconds, E> {
        Self::checked(v)
    }
}

/// A whole number within `min..=max`; `what` is what the message says it is.
struct Whole {
    min: u64,
    max: u64,
    what: &'static str,
}

impl Whole {
    fn read<'de, D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for Whole {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {} or more", self.what, self.min)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        use super::numbers::{whole, NumberErrorKind};
        match whole(v.into(), self.min, self.max) {
            Ok(v) => Ok(v),
            Err(e) if e.kind() == NumberErrorKind::TooSmall => {
                Err(E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            Err(_) => {
                let (what, max) = (self.what, self.max);
                Err(E::custom(format!("expected {what}, at most {max}")))
            }
        }
    }
}

/// A whole number of retries or calls, 0 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Count(pub u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (min, max, what) = (0, u32::MAX.into(), "a whole number");
        let n = Whole { min, max, what }.read(d)?;
        Ok(Self(n as u32))
    }
}

/// A whole number, 1 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AtLeastOne(pub u32);

impl<'de> Deserialize<'de> for AtLeastOne {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (min, max, what) = (1, u32::MAX.into(), "a whole number");
        let n = Whole { min, max, what }.read(d)?;
        Ok(Self(n as u32))
    }
}

/// A whole number of milliseconds, 0 or more, at most
/// [`MAX_SECONDS`](super::numbers::MAX_SECONDS) seconds' worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Millis(pub Duration);

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let max = super::numbers::MAX_SECONDS * 1000;
        let (min, what) = (0, "a whole number of milliseconds");
        let n = Whole { min, max, what }.read(d)?;
        Ok(Self(Duration::from_millis(n)))
    }
}

/// How often metrics are exported: a whole number of milliseconds, 1 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ExportInterval(pub u64);

impl<'de> Deserialize<'de> for ExportInterval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let max = super::numbers::MAX_SECONDS * 1000;
        let (min, what) = (1, "a whole number of milliseconds");
        Whole { min, max, what }.read(d).map(Self)
    }
}

/// A whole number of bytes, 1 or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bytes(pub usize);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let max = usize::MAX.try_into().unwrap_or(u64::MAX);
        let what = "a whole number of bytes";
        let n = Whole { min: 1, max, what }.read(d)?;
        Ok(Self(usize::try_from(n).unwrap_or(usize::MAX)))
    }
}
