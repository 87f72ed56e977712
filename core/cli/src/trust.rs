//! `toolhost trust`: the public keys whose signatures `toolhost add` accepts (usr/trusted-keys/).

use std::path::Path;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use std::path::PathBuf;
use toolhost::package::{install, signature, PackageLock};
use toolhost::{Escaped, Layout};

/// The public keys whose signatures `add` accepts (usr/trusted-keys/).
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: TrustCommand,
}

#[derive(clap::Subcommand)]
enum TrustCommand {
    /// Trust a minisign public key file (NAME.pub): copied to usr/trusted-keys/ID.pub.
    Add {
        /// The public key file.
        key: PathBuf,
    },
    /// The trusted keys.
    List,
    /// Stop trusting a key (its id, as `trust list` shows it, or its .pub file): packages it
    /// signed no longer load until signed by a trusted key and added again, or removed.
    Remove {
        /// The key id or public key file.
        key: String,
    },
}

impl Args {
    /// `toolhost trust add|list|remove`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let root = &global.root;
        match self.command {
            TrustCommand::Add { key } => add(root, &key),
            TrustCommand::List => list(root),
            TrustCommand::Remove { key } => remove(root, &key),
        }
    }
}

pub(crate) fn add(root: &Path, key: &Path) -> Result<ExitCode> {
    let dir = install::trusted_keys_dir(&Layout::new(root));
    let key = signature::trust(&dir, key)?;
    println!(
        "trusted key {} ({})",
        key.id,
        Escaped(&dir.join(format!("{}.pub", key.id)))
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn list(root: &Path) -> Result<ExitCode> {
    let dir = install::trusted_keys_dir(&Layout::new(root));
    let keys = signature::trusted_keys(&dir)?;
    if keys.is_empty() {
        println!("no trusted keys: add one with `toolhost trust add KEY.pub`");
    }
    for key in keys {
        println!("{}  {}", key.id, key.base64);
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolhost trust remove KEY`: the key's file goes from usr/trusted-keys/; the packages it
/// signed are named, since they no longer load.
pub(crate) fn remove(root: &Path, key: &str) -> Result<ExitCode> {
    let layout = Layout::new(root);
    let id = signature::untrust(&install::trusted_keys_dir(&layout), key)?;
    println!("removed key {id} from usr/trusted-keys/");
    let lock = PackageLock::read(&install::packages_lock_file(&layout))?;
    for (name, locked) in &lock.packages {
        if locked
            .signer
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&id))
        {
            println!(
                "package {name} {} is signed by key {id}: it no longer loads until it is signed by a trusted key and added again (`toolhost add`), or removed (`toolhost remove {name}`)",
                locked.version
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
