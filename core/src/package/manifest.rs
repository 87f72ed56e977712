//! The manifest, `toolhost-plugin.toml`: what a package is, what it was built for, and the
//! SHA-256 of every file in it. The format is documented in the book
//! (docs/src/reference/packages.md), with its evolution rule.
//!
//! ```
//! use toolhost::package::Manifest;
//!
//! let text = r#"
//! format = 1
//! name = "hello"
//! version = "1.2.0"
//! description = "Says hello."
//! capabilities = ["net:443"]
//!
//! [compat]
//! plugin-api = "^0.1"
//! toolhost = ">=0.1, <2"
//!
//! [libraries.x86_64-unknown-linux-gnu]
//! "tools/hello.so" = { path = "lib/x86_64-unknown-linux-gnu/tools/hello.so", sha256 = "00000000000000000000000000000000000000000000000000000000000000aa" }
//!
//! [files]
//! "prompts/agent.system.tool.hello.md" = "sha256:00000000000000000000000000000000000000000000000000000000000000bb"
//! "#;
//! let manifest = Manifest::parse(std::path::Path::new("toolhost-plugin.toml"), text).unwrap();
//! assert_eq!(manifest.name, "hello");
//! assert!(manifest.libraries_for("x86_64-unknown-linux-gnu").is_some());
//!
//! let bad = text.replace("1.2.0", "one");
//! let error = Manifest::parse(std::path::Path::new("toolhost-plugin.toml"), &bad).unwrap_err();
//! // The text starts with a newline: `version` is on line 4.
//! assert!(error.message.starts_with("toolhost-plugin.toml:4: `version`"), "{error}");
//!
//! // A capability of the sandbox must be well formed (a free-form tag is anything).
//! let bad = text.replace("net:443", "net:https");
//! let error = Manifest::parse(std::path::Path::new("toolhost-plugin.toml"), &bad).unwrap_err();
//! assert!(error.message.starts_with("toolhost-plugin.toml:6: `capabilities`: `net:https`: expected a port"), "{error}");
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{PackageError, PackageErrorKind};
pub(crate) use crate::layout::check_path;
use crate::layout::Escaped;

pub use crate::layout::MANIFEST_FILE_NAME;

/// The newest manifest format this toolhost reads. Format 2 added `secrets`; `toolhost pack`
/// writes the oldest format that holds what a manifest says (1 without `secrets`), so a
/// package is installable by as many toolhosts as can use it.
pub const MANIFEST_FORMAT: u32 = 2;

/// The first manifest format with `secrets`.
pub const SECRETS_FORMAT: u32 = 2;

/// A package's manifest, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The format of the manifest (see [`MANIFEST_FORMAT`]).
    pub format: u32,
    /// The package's name: the folder it installs to, `usr/plugins/<name>/`.
    pub name: String,
    /// Its version.
    pub version: semver::Version,
    /// One line saying what it does.
    pub description: String,
    /// Who made it.
    pub authors: Vec<String>,
    /// Its licence (an SPDX expression).
    pub license: Option<String>,
    /// Where its sources are.
    pub repository: Option<String>,
    /// The capabilities its tools declare (`net:443`, `read:/data`, `exec`, free-form tags;
    /// see [`Capability`](crate::config::Capability)): shown before
    /// install; granted by the user's configuration, never by the package.
    pub capabilities: Vec<String>,
    /// The names of the secrets its tools need (keys of `usr/secrets.env`, letters, digits
    /// and '_'): an MCP Bundle asks its user for each (format 2).
    pub secrets: Vec<String>,
    /// What it was built for.
    pub compat: Compat,
    /// Its libraries, by target triple.
    pub libraries: BTreeMap<String, BTreeMap<String, Library>>,
    /// The SHA-256 (hex) of every other file, by its path in the package.
    pub files: BTreeMap<String, String>,
}

/// The `[compat]` table: the ranges of host versions a package works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compat {
    /// The plugin-api contract (plugin-abi) versions its libraries were built against.
    pub plugin_api: semver::VersionReq,
    /// The toolhost versions it was made for.
    pub toolhost: semver::VersionReq,
}

