//! Skills from the layers (the Skills extension of MCP, `io.modelcontextprotocol/skills`):
//! each `<layer>/skills/<name>/SKILL.md` is the skill `<name>`, the first layer's winning as
//! for tools, with every file of its folder. `SKILL.md` opens with a frontmatter whose
//! `name:` (the folder's name) and `description:` lines say what the skill is:
//!
//! ```markdown
//! ---
//! name: trip-planner
//! description: Plans a trip day by day
//! ---
//! # How to plan a trip
//! ...
//! ```
//!
//! A skill is listed with every file's `skill://<name>/<path>` URI, its SHA-256 digest and
//! its size (at most [`MAX_FILES`] files and [`MAX_BYTES`] in all, as the extension bounds
//! them); `resources/read` reads them and `resources/directory/read` lists a folder's
//! children. A skill folder that cannot be served (no frontmatter, a `name` that is not the
//! folder's, too many files) is left out with one warning naming it and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rmcp::model::{
    ReadResourceResult, Resource, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use rmcp::ErrorData;
use serde_json::json;
use toolhost::Host;

/// The most files one skill may have (the extension's bound).
pub(crate) const MAX_FILES: usize = 512;

/// The most bytes one skill's files may have in all (the extension's bound).
pub(crate) const MAX_BYTES: u64 = 16 << 20;

/// The scheme of skill URIs.
const SCHEME: &str = "skill://";

/// The skills' folders, by name: the first layer's winning.
fn folders(host: &Host, profile: &str) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    for layer in host.layers(profile).iter() {
        let Ok(entries) = std::fs::read_dir(layer.skills_dir()) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if toolhost::is_safe_name(&name) && path.join("SKILL.md").is_file() {
                found.entry(name).or_insert(path);
            }
        }
    }
    found
}

