//! One `cargo build` of a plugin crate, and the load of what it built.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::dev::crates::{Crates, PluginCrate};

/// What one build did, for its line.
pub(crate) enum Built {
    /// Cargo succeeded: how long it took, and how long loading its libraries took after it.
    Done {
        took: Duration,
        loaded_in: Duration,
        /// The layer entries that were loaded again (none: the library is in no layer).
        entries: Vec<PathBuf>,
        /// The libraries cargo wrote.
        libraries: Vec<PathBuf>,
    },
    /// Cargo failed (its errors are on standard error).
    Failed,
    /// Cargo could not be started.
    NoCargo(std::io::Error),
}

/// Builds `krate` with cargo (debug profile, as `toolhost new` links it), cargo's own output on
/// standard error, then tells the host that the layer entries of the libraries it built
/// changed, so they are live when this returns (without waiting for the folder watcher).
pub(crate) fn build(crates: &Crates, krate: &PluginCrate) -> Built {
    let started = Instant::now();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let child = Command::new(cargo)
        .args(["build", "--message-format=json-render-diagnostics"])
        .current_dir(&krate.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Built::NoCargo(e),
    };
    let mut libraries = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            libraries.extend(libraries_in_message(&line));
        }
    }
    let ok = child.wait().is_ok_and(|status| status.success());
    let took = started.elapsed();
    if !ok {
        return Built::Failed;
    }
    let after = Instant::now();
    let entries: Vec<PathBuf> = libraries
        .iter()
        .flat_map(|library| crates.entries_of(library))
        .collect();
    crates.host().files_changed(&entries);
    Built::Done {
        took,
        loaded_in: after.elapsed(),
        entries,
        libraries,
    }
}

/// The shared libraries a line of cargo's JSON output says it wrote.
pub(crate) fn libraries_in_message(line: &str) -> Vec<PathBuf> {
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    if message["reason"] != "compiler-artifact" {
        return Vec::new();
    }
    let kinds = message["target"]["kind"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !kinds.iter().any(|k| k == "cdylib" || k == "dylib") {
        return Vec::new();
    }
    message["filenames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(PathBuf::from)
        .filter(|p| is_library(p))
        .collect()
}

/// A `.so`, `.dylib` or `.dll`: the file a host loads (not `.rlib`, `.pdb`, `.dll.a` or
/// `.dll.lib`), of whichever system it was built for (`pack --target`).
fn is_library(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e == "so" || e == "dylib" || e == "dll")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdylib_of_an_artifact_message_is_read_and_nothing_else() {
        let ext = std::env::consts::DLL_EXTENSION;
        let line = format!(
            r#"{{"reason":"compiler-artifact","target":{{"kind":["cdylib"],"name":"hello"}},"filenames":["/c/target/debug/libhello.{ext}","/c/target/debug/libhello.rlib"]}}"#
        );
        assert_eq!(
            libraries_in_message(&line),
            vec![PathBuf::from(format!("/c/target/debug/libhello.{ext}"))]
        );
        let dependency = r#"{"reason":"compiler-artifact","target":{"kind":["lib"]},"filenames":["/t/libserde.rlib"]}"#;
        assert!(libraries_in_message(dependency).is_empty());
        assert!(libraries_in_message(r#"{"reason":"build-finished","success":true}"#).is_empty());
        assert!(libraries_in_message("not json").is_empty());
    }
}
