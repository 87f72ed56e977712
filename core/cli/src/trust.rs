//! `toolhost trust`: the public keys whose signatures `toolhost add` accepts (usr/trusted-keys/).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use toolhost::package::{install, signature};
use toolhost::{Escaped, Layout};

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
