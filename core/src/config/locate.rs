//! Where in a file a mistake is, in words. The TOML reader gives the byte span of the key or
//! value it refused; this module finds that key in the file's spanned tree and writes one line:
//! `unknown key `timeout` in [calls] (expected one of: ...)`, or `[policy] exec = "maybe":
//! expected "allow", "ask" or "deny"`.

use std::ops::Range;
use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, ConfigErrorKind};
use super::source::{clean, key_name, table_name};

/// The keys of `toolhost.toml` outside every table (see `tables.rs`).
const TOP_LEVEL_KEYS: &[&str] = &["isolate", "pinning"];

/// The longest excerpt of a value shown in a message, in characters.
const EXCERPT: usize = 60;

pub(super) use crate::layout::line_of;

/// A file that is not valid TOML.
pub(super) fn syntax_error(file: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let line = error.span().map(|span| line_of(text, span.start));
    let message = error.message().trim().replace('\n', "; ");
    ConfigError::new(
        file,
        line,
        ConfigErrorKind::Syntax,
        format!("invalid TOML: {message}"),
    )
}

/// A file that is valid TOML but does not fit the schema; `doc` is the file's spanned tree.
pub(super) fn schema_error(
    file: &Path,
    text: &str,
    doc: &DeTable<'_>,
    error: &toml::de::Error,
) -> ConfigError {
    let message = error.message().trim().replace('\n', "; ");
    let Some(span) = error.span() else {
        return ConfigError::new(file, None, ConfigErrorKind::InvalidValue, message);
    };
    let line = Some(line_of(text, span.start));
    let (kind, message) = match find(doc, span.start, &mut Vec::new()) {
        Some(Found::Key {
            table,
            key,
            is_table,
        }) if !message.starts_with("unknown field") => {
            // A key the schema knows the place of but refuses itself (a source prefix of
            // `[packages.signers]` that can never match): its own reason.
            let place = match table.is_empty() {
                true => String::new(),
                false => format!("{} ", table_name(&table)),
            };
            let _ = is_table;
            let text = format!("{place}`{}`: {message}", clean(&key));
            (ConfigErrorKind::InvalidValue, text)
        }
        Some(Found::Key {
            table,
            key,
            is_table,
        }) => {
            let expected = expected_keys(&message);
            let what = if is_table { "table" } else { "key" };
            let place = match table.is_empty() {
                true => String::new(),
                false => format!(" in {}", table_name(&table)),
            };
            let expected = match expected.is_empty() {
                true => String::new(),
                false => format!(" (expected one of: {})", expected.join(", ")),
            };
            let key = clean(&key);
            // A top-level key written after a table header lands in that table.
            let hint = match (
                !table.is_empty() && !is_table,
                TOP_LEVEL_KEYS.contains(&key.as_str()),
            ) {
                (true, true) => format!(
                    "; `{key}` is a top-level key: move it above the first [table] of the file"
                ),
                _ => String::new(),
            };
            let text = format!("unknown {what} `{key}`{place}{expected}{hint}");
            (ConfigErrorKind::UnknownKey, text)
        }
        Some(Found::Value { table, key, span }) => {
            let prefix = match table.is_empty() {
                true => String::new(),
                false => format!("{} ", table_name(&table)),
            };
            let shown = excerpt(&text[span]);
            let text = format!(
                "{prefix}{} = {shown}: {}",
                key_name(&key),
                expectation(&message)
            );
            (ConfigErrorKind::InvalidValue, text)
        }
        None => (ConfigErrorKind::InvalidValue, expectation(&message)),
    };
    ConfigError::new(file, line, kind, message)
}

/// What sits at a byte offset of the file.
enum Found {
    /// A key: the tables it is in, and whether its value is a table.
    Key {
        table: Vec<String>,
        key: String,
        is_table: bool,
    },
    /// A value (or one element of an array value): the tables it is in, its key, its span.
    Value {
        table: Vec<String>,
        key: String,
        span: Range<usize>,
    },
}

/// The key or value of `table` (at any depth) whose span holds `at`; `path` is where `table`
/// is. Tables are searched whole (a `[header]` table's span does not cover its keys), then
/// taken as a value (an inline table where a string belongs).
fn find(table: &DeTable<'_>, at: usize, path: &mut Vec<String>) -> Option<Found> {
    for (key, value) in table {
        let name = key.get_ref().to_string();
        let is_table = matches!(value.get_ref(), DeValue::Table(_));
        if key.span().contains(&at) {
            let table = path.clone();
            return Some(Found::Key {
                table,
                key: name,
                is_table,
            });
        }
        if let DeValue::Table(inner) = value.get_ref() {
            path.push(name.clone());
            let found = find(inner, at, path);
            path.pop();
            if found.is_some() {
                return found;
            }
        }
        if !value.span().contains(&at) {
            continue;
        }
        let span = match value.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .map(|item| item.span())
                .find(|span| span.contains(&at))
                .unwrap_or(value.span()),
            _ => value.span(),
        };
        let table = path.clone();
        return Some(Found::Value {
            table,
            key: name,
            span,
        });
    }
    None
}

/// The keys a serde "unknown field" message lists:
/// ``unknown field `x`, expected one of `a`, `b` `` gives `[a, b]`.
fn expected_keys(message: &str) -> Vec<&str> {
    match message.split_once(", expected ") {
        Some((_, list)) => list.split('`').skip(1).step_by(2).collect(),
        None => Vec::new(),
    }
}

/// `expected ...`: what the reader wanted, without its own rendering of the value (the message
/// shows the value as written).
fn expectation(message: &str) -> String {
    let is_serde = ["invalid type: ", "invalid value: ", "invalid length "]
        .iter()
        .any(|p| message.starts_with(p));
    let wanted = match message.rfind(", expected ") {
        Some(at) if is_serde => &message[at + 2..],
        _ => message,
    };
    wanted
        .replace("expected a map", "expected a table")
        .replace("expected a sequence", "expected an array")
        .replace("expected a boolean", "expected true or false")
}

/// The value as written, on one line and at most [`EXCERPT`] characters.
fn excerpt(raw: &str) -> String {
    let first = raw.trim().lines().next().unwrap_or_default();
    let mut shown: String = clean(&first.chars().take(EXCERPT).collect::<String>());
    if first.chars().count() > EXCERPT || raw.trim().lines().count() > 1 {
        shown.push('…');
    }
    shown
}
