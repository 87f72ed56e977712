//! `toolhost pin`: writes `usr/plugins.lock` with the SHA-256 of every library the layers hold;
//! `--check` compares instead, for CI.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use toolhost::pins::PinLock;
use toolhost::{Escaped, Host};

/// Write usr/plugins.lock with the SHA-256 of every library in the layers (tools and
/// extensions of every profile). With `pinning = true` in usr/toolhost.toml, a library
/// missing from the lock, or whose bytes changed, is then refused.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Compare the layers with the lock instead of writing it: list what is not pinned,
    /// changed or gone, and exit 1 if anything is.
    #[arg(long)]
    check: bool,
}

impl Args {
    /// `toolhost pin`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        pin(&global.host()?, self.check)
    }
}

pub(crate) fn pin(host: &Host, check: bool) -> Result<ExitCode> {
    let layout = host.layout();
    let file = layout.pins_file();
    let found = PinLock::collect(layout, host.options().max_library_bytes)?;
    if !check {
        found.write(&file)?;
        let pinning = host.config("default").map(|c| c.pinning()).unwrap_or(false);
        let n = found.len();
        let libraries = if n == 1 { "library" } else { "libraries" };
        println!("pinned {n} {libraries} in {}", Escaped(&file));
        if !pinning {
            println!(
                "pinning is off: set `pinning = true` in usr/toolhost.toml to refuse the others"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let pinned = PinLock::read(&file, host.options().max_text_bytes)?.unwrap_or_default();
    let differences = compare(&pinned, &found);
    for line in &differences {
        println!("{line}");
    }
    if differences.is_empty() {
        println!("all {} libraries match {}", found.len(), Escaped(&file));
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "error: {} difference(s) from {}: run `toolhost pin` after a change you trust",
        differences.len(),
        Escaped(&file)
    );
    Ok(ExitCode::FAILURE)
}

/// `changed`, `not pinned` and `pinned, gone` lines, by path.
fn compare(pinned: &PinLock, found: &PinLock) -> Vec<String> {
    let old: BTreeMap<&str, &str> = pinned.iter().collect();
    let new: BTreeMap<&str, &str> = found.iter().collect();
    let mut lines = Vec::new();
    for (path, hash) in &new {
        match old.get(path) {
            None => lines.push(format!("not pinned   {path}")),
            Some(h) if h != hash => lines.push(format!("changed      {path}")),
            Some(_) => {}
        }
    }
    for path in old.keys().filter(|p| !new.contains_key(*p)) {
        lines.push(format!("pinned, gone {path}"));
    }
    lines
}