/// One library of a target triple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    /// Its path in the package (`lib/<triple>/tools/hello.so`).
    pub path: String,
    /// The SHA-256 of its bytes, in hex.
    pub sha256: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    format: Spanned<u32>,
    name: Spanned<String>,
    version: Spanned<String>,
    description: String,
    #[serde(default)]
    authors: Vec<String>,
    license: Option<String>,
    repository: Option<String>,
    #[serde(default)]
    capabilities: Vec<Spanned<String>>,
    secrets: Option<Spanned<Vec<Spanned<String>>>>,
    compat: RawCompat,
    #[serde(default)]
    libraries: BTreeMap<String, BTreeMap<Spanned<String>, RawLibrary>>,
    #[serde(default)]
    files: BTreeMap<Spanned<String>, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompat {
    #[serde(rename = "plugin-api")]
    plugin_api: Spanned<String>,
    toolhost: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLibrary {
    path: Spanned<String>,
    sha256: Spanned<String>,
}

/// Builds one-line errors about one manifest file.
struct At<'a> {
    file: &'a Path,
    text: &'a str,
}

impl At<'_> {
    fn line(&self, offset: usize) -> usize {
        crate::layout::line_of(self.text, offset)
    }

    fn error(&self, offset: usize, key: &str, message: &str) -> PackageError {
        PackageError::new(
            PackageErrorKind::Manifest,
            format!(
                "{}: `{key}`: {message}",
                crate::layout::Location::new(self.file, Some(self.line(offset)))
            ),
        )
    }
}

/// The steps of [`Manifest::parse`], each checking one part of the raw manifest.
impl At<'_> {
    /// The format is one this toolhost reads, and the name a package's name.
    fn check_header(&self, raw: &Raw) -> Result<(), PackageError> {
        if *raw.format.get_ref() > MANIFEST_FORMAT {
            return Err(self.error(
                raw.format.span().start,
                "format",
                &format!(
                    "format {} is newer than this toolhost reads ({MANIFEST_FORMAT}): update toolhost",
                    raw.format.get_ref()
                ),
            ));
        }
        if !crate::is_safe_name(raw.name.get_ref()) || raw.name.get_ref().starts_with('.') {
            return Err(self.error(
                raw.name.span().start,
                "name",
                &format!("a package's name is {}", super::NAME_RULE),
            ));
        }
        Ok(())
    }

    /// The secrets' names, each checked; `secrets` needs [`SECRETS_FORMAT`].
    fn secrets(
        &self,
        names: Option<Spanned<Vec<Spanned<String>>>>,
        format: u32,
    ) -> Result<Vec<String>, PackageError> {
        let Some(names) = names else {
            return Ok(Vec::new());
        };
        if format < SECRETS_FORMAT {
            return Err(self.error(
                names.span().start,
                "secrets",
                &format!("`secrets` needs format = {SECRETS_FORMAT} or later"),
            ));
        }
        let mut secrets = Vec::new();
        for name in names.into_inner() {
            if let Err(why) = check_secret_name(name.get_ref()) {
                return Err(self.error(name.span().start, "secrets", &why.message));
            }
            secrets.push(name.into_inner());
        }
        Ok(secrets)
    }

    /// A version range of `[compat]`.
    fn range(
        &self,
        value: &Spanned<String>,
        key: &str,
    ) -> Result<semver::VersionReq, PackageError> {
        semver::VersionReq::parse(value.get_ref()).map_err(|e| {
            self.error(
                value.span().start,
                key,
                &format!("{e} (a version range such as \"^0.1\")"),
            )
        })
    }

    /// The libraries of each triple: their places, paths and hashes checked.
    fn libraries(
        &self,
        raw: BTreeMap<String, BTreeMap<Spanned<String>, RawLibrary>>,
    ) -> Result<BTreeMap<String, BTreeMap<String, Library>>, PackageError> {
        let mut libraries = BTreeMap::new();
        for (triple, libs) in raw {
            let mut checked = BTreeMap::new();
            for (place, library) in libs {
                let key = format!("libraries.{triple}.\"{}\"", place.get_ref());
                if let Err(why) = check_library_place(place.get_ref(), &triple) {
                    return Err(self.error(place.span().start, &key, &why));
                }
                if let Err(why) = check_path(library.path.get_ref()) {
                    let key = format!("{key}.path");
                    return Err(self.error(library.path.span().start, &key, &why));
                }
                let sha256 = check_sha256(library.sha256.get_ref(), false).map_err(|why| {
                    self.error(library.sha256.span().start, &format!("{key}.sha256"), &why)
                })?;
                let path = library.path.into_inner();
                checked.insert(place.into_inner(), Library { path, sha256 });
            }
            libraries.insert(triple, checked);
        }
        Ok(libraries)
    }

    /// The other files: their paths and hashes checked.
    fn files(
        &self,
        raw: BTreeMap<Spanned<String>, Spanned<String>>,
    ) -> Result<BTreeMap<String, String>, PackageError> {
        let mut files = BTreeMap::new();
        for (path, hash) in raw {
            let key = format!("files.\"{}\"", path.get_ref());
            if let Err(why) = check_path(path.get_ref()) {
                return Err(self.error(path.span().start, &key, &why));
            }
            if path.get_ref() == MANIFEST_FILE_NAME {
                let why = "the manifest does not list itself";
                return Err(self.error(path.span().start, &key, why));
            }
            let sha256 = check_sha256(hash.get_ref(), true)
                .map_err(|why| self.error(hash.span().start, &key, &why))?;
            files.insert(path.into_inner(), sha256);
        }
        Ok(files)
    }

    /// The capability tags: free-form, but a capability of the sandbox must be well formed.
    fn capabilities(&self, raw: Vec<Spanned<String>>) -> Result<Vec<String>, PackageError> {
        let mut capabilities = Vec::with_capacity(raw.len());
        for tag in raw {
            if let Err(why) = crate::config::Capability::parse(tag.get_ref()) {
                return Err(self.error(tag.span().start, "capabilities", &why.message));
            }
            capabilities.push(tag.into_inner());
        }
        Ok(capabilities)
    }
}

