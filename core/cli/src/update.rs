//! `toolhost update [NAME]`: the newer version of installed packages from the sources they came
//! from, verified and installed as `toolhost add` does (add.rs).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};
use toolhost::package::{install, PackageLock};
use toolhost::Layout;

use crate::add::{fetch_and_verify, finish, AddOptions};
use crate::shared_args::PackageArgs;
use crate::Global;

/// Install the newer version of installed packages (all, or NAME) from the sources they
/// came from, with the same checks; the old version serves until the new one is in place.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The package (default: every installed one).
    name: Option<String>,
    #[command(flatten)]
    package: PackageArgs,
}

impl Args {
    /// `toolhost update`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let options = AddOptions::new(global, false, "release".to_owned(), self.package)?;
        update(&global.root, self.name.as_deref(), &options)
    }
}

/// Each package (NAME, or every installed one) fetched from its source and verified; installed
/// if its files changed.
pub(crate) fn update(root: &Path, name: Option<&str>, options: &AddOptions) -> Result<ExitCode> {
    let layout = Layout::new(root);
    let lock = PackageLock::read(&install::packages_lock_file(&layout))?;
    let names: Vec<String> = match name {
        Some(name) if !lock.packages.contains_key(name) => {
            bail!("no installed package {name:?}: `toolhost installed` lists them")
        }
        Some(name) => vec![name.to_owned()],
        None => lock.packages.keys().cloned().collect(),
    };
    for name in names {
        let locked = &lock.packages[&name];
        let verified = fetch_and_verify(&layout, &locked.source, options)?;
        if verified.manifest.name != name {
            bail!(
                "{}: its source now holds package {}, not {name}; nothing was changed",
                locked.source,
                verified.manifest.name
            );
        }
        if verified.files == locked.files {
            println!(
                "{name} {} is up to date ({})",
                locked.version, locked.source
            );
            continue;
        }
        finish(&layout, verified, options)?;
    }
    Ok(ExitCode::SUCCESS)
}
