//! Whether pinning is on, and whether only installed packages may load (`[packages]
//! only_installed`), also when the configuration has a mistake: both must fail closed. A
//! mistake elsewhere in the file (a typo in `[calls]`) does not switch either off; a file in
//! which `pinning` cannot be read at all (its own line is broken) refuses every library until
//! it is fixed; a mistake inside `[packages]` (a typo'd key, a value of the wrong type) turns
//! `only_installed` on until it is fixed; and a file that never mentions either leaves it off
//! without a word about it.

use std::path::Path;

use super::{Config, ConfigError};
use crate::layout::{read_text, Layout, ReadErrorKind};

/// What the configuration says about pinning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pinning {
    /// `pinning = true`.
    On,
    /// `pinning = false`, or no `pinning` key.
    Off,
    /// The configuration has a mistake that hides what `pinning` is: the message says which,
    /// and what to fix.
    Unknown(String),
}

impl Pinning {
    /// What `usr/toolhost.toml` (and the default profile's file over it) say about pinning.
    /// With a mistake in either, the `pinning` key is read from the files as far as they can
    /// be read; `Err` carries the mistake, for the caller to report along with the verdict.
    pub(crate) fn read(
        layout: &Layout,
        max_text_bytes: u64,
    ) -> Result<Pinning, (Pinning, ConfigError)> {
        let error = match Config::load(layout, "default", max_text_bytes) {
            Ok(config) if config.pinning() => return Ok(Pinning::On),
            Ok(_) => return Ok(Pinning::Off),
            Err(error) => error,
        };
        let mut verdict = Pinning::Off;
        for path in [layout.config_file(), layout.profile_config_file("default")] {
            // The more specific file wins, as in the merged configuration.
            match file_says(&path, max_text_bytes) {
                Said::Nothing => {}
                Said::Is(on) => verdict = if on { Pinning::On } else { Pinning::Off },
                Said::Unreadable => {
                    let message = format!(
                        "{error}; pinning cannot be read from it, so no library is loaded until \
                         the file is fixed (or pass --allow-unpinned while developing)"
                    );
                    return Err((Pinning::Unknown(message), error));
                }
            }
        }
        Err((verdict, error))
    }
}

/// What one file says about `pinning`.
enum Said {
    /// No file, or no `pinning` key in it.
    Nothing,
    /// `pinning = true` or `false`.
    Is(bool),
    /// The file mentions pinning but its value cannot be read (or the file cannot be).
    Unreadable,
}

fn file_says(path: &Path, max_text_bytes: u64) -> Said {
    let text = match read_text(path, max_text_bytes, "HostOptions::max_text_bytes") {
        Ok(text) => text,
        Err(e) if e.kind == ReadErrorKind::Missing => return Said::Nothing,
        Err(_) => return Said::Unreadable,
    };
    // Valid TOML with a mistake in the schema: the top-level key as it is.
    if let Ok(table) = text.parse::<toml::Table>() {
        return match table.get("pinning") {
            None => Said::Nothing,
            Some(toml::Value::Boolean(on)) => Said::Is(*on),
            Some(_) => Said::Unreadable,
        };
    }
    // Not TOML: a `pinning = true|false` line above the first table, else unknown if the
    // file mentions pinning anywhere.
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            break;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() == "pinning" {
            let value = value.split('#').next().unwrap_or_default().trim();
            return match value {
                "true" => Said::Is(true),
                "false" => Said::Is(false),
                _ => Said::Unreadable,
            };
        }
    }
    match text.contains("pinning") {
        true => Said::Unreadable,
        false => Said::Nothing,
    }
}

/// What the configuration says about `[packages] only_installed`, read as [`Pinning::read`]
/// reads `pinning`: `Ok` from a file without mistakes; with a mistake, `Err` carries the
/// verdict (what the files still say, and `true` when `[packages]` itself has the mistake: a
/// typo'd key there may be the `only_installed` meant) with a one-line message saying so.
pub(crate) fn only_installed(layout: &Layout, max_text_bytes: u64) -> Result<bool, (bool, String)> {
    let error = match Config::load(layout, "default", max_text_bytes) {
        Ok(config) => return Ok(config.only_installed()),
        Err(error) => error,
    };
    let mut verdict = false;
    for path in [layout.config_file(), layout.profile_config_file("default")] {
        match packages_say(&path, max_text_bytes) {
            Said::Nothing => {}
            Said::Is(on) => verdict = on,
            Said::Unreadable => {
                let message = format!(
                    "{error}; [packages] cannot be read from it, so only_installed is taken as \
                     true (only libraries of installed packages load under usr/) until the file \
                     is fixed"
                );
                return Err((true, message));
            }
        }
    }
    let message = match verdict {
        true => {
            format!("{error}; [packages] only_installed stays on (the file still says so): fix it")
        }
        false => error.to_string(),
    };
    Err((verdict, message))
}

/// What one file says about `[packages] only_installed`.
fn packages_say(path: &Path, max_text_bytes: u64) -> Said {
    const KEYS: [&str; 3] = ["require_signature", "only_installed", "signers"];
    let text = match read_text(path, max_text_bytes, "HostOptions::max_text_bytes") {
        Ok(text) => text,
        Err(e) if e.kind == ReadErrorKind::Missing => return Said::Nothing,
        Err(_) => return Said::Unreadable,
    };
    // Valid TOML with a mistake in the schema: the table as it is. A key of `[packages]` the
    // schema does not know, or one of a wrong type, hides what was meant.
    if let Ok(table) = text.parse::<toml::Table>() {
        let packages = match table.get("packages") {
            None => return Said::Nothing,
            Some(toml::Value::Table(packages)) => packages,
            Some(_) => return Said::Unreadable,
        };
        let typo = packages.iter().any(|(key, value)| match key.as_str() {
            "require_signature" => !value.is_bool(),
            "signers" => !value.is_table(),
            "only_installed" => false,
            _ => true,
        });
        return match packages.get("only_installed") {
            _ if typo => Said::Unreadable,
            Some(toml::Value::Boolean(on)) => Said::Is(*on),
            Some(_) => Said::Unreadable,
            None => Said::Nothing,
        };
    }
    // Not TOML: unknown if the file mentions the table or the key anywhere.
    match text.contains("packages") || KEYS.iter().any(|key| text.contains(key)) {
        true => Said::Unreadable,
        false => Said::Nothing,
    }
}
