//! MCP resources from the layers: every file of a layer's `resources/` folder (its subfolders
//! too), the first occurrence of a URI winning as for tools. A file's URI is
//! `toolhost://resources/<path under resources/>` unless `resources/resources.toml` gives it
//! another, with a name and a description; that file also declares templates, whose text gets
//! the URI's variables filled in:
//!
//! ```toml
//! [[resource]]
//! uri = "test://static-text"
//! file = "static-text.txt"          # under this resources/ folder
//! description = "A text resource"   # optional, as are `name` and `mime_type`
//!
//! [[template]]
//! uri_template = "test://template/{id}/data"
//! name = "template-data"
//! mime_type = "application/json"
//! text = '{"id": "{id}"}'
//! values = { id = ["123", "456"] }  # what completion/complete offers for each variable
//! ```
//!
//! A manifest that cannot be read is left out, with one warning naming it and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;
use rmcp::model::{ReadResourceResult, Resource, ResourceTemplate};
use rmcp::ErrorData;
use serde::Deserialize;
use serde_json::json;
use toolhost::Host;

use crate::prompts::without_nulls;

/// The manifest's name in a `resources/` folder (never a resource itself).
pub(crate) const MANIFEST: &str = "resources.toml";

/// The URI of a file that the manifest does not name: this, then its path.
const FILE_URI_PREFIX: &str = "toolhost://resources/";

/// The largest resource read.
const MAX_RESOURCE_BYTES: u64 = 16 << 20;

/// How deep subfolders of `resources/` are looked into.
const MAX_DEPTH: usize = 8;

/// MCP's error code for a resource that does not exist.
const RESOURCE_NOT_FOUND: i32 = -32002;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default, rename = "resource")]
    resources: Vec<Entry>,
    #[serde(default, rename = "template")]
    templates: Vec<Template>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    uri: String,
    file: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Template {
    uri_template: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    text: String,
    #[serde(default)]
    values: BTreeMap<String, Vec<String>>,
}

/// One resource: where its bytes are and what it says about itself.
#[derive(Debug, Clone)]
struct Found {
    uri: String,
    path: PathBuf,
    name: String,
    description: Option<String>,
    mime_type: String,
}

/// Every resource and template of `profile`, the first occurrence of each URI winning.
fn collect(host: &Host, profile: &str) -> (BTreeMap<String, Found>, Vec<Template>) {
    let mut found = BTreeMap::new();
    let mut templates: Vec<Template> = Vec::new();
    for layer in host.layers(profile).iter() {
        let dir = layer.resources_dir();
        if !dir.is_dir() {
            continue;
        }
        let manifest = read_manifest(&dir.join(MANIFEST));
        let mut named = std::collections::HashSet::new();
        for entry in manifest.resources {
            let path = dir.join(&entry.file);
            named.insert(path.clone());
            let name = entry.name.unwrap_or_else(|| entry.file.clone());
            let mime_type = entry.mime_type.unwrap_or_else(|| mime_type(&path));
            found.entry(entry.uri.clone()).or_insert(Found {
                uri: entry.uri,
                path,
                name,
                description: entry.description,
                mime_type,
            });
        }
        for template in manifest.templates {
            if !templates
                .iter()
                .any(|t| t.uri_template == template.uri_template)
            {
                templates.push(template);
            }
        }
        let mut files = Vec::new();
        walk(&dir, 0, &mut files);
        for path in files {
            if named.contains(&path) || path == dir.join(MANIFEST) {
                continue;
            }
            let Ok(relative) = path.strip_prefix(&dir) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            let uri = format!("{FILE_URI_PREFIX}{relative}");
            let mime_type = mime_type(&path);
            found.entry(uri.clone()).or_insert(Found {
                uri,
                path,
                name: relative.clone(),
                description: Some(format!("{relative} of {}", layer.label)),
                mime_type,
            });
        }
    }
    (found, templates)
}

fn read_manifest(path: &Path) -> Manifest {
    if !path.exists() {
        return Manifest::default();
    }
    let read = toolhost::read_text(path, MAX_RESOURCE_BYTES, "resources manifest")
        .map_err(|e| e.to_string())
        .and_then(|text| {
            toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))
        });
    read.unwrap_or_else(|e| {
        tracing::warn!("skipping MCP resources manifest {e}");
        Manifest::default()
    })
}

/// The regular files under `dir`, hidden ones left out.
fn walk(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => walk(&path, depth + 1, files),
            Ok(_) if path.is_file() => files.push(path),
            _ => {}
        }
    }
}

/// The resources `profile` offers, sorted by URI.
pub(crate) fn list(host: &Host, profile: &str) -> Vec<Resource> {
    collect(host, profile)
        .0
        .into_values()
        .filter_map(|found| {
            let resource = json!({
                "uri": found.uri,
                "name": found.name,
                "description": found.description,
                "mimeType": found.mime_type,
            });
            serde_json::from_value(without_nulls(resource)).ok()
        })
        .collect()
}

/// The resource templates `profile` offers.
pub(crate) fn templates(host: &Host, profile: &str) -> Vec<ResourceTemplate> {
    collect(host, profile)
        .1
        .into_iter()
        .filter_map(|t| {
            let template = json!({
                "uriTemplate": t.uri_template,
                "name": t.name,
                "description": t.description,
                "mimeType": t.mime_type,
            });
            serde_json::from_value(without_nulls(template)).ok()
        })
        .collect()
}