impl Manifest {
    /// Reads the manifest at `path`.
    pub fn read(path: &Path) -> Result<Self, PackageError> {
        Self::read_as(path, path)
    }

    /// Reads the manifest at `path`, naming it `shown` in errors (where the user has it).
    pub fn read_as(path: &Path, shown: &Path) -> Result<Self, PackageError> {
        let text = crate::layout::read_text(path, 1 << 20, "the manifest's limit of 1 MiB")
            .map_err(|e| {
                PackageError::new(
                    PackageErrorKind::Manifest,
                    format!(
                        "{}: {e}: a package has its manifest at its top",
                        Escaped(shown)
                    ),
                )
            })?;
        Self::parse(shown, &text)
    }

    /// Parses `text`, the manifest read from `file` (named in errors). Its parts are checked
    /// in the file's order, so the first mistake is the one reported.
    pub fn parse(file: &Path, text: &str) -> Result<Self, PackageError> {
        let at = At { file, text };
        let raw: Raw = toml::from_str(text).map_err(|e| {
            let start = e.span().map_or(0, |s| s.start);
            let message = e.message().trim().replace('\n', "; ");
            at.error(
                start,
                &toml_error_key(text, start, &message),
                &format!("{message} (see docs/src/reference/packages.md)"),
            )
        })?;
        at.check_header(&raw)?;
        let secrets = at.secrets(raw.secrets, *raw.format.get_ref())?;
        let version = semver::Version::parse(raw.version.get_ref()).map_err(|e| {
            at.error(
                raw.version.span().start,
                "version",
                &format!("{e} (a semantic version such as \"1.2.0\")"),
            )
        })?;
        let compat = Compat {
            plugin_api: at.range(&raw.compat.plugin_api, "compat.plugin-api")?,
            toolhost: at.range(&raw.compat.toolhost, "compat.toolhost")?,
        };
        Ok(Self {
            format: raw.format.into_inner(),
            name: raw.name.into_inner(),
            version,
            description: raw.description,
            authors: raw.authors,
            license: raw.license,
            repository: raw.repository,
            compat,
            libraries: at.libraries(raw.libraries)?,
            files: at.files(raw.files)?,
            capabilities: at.capabilities(raw.capabilities)?,
            secrets,
        })
    }

    /// The libraries for `triple` (place in the layer -> library), if the package has any.
    pub fn libraries_for(&self, triple: &str) -> Option<&BTreeMap<String, Library>> {
        self.libraries.get(triple).filter(|l| !l.is_empty())
    }

    /// The triples the package has libraries for.
    pub fn triples(&self) -> Vec<&str> {
        self.libraries.keys().map(String::as_str).collect()
    }

    /// `name version`, as messages name a package.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }

