//! Building the plugin crate's library before it is loaded.
//!
//! Cargo does not rebuild a `cdylib`-only crate's library for its integration tests (they
//! cannot link it, so they do not depend on it): without this, a test would load whatever
//! library an earlier build left in `target/`. So the testkit runs `cargo build --lib` for the
//! crate once per test process, into the test binary's own target folder and profile. The
//! build resolves features as `cargo build` does, without the dev-dependencies' (plugin-api's
//! `testing`): the library loaded is the one that gets installed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use crate::locate::PluginCrate;
use crate::TestkitError;

/// The outcome of the one build per crate folder in this process: why it failed, if it did.
type Built = Arc<OnceLock<Result<(), String>>>;

/// Builds `krate`'s library, once per process (later calls wait for the first one and share
/// its outcome).
pub(crate) fn build_once(krate: &PluginCrate, target: Option<&Path>) -> Result<(), TestkitError> {
    static BUILT: OnceLock<Mutex<HashMap<PathBuf, Built>>> = OnceLock::new();
    let cell = {
        let mut map = BUILT
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(krate.dir.clone()).or_default().clone()
    };
    let outcome = cell.get_or_init(|| build(krate, target)).clone();
    outcome.map_err(|reason| TestkitError::Build {
        package: krate.package.clone(),
        reason,
    })
}

/// `cargo build --lib` of the crate, in `target` (`<target dir>/<profile>`) if known.
fn build(krate: &PluginCrate, target: Option<&Path>) -> Result<(), String> {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .arg("build")
        .arg("--lib")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(krate.dir.join("Cargo.toml"));
    if let Some((dir, profile)) = target.and_then(|t| Some((t.parent()?, t.file_name()?))) {
        cargo.arg("--target-dir").arg(dir);
        match profile.to_str() {
            Some("debug") => {}
            Some("release") => {
                cargo.arg("--release");
            }
            _ => {
                cargo.arg("--profile").arg(profile);
            }
        }
    }
    let out = cargo
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(first_error(&stderr).unwrap_or_else(|| out.status.to_string()))
}

/// The first `error...` line of cargo's output, which says what failed.
fn first_error(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("error"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::first_error;

    #[test]
    fn the_first_error_line_is_the_reason() {
        let stderr = "warning: unused\nerror[E0425]: cannot find value `x`\n  --> src/lib.rs:1:1\n\
                      error: could not compile `t`\n";
        assert_eq!(
            first_error(stderr).as_deref(),
            Some("error[E0425]: cannot find value `x`")
        );
        assert_eq!(first_error("nothing useful"), None);
    }
}
