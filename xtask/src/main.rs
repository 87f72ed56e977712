//! Developer tasks: `cargo xtask install` builds every built-in plugin and puts each library
//! where discovery looks (release profile); `cargo xtask demo` does that with the dev profile,
//! runs the demo, and builds the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::Value;

// The environment a shell gives cargo: shared with the tests' own build of the fixtures.
#[path = "../../tests/src/shell_env.rs"]
mod shell_env;

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build the built-in plugins and install each library beside its crate folder.
    Install {
        /// Build in debug mode (faster to build, slower to run).
        #[arg(long, conflicts_with = "dist")]
        debug: bool,
        /// Build with the dist profile (whole-program optimisation: smaller, faster-loading
        /// libraries, several times the build time), for shipping.
        #[arg(long)]
        dist: bool,
    },
    /// Install (dev profile), then show discovery, a call, an unknown tool and a profile
    /// override.
    Demo,
}

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::Install { debug, dist } => {
            let profile = match (debug, dist) {
                (true, _) => "dev",
                (_, true) => "dist",
                _ => "release",
            };
            install(profile).map(|_| ())
        }
        Task::Demo => demo(),
    }
}

/// A workspace crate whose folder has the shape of a discovery path: `<layer>/tools/<name>/` or
/// `<layer>/extensions/<point>/<name>/`. Its library is installed as `<folder>.<ext>`.
struct Installable {
    package: String,
    lib_name: String,
    dir: PathBuf,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is one level down")
        .to_owned()
}

fn cargo() -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // `cargo run` gives this process the variables of the xtask package: the build must see
    // the environment a shell gives it.
    shell_env::as_from_a_shell(&mut cargo);
    cargo
}

fn installables(root: &Path) -> Result<(Vec<Installable>, PathBuf)> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout)?;
    let target_dir = PathBuf::from(meta["target_directory"].as_str().unwrap_or("target"));
    let mut found = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().unwrap_or(root).to_owned();
        let rel = dir.strip_prefix(root).unwrap_or(&dir);
        let parts: Vec<_> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let shaped = matches!(
            parts.len().checked_sub(2).map(|i| parts[i].as_str()),
            Some("tools")
        ) || matches!(
            parts.len().checked_sub(3).map(|i| parts[i].as_str()),
            Some("extensions")
        );
        if !shaped || rel.starts_with("tests") {
            continue;
        }
        let lib = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| {
                t["crate_types"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|k| k == "cdylib"))
            });
        if let Some(lib) = lib {
            found.push(Installable {
                package: package["name"].as_str().unwrap_or_default().to_owned(),
                lib_name: lib["name"].as_str().unwrap_or_default().replace('-', "_"),
                dir,
            });
        }
    }
    Ok((found, target_dir))
}

/// Builds the host and the built-in plugins with `profile` (`dev`, `release`, `dist`) and puts
/// each library beside its crate folder. A library that is a symbolic link (a developer's live
/// reload link) is left alone, and said so.
fn install(profile: &str) -> Result<PathBuf> {
    let root = workspace_root();
    let (plugins, target_dir) = installables(&root)?;
    let mut build = cargo();
    build
        .arg("build")
        .current_dir(&root)
        .args(["-p", "toolhost-cli"]);
    build.args(["--profile", profile]);
    for p in &plugins {
        build.args(["-p", &p.package]);
    }
    eprintln!(
        "building toolhost and {} plugins ({})",
        plugins.len(),
        profile
    );
    if !build.status().context("running cargo build")?.success() {
        bail!("cargo build failed");
    }
    let profile_dir = target_dir.join(match profile {
        "dev" => "debug",
        other => other,
    });
    for p in &plugins {
        let built = profile_dir.join(format!(
            "{}{}{}",
            std::env::consts::DLL_PREFIX,
            p.lib_name,
            std::env::consts::DLL_SUFFIX
        ));
        let dest = p.dir.with_extension(std::env::consts::DLL_EXTENSION);
        let shown = dest
            .strip_prefix(&root)
            .unwrap_or(&dest)
            .display()
            .to_string();
        if dest
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            eprintln!("  left {shown}: it is a symbolic link (live reload of your own build)");
            continue;
        }
        // Copy then rename, so a running host never sees a half-written library.
        let tmp = p.dir.with_extension("installing");
        std::fs::copy(&built, &tmp).with_context(|| format!("copying {}", built.display()))?;
        std::fs::rename(&tmp, &dest).with_context(|| format!("installing {}", dest.display()))?;
        eprintln!("  installed {shown}");
    }
    Ok(profile_dir.join(format!("toolhost{}", std::env::consts::EXE_SUFFIX)))
}

fn demo() -> Result<()> {
    let root = workspace_root();
    // The dev profile: the demo needs no speed, and `cargo test --workspace` afterwards reuses
    // the same build of the host and every dependency instead of compiling them again (a
    // release build on top took about as long as the tests' own on two cores).
    let host = install("dev")?;
    let (bold, plain) = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    let step = |title: &str, args: &[&str]| -> Result<()> {
        println!(
            "\n{bold}== {title}{plain}\n$ toolhost {}",
            shell_words(args)
        );
        let status = Command::new(&host).args(args).current_dir(&root).status()?;
        if !status.success() {
            println!("(exit status {})", status.code().unwrap_or(-1));
        }
        Ok(())
    };
    step(
        "Discovery: the tools profile 'example' sees, by layer",
        &["list", "--profile", "example"],
    )?;
    step(
        "A scripted session (the model's replies come from a file; everything else is real)",
        &[
            "run",
            "plugins/example/demo/session.txt",
            "--profile",
            "example",
            "--secrets",
            "plugins/example/demo/secrets.env",
        ],
    )?;
    // Everything is built: the tests too, so that `cargo test --workspace` next starts running
    // at once instead of compiling first (about a minute on two cores). The demo has run by
    // now: a failure here is said, and left to `cargo test` to show.
    println!("\n{bold}Building the tests{plain}, so that `cargo test --workspace` starts at once");
    let built = cargo()
        .current_dir(&root)
        .args(["build", "--workspace", "--tests"])
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("the tests did not build: `cargo test --workspace` shows why");
    }
    Ok(())
}

fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if a.contains([' ', '"', '{']) {
                format!("'{a}'")
            } else {
                (*a).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
