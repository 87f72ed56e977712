//! Running cargo from a program that cargo started, as if from a shell. Used by the tests' own
//! build of the fixtures (`build_dir`) and by xtask, which includes this file by its path.

use std::process::Command;

/// Removes from `cargo`'s environment the variables cargo sets for the package it runs
/// (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, ...). Build scripts that declare them as
/// inputs (ring's does) would otherwise be built again for this package's values, with
/// everything above them (rustls, reqwest, rmcp, the host), and once more by the next
/// `cargo test` from a shell.
pub fn as_from_a_shell(cargo: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let per_package = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_"]
            .iter()
            .any(|p| name.starts_with(p))
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&&*name);
        if per_package {
            cargo.env_remove(&*name);
        }
    }
}
