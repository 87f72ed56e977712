//! `toolhost keygen`: a minisign key pair for signing packages.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use toolhost::package::signature;
use toolhost::Escaped;

/// Make a minisign key pair for signing packages: DIR/NAME.pub and DIR/NAME.key (the
/// secret key encrypted with a password, as minisign does, unless --no-password).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The folder to write the keys into. Default: toolhost/keys/ in the user's
    /// configuration folder (~/.config on Linux), outside any repository.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The keys' file name.
    #[arg(long, default_value = "toolhost")]
    name: String,
    /// Leave the secret key unencrypted (for CI signing keys kept in a secret store).
    #[arg(long)]
    no_password: bool,
}

impl Args {
    /// `toolhost keygen`.
    pub(crate) fn run(self, _: &Global) -> Result<ExitCode> {
        keygen(self.out, &self.name, self.no_password)
    }
}

pub(crate) fn keygen(out: Option<PathBuf>, name: &str, no_password: bool) -> Result<ExitCode> {
    if !toolhost::is_safe_name(name) {
        crate::exit::usage!("--name {name:?}: a file name (letters, digits, '_', '-' and '.')");
    }
    let out = match out {
        Some(out) => out,
        None => default_dir()?,
    };
    let out = out.as_path();
    let password = match no_password {
        true => None,
        false => Some(match std::env::var(signature::PASSWORD_ENV) {
            Ok(p) if !p.is_empty() => p,
            _ => ask_password()?,
        }),
    };
    let key = signature::keygen(out, name, password)?;
    println!("public key  {}", Escaped(&out.join(format!("{name}.pub"))));
    println!("secret key  {}", Escaped(&out.join(format!("{name}.key"))));
    println!("key id      {}", key.id);
    println!(
        "sign with `toolhost pack --sign {}`; users trust it with `toolhost trust add {name}.pub`",
        Escaped(&out.join(format!("{name}.key")))
    );
    Ok(ExitCode::SUCCESS)
}

/// `toolhost/keys/` in the user's configuration folder: a secret key is never written into the
/// working tree (where `git add .` would commit it) unless `--out` says so.
fn default_dir() -> Result<PathBuf> {
    let Some(config) = dirs::config_dir() else {
        crate::exit::usage!(
            "keygen: no configuration folder for the keys (HOME is not set): pass --out DIR"
        );
    };
    let dir = config.join("toolhost").join("keys");
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}; pass --out DIR", Escaped(&dir)))?;
    Ok(dir)
}

/// The password for a new secret key, typed twice on the terminal.
fn ask_password() -> Result<String> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        crate::exit::usage!(
            "keygen needs a password for the secret key: type it on a terminal, set {}, or pass --no-password",
            signature::PASSWORD_ENV
        );
    }
    let first = rpassword::prompt_password("Password for the secret key: ")?;
    let second = rpassword::prompt_password("Password (again): ")?;
    if first != second {
        crate::exit::usage!("the two passwords differ: run keygen again");
    }
    Ok(first)
}
