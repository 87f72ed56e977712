//! Embeds the sources of the plugin SDK (plugin-api and plugin-abi) in the `toolhost` binary,
//! for `toolhost new` to unpack (src/new/sdk.rs): a plugin then builds against the exact
//! contract this binary speaks, on a machine with only the binary.
//!
//! A list of `include_bytes!` written here, not the `include_dir` crate: cargo must rebuild the
//! binary when a file of the SDK changes, and on stable Rust only a build script can tell it
//! (`rerun-if-changed` on the folders).

use std::fmt::Write as _;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let api = manifest.join("../../plugin-api").canonicalize().unwrap();
    let mut files = Vec::new();
    for (prefix, dir) in [
        ("plugin-api", api.clone()),
        ("plugin-api/abi", api.join("abi")),
    ] {
        for name in ["Cargo.toml", "README.md"] {
            files.push((format!("{prefix}/{name}"), dir.join(name)));
        }
        collect(&dir.join("src"), &format!("{prefix}/src"), &mut files);
        println!("cargo:rerun-if-changed={}", dir.join("src").display());
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("Cargo.toml").display()
        );
        println!("cargo:rerun-if-changed={}", dir.join("README.md").display());
    }
    files.sort();
    // The SDK's content hash names its unpacked folder: two builds of the same version with
    // different sources never share one.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut code = String::from(
        "/// The SDK's files: the path in its folder, and the bytes.\n\
         pub(crate) const FILES: &[(&str, &[u8])] = &[\n",
    );
    for (relative, path) in &files {
        relative.hash(&mut hasher);
        std::fs::read(path).unwrap().hash(&mut hasher);
        writeln!(
            code,
            "    ({relative:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    writeln!(
        code,
        "/// A hash of [`FILES`] (paths and bytes).\npub(crate) const HASH: &str = \"{:016x}\";",
        hasher.finish()
    )
    .unwrap();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("sdk_files.rs");
    std::fs::write(out, code).unwrap();
}

/// Every file under `dir`, as `prefix/...`.
fn collect(dir: &Path, prefix: &str, files: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            collect(&path, &format!("{prefix}/{name}"), files);
        } else {
            files.push((format!("{prefix}/{name}"), path));
        }
    }
}
