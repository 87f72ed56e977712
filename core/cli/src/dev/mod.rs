//! `toolhost dev`: the author loop in one command, as cargo-watch and bacon are for Rust code.
//! It watches the sources of the plugin crates (those `toolhost new` made in the profile's
//! layers, and any crate named on the command line), rebuilds a changed crate with cargo
//! (cargo's errors shown as cargo prints them; a failed build leaves the last good one
//! serving), loads the new library at once, and calls tools typed on standard input as
//! `toolhost watch` does.

pub(crate) mod build;
mod crates;
mod sources;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use toolhost::Host;

use crate::check_profile;
use crate::shared_args::WatchArgs;
use crate::Global;

/// The author loop: build the plugin crates (those `toolhost new` made in the profile's
/// layers, and any named here) with cargo, rebuild a crate when one of its sources is
/// saved (its errors shown; the last good build keeps serving), load the new library at
/// once, and call tools typed on standard input as `watch` does.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// More plugin crates to build and watch: their folders (each with a Cargo.toml).
    #[arg(value_name = "CRATE")]
    crates: Vec<PathBuf>,
    #[command(flatten)]
    watching: WatchArgs,
}

impl Args {
    /// `toolhost dev`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let debounce = self.watching.debounce();
        let options = global.options.clone().with_debounce(debounce);
        let host = Host::with_options(&global.root, options)?;
        let options = DevOptions {
            profile: self.watching.profile,
            agent: self.watching.agent,
            crates: self.crates,
            debounce,
        };
        dev(Arc::new(host), options, global.yes)
    }
}

/// What `toolhost dev` was asked for.
pub(crate) struct DevOptions {
    /// The profile whose tools are served and whose layers hold the crates' libraries.
    pub(crate) profile: String,
    /// The agent's name for the calls typed on standard input.
    pub(crate) agent: String,
    /// Crates named on the command line, besides those found in the layers.
    pub(crate) crates: Vec<PathBuf>,
    /// How long a saved source file must stay quiet before the build starts.
    pub(crate) debounce: Duration,
}

/// `toolhost dev`: builds every crate once, then rebuilds and reloads on each save while
/// calls are typed, until standard input ends or `/quit`.
pub(crate) fn dev(host: Arc<Host>, options: DevOptions, yes: bool) -> Result<ExitCode> {
    check_profile(&host, &options.profile)?;
    let named = crates::named(&options.crates)?;
    let found = crates::Crates::new(host.clone(), &options.profile, named);
    // Watching starts before the first builds, so a save made while they run is built next.
    let sources = sources::SourceWatcher::start(found, options.debounce)?;
    crate::watch::watch(
        host,
        &options.profile,
        &options.agent,
        yes,
        toolhost::DEFAULT_GRACE,
    )?;
    drop(sources);
    Ok(ExitCode::SUCCESS)
}
