//! `toolhost pack`: builds a plugin folder's crates with cargo for this host and writes one
//! archive, `NAME-VERSION.tar.gz`, with its manifest; `--sign` writes the minisign signature
//! beside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use crate::Global;
use anyhow::{bail, Context as _, Result};
use toolhost::package::{pack, signature};
use toolhost::Escaped;

/// Cargo's setting that builds std from its sources for the target (`-Zbuild-std`).
const BUILD_STD_ENV: &str = "CARGO_UNSTABLE_BUILD_STD";

/// Pack a plugin folder (with toolhost-plugin.toml) into DIR/NAME-VERSION.tar.gz: its
/// crates built with cargo for this host, its manifest with every file's SHA-256; --sign
/// writes the minisign signature beside it (ARCHIVE.minisig).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The plugin folder.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The folder to write the archive into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Sign the archive with this minisign secret key (its password from
    /// TOOLHOST_KEY_PASSWORD or the terminal).
    #[arg(long, value_name = "KEYFILE")]
    sign: Option<PathBuf>,
    /// The cargo profile the crates are built with.
    #[arg(long, default_value = "release")]
    cargo_profile: String,
    /// Also write DIR/NAME-VERSION.mcpb, an MCP Bundle that MCP clients install: this
    /// toolhost binary serving the package's tools (`serve-mcp`).
    #[arg(long)]
    mcpb: bool,
    /// Build the libraries for this target triple (one the installed toolchain can build:
    /// `rustup target list --installed`) instead of only this host's. Repeatable; name
    /// this host's triple too to keep its libraries.
    #[arg(long, value_name = "TRIPLE")]
    target: Vec<String>,
}

impl Args {
    /// `toolhost pack`.
    pub(crate) fn run(self, _: &Global) -> Result<ExitCode> {
        pack(&PackOptions {
            folder: &self.path,
            out: &self.out,
            sign: self.sign.as_deref(),
            cargo_profile: &self.cargo_profile,
            mcpb: self.mcpb,
            targets: &self.target,
        })
    }
}

/// What `toolhost pack` was asked.
pub(crate) struct PackOptions<'a> {
    pub(crate) folder: &'a Path,
    pub(crate) out: &'a Path,
    pub(crate) sign: Option<&'a Path>,
    pub(crate) cargo_profile: &'a str,
    pub(crate) mcpb: bool,
    /// `--target`: the triples to build for (empty: this host's).
    pub(crate) targets: &'a [String],
}

