//! The arguments several commands share: a number of seconds (`watch`, `chat`, `serve-mcp`),
//! what `watch` and `dev` watch, the session of `run` and `chat`, and how `add` and `update`
//! fetch a package and replace an installed one.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use toolhost::package::Replace;
use toolhost::{Host, LoopOptions};

use crate::Global;

/// The longest `--debounce-ms`: the longest duration the host takes from outside.
const MAX_DEBOUNCE_MS: u64 = toolhost::config::numbers::MAX_SECONDS * 1000;

/// The longest grace or drain period accepted: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// A number of seconds (`30`, `0.5`), 0 to a day.
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if (0.0..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to {MAX_SECONDS}"
        )),
    }
}

/// The arguments `watch` and `dev` share: whose tools are called, and how quiet a changed file
/// must be.
#[derive(clap::Args)]
pub(crate) struct WatchArgs {
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    pub(crate) profile: String,
    /// The agent's name.
    #[arg(long, default_value = "A0")]
    pub(crate) agent: String,
    /// How long a changed file must stay quiet before it is read (or, for `dev`, built), in
    /// milliseconds.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(..=MAX_DEBOUNCE_MS))]
    debounce_ms: u64,
}

impl WatchArgs {
    /// The debounce as a duration.
    pub(crate) fn debounce(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.debounce_ms)
    }
}

/// The arguments `run` and `chat` share: the agent's name, when its loop gives up, and where
/// its secrets come from.
#[derive(clap::Args)]
pub(crate) struct SessionArgs {
    /// The agent's name.
    #[arg(long, default_value = "A0")]
    pub(crate) agent: String,
    /// Iterations per user message before the loop gives up.
    #[arg(long, default_value_t = 25)]
    max_iterations: usize,
    /// Unusable replies in a row before the loop gives up.
    #[arg(long, default_value_t = 3)]
    max_unusable: usize,
    /// Failed tool calls in a row before the loop gives up (each failure goes back to the
    /// model).
    #[arg(long, default_value_t = 5)]
    max_failed_calls: usize,
    /// Read the secrets from this file instead of usr/secrets.env.
    #[arg(long)]
    secrets: Option<PathBuf>,
}

impl SessionArgs {
    /// The message loop's limits.
    pub(crate) fn loop_options(&self) -> LoopOptions {
        LoopOptions::default()
            .with_max_iterations(self.max_iterations)
            .with_max_unusable(self.max_unusable)
            .with_max_failed_calls(self.max_failed_calls)
    }

    /// The host, with its secrets read from `--secrets` instead of `usr/secrets.env` if given.
    pub(crate) fn host(&self, global: &Global) -> Result<Arc<Host>> {
        let host = Arc::new(global.host()?);
        if let Some(file) = &self.secrets {
            if std::fs::symlink_metadata(file).is_err() {
                let file = toolhost::Escaped(file);
                crate::exit::usage!(
                    "--secrets {file}: no such file (give the path of a KEY=VALUE file)"
                );
            }
            let secrets = toolhost::Secrets::load(file)?;
            host.set_secrets(secrets.from_file(file));
        }
        Ok(host)
    }
}

/// The arguments `add` and `update` share: the certificate authorities a package's https://
/// source is fetched with, and which replacements of an installed version are accepted.
#[derive(clap::Args)]
pub(crate) struct PackageArgs {
    /// For a package from an https:// URL: also trust the certificate authorities in this
    /// PEM file (a private CA), besides the system's.
    #[arg(long, value_name = "FILE")]
    pub(crate) ca: Option<PathBuf>,
    /// Install a version older than, or the same as, the installed one (the refusal
    /// names both).
    #[arg(long)]
    allow_downgrade: bool,
    /// Accept a signer other than the key the installed version was signed by (pinned
    /// at its first install).
    #[arg(long)]
    new_signer: bool,
}

impl PackageArgs {
    /// The replacements of an installed version `--allow-downgrade` and `--new-signer` accept.
    pub(crate) fn replace(&self) -> Replace {
        Replace {
            allow_downgrade: self.allow_downgrade,
            new_signer: self.new_signer,
        }
    }
}