/// Every file under `dir`, by its path relative to `dir` (`/`-separated), in name order.
fn files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut found = Vec::new();
    let mut folders = vec![(String::new(), dir.to_owned())];
    while let Some((prefix, folder)) = folders.pop() {
        let entries =
            std::fs::read_dir(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let kind = entry.file_type().map_err(|e| format!("{rel}: {e}"))?;
            if kind.is_dir() {
                folders.push((format!("{rel}/"), entry.path()));
            } else if kind.is_file() {
                found.push((rel, entry.path()));
            }
            if found.len() > MAX_FILES {
                return Err(format!("more than {MAX_FILES} files"));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The skill `name` of the folder `dir`: its frontmatter, and each file with its SHA-256
/// digest and size. A skill of an installed package is served only as its package installed
/// it: each file's digest must be the one `usr/packages.lock` recorded from the package's
/// signed manifest, and no file may be added or missing ([`recorded`]).
fn skill(name: &str, dir: &Path) -> Result<Skill, String> {
    let manifest = dir.join("SKILL.md");
    let text = toolhost::read_text(&manifest, MAX_BYTES, "SKILL.md").map_err(|e| e.to_string())?;
    let (declared, description, _) =
        toolhost::skill_frontmatter(&text).map_err(|e| e.to_string())?;
    if declared != name {
        return Err(format!(
            "its frontmatter's name is '{declared}', not the folder's '{name}': rename one"
        ));
    }
    let mut recorded = recorded(dir)?;
    let mut resources = Vec::new();
    let mut total = 0u64;
    for (rel, path) in files(dir)? {
        let bytes = crate::resources::read_bytes(&path, MAX_BYTES)?;
        total += bytes.len() as u64;
        if total > MAX_BYTES {
            return Err(format!(
                "its files are larger than {MAX_BYTES} bytes in all"
            ));
        }
        let resource = SkillResource::from_bytes(format!("{SCHEME}{name}/{rel}"), &bytes);
        if let Some((package, digests)) = &mut recorded {
            as_installed(package, &rel, &resource.digest, digests)?;
        }
        resources.push(resource);
    }
    if let Some((package, missing)) = recorded.filter(|(_, left)| !left.is_empty()) {
        let file = missing.keys().next().cloned().unwrap_or_default();
        return Err(format!(
            "its file {file}, installed by package '{package}', is gone: reinstall the package (toolhost add)"
        ));
    }
    let uri = format!("{SCHEME}{name}/SKILL.md");
    let frontmatter = SkillFrontmatter::new(name, description);
    Ok(Skill::new(
        uri,
        frontmatter,
        SkillResources::Files(resources),
    ))
}

/// Checks the file `rel` of a package's skill, whose digest is `digest` (`sha256:…`), against
/// the package's record (taking it out of `digests`).
fn as_installed(
    package: &str,
    rel: &str,
    digest: &str,
    digests: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    match digests.remove(rel) {
        Some(sha) if digest.strip_prefix("sha256:") == Some(sha.as_str()) => Ok(()),
        Some(_) => Err(format!(
            "its file {rel} is not what package '{package}' installed (its SHA-256 is not the one usr/packages.lock records from the signed package): reinstall the package (toolhost add) or undo the change"
        )),
        None => Err(format!(
            "its file {rel} was not installed by package '{package}' (usr/packages.lock has no record of it): remove it"
        )),
    }
}

/// For a skill folder inside an installed package (`usr/plugins/<package>/…`): the package's
/// name and the SHA-256 (hex) of each file of the folder as `toolhost add` recorded it in
/// `usr/packages.lock` (from the package's manifest, which its signature covers), by its path
/// in the folder. `None` for a folder of no installed package.
fn recorded(dir: &Path) -> Result<Option<(String, BTreeMap<String, String>)>, String> {
    let found = dir.ancestors().find_map(|folder| {
        let plugins = folder.parent()?;
        let usr = plugins.parent()?;
        let inside = plugins.file_name()? == "plugins" && usr.file_name()? == "usr";
        inside.then_some((folder, usr))
    });
    let Some((package_dir, usr)) = found else {
        return Ok(None);
    };
    let package = package_dir.file_name().unwrap_or_default();
    let package = package.to_string_lossy().into_owned();
    let lock = usr.join(toolhost::package::lock::PACKAGES_LOCK_FILE_NAME);
    let lock = toolhost::package::PackageLock::read(&lock).map_err(|e| e.to_string())?;
    let Some(locked) = lock.packages.get(&package) else {
        return Ok(None);
    };
    let inner = dir.strip_prefix(package_dir).map_err(|e| e.to_string())?;
    let prefix: Vec<String> = inner
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let prefix = format!("{}/", prefix.join("/"));
    let digests = locked
        .files
        .iter()
        .filter_map(|(path, sha)| Some((path.strip_prefix(&prefix)?.to_owned(), sha.clone())))
        .collect();
    Ok(Some((package, digests)))
}

/// The skills of `profile`'s layers, in name order; a folder that cannot be served is left
/// out with a warning.
pub(crate) fn list(host: &Host, profile: &str) -> Vec<Skill> {
    folders(host, profile)
        .into_iter()
        .filter_map(|(name, dir)| match skill(&name, &dir) {
            Ok(skill) => Some(skill),
            Err(e) => {
                tracing::warn!("skill {}: left out: {e}", dir.display());
                None
            }
        })
        .collect()
}

/// The skill whose `SKILL.md` is at `uri`.
pub(crate) fn get(host: &Host, profile: &str, uri: &str) -> Result<Skill, ErrorData> {
    list(host, profile)
        .into_iter()
        .find(|s| s.uri == uri)
        .ok_or_else(|| ErrorData::invalid_params(format!("no skill at {uri}"), None))
}

/// The skill's name and the file's path in it, of a `skill://` URI.
fn split(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(SCHEME)?.split_once('/')
}

/// Whether `uri` is a skill's (`skill://...`).
pub(crate) fn is_skill_uri(uri: &str) -> bool {
    uri.starts_with(SCHEME)
}

/// The contents of the skill file at `uri` (`-32002`, resource not found, for one no skill
/// lists).
pub(crate) fn read(host: &Host, profile: &str, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let not_found = || {
        ErrorData::resource_not_found(format!("no skill file at {uri}"), Some(json!({"uri": uri})))
    };
    let (name, _) = split(uri).ok_or_else(not_found)?;
    let skill = list(host, profile)
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(not_found)?;
    let SkillResources::Files(files) = &skill.resources else {
        return Err(not_found());
    };
    if !files.iter().any(|f| f.uri == uri) {
        return Err(not_found());
    }
    let dir = folders(host, profile).remove(name).ok_or_else(not_found)?;
    let rel = &uri[SCHEME.len() + name.len() + 1..];
    let path = dir.join(rel);
    let bytes = crate::resources::read_bytes(&path, MAX_BYTES)
        .map_err(|e| ErrorData::internal_error(e, None))?;
    // The bytes read are those listed (a file changed since is not served).
    let listed = files
        .iter()
        .find(|f| f.uri == uri)
        .map(|f| f.digest.as_str());
    if listed != Some(SkillResource::from_bytes(uri, &bytes).digest.as_str()) {
        let message = format!("{uri} changed while it was read: read it again");
        return Err(ErrorData::internal_error(message, None));
    }
    let mime = match rel {
        "SKILL.md" => "text/markdown".to_owned(),
        _ => crate::resources::mime_type(&path),
    };
    let mut content = match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": uri, "mimeType": mime, "text": text}),
        Err(e) => {
            use base64::Engine as _;
            let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
            json!({"uri": uri, "mimeType": mime, "blob": blob})
        }
    };
    if rel == "SKILL.md" {
        content["_meta"] = json!({"io.modelcontextprotocol.skills/name": skill.name()});
    }
    serde_json::from_value(json!({"contents": [content]}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The resource entry of each skill's `SKILL.md` (for `resources/list`): named and described
/// by its frontmatter, `text/markdown`.
pub(crate) fn manifests(host: &Host, profile: &str) -> Vec<Resource> {
    list(host, profile)
        .iter()
        .filter_map(|s| {
            let resource = json!({
                "uri": s.uri,
                "name": s.name(),
                "description": s.frontmatter.description,
                "mimeType": "text/markdown",
            });
            serde_json::from_value(resource).ok()
        })
        .collect()
}

/// The direct children of the skill folder at `uri` (`skill://<name>/` or a folder in it):
/// files with their MIME type, folders as `inode/directory`; `-32602` for a URI that is not
/// a folder of a skill.
pub(crate) fn directory(host: &Host, profile: &str, uri: &str) -> Result<Vec<Resource>, ErrorData> {
    let not_a_folder =
        || ErrorData::invalid_params(format!("{uri} is not a folder of a skill"), None);
    let folder_uri = if uri.ends_with('/') {
        uri.to_owned()
    } else {
        format!("{uri}/")
    };
    let (name, _) = split(&folder_uri).ok_or_else(not_a_folder)?;
    let skill = list(host, profile)
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(not_a_folder)?;
    let SkillResources::Files(files) = &skill.resources else {
        return Err(not_a_folder());
    };
    let mut children: BTreeMap<String, Resource> = BTreeMap::new();
    for file in files {
        let Some(rest) = file.uri.strip_prefix(&folder_uri) else {
            continue;
        };
        let (child, is_folder) = match rest.split_once('/') {
            Some((folder, _)) => (format!("{folder_uri}{folder}/"), true),
            None => (file.uri.clone(), false),
        };
        let title = child
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let mime = match is_folder {
            true => rmcp::model::DIRECTORY_MIME_TYPE.to_owned(),
            false if title == "SKILL.md" => "text/markdown".to_owned(),
            false => crate::resources::mime_type(Path::new(&title)),
        };
        let resource = json!({"uri": child, "name": title, "mimeType": mime});
        if let Ok(resource) = serde_json::from_value(resource) {
            children.entry(child).or_insert(resource);
        }
    }
    if children.is_empty() {
        return Err(not_a_folder());
    }
    Ok(children.into_values().collect())
}
