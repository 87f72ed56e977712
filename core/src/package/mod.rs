//! Plugin packages: a plugin folder (`tools/`, `extensions/<point>/`, `prompts/`,
//! `agents/<P>/`) with a manifest, `toolhost-plugin.toml`, shipped as one signed archive per
//! version and installed into `usr/plugins/<name>/`. The operator's guide and the manifest
//! format are in the book (docs/src/reference/packages.md).
//!
//! One concept per file: [`manifest`] (the format), [`archive`] (the deterministic tar.gz and
//! its safe unpacking), [`signature`] (minisign keys and signatures, the trusted keys),
//! [`pack`] (a plugin folder into an archive), [`mcpb`] (an MCP Bundle of it), [`install`] (verify, install atomically,
//! remove) and [`lock`] (`usr/packages.lock`).

/// What a package's name may be, for the errors that refuse one: a folder name that `.` and
/// `..` are not.
pub const NAME_RULE: &str =
    "a folder name: letters, digits, '_', '-' and '.', not starting with '.' (so not `.` or `..`)";

pub mod archive;
mod error;
pub mod install;
mod installed;
pub mod lock;
pub mod manifest;
pub mod mcpb;
pub mod pack;
pub mod signature;
mod verify;

pub use error::{PackageError, PackageErrorKind};
pub use install::{Policy, Replace, Verified};
pub use lock::{Locked, PackageLock};
pub use manifest::{Manifest, MANIFEST_FILE_NAME};

/// Text from a package (its description, a file's name, a source), shown on the terminal
/// with every control character (terminal escapes, newlines) and every bidirectional or
/// invisible formatting character escaped (`\u{1b}`, `\u{202e}`): a package cannot draw or
/// reorder the lines around it.
///
/// ```
/// use toolhost::package::Shown;
/// assert_eq!(Shown("ok\u{1b}[2K\u{202e}").to_string(), "ok\\u{1b}[2K\\u{202e}");
/// assert_eq!(Shown("Greets — someone.").to_string(), "Greets — someone.");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

/// Whether `c` must be escaped when text from a package is shown: a control character, or a
/// bidirectional or invisible formatting one.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match needs_escape(c) {
                true => write!(f, "\\u{{{:x}}}", c as u32)?,
                false => std::fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// The target triple this host was built for (`x86_64-unknown-linux-gnu`): the libraries of a
/// package it installs.
pub fn host_target() -> &'static str {
    env!("TOOLHOST_TARGET")
}

pub(crate) use crate::hash::sha256_hex;
