//! An MCP Bundle (`.mcpb`, manifest version 0.3) of a package, so that MCP clients that install
//! bundles (Claude Desktop and others, the `mcpb` tool) can install a toolhost pack: a zip
//! holding `manifest.json`, the `toolhost` binary as a `binary` server, and a root whose
//! `usr/plugins/<name>/` is the package installed. The client starts
//! `toolhost --root <bundle>/root serve-mcp`, with `--secret-env NAME` and the environment
//! variable NAME for each secret of the manifest's `secrets`, which the client asks its user
//! for (`user_config`, `sensitive`).
//!
//! The root is the package installed as `toolhost add` installs it: `usr/packages.lock`
//! records it (so it runs isolated and sandboxed, as every installed package does), and
//! `usr/toolhost.toml` grants its plugin the sandbox capabilities its manifest declares (the
//! grants it was packed with) and turns `only_installed` on. A bundle packed with a key also
//! holds the manifest's signature (`toolhost-plugin.toml.minisig`, the manifest lists every
//! other file's SHA-256) and the key's public half in `usr/trusted-keys/`; the server is
//! started with `serve-mcp --verify-packages`, which checks both before it serves.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::lock::{Locked, PackageLock};
use super::manifest::{Manifest, MANIFEST_FILE_NAME};
use super::signature::{signature_path, PublicKey};
use super::{PackageError, PackageErrorKind};

/// The MCPB manifest version written.
pub const MCPB_MANIFEST_VERSION: &str = "0.3";

/// A tool a bundle serves, as its manifest lists it.
#[derive(Debug, Clone)]
pub struct BundledTool {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
}

/// The MCPB platform name of a target triple (`linux`, `darwin`, `win32`).
pub fn mcpb_platform(triple: &str) -> &'static str {
    if triple.contains("windows") {
        "win32"
    } else if triple.contains("apple") {
        "darwin"
    } else {
        "linux"
    }
}

/// The bundle's `manifest.json` for `manifest` (this host's platform), serving `tools`.
pub fn bundle_manifest(manifest: &Manifest, tools: &[BundledTool]) -> serde_json::Value {
    let binary = format!("server/toolhost{}", std::env::consts::EXE_SUFFIX);
    let author = manifest.authors.first().map_or("unknown", String::as_str);
    // Each secret the tools need: asked of the user by the client (`user_config`, sensitive:
    // kept in the system's keychain), given to the server in an environment variable of its
    // name, which `serve-mcp --secret-env NAME` adds to the host's secrets.
    let mut args = vec![
        json!("--root"),
        json!("${__dirname}/root"),
        json!("serve-mcp"),
        json!("--verify-packages"),
    ];
    let mut user_config = serde_json::Map::new();
    let mut env = serde_json::Map::new();
    for name in &manifest.secrets {
        let key = name.to_ascii_lowercase();
        args.extend([json!("--secret-env"), json!(name)]);
        env.insert(name.clone(), json!(format!("${{user_config.{key}}}")));
        user_config.insert(
            key,
            json!({
                "type": "string",
                "title": name,
                "description": format!("The secret {name} that the tools of {} use (usr/secrets.env of a toolhost root)", manifest.name),
                "sensitive": true,
                "required": true,
            }),
        );
    }
    let mut value = json!({
        "manifest_version": MCPB_MANIFEST_VERSION,
        "name": manifest.name,
        "version": manifest.version.to_string(),
        "description": manifest.description,
        "author": {"name": author},
        "server": {
            "type": "binary",
            "entry_point": binary,
            "mcp_config": {
                "command": format!("${{__dirname}}/{binary}"),
                "args": args,
            },
        },
        "tools": tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description}))
            .collect::<Vec<_>>(),
        "compatibility": {"platforms": [mcpb_platform(super::host_target())]},
    });
    if !user_config.is_empty() {
        value["server"]["mcp_config"]["env"] = json!(env);
        value["user_config"] = json!(user_config);
    }
    if let Some(license) = &manifest.license {
        value["license"] = json!(license);
    }
    if let Some(repository) = &manifest.repository {
        value["repository"] = json!({"type": "git", "url": repository});
    }
    value
}

/// The capabilities of `manifest` that are sandbox grants (`net:443`, `read:/path`, `exec`,
/// limits; not free-form tags such as `idempotent`, nor secrets, which an installed package
/// receives by its manifest's `secrets`).
pub fn bundle_grants(manifest: &Manifest) -> Vec<String> {
    const GRANTS: [&str; 8] = [
        "read:", "write:", "net:", "bind:", "env:", "memory:", "cpu:", "tasks:",
    ];
    manifest
        .capabilities
        .iter()
        .filter(|c| *c == "exec" || GRANTS.iter().any(|g| c.starts_with(g)))
        .cloned()
        .collect()
}

