//! The reload lines of the long-lived commands (`watch`, `serve-mcp`, `chat`): each load,
//! reload, failure and removal once, in the library's one format ([`toolhost::Report`]).

use std::path::{Component, Path};
use std::sync::Arc;

use anyhow::Result;
use toolhost::package::{install, PackageLock};
use toolhost::{Host, Layout, ReloadEvent, Watcher};

/// Where the lines go.
pub(crate) enum To {
    /// `watch`: its standard output is the conversation with the user.
    Stdout,
    /// `serve-mcp` (standard output is the protocol) and `chat` (it holds the answers).
    Stderr,
}

/// Watches the host's folders and prints a line for every change, until the watcher is
/// dropped.
pub(crate) fn report(host: &Arc<Host>, to: To) -> Result<Watcher> {
    print(host, to);
    Ok(host.watch()?)
}

/// Prints a line for every change a watcher of `host` (started by the caller) reports.
pub(crate) fn print(host: &Host, to: To) {
    let events = host.subscribe();
    let root = host.root().to_owned();
    std::thread::spawn(move || {
        for event in events {
            let mut line = event.report(&root).to_string();
            if let Some(package) = package_of(&root, &event) {
                line.push_str(&format!(" (package {package})"));
            }
            match to {
                To::Stdout => println!("{line}"),
                To::Stderr => eprintln!("{line}"),
            }
        }
    });
}

/// `NAME VERSION` of the installed package a loaded library belongs to
/// (`usr/plugins/NAME/...`), from usr/packages.lock: the version its author released, which
/// the library's own (its crate's) need not be.
fn package_of(root: &Path, event: &ReloadEvent) -> Option<String> {
    let ReloadEvent::Loaded { path, .. } = event else {
        return None;
    };
    let rel = path.strip_prefix(root).unwrap_or(path);
    let mut parts = rel
        .components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| c.as_os_str().to_str());
    if (parts.next()?, parts.next()?) != (Some("usr"), Some("plugins")) {
        return None;
    }
    let name = parts.next()??;
    let layout = Layout::new(root);
    let lock = PackageLock::read(&install::packages_lock_file(&layout)).ok()?;
    let locked = lock.packages.get(name)?;
    Some(format!(
        "{name} {}",
        toolhost::package::Shown(&locked.version)
    ))
}
