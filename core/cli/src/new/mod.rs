//! `toolhost new NAME`: a plugin crate where its library goes (`usr/tools/NAME/` builds
//! `usr/tools/NAME.so`), with the library linked into the layer, so that `cargo build` in the
//! crate is the whole development loop. Outside a root, a standalone crate `./NAME/`. Either
//! depends on the plugin SDK this binary carries (sdk.rs), so it builds in any folder.

mod sdk;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::Global;
use anyhow::{bail, Context as _, Result};

const CARGO_TOML: &str = include_str!("Cargo.toml.tmpl");
const TOOL: &str = include_str!("tool.rs.tmpl");
const EXTENSION: &str = include_str!("extension.rs.tmpl");
const GITIGNORE: &str = "/target\n/Cargo.lock\n";

/// Start a plugin: a crate in usr/tools/NAME/ (or usr/extensions/POINT/NAME/, or a
/// profile's folder) whose debug build is linked into the layer, so `cargo build` in the
/// crate is the development loop; outside a root (no usr/, core/ or plugins/), the
/// standalone crate ./NAME/. It has typed arguments, progress, a repairable error and unit
/// tests, and depends on the plugin-api this toolhost speaks (a copy it carries, unpacked
/// into the user's data folder): no checkout of toolhost is needed.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The tool's (or extension's) name: lower-case letters, digits and '_'.
    name: String,
    /// Make an extension run at this point (e.g. `tool_execute_after`).
    #[arg(long, value_name = "POINT")]
    extension: Option<String>,
    /// Put it in this profile's folder (usr/agents/P/), overriding the tool for P only.
    #[arg(long, short)]
    profile: Option<String>,
}

impl Args {
    /// `toolhost new`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let plugin = NewPlugin {
            name: &self.name,
            extension: self.extension.as_deref(),
            profile: self.profile.as_deref(),
        };
        new(&global.root, &plugin)
    }
}

/// What to scaffold.
pub(crate) struct NewPlugin<'a> {
    pub(crate) name: &'a str,
    /// `Some(point)` for an extension.
    pub(crate) extension: Option<&'a str>,
    /// `Some(profile)` for a profile's override.
    pub(crate) profile: Option<&'a str>,
}

pub(crate) fn new(root: &Path, plugin: &NewPlugin<'_>) -> Result<ExitCode> {
    check_names(plugin)?;
    if !toolhost::Layout::new(root).is_root() {
        return standalone(root, plugin);
    }
    let layer_dir = layer_dir(plugin);
    let crate_dir = root.join(&layer_dir).join(plugin.name);
    let library = format!("{}.{}", plugin.name, std::env::consts::DLL_EXTENSION);
    let link = root.join(&layer_dir).join(&library);
    if crate_dir.exists() || link.symlink_metadata().is_ok() {
        bail!(
            "{} already exists: choose another name or remove it",
            shown(
                root,
                if crate_dir.exists() {
                    &crate_dir
                } else {
                    &link
                }
            )
        );
    }
    std::fs::create_dir_all(&crate_dir)
        .with_context(|| format!("cannot create {}", crate_dir.display()))?;
    let lib = library_name(plugin.name, &crate_dir)?;
    write_crate(
        &crate_dir,
        plugin,
        &format!("{}/{library}", layer_dir.display()),
        &lib,
    )?;
    let built = link_library(&link, plugin.name, &lib)?;
    print_next(root, &crate_dir, plugin, &link, built);
    Ok(ExitCode::SUCCESS)
}

/// `toolhost new NAME` outside a root: the crate `./NAME/`, and how a root uses it.
fn standalone(dir: &Path, plugin: &NewPlugin<'_>) -> Result<ExitCode> {
    if let Some(profile) = plugin.profile {
        crate::exit::usage!(
            "--profile {profile}: {} is not a root (no usr/, core/ or plugins/ in it), so it has \
             no profiles; run `toolhost new` in a root, or pass --root",
            toolhost::Escaped(dir)
        );
    }
    let crate_dir = dir.join(plugin.name);
    if crate_dir.symlink_metadata().is_ok() {
        bail!(
            "{} already exists: choose another name or remove it",
            toolhost::Escaped(&crate_dir)
        );
    }
    std::fs::create_dir_all(&crate_dir)
        .with_context(|| format!("cannot create {}", crate_dir.display()))?;
    let lib = library_name(plugin.name, &crate_dir)?;
    let (layer, what) = match plugin.extension {
        Some(point) => (format!("usr/extensions/{point}"), "extension"),
        None => ("usr/tools".to_owned(), "tool"),
    };
    let library = format!("{}.{}", plugin.name, std::env::consts::DLL_EXTENSION);
    write_crate(&crate_dir, plugin, &format!("ROOT/{layer}/{library}"), &lib)?;
    let built = std::path::absolute(&crate_dir)?
        .join("target/debug")
        .join(dll_file(&lib));
    println!(
        "created {what} crate {} (standalone: {} is not a root, no usr/, core/ or plugins/ in it)",
        toolhost::Escaped(&crate_dir),
        toolhost::Escaped(dir)
    );
    println!("next:");
    println!(
        "  (cd {} && cargo build && cargo test)",
        toolhost::Escaped(&crate_dir)
    );
    println!(
        "then point a root at it, by a link to its build (each build is then the next call's):"
    );
    println!(
        "  mkdir -p ROOT/{layer} && ln -s {} ROOT/{layer}/{library}",
        toolhost::Escaped(&built)
    );
    println!(
        "or, to install a copy, `toolhost --root ROOT add` its package (`toolhost pack`, see the book's packages chapter)"
    );
    Ok(ExitCode::SUCCESS)
}

