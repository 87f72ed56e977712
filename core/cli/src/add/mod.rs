//! `toolhost add SOURCE` and `toolhost update [NAME]`: verify a package (signature against the
//! trusted keys, every hash, `[compat]`, the target triple), show what it installs, ask (or
//! `--yes`), then install it into usr/plugins/<name>/ in one rename and record it in
//! usr/packages.lock. A running host picks it up through its normal reload path.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use toolhost::package::{install, Locked, Policy, Replace, Shown, Verified};
use toolhost::Layout;

use crate::shared_args::PackageArgs;
use crate::Global;
pub(crate) use source::fetch_and_verify;

mod source;

/// Install a package: SOURCE is an archive (its .minisig beside it), an unpacked package
/// folder, or an http(s) URL; or a plugin folder built here (--path, --git). Verified first
/// (signature, hashes, compat, target triple), shown, asked (or --yes), installed into
/// usr/plugins/NAME/ in one rename and recorded in usr/packages.lock. A running host loads
/// it live.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The package.
    #[arg(required_unless_present_any = ["path", "git"], conflicts_with_all = ["path", "git"])]
    source: Option<String>,
    /// Build the plugin folder DIR (with toolhost-plugin.toml) here and install it.
    #[arg(long, value_name = "DIR", conflicts_with = "git")]
    path: Option<PathBuf>,
    /// Clone the repository URL (a plugin folder at its top) and build it here.
    #[arg(long, value_name = "URL")]
    git: Option<String>,
    /// With --git: the commit, tag or branch to build.
    #[arg(long, value_name = "REV", requires = "git")]
    rev: Option<String>,
    /// With --path or --git: the cargo profile the crates are built with.
    #[arg(long, default_value = "release")]
    cargo_profile: String,
    /// Install only what usr/packages.lock records for this package (same version, same
    /// bytes).
    #[arg(long)]
    locked: bool,
    #[command(flatten)]
    package: PackageArgs,
}

impl Args {
    /// `toolhost add`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let source = match (self.source, self.path, self.git) {
            (Some(source), _, _) => source,
            (None, Some(path), _) => {
                let path = std::fs::canonicalize(&path).unwrap_or(path);
                format!("path+{}", path.display())
            }
            (None, None, Some(url)) => match self.rev {
                Some(rev) => format!("git+{url}#{rev}"),
                None => format!("git+{url}"),
            },
            (None, None, None) => crate::exit::usage!("add needs SOURCE, --path DIR or --git URL"),
        };
        let (locked, cargo_profile) = (self.locked, self.cargo_profile);
        let options = AddOptions::new(global, locked, cargo_profile, self.package)?;
        add(&global.root, &source, &options)
    }
}

/// What `add` and `update` were asked.
pub(crate) struct AddOptions {
    pub(crate) yes: bool,
    pub(crate) locked: bool,
    pub(crate) policy: Policy,
    /// The cargo profile a package built from source (`--path`, `--git`) is built with.
    pub(crate) cargo_profile: String,
    /// `--ca FILE`: certificate authorities (PEM) trusted for https:// sources besides the
    /// system's.
    pub(crate) ca: Option<PathBuf>,
    /// `--allow-downgrade` and `--new-signer`.
    pub(crate) replace: Replace,
}

impl AddOptions {
    /// The options of `add` and `update`, with the trust policy of usr/toolhost.toml.
    pub(crate) fn new(
        global: &Global,
        locked: bool,
        cargo_profile: String,
        package: PackageArgs,
    ) -> Result<Self> {
        let layout = Layout::new(&global.root);
        let config =
            toolhost::config::Config::load(&layout, "default", toolhost::DEFAULT_MAX_TEXT_BYTES)?;
        let policy = Policy {
            require_signature: config.require_signature(),
            signers: config.package_signers(),
        };
        Ok(AddOptions {
            yes: global.yes,
            locked,
            policy,
            cargo_profile,
            replace: package.replace(),
            ca: package.ca,
        })
    }
}