pub(crate) fn pack(options: &PackOptions<'_>) -> Result<ExitCode> {
    let folder = options.folder;
    // The bundle's server is this binary's `serve-mcp`.
    if options.mcpb && cfg!(not(feature = "mcp")) {
        crate::exit::usage!(
            "--mcpb: this toolhost was built without its `mcp` feature (as the Windows build is), so it cannot serve the bundle"
        );
    }
    if !folder.is_dir() {
        crate::exit::usage!(
            "{}: no such folder (give a plugin folder: tools/, extensions/, prompts/ and toolhost-plugin.toml)",
            Escaped(folder)
        );
    }
    let packed = build_and_pack(
        folder,
        options.out,
        options.cargo_profile,
        options.mcpb,
        options.targets,
        options.sign,
    )?;
    println!(
        "packed {} ({} for {})",
        Escaped(&packed.archive),
        packed.manifest.label(),
        packed.manifest.triples().join(", ")
    );
    if let Some(bundle) = &packed.bundle {
        let signed = match options.sign {
            Some(_) => "; its manifest signed, verified by the bundled host at start",
            None => "; unsigned",
        };
        println!(
            "bundled {} (an MCP Bundle serving it with toolhost serve-mcp, isolated and sandboxed{signed})",
            Escaped(bundle)
        );
    }
    if let Some(key) = options.sign {
        let signature = signature::sign(&packed.archive, key, None)?;
        println!("signed {}", Escaped(&signature));
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the crates of the plugin folder `folder` with cargo (`--profile PROFILE`) for each of
/// `targets` (empty: this host) and packs it into `out` (with an MCP Bundle if `mcpb`, its
/// manifest signed with `sign`).
pub(crate) fn build_and_pack(
    folder: &Path,
    out: &Path,
    cargo_profile: &str,
    mcpb: bool,
    targets: &[String],
    sign: Option<&Path>,
) -> Result<pack::Packed> {
    let host = toolhost::package::host_target();
    let mut triples: Vec<String> = targets.to_vec();
    triples.sort();
    triples.dedup();
    if triples.iter().any(|t| t != host) {
        check_targets(&triples)?;
    }
    let mut built: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    let crates = crates(folder);
    for triple in triples
        .iter()
        .map(String::as_str)
        .chain(triples.is_empty().then_some(host))
    {
        let ext = toolhost::package::manifest::library_extension(triple);
        // This host's triple is built as cargo builds by default (target/<profile>/), so a
        // plain `pack` and `pack --target <host>` share their builds; cargo building std
        // from its sources needs every triple named.
        let target =
            (triple != host || std::env::var_os(BUILD_STD_ENV).is_some()).then_some(triple);
        for krate in &crates {
            let place = krate
                .strip_prefix(folder)
                .unwrap_or(krate)
                .to_string_lossy()
                .replace('\\', "/");
            let library = build(krate, cargo_profile, target)?;
            built
                .entry(triple.to_owned())
                .or_default()
                .insert(format!("{place}.{ext}"), library);
        }
    }
    let binary =
        std::env::current_exe().context("cannot find the toolhost binary for the bundle")?;
    Ok(pack::pack(
        folder,
        &pack::PackOptions {
            built: &built,
            targets: &triples,
            out,
            describe: &describe,
            mcpb_binary: mcpb.then_some(binary.as_path()),
            bundle_key: sign.filter(|_| mcpb).map(|key| (key, None)),
        },
    )?)
}

/// Refuses a triple the installed toolchain cannot build, with the command that adds it. With
/// cargo set to build std from its sources (`CARGO_UNSTABLE_BUILD_STD`, as the route to Windows
/// of docs/src/guide/building.md does), rustup's targets do not decide: cargo's own error does.
fn check_targets(triples: &[String]) -> Result<()> {
    if std::env::var_os(BUILD_STD_ENV).is_some() {
        return Ok(());
    }
    let host = toolhost::package::host_target();
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    for triple in triples.iter().filter(|t| *t != host) {
        match &installed {
            Some(list) if list.lines().any(|l| l.trim() == triple) => {}
            Some(_) => crate::exit::usage!(
                "--target {triple}: the installed toolchain cannot build for it (not in `rustup target list --installed`): add it with `rustup target add {triple}` (and a linker for it), or leave it out"
            ),
            None => crate::exit::usage!(
                "--target {triple}: cannot ask rustup which targets the toolchain has (is rustup on PATH?): without it only this host's triple ({host}) is built"
            ),
        }
    }
    Ok(())
}

/// A library's tool: its description and the capabilities it declares (`None` for an
/// extension, or a library whose metadata cannot be read: the host skips it when loading).
fn describe(library: &Path) -> Option<(String, Vec<String>)> {
    match toolhost::inspect(library).ok()?.kind {
        toolhost::Declared::Tool { info, .. } => Some((info.description, info.capabilities)),
        toolhost::Declared::Extension(_) => None,
    }
}

/// The plugin crates of a plugin folder: `tools/<name>/`, `extensions/<point>/<name>/`, and
/// the same under `agents/<P>/`, each with a Cargo.toml.
fn crates(folder: &Path) -> Vec<PathBuf> {
    let subdirs = |dir: &Path| -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs
    };
    let mut bases = vec![folder.to_owned()];
    bases.extend(subdirs(&folder.join("agents")));
    let mut out = Vec::new();
    for base in bases {
        out.extend(subdirs(&base.join("tools")));
        for point in subdirs(&base.join("extensions")) {
            out.extend(subdirs(&point));
        }
    }
    out.retain(|dir| dir.join("Cargo.toml").is_file());
    out
}

/// Builds the crate in `dir` with cargo (`--profile PROFILE`, and `--target TRIPLE` if given)
/// and returns its library.
fn build(dir: &Path, profile: &str, target: Option<&str>) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let shown = target.map_or(String::new(), |t| format!(", {t}"));
    eprintln!("building {} ({profile}{shown})", Escaped(dir));
    let mut command = Command::new(cargo);
    command.args([
        "build",
        "--lib",
        "--message-format=json-render-diagnostics",
        "--profile",
        profile,
    ]);
    if let Some(triple) = target {
        command.args(["--target", triple]);
    }
    let output = command
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo (is it on PATH?)")?;
    if !output.status.success() {
        bail!(
            "cargo build of {} failed (its errors are above)",
            Escaped(dir)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let libraries: Vec<PathBuf> = stdout
        .lines()
        .flat_map(crate::dev::build::libraries_in_message)
        .collect();
    match libraries.as_slice() {
        [library] => Ok(library.clone()),
        [] => bail!(
            "{}: cargo built no library (a plugin crate has crate-type = [\"cdylib\"])",
            Escaped(dir)
        ),
        _ => bail!(
            "{}: cargo built several libraries; a plugin crate builds one",
            Escaped(dir)
        ),
    }
}