/// The crate's library name: its name and a hash of its folder, unique to its place, so that
/// two crates of one name (a user's tool and a profile's override, or two roots) never build
/// the same file in a shared `CARGO_TARGET_DIR`.
fn library_name(name: &str, crate_dir: &Path) -> Result<String> {
    use std::hash::{Hash as _, Hasher as _};
    let place = crate_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", crate_dir.display()))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    place.hash(&mut hasher);
    Ok(format!("{name}_{:08x}", hasher.finish() as u32))
}

/// `lib{lib}.so`, `{lib}.dll`, ...
fn dll_file(lib: &str) -> String {
    format!(
        "{}{lib}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

fn check_names(plugin: &NewPlugin<'_>) -> Result<()> {
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    if !valid(plugin.name) {
        crate::exit::usage!(
            "invalid plugin name '{}': use lower-case letters, digits and '_', starting with a \
             letter (it is the tool's name and the crate's)",
            plugin.name
        );
    }
    for (what, value) in [
        ("--extension", plugin.extension),
        ("--profile", plugin.profile),
    ] {
        if let Some(v) = value.filter(|v| !toolhost::is_safe_name(v)) {
            crate::exit::usage!("invalid {what} '{v}': use letters, digits, '_', '-' and '.' only");
        }
    }
    Ok(())
}

/// `usr/tools`, `usr/extensions/<point>`, `usr/agents/<profile>/tools`, ...
fn layer_dir(plugin: &NewPlugin<'_>) -> PathBuf {
    let mut dir = PathBuf::from("usr");
    if let Some(profile) = plugin.profile {
        dir = dir.join("agents").join(profile);
    }
    match plugin.extension {
        Some(point) => dir.join("extensions").join(point),
        None => dir.join("tools"),
    }
}

fn write_crate(dir: &Path, plugin: &NewPlugin<'_>, library: &str, lib: &str) -> Result<()> {
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let plugin_api = sdk::dependency(false)?;
    let plugin_api_testing = sdk::dependency(true)?;
    let camel = camel_case(plugin.name);
    let (kind, description, source) = match plugin.extension {
        Some(_) => ("extension", "Records that it ran.", EXTENSION),
        None => ("tool", "Greets someone by name.", TOOL),
    };
    let fill = |text: &str| {
        text.replace("{name}", plugin.name)
            .replace("{camel}", &camel)
            .replace("{point}", plugin.extension.unwrap_or_default())
            .replace("{kind}", kind)
            .replace("{description}", description)
            .replace("{library}", library)
            .replace("{lib}", lib)
            .replace("{plugin_api_testing}", &plugin_api_testing)
            .replace("{plugin_api}", &plugin_api)
    };
    for (file, text) in [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(source)),
        (".gitignore", GITIGNORE.to_owned()),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Links `<layer>/NAME.so` to the crate's debug build (in `$CARGO_TARGET_DIR` when that is
/// set, as cargo will put it there); returns whether the link was made.
fn link_library(link: &Path, name: &str, lib: &str) -> Result<bool> {
    let file = dll_file(lib);
    let built = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => std::path::absolute(PathBuf::from(dir))?
            .join("debug")
            .join(file),
        None => Path::new(name).join("target/debug").join(file),
    };
    let built = built.display().to_string();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&built, link)
            .with_context(|| format!("cannot link {} to {built}", link.display()))?;
        Ok(true)
    }
    #[cfg(not(unix))]
    {
        let _ = (built, link);
        Ok(false)
    }
}

fn print_next(root: &Path, crate_dir: &Path, plugin: &NewPlugin<'_>, link: &Path, linked: bool) {
    let kind = if plugin.extension.is_some() {
        "extension"
    } else {
        "tool"
    };
    println!("created {kind} crate {}", shown(root, crate_dir));
    if linked {
        println!("linked  {} -> its target/debug build", shown(root, link));
    } else {
        println!(
            "after each build, copy its target/debug library to {}",
            shown(root, link)
        );
    }
    let profile = plugin
        .profile
        .map(|p| format!(" --profile {p}"))
        .unwrap_or_default();
    println!("next:");
    println!(
        "  (cd {} && cargo build && cargo test)",
        shown(root, crate_dir)
    );
    match plugin.extension {
        None => println!(
            "  toolhost call {}{profile} --args '{{\"name\": \"Ada\"}}'   (or `toolhost watch{profile}` while you edit)",
            plugin.name
        ),
        Some(_) => println!("  toolhost watch{profile}   (rebuild and watch it reload)"),
    }
}

fn shown(root: &Path, path: &Path) -> String {
    toolhost::Escaped(path.strip_prefix(root).unwrap_or(path)).to_string()
}

/// `my_tool` -> `MyTool`.
fn camel_case(name: &str) -> String {
    name.split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}