pub(crate) fn add(root: &Path, source: &str, options: &AddOptions) -> Result<ExitCode> {
    let layout = Layout::new(root);
    let verified = fetch_and_verify(&layout, source, options)?;
    if options.locked {
        install::check_locked(&layout, &verified)?;
    }
    finish(&layout, verified, options)
}

/// Shows, asks and installs.
pub(crate) fn finish(
    layout: &Layout,
    verified: Verified,
    options: &AddOptions,
) -> Result<ExitCode> {
    // `--locked` installs the version the lock names, whatever is installed.
    let replace = Replace {
        allow_downgrade: options.replace.allow_downgrade || options.locked,
        ..options.replace
    };
    // Refused before anything is shown or asked; `install` checks again against the lock
    // it writes.
    let installed = install::installed(layout, &verified)?;
    if let Some(installed) = &installed {
        install::check_replace(installed, &verified, replace)?;
    }
    show(layout, &verified, installed.as_ref());
    if !options.yes {
        if !std::io::stdin().is_terminal() {
            crate::exit::usage!(
                "not installed: pass --yes to install without a terminal to ask on"
            );
        }
        let question = match &installed {
            Some(old) => format!(
                "Install {} {} → {}{}? [y/N] ",
                verified.manifest.name,
                Shown(&old.version),
                verified.manifest.version,
                signer_change(old, &verified)
                    .map(|change| format!(", {change}"))
                    .unwrap_or_default()
            ),
            None => format!("Install {}? [y/N] ", verified.manifest.label()),
        };
        print!("{question}");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not installed");
            return Ok(ExitCode::FAILURE);
        }
    }
    let name = verified.manifest.name.clone();
    let label = verified.manifest.label();
    let replaced = install::install(layout, verified, replace)?;
    match replaced {
        Some(old) => println!(
            "installed {label} into usr/plugins/{name}/ (replacing {})",
            old.version
        ),
        None => println!("installed {label} into usr/plugins/{name}/"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `key A is replaced by key B` when `verified` has another signer than the installed `old`.
fn signer_change(old: &Locked, verified: &Verified) -> Option<String> {
    let new = verified.signer.as_ref().map(|k| k.id.as_str());
    match (old.signer.as_deref(), new) {
        (Some(old), Some(new)) if old.eq_ignore_ascii_case(new) => None,
        (None, None) => None,
        (old, new) => Some(format!(
            "its signer key {} replaced by {}",
            old.unwrap_or("(none)"),
            new.map_or("nobody (unsigned)".to_owned(), |k| format!("key {k}"))
        )),
    }
}

/// What is being installed: name, version, signer, source, what it replaces, every file it
/// adds (libraries, prompts, extensions, skills; and what each overrides), and the
/// capabilities it asks for. Text from the package is shown escaped ([`Shown`]).
fn show(layout: &Layout, verified: &Verified, installed: Option<&Locked>) {
    let m = &verified.manifest;
    println!("package      {} — {}", m.label(), Shown(&m.description));
    match &verified.signer {
        Some(key) => println!("signed by    {} (trusted)", key.id),
        None if verified.source.starts_with("path+") || verified.source.starts_with("git+") => {
            println!("signed by    nobody (built here from source: you trust the source)")
        }
        None => println!("signed by    nobody (unsigned; allowed by require_signature = false)"),
    }
    println!("source       {}", Shown(&verified.source));
    if let Some(old) = installed {
        println!(
            "replaces     {} {} (signed by {}, from {})",
            m.name,
            Shown(&old.version),
            old.signer.as_deref().unwrap_or("nobody"),
            Shown(&old.source)
        );
        if let Some(change) = signer_change(old, verified) {
            let why = match verified.signer_named {
                true => "[packages.signers] names the new key for this source",
                false => "--new-signer",
            };
            println!("NEW SIGNER   {change} ({why})");
        }
        if old.source != verified.source {
            println!(
                "NEW SOURCE   {} (was {})",
                Shown(&verified.source),
                Shown(&old.source)
            );
        }
    }
    for place in verified.files.keys() {
        if place == toolhost::package::MANIFEST_FILE_NAME {
            continue;
        }
        let (kind, replaces) = kind_of(place);
        let mut notes = vec![kind.to_owned()];
        if let Some(what) = replaces {
            notes.push(what);
        }
        match standing(layout, place, &m.name) {
            Some((layer, true)) => notes.push(format!(
                "shadowed by the one in {layer}, which keeps serving"
            )),
            Some((layer, false)) => notes.push(format!("overrides the one in {layer}")),
            None => {}
        }
        println!("adds         {}  ({})", Shown(place), notes.join("; "));
    }
    let capabilities = match m.capabilities.is_empty() {
        true => "none".to_owned(),
        false => m
            .capabilities
            .iter()
            .map(|c| Shown(c).to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    println!("capabilities {capabilities} (granted in your configuration, not by the package)");
    if !m.secrets.is_empty() {
        // Installing grants them: an installed package's tools receive the secrets its
        // manifest declares, and no other (docs/src/reference/isolation.md).
        println!(
            "secrets      {} (its tools receive these secrets of usr/secrets.env once installed)",
            m.secrets.join(", ")
        );
    }
}

/// What the file at `place` in a plugin folder is (`library`, `prompt`, `extension`,
/// `skill`, `file`), and, for a prompt that is not a tool's fragment, what of the agent it
/// replaces: `agent.system.main.md` is the core system prompt.
fn kind_of(place: &str) -> (&'static str, Option<String>) {
    // `agents/<P>/...` is the same file for profile P.
    let (profile, rest) = match place.strip_prefix("agents/") {
        Some(rest) => match rest.split_once('/') {
            Some((profile, rest)) => (Some(profile), rest),
            None => (None, place),
        },
        None => (None, place),
    };
    let library = [".so", ".dylib", ".dll"]
        .iter()
        .any(|ext| rest.ends_with(ext));
    let first = rest.split('/').next().unwrap_or("");
    match first {
        "tools" if library => ("library: a tool", None),
        "extensions" if library => ("library: an extension", None),
        _ if library => ("library", None),
        "extensions" => ("extension", None),
        "skills" => ("skill", None),
        "prompts" => {
            let file = rest.rsplit('/').next().unwrap_or(rest);
            let whose = profile.map_or(String::new(), |p| format!(" of profile {p}"));
            let replaces = match file {
                f if f.starts_with("agent.system.tool.") => None,
                "agent.system.main.md" => Some(format!(
                    "REPLACES THE CORE SYSTEM PROMPT{whose} (agent.system.main.md)"
                )),
                f => Some(format!("replaces the agent's prompt {f}{whose}")),
            };
            ("prompt", replaces)
        }
        _ => ("file", None),
    }
}

/// The first other layer of the default profile that has a file at `place` (`tools/x.so`),
/// and whether it comes before the package's layer `usr/plugins/<name>/` (and so keeps
/// serving) rather than after it (the package overrides it). See the layer order in
/// docs/src/guide/profiles.md.
fn standing(layout: &Layout, place: &str, name: &str) -> Option<(String, bool)> {
    use toolhost::LayerKind;
    let own = format!("usr/plugins/{name}");
    let layer = layout
        .layers("default")
        .into_iter()
        .filter(|layer| layer.label != own)
        .find(|layer| layer.dir.join(place).exists())?;
    let before = match layer.kind {
        LayerKind::Profile | LayerKind::User => true,
        // User plugins in folder-name order, then the built-in ones (a built-in plugin of the
        // same name is hidden by the package).
        LayerKind::Plugin => layer
            .label
            .strip_prefix("usr/plugins/")
            .is_some_and(|other| other < name),
        _ => false,
    };
    Some((layer.label, before))
}