    /// The manifest as TOML, in the order the book documents (what `toolhost pack` writes).
    pub fn to_toml(&self) -> String {
        let mut doc = toml_edit::DocumentMut::new();
        doc["format"] = toml_edit::value(i64::from(self.format));
        doc["name"] = toml_edit::value(&self.name);
        doc["version"] = toml_edit::value(self.version.to_string());
        doc["description"] = toml_edit::value(&self.description);
        let strings = |v: &[String]| {
            let mut a = toml_edit::Array::new();
            v.iter().for_each(|s| a.push(s.as_str()));
            toml_edit::value(a)
        };
        doc["authors"] = strings(&self.authors);
        if let Some(l) = &self.license {
            doc["license"] = toml_edit::value(l);
        }
        if let Some(r) = &self.repository {
            doc["repository"] = toml_edit::value(r);
        }
        doc["capabilities"] = strings(&self.capabilities);
        if !self.secrets.is_empty() {
            doc["secrets"] = strings(&self.secrets);
        }
        let mut compat = toml_edit::Table::new();
        compat["plugin-api"] = toml_edit::value(self.compat.plugin_api.to_string());
        compat["toolhost"] = toml_edit::value(self.compat.toolhost.to_string());
        doc["compat"] = toml_edit::Item::Table(compat);
        let mut libraries = toml_edit::Table::new();
        libraries.set_implicit(true);
        for (triple, libs) in &self.libraries {
            let mut table = toml_edit::Table::new();
            for (place, lib) in libs {
                let mut inline = toml_edit::InlineTable::new();
                inline.insert("path", lib.path.as_str().into());
                inline.insert("sha256", lib.sha256.as_str().into());
                table[place.as_str()] = toml_edit::value(inline);
            }
            libraries[triple.as_str()] = toml_edit::Item::Table(table);
        }
        doc["libraries"] = toml_edit::Item::Table(libraries);
        let mut files = toml_edit::Table::new();
        for (path, hash) in &self.files {
            files[path.as_str()] = toml_edit::value(format!("sha256:{hash}"));
        }
        doc["files"] = toml_edit::Item::Table(files);
        doc.to_string()
    }
}

/// The key a TOML error is about: the missing field it names, else the key on the line where
/// it points (`key = value`), else the table (`[compat]`), else `manifest`.
fn toml_error_key(text: &str, offset: usize, message: &str) -> String {
    if let Some(rest) = message.strip_prefix("missing field `") {
        return rest.split('`').next().unwrap_or("manifest").to_owned();
    }
    let start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    match line.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => key.trim().to_owned(),
        _ if line.starts_with('[') => line.trim_matches(['[', ']']).trim().to_owned(),
        _ => "manifest".to_owned(),
    }
}

/// The library file extension of a target triple.
pub fn library_extension(triple: &str) -> &'static str {
    if triple.contains("windows") {
        "dll"
    } else if triple.contains("apple") {
        "dylib"
    } else {
        "so"
    }
}

/// Whether `place` is where a library goes in a plugin folder: `tools/<name>.<ext>`,
/// `extensions/<point>/<file>.<ext>`, or either under `agents/<profile>/`, with the extension
/// of `triple`.
fn check_library_place(place: &str, triple: &str) -> Result<(), String> {
    check_path(place)?;
    let parts: Vec<&str> = place.split('/').collect();
    let rest = match parts.as_slice() {
        ["agents", _, rest @ ..] => rest,
        rest => rest,
    };
    let shape = matches!(rest, ["tools", _] | ["extensions", _, _]);
    let ext = library_extension(triple);
    if !shape || !place.ends_with(&format!(".{ext}")) {
        return Err(format!(
            "a library goes at tools/<name>.{ext} or extensions/<point>/<file>.{ext} (optionally under agents/<profile>/)"
        ));
    }
    Ok(())
}

/// A SHA-256 in hex (64 lower-case digits), with a `sha256:` prefix when `prefixed`.
fn check_sha256(value: &str, prefixed: bool) -> Result<String, String> {
    let hex = match prefixed {
        true => value.strip_prefix("sha256:").unwrap_or(""),
        false => value,
    };
    if hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Ok(hex.to_owned());
    }
    let shape = if prefixed {
        "\"sha256:<64 hex digits>\""
    } else {
        "64 lower-case hex digits"
    };
    Err(format!("expected {shape}"))
}

/// A secret's name, as `usr/secrets.env` has its keys: letters, digits and '_'; else a
/// [`PackageErrorKind::Manifest`] error saying so.
pub fn check_secret_name(name: &str) -> Result<(), PackageError> {
    match !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        true => Ok(()),
        false => Err(PackageError::new(
            PackageErrorKind::Manifest,
            format!(
                "{name:?} is not a secret's name: letters, digits and '_', as the keys of \
                 usr/secrets.env"
            ),
        )),
    }
}