/// Whether `uri` is a resource of `profile` (a file, or a URI a template matches).
pub(crate) fn exists(host: &Host, profile: &str, uri: &str) -> bool {
    let (found, templates) = collect(host, profile);
    found.contains_key(uri)
        || templates
            .iter()
            .any(|t| matches(&t.uri_template, uri).is_some())
}

/// The error for a URI that is not a resource.
pub(crate) fn not_found(uri: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode(RESOURCE_NOT_FOUND),
        format!("resource not found: {}", super::echo::echoed(uri)),
        Some(json!({"uri": super::echo::echoed(uri)})),
    )
}

/// Reads the resource `uri`: a file's text (or its bytes, base64, when it is not text), or a
/// template's text with the URI's variables filled in.
pub(crate) fn read(host: &Host, profile: &str, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let (found, templates) = collect(host, profile);
    let contents = if let Some(found) = found.get(uri) {
        let bytes = read_bytes(&found.path, MAX_RESOURCE_BYTES)
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let binary = ["image/", "audio/", "video/", "application/octet-stream"]
            .iter()
            .any(|p| found.mime_type.starts_with(p));
        match (binary, String::from_utf8(bytes)) {
            (false, Ok(text)) => json!({"uri": uri, "mimeType": found.mime_type, "text": text}),
            (_, Ok(text)) => {
                json!({"uri": uri, "mimeType": found.mime_type, "blob": b64(text.as_bytes())})
            }
            (_, Err(e)) => {
                json!({"uri": uri, "mimeType": found.mime_type, "blob": b64(e.as_bytes())})
            }
        }
    } else {
        let Some((template, values)) = templates
            .iter()
            .find_map(|t| matches(&t.uri_template, uri).map(|v| (t, v)))
        else {
            return Err(not_found(uri));
        };
        let mut text = template.text.clone();
        for (name, value) in &values {
            text = text.replace(&format!("{{{name}}}"), value);
        }
        json!({"uri": uri, "mimeType": template.mime_type, "text": text})
    };
    let result = json!({"contents": [without_nulls(contents)]});
    serde_json::from_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The values of variable `name` of the template `uri_template` that start with `typed`.
pub(crate) fn complete(
    host: &Host,
    profile: &str,
    uri_template: &str,
    name: &str,
    typed: &str,
) -> Vec<String> {
    let typed = typed.to_lowercase();
    collect(host, profile)
        .1
        .into_iter()
        .filter(|t| t.uri_template == uri_template)
        .flat_map(|mut t| t.values.remove(name).unwrap_or_default())
        .filter(|v| v.to_lowercase().starts_with(&typed))
        .collect()
}

/// A stamp of every resource of `profile` (its URI, modification time and size): a resource
/// whose stamp changes was updated; a URI that comes or goes changes the list.
pub(crate) fn stamps(host: &Host, profile: &str) -> BTreeMap<String, (Option<SystemTime>, u64)> {
    collect(host, profile)
        .0
        .into_values()
        .map(|found| {
            let meta = std::fs::metadata(&found.path).ok();
            let stamp = (
                meta.as_ref().and_then(|m| m.modified().ok()),
                meta.map_or(0, |m| m.len()),
            );
            (found.uri, stamp)
        })
        .collect()
}

/// The variables of `template` (`test://t/{id}/data`) when `uri` matches it: each variable
/// stands for a non-empty part without `/`.
fn matches(template: &str, uri: &str) -> Option<BTreeMap<String, String>> {
    let mut values = BTreeMap::new();
    let mut rest = uri;
    let mut pattern = template;
    while let Some(open) = pattern.find('{') {
        let literal = &pattern[..open];
        rest = rest.strip_prefix(literal)?;
        let close = pattern[open..].find('}')? + open;
        let name = &pattern[open + 1..close];
        pattern = &pattern[close + 1..];
        let next = pattern.find('{').map_or(pattern, |n| &pattern[..n]);
        let end = match next.is_empty() {
            true => rest.find('/').unwrap_or(rest.len()),
            false => rest.find(next)?,
        };
        let value = &rest[..end];
        if value.is_empty() || value.contains('/') {
            return None;
        }
        values.insert(name.to_owned(), value.to_owned());
        rest = &rest[end..];
    }
    (rest == pattern).then_some(values)
}

/// A file's bytes, refused beyond `cap` bytes or when it is not a regular file.
pub(crate) fn read_bytes(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > cap {
        return Err(format!("{}: larger than {cap} bytes", path.display()));
    }
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A file's MIME type, from its extension (`application/octet-stream` when unknown).
pub(crate) fn mime_type(path: &Path) -> String {
    mime_guess::from_path(path)
        .first_or_octet_stream()
        .essence_str()
        .to_owned()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_whole_segments() {
        let t = "test://template/{id}/data";
        let got = matches(t, "test://template/123/data").unwrap();
        assert_eq!(got["id"], "123");
        assert!(matches(t, "test://template//data").is_none());
        assert!(matches(t, "test://template/1/2/data").is_none());
        assert!(matches(t, "test://template/123/other").is_none());
        assert_eq!(matches("x://{a}", "x://b").unwrap()["a"], "b");
        assert!(matches("x://{a}", "x://b/c").is_none());
        assert_eq!(matches("x://{a}-{b}", "x://1-2").unwrap()["b"], "2");
    }

    #[test]
    fn mime_types_come_from_extensions() {
        assert_eq!(mime_type(Path::new("a.png")), "image/png");
        assert_eq!(mime_type(Path::new("a.txt")), "text/plain");
        assert_eq!(
            mime_type(Path::new("a.unknownext")),
            "application/octet-stream"
        );
    }
}
