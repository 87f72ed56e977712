//! `toolhost installed`: the packages in usr/packages.lock, with version, source, signer and
//! what each provides.

use std::path::Path;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use serde_json::json;
use toolhost::package::{install, PackageLock, Shown};
use toolhost::Layout;

/// The installed packages: name, version, source, signer and the libraries each provides.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// `toolhost installed`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        installed(&global.root, self.json)
    }
}

pub(crate) fn installed(root: &Path, json: bool) -> Result<ExitCode> {
    let layout = Layout::new(root);
    let lock = PackageLock::read(&install::packages_lock_file(&layout))?;
    let provides = |files: &std::collections::BTreeMap<String, String>| -> Vec<String> {
        files
            .keys()
            .filter(|f| f.ends_with(&format!(".{}", toolhost::LIBRARY_EXTENSION)))
            .cloned()
            .collect()
    };
    if json {
        let list: Vec<_> = lock
            .packages
            .iter()
            .map(|(name, p)| {
                json!({
                    "name": name,
                    "version": p.version,
                    "source": p.source,
                    "signer": p.signer,
                    "provides": provides(&p.files),
                    "files": p.files,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if lock.packages.is_empty() {
        println!("no packages installed: `toolhost add SOURCE` installs one");
    }
    for (name, p) in &lock.packages {
        let signer = p.signer.as_deref().unwrap_or("unsigned");
        println!(
            "{name} {}  signed by {signer}  from {}",
            Shown(&p.version),
            Shown(&p.source)
        );
        for file in provides(&p.files) {
            println!("  {file}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
