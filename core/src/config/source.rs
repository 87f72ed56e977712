//! Where a resolved value came from: a key of a file (with its line), or a default. Messages
//! name it: `deny (usr/toolhost.toml:7 [tools.shell] policy)`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use super::locate::line_of;
use crate::layout::Location;

/// Where a value set in a configuration file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file, as messages name it (`usr/toolhost.toml`).
    pub file: PathBuf,
    /// The line of the key (1-based).
    pub line: usize,
    /// The tables the key is in: `["tools", "weather"]`.
    pub table: Vec<String>,
    /// The key: `policy`.
    pub key: String,
}

impl fmt::Display for Origin {
    /// `usr/toolhost.toml:12 [tools.weather] policy`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = Location::new(&self.file, Some(self.line));
        let (table, key) = (table_name(&self.table), key_name(&self.key));
        write!(f, "{at} {table} {key}")
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// No file sets it: a built-in default, described (`default: exec asks`).
    Default(&'static str),
    /// A key of a configuration file.
    File(Origin),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default(what) => f.write_str(what),
            Self::File(origin) => origin.fmt(f),
        }
    }
}

/// Every key set in the files read so far, by its path (`["tools", "weather", "policy"]`).
pub(super) type Origins = BTreeMap<Vec<String>, Origin>;

/// Records where each value of `doc` (the spanned tree of `file`) is. Tables are descended;
/// an array is one value, as it replaces the array of a more general file whole.
pub(super) fn record(file: &Path, text: &str, doc: &DeTable<'_>, out: &mut Origins) {
    record_in(file, text, doc, &mut Vec::new(), out);
}

fn record_in(
    file: &Path,
    text: &str,
    table: &DeTable<'_>,
    path: &mut Vec<String>,
    out: &mut Origins,
) {
    for (key, value) in table {
        let name = key.get_ref().to_string();
        if let DeValue::Table(inner) = value.get_ref() {
            path.push(name);
            record_in(file, text, inner, path, out);
            path.pop();
            continue;
        }
        let origin = Origin {
            file: file.to_owned(),
            line: line_of(text, key.span().start),
            table: path.clone(),
            key: name.clone(),
        };
        let mut keys = path.clone();
        keys.push(name);
        out.insert(keys, origin);
    }
}

/// A table's header as written: `[calls]`, `[tools.weather]`, `[tools."my.tool"]`.
pub(super) fn table_name(path: &[String]) -> String {
    let parts: Vec<String> = path.iter().map(|key| key_name(key)).collect();
    format!("[{}]", parts.join("."))
}

/// A key as written in a header: bare if it can be, else quoted.
pub(super) fn key_name(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match bare {
        true => key.to_owned(),
        false => format!("\"{}\"", key.escape_debug()),
    }
}

/// `text` with control characters escaped, so a message stays one line.
pub(super) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c.is_control() {
            true => out.extend(c.escape_debug()),
            false => out.push(c),
        }
    }
    out
}
