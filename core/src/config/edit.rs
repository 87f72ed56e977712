//! Saving a decision into a configuration file: `[tools.<tool>] policy = "allow"` when a person
//! answers "always" to an approval. The rest of the file keeps its comments and formatting
//! (`toml_edit`), and the file is replaced atomically: a reader sees the old file or the new
//! one, never half of it.

use std::path::Path;

use toml_edit::{DocumentMut, InlineTable, Item, Table, Value};

use super::error::{ConfigError, ConfigErrorKind};
use super::load::parse;
use super::source::{key_name, Origins};
use super::PolicyDecision;
use crate::layout::is_safe_name;
use crate::layout::write_atomically;
use crate::layout::{read_text, ReadErrorKind};

/// Sets `[tools.<tool>] policy = "<decision>"` in the configuration file at `path` (created,
/// with its folder, if missing), keeping the file's comments and formatting, and a comment
/// after an existing `policy` value.
///
/// The file is read as [`Config::load`](super::Config::load) reads it (a regular file, here of
/// at most [`DEFAULT_MAX_TEXT_BYTES`](crate::layout::DEFAULT_MAX_TEXT_BYTES)) and checked the same way,
/// before and after the change: a file with a mistake is left alone, and the error names it. The new text is written
/// to a temporary file in the same folder, flushed to the disk, and renamed over the file (over
/// a symbolic link's target, if `path` is a link). Two saves at the same moment may lose one of
/// the two changes, never the file.
///
/// ```
/// use toolhost::config::{save_tool_policy, PolicyDecision};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("toolhost-save-doc-{}", std::process::id()));
/// let path = dir.join("toolhost.toml");
/// save_tool_policy(&path, "weather", PolicyDecision::Allow)?;
/// assert_eq!(std::fs::read_to_string(&path)?, "[tools.weather]\npolicy = \"allow\"\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(()) }
/// ```
pub fn save_tool_policy(
    path: &Path,
    tool: &str,
    decision: PolicyDecision,
) -> Result<(), ConfigError> {
    save_tool_key(path, tool, "policy", decision)
}

/// Sets `[tools.<tool>] mcp_policy = "<decision>"` (the policy for MCP clients, see
/// [`Config::mcp_policy`](super::Config::mcp_policy)) as [`save_tool_policy`] sets `policy`.
pub fn save_tool_mcp_policy(
    path: &Path,
    tool: &str,
    decision: PolicyDecision,
) -> Result<(), ConfigError> {
    save_tool_key(path, tool, "mcp_policy", decision)
}

fn save_tool_key(
    path: &Path,
    tool: &str,
    key: &str,
    decision: PolicyDecision,
) -> Result<(), ConfigError> {
    let setting = format!("[tools.{}] {key}", key_name(tool));
    if !is_safe_name(tool) {
        let message = format!("cannot save {setting}: not a tool name");
        return Err(ConfigError::new(
            path,
            None,
            ConfigErrorKind::InvalidValue,
            message,
        ));
    }
    let cap = crate::layout::DEFAULT_MAX_TEXT_BYTES;
    let text = match read_text(path, cap, "HostOptions::max_text_bytes") {
        Ok(text) => text,
        Err(e) if e.kind == ReadErrorKind::Missing => String::new(),
        Err(e) => return Err(ConfigError::unreadable(path, &e)),
    };
    parse(path, &text, &mut Origins::new())?;
    let failed = |kind, why: &dyn std::fmt::Display| {
        ConfigError::new(path, None, kind, format!("cannot save {setting}: {why}"))
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| failed(ConfigErrorKind::Syntax, &e))?;
    if set_policy(&mut doc, tool, key, decision).is_none() {
        let why = "[tools] or its entry for the tool is not a table";
        return Err(failed(ConfigErrorKind::InvalidValue, &why));
    }
    let text = doc.to_string();
    parse(path, &text, &mut Origins::new())?;
    write_atomically(path, text.as_bytes()).map_err(|e| failed(ConfigErrorKind::Write, &e))
}

/// Sets `tools.<tool>.<key>` in `doc`, making the tables it needs; `None` if one of them is
/// there but is not a table.
fn set_policy(
    doc: &mut DocumentMut,
    tool: &str,
    key: &str,
    decision: PolicyDecision,
) -> Option<()> {
    let tools = child_table(doc.as_item_mut(), "tools", true)?;
    let entry = child_table(tools, tool, false)?.as_table_like_mut()?;
    match entry.get_mut(key) {
        Some(Item::Value(value)) => {
            // Keep the comment after the old value, and the spacing around it.
            let decor = value.decor().clone();
            *value = Value::from(decision.as_str());
            *value.decor_mut() = decor;
        }
        _ => {
            entry.insert(key, toml_edit::value(decision.as_str()));
        }
    }
    Some(())
}

/// The table at `key` in the table `parent`, made if missing in the same style as its parent
/// (inline in an inline table, dotted in a dotted one); `implicit`: a new one has no header of
/// its own (`[tools.weather]` without a `[tools]` line).
fn child_table<'a>(parent: &'a mut Item, key: &str, implicit: bool) -> Option<&'a mut Item> {
    let inline = parent.is_inline_table();
    let dotted = parent.as_table_like().is_some_and(|t| t.is_dotted());
    let child = parent.as_table_like_mut()?.entry(key).or_insert_with(|| {
        if inline {
            return Item::Value(Value::InlineTable(InlineTable::new()));
        }
        let mut table = Table::new();
        table.set_implicit(implicit);
        table.set_dotted(dotted);
        Item::Table(table)
    });
    child.is_table_like().then_some(child)
}
