//! Making a package from a plugin folder: its built libraries, its other files and the
//! manifest template at its top (`toolhost-plugin.toml` with `name`, `version`,
//! `description`, ...) become one archive, `NAME-VERSION.tar.gz`, whose manifest lists every
//! file's SHA-256. The libraries are for this host's target triple, or the triples asked for;
//! building them is the caller's part (`toolhost pack` runs cargo).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::archive::{write_archive, Entry};
use super::manifest::{
    library_extension, Compat, Library, Manifest, MANIFEST_FILE_NAME, SECRETS_FORMAT,
};
use super::mcpb::{write_bundle, BundledTool};
use super::{host_target, PackageError, PackageErrorKind};
use crate::layout::Escaped;

/// The manifest template at the top of a plugin folder: what `toolhost pack` cannot find out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Template {
    name: String,
    version: String,
    description: String,
    #[serde(default)]
    authors: Vec<String>,
    license: Option<String>,
    repository: Option<String>,
    #[serde(default)]
    capabilities: Vec<String>,
    /// The names of the secrets the tools need (an MCP Bundle asks its user for each).
    #[serde(default)]
    secrets: Vec<String>,
    /// Folders and files (relative to the plugin folder) left out of the package.
    #[serde(default)]
    exclude: Vec<String>,
}

/// A package written by [`pack`].
#[derive(Debug)]
pub struct Packed {
    /// The archive, `<out>/NAME-VERSION.tar.gz`.
    pub archive: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// The MCP Bundle, `<out>/NAME-VERSION.mcpb`, if one was asked for.
    pub bundle: Option<PathBuf>,
}

/// What a library is, if it is a tool: its description and the capabilities it declares.
pub type Describe = dyn Fn(&Path) -> Option<(String, Vec<String>)>;

/// What [`pack`] is given besides the plugin folder.
pub struct PackOptions<'a> {
    /// Libraries built by the caller, by target triple: place in the layer (`tools/x.so`) ->
    /// built file.
    pub built: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// The target triples to pack libraries for (empty: this host's). Library files already
    /// in the folder are this host's.
    pub targets: &'a [String],
    /// The folder the archive (and bundle) go into.
    pub out: &'a Path,
    /// What a library is, if it is a tool: its description and the capabilities it declares
    /// (the caller reads the metadata).
    pub describe: &'a Describe,
    /// Also write an MCP Bundle, `NAME-VERSION.mcpb`, with this `toolhost` binary as its server.
    pub mcpb_binary: Option<&'a Path>,
    /// The secret key that signs the bundle's manifest (`pack --sign`), with its password
    /// (`None`: [`PASSWORD_ENV`](super::signature::PASSWORD_ENV), else the terminal).
    pub bundle_key: Option<(&'a Path, Option<String>)>,
}

/// Packs the plugin folder `folder` into `out/NAME-VERSION.tar.gz`. Its libraries are the
/// library files already in its `tools/` and `extensions/<point>/` folders (and under
/// `agents/<P>/`), plus the built ones. Left out: the template's `exclude`, hidden files,
/// `target/` folders and crate folders (those with a Cargo.toml). The manifest lists the
/// capabilities the tools declare with the template's.
pub fn pack(folder: &Path, options: &PackOptions<'_>) -> Result<Packed, PackageError> {
    let (template_file, template) = read_template(folder)?;
    let (by_triple, files) = libraries_by_triple(folder, &template, options)?;
    let mut contents = contents(&by_triple, &files, options)?;
    contents
        .capabilities
        .extend(template.capabilities.iter().cloned());
    let manifest = manifest_of(&template_file, template, &mut contents)?;
    let (archive, bundle) = write_outputs(&manifest, contents, options)?;
    Ok(Packed {
        archive,
        manifest,
        bundle,
    })
}

/// The libraries of each target triple asked for (this host's: those in the folder, and
/// the built ones), and the folder's other files; both by their path in the folder.
type Sorted<'o> = (
    BTreeMap<&'o str, BTreeMap<String, PathBuf>>,
    BTreeMap<String, PathBuf>,
);

/// What goes into the package, gathered from the folder: its archive's entries, the files
/// installed from it (this host's), the tools its bundle serves, the capabilities the tools
/// declare, the libraries listed by triple and every other file's hash.
struct Contents {
    entries: Vec<Entry>,
    installed: Vec<(String, Vec<u8>)>,
    tools: Vec<BundledTool>,
    capabilities: BTreeSet<String>,
    libraries: BTreeMap<String, BTreeMap<String, Library>>,
    hashes: BTreeMap<String, String>,
}