/// The bundle root's `usr/toolhost.toml`: the package's grants, and only installed libraries.
fn bundle_config(manifest: &Manifest) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    let mut packages = toml_edit::Table::new();
    packages["only_installed"] = toml_edit::value(true);
    doc["packages"] = toml_edit::Item::Table(packages);
    let grants = bundle_grants(manifest);
    if !grants.is_empty() {
        let mut array = toml_edit::Array::new();
        for grant in grants {
            array.push(grant);
        }
        let mut plugin = toml_edit::Table::new();
        plugin["grant"] = toml_edit::value(array);
        let mut plugins = toml_edit::Table::new();
        plugins.set_implicit(true);
        plugins[manifest.name.as_str()] = toml_edit::Item::Table(plugin);
        let mut sandbox = toml_edit::Table::new();
        sandbox.set_implicit(true);
        sandbox["plugins"] = toml_edit::Item::Table(plugins);
        doc["sandbox"] = toml_edit::Item::Table(sandbox);
    }
    format!("# Written by `toolhost pack --mcpb`: the grants the package was packed with.\n{doc}")
}

/// A bundle's signature: the manifest's (`.minisig` text) and the key that made it.
#[derive(Debug, Clone)]
pub struct BundleSignature {
    /// The text of `toolhost-plugin.toml.minisig`.
    pub minisig: String,
    /// The signer's public key, trusted in the bundle's root.
    pub key: PublicKey,
}

/// Writes `out` (a `.mcpb` zip): `manifest.json`, `binary` as `server/toolhost`, each of
/// `files` (path in the package's plugin folder, bytes) under `root/usr/plugins/<name>/`,
/// the lock and the configuration of the root, and with `signed` the manifest's signature
/// and the signer's key.
pub fn write_bundle(
    out: &Path,
    manifest: &Manifest,
    tools: &[BundledTool],
    binary: &Path,
    files: &[(String, Vec<u8>)],
    signed: Option<&BundleSignature>,
) -> Result<PathBuf, PackageError> {
    let failed = |e: &dyn std::fmt::Display| {
        PackageError::new(
            PackageErrorKind::Io,
            format!("cannot write {}: {e}", crate::layout::Escaped(out)),
        )
    };
    let exe = std::fs::read(binary).map_err(|e| PackageError::io("cannot read", binary, e))?;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = |mode: u32| {
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode)
            .large_file(false)
    };
    let mut add = |name: &str, bytes: &[u8], mode: u32| -> Result<(), PackageError> {
        zip.start_file(name, options(mode))
            .map_err(|e| failed(&e))?;
        zip.write_all(bytes).map_err(|e| failed(&e))
    };
    let text = serde_json::to_string_pretty(&bundle_manifest(manifest, tools)).expect("JSON");
    add("manifest.json", text.as_bytes(), 0o644)?;
    let binary_name = format!("server/toolhost{}", std::env::consts::EXE_SUFFIX);
    add(&binary_name, &exe, 0o755)?;
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, bytes) in sorted {
        let mode = if path.ends_with(&format!(".{}", crate::LIBRARY_EXTENSION)) {
            0o755
        } else {
            0o644
        };
        add(
            &format!("root/usr/plugins/{}/{path}", manifest.name),
            bytes,
            mode,
        )?;
    }
    let plugin = format!("root/usr/plugins/{}", manifest.name);
    let lock = bundle_lock(out, manifest, files, signed);
    add("root/usr/packages.lock", lock.to_text().as_bytes(), 0o644)?;
    add(
        "root/usr/toolhost.toml",
        bundle_config(manifest).as_bytes(),
        0o644,
    )?;
    if let Some(signed) = signed {
        let sig = signature_path(Path::new(MANIFEST_FILE_NAME));
        add(
            &format!("{plugin}/{}", sig.display()),
            signed.minisig.as_bytes(),
            0o644,
        )?;
        let key = public_key_text(&signed.key);
        add(
            &format!("root/usr/trusted-keys/{}.pub", signed.key.id),
            key.as_bytes(),
            0o644,
        )?;
    }
    let bytes = zip.finish().map_err(|e| failed(&e))?.into_inner();
    crate::layout::write_atomically(out, &bytes).map_err(|e| failed(&e))?;
    Ok(out.to_owned())
}

/// The bundle root's usr/packages.lock: the package, from the bundle `out`, with every file's
/// SHA-256 and its signer, if `signed`.
fn bundle_lock(
    out: &Path,
    manifest: &Manifest,
    files: &[(String, Vec<u8>)],
    signed: Option<&BundleSignature>,
) -> PackageLock {
    let source = format!(
        "mcpb:{}",
        out.file_name().unwrap_or_default().to_string_lossy()
    );
    let locked = Locked {
        version: manifest.version.to_string(),
        source,
        signer: signed.map(|s| s.key.id.clone()),
        archive_sha256: None,
        files: files
            .iter()
            .map(|(path, bytes)| (path.clone(), super::sha256_hex(bytes)))
            .collect(),
    };
    PackageLock {
        packages: [(manifest.name.clone(), locked)].into(),
    }
}

/// A public key file's text, as minisign writes it.
fn public_key_text(key: &PublicKey) -> String {
    format!(
        "untrusted comment: minisign public key {}\n{}\n",
        key.id, key.base64
    )
}
