//! Reading the configuration files through the layout's safe reader, checking each against the
//! schema, and layering them: the profile's file over the global one, key by key.

use std::path::{Path, PathBuf};

use toml::de::DeTable;

use super::error::{ConfigError, ConfigErrorKind};
use super::locate::{schema_error, syntax_error};
use super::source::{record, Origins};
use super::tables::FileConfig;
use crate::layout::is_safe_name;
use crate::layout::{read_text, Layout, ReadErrorKind};

/// The files of a profile, merged: the values, where each one is, the files read.
#[derive(Debug, Clone, Default)]
pub(super) struct Layered {
    pub values: FileConfig,
    pub origins: Origins,
    pub files: Vec<PathBuf>,
}

/// Reads `usr/toolhost.toml`, then `usr/agents/<profile>/toolhost.toml` over it (only the
/// first without a profile); a missing file is skipped. Each file is read whole (a regular
/// file of at most `max_text_bytes`) and checked on its own, so a mistake names the file it
/// is in.
pub(super) fn load(
    layout: &Layout,
    profile: Option<&str>,
    max_text_bytes: u64,
) -> Result<Layered, ConfigError> {
    let mut paths = vec![layout.config_file()];
    if let Some(profile) = profile {
        check_profile(profile)?;
        paths.push(layout.profile_config_file(profile));
    }
    let mut merged = toml::Table::new();
    let mut layered = Layered::default();
    for path in paths {
        let label = path.strip_prefix(layout.root()).unwrap_or(&path);
        let text = match read_text(&path, max_text_bytes, "HostOptions::max_text_bytes") {
            Ok(text) => text,
            Err(e) if e.kind == ReadErrorKind::Missing => continue,
            Err(e) => return Err(ConfigError::unreadable(label, &e)),
        };
        let table = parse(label, &text, &mut layered.origins)?;
        if path != layout.config_file() && table.contains_key("telemetry") {
            let message =
                "[telemetry] is host-wide: set it in usr/toolhost.toml, not in a profile's file";
            let line = text.lines().position(|l| {
                let l = l.trim_start();
                l.starts_with("[telemetry") || l.starts_with("telemetry")
            });
            let kind = ConfigErrorKind::InvalidValue;
            return Err(ConfigError::new(label, line.map(|l| l + 1), kind, message));
        }
        overlay(&mut merged, table);
        layered.files.push(path.clone());
    }
    // Every key and value was checked in its own file, and merging only combines them.
    layered.values = merged.try_into().map_err(|e: toml::de::Error| {
        let file = layered.files.last().map_or(Path::new(""), PathBuf::as_path);
        ConfigError::new(file, None, ConfigErrorKind::InvalidValue, e.message())
    })?;
    Ok(layered)
}

/// Refuses a profile name that is not a safe name.
fn check_profile(profile: &str) -> Result<(), ConfigError> {
    if is_safe_name(profile) {
        return Ok(());
    }
    let message = format!(
        "invalid profile name '{}': use letters, digits, '_', '-' and '.' only",
        profile.escape_debug()
    );
    let file = Path::new("usr/agents");
    Err(ConfigError::new(
        file,
        None,
        ConfigErrorKind::InvalidProfile,
        message,
    ))
}

/// Checks the text of one file (`file` as messages name it) against the schema, records where
/// each of its values is into `origins`, and gives its table.
pub(super) fn parse(
    file: &Path,
    text: &str,
    origins: &mut Origins,
) -> Result<toml::Table, ConfigError> {
    let doc = DeTable::parse(text).map_err(|e| syntax_error(file, text, &e))?;
    if let Err(e) = toml::from_str::<FileConfig>(text) {
        return Err(schema_error(file, text, doc.get_ref(), &e));
    }
    record(file, text, doc.get_ref(), origins);
    toml::from_str(text).map_err(|e| syntax_error(file, text, &e))
}

/// Lays `top` over `base`: tables merge key by key, at any depth; any other value of `top`
/// (an array too) replaces the one in `base`.
pub(super) fn overlay(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(under)), toml::Value::Table(over)) => overlay(under, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}