/// The folder's `toolhost-plugin.toml`, its path and what it says.
fn read_template(folder: &Path) -> Result<(PathBuf, Template), PackageError> {
    let template_file = folder.join(MANIFEST_FILE_NAME);
    let text = crate::layout::read_text(&template_file, 1 << 20, "the manifest's limit of 1 MiB").map_err(|e| {
        PackageError::new(
            PackageErrorKind::Manifest,
            format!(
                "{}: {e}: a plugin folder to pack has a toolhost-plugin.toml with name, version and description (docs/src/reference/packages.md)",
                Escaped(&template_file)
            ),
        )
    })?;
    let template: Template = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map_or(1, |s| crate::layout::line_of(&text, s.start));
        PackageError::new(
            PackageErrorKind::Manifest,
            format!(
                "{}: {} (see docs/src/reference/packages.md)",
                crate::layout::Location::new(&template_file, Some(line)),
                e.message().trim()
            ),
        )
    })?;
    Ok((template_file, template))
}

/// The folder's files, its libraries sorted by target triple (see [`Sorted`]).
fn libraries_by_triple<'o>(
    folder: &Path,
    template: &Template,
    options: &PackOptions<'o>,
) -> Result<Sorted<'o>, PackageError> {
    let built = options.built;
    let host = host_target();
    let ext = library_extension(host);
    let excluded: BTreeSet<&str> = template.exclude.iter().map(String::as_str).collect();
    let mut found = Vec::new();
    collect(folder, folder, &excluded, &mut found)?;
    // Library files already in the folder are this host's builds.
    let mut prebuilt: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for relative in found {
        let path = folder.join(&relative);
        if relative.ends_with(&format!(".{ext}")) && is_library_place(&relative) {
            prebuilt.insert(relative, path);
        } else {
            files.insert(relative, path);
        }
    }
    let targets: Vec<&str> = match options.targets.is_empty() {
        true => vec![host],
        false => options.targets.iter().map(String::as_str).collect(),
    };
    let mut by_triple: BTreeMap<&str, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for &triple in &targets {
        let mut libraries = match triple == host {
            true => prebuilt.clone(),
            false => BTreeMap::new(),
        };
        libraries.extend(
            built
                .get(triple)
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        if libraries.is_empty() {
            let ext = library_extension(triple);
            return Err(PackageError::new(
                PackageErrorKind::Target,
                format!(
                    "{}: no plugin library to pack for {triple} (no crate built, no tools/*.{ext} or extensions/*/*.{ext})",
                    Escaped(folder)
                ),
            ));
        }
        by_triple.insert(triple, libraries);
    }
    if options.mcpb_binary.is_some() && !by_triple.contains_key(host) {
        return Err(PackageError::new(
            PackageErrorKind::Target,
            format!(
                "{}: an MCP Bundle serves the libraries of this host ({host}) with this toolhost: pack them too (--target {host})",
                Escaped(folder)
            ),
        ));
    }
    Ok((by_triple, files))
}

/// Reads every library and file to pack (see [`Contents`]).
fn contents(
    by_triple: &BTreeMap<&str, BTreeMap<String, PathBuf>>,
    files: &BTreeMap<String, PathBuf>,
    options: &PackOptions<'_>,
) -> Result<Contents, PackageError> {
    let host = host_target();
    let mut capabilities: BTreeSet<String> = BTreeSet::new();
    let mut entries = Vec::new();
    let mut listed_by_triple = BTreeMap::new();
    let mut tools = Vec::new();
    let mut installed = Vec::new();
    for (&triple, libraries) in by_triple {
        let mut listed = BTreeMap::new();
        for (place, path) in libraries {
            // Only this host's libraries can be read (loaded) here.
            let described = match triple == host {
                true => (options.describe)(path),
                false => None,
            };
            if let Some((description, declared)) = described {
                capabilities.extend(declared);
                // The bundle serves the default profile: the tools of the plugin's own folder.
                if let Some(name) = place.strip_prefix("tools/") {
                    let name = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
                    tools.push(BundledTool {
                        name: name.to_owned(),
                        description,
                    });
                }
            }
            let bytes = fs::read(path).map_err(|e| PackageError::io("cannot read", path, e))?;
            let in_package = format!("lib/{triple}/{place}");
            listed.insert(
                place.clone(),
                Library {
                    path: in_package.clone(),
                    sha256: super::sha256_hex(&bytes),
                },
            );
            if triple == host {
                installed.push((place.clone(), bytes.clone()));
            }
            entries.push(Entry {
                path: in_package,
                bytes,
                executable: true,
            });
        }
        listed_by_triple.insert(triple.to_owned(), listed);
    }
    let mut hashes = BTreeMap::new();
    for (relative, path) in files {
        let bytes = fs::read(path).map_err(|e| PackageError::io("cannot read", path, e))?;
        hashes.insert(relative.clone(), super::sha256_hex(&bytes));
        installed.push((relative.clone(), bytes.clone()));
        entries.push(Entry {
            path: relative.clone(),
            bytes,
            executable: false,
        });
    }
    Ok(Contents {
        entries,
        installed,
        tools,
        capabilities,
        libraries: listed_by_triple,
        hashes,
    })
}

/// The package's manifest: the template's values checked, the capabilities and the files
/// listed; its text goes into the package too.
fn manifest_of(
    template_file: &Path,
    template: Template,
    contents: &mut Contents,
) -> Result<Manifest, PackageError> {
    let template_file = template_file.to_owned();
    let bad = |key: &str, why: String| {
        PackageError::new(
            PackageErrorKind::Manifest,
            format!("{}: `{key}`: {why}", Escaped(&template_file)),
        )
    };
    let version = semver::Version::parse(&template.version).map_err(|e| {
        bad(
            "version",
            format!("{e} (a semantic version such as \"1.2.0\")"),
        )
    })?;
    if !crate::is_safe_name(&template.name) {
        return Err(bad(
            "name",
            format!("a package's name is {}", super::NAME_RULE),
        ));
    }
    for name in &template.secrets {
        super::manifest::check_secret_name(name).map_err(|why| bad("secrets", why.message))?;
    }
    let caret = |v: &str| {
        let v = semver::Version::parse(v).expect("a crate version");
        let range = match v.major {
            0 => format!("^0.{}", v.minor),
            major => format!("^{major}"),
        };
        semver::VersionReq::parse(&range).expect("a caret range")
    };
    let manifest = Manifest {
        // The oldest format that holds what it says (see MANIFEST_FORMAT).
        format: match template.secrets.is_empty() {
            true => 1,
            false => SECRETS_FORMAT,
        },
        name: template.name,
        version,
        description: template.description,
        authors: template.authors,
        license: template.license,
        repository: template.repository,
        capabilities: std::mem::take(&mut contents.capabilities)
            .into_iter()
            .collect(),
        secrets: template.secrets,
        compat: Compat {
            plugin_api: caret(plugin_abi::ABI_VERSION),
            toolhost: caret(env!("CARGO_PKG_VERSION")),
        },
        libraries: std::mem::take(&mut contents.libraries),
        files: std::mem::take(&mut contents.hashes),
    };
    let text = manifest.to_toml().into_bytes();
    contents
        .installed
        .push((MANIFEST_FILE_NAME.to_owned(), text.clone()));
    contents.entries.push(Entry {
        path: MANIFEST_FILE_NAME.to_owned(),
        bytes: text,
        executable: false,
    });
    Ok(manifest)
}

/// Writes the archive, and the MCP Bundle when asked for.
fn write_outputs(
    manifest: &Manifest,
    contents: Contents,
    options: &PackOptions<'_>,
) -> Result<(PathBuf, Option<PathBuf>), PackageError> {
    let out = options.out;
    let Contents {
        entries,
        installed,
        tools,
        ..
    } = contents;
    fs::create_dir_all(out).map_err(|e| PackageError::io("cannot create", out, e))?;
    let stem = format!("{}-{}", manifest.name, manifest.version);
    let archive = out.join(format!("{stem}.tar.gz"));
    write_archive(&archive, entries)?;
    let bundle = match options.mcpb_binary {
        Some(binary) => {
            let path = out.join(format!("{stem}.mcpb"));
            let signed = match &options.bundle_key {
                Some((key, password)) => {
                    let text = manifest.to_toml();
                    let (minisig, key) = super::signature::sign_bytes(
                        text.as_bytes(),
                        MANIFEST_FILE_NAME,
                        key,
                        password.clone(),
                    )?;
                    Some(super::mcpb::BundleSignature { minisig, key })
                }
                None => None,
            };
            Some(write_bundle(
                &path,
                manifest,
                &tools,
                binary,
                &installed,
                signed.as_ref(),
            )?)
        }
        None => None,
    };
    Ok((archive, bundle))
}

/// Whether `relative` is where a library goes in a plugin folder.
fn is_library_place(relative: &str) -> bool {
    let parts: Vec<&str> = relative.split('/').collect();
    let rest = match parts.as_slice() {
        ["agents", _, rest @ ..] => rest,
        rest => rest,
    };
    matches!(rest, ["tools", _] | ["extensions", _, _])
}

/// Every file to pack under `dir`, relative to `root`, `/`-separated.
fn collect(
    root: &Path,
    dir: &Path,
    excluded: &BTreeSet<&str>,
    out: &mut Vec<String>,
) -> Result<(), PackageError> {
    let entries = fs::read_dir(dir).map_err(|e| PackageError::io("cannot read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| PackageError::io("cannot read", dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if name.starts_with('.')
            || excluded.contains(relative.as_str())
            || relative == MANIFEST_FILE_NAME
        {
            continue;
        }
        let meta = fs::metadata(&path).map_err(|e| PackageError::io("cannot read", &path, e))?;
        if meta.is_dir() {
            if name == "target" || path.join("Cargo.toml").is_file() {
                continue;
            }
            collect(root, &path, excluded, out)?;
        } else if meta.is_file() {
            out.push(relative);
        }
    }
    Ok(())
}
