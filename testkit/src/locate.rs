//! Finding the library cargo built for a plugin crate.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::TestkitError;

/// What the testkit reads of a plugin crate's `Cargo.toml`.
#[derive(Debug, Deserialize)]
struct Manifest {
    package: Option<Package>,
    lib: Option<Lib>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
}

#[derive(Debug, Deserialize)]
struct Lib {
    name: Option<String>,
    #[serde(rename = "crate-type")]
    crate_type: Option<Vec<String>>,
}

/// A plugin crate and the library file cargo builds for it.
#[derive(Debug, Clone)]
pub(crate) struct PluginCrate {
    /// The crate's folder.
    pub(crate) dir: PathBuf,
    /// `[package] name`.
    pub(crate) package: String,
    /// `lib<name>.so`, `lib<name>.dylib` or `<name>.dll`.
    pub(crate) file_name: String,
}

impl PluginCrate {
    /// Reads `<dir>/Cargo.toml`; the crate must build a `cdylib`.
    pub(crate) fn read(dir: &Path) -> Result<Self, TestkitError> {
        let path = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&path).map_err(|source| TestkitError::Manifest {
            path: path.clone(),
            reason: source.to_string(),
        })?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| TestkitError::Manifest {
            path: path.clone(),
            reason: e.message().to_owned(),
        })?;
        let Some(package) = manifest.package else {
            let reason = "no [package] section: pass the folder of the plugin crate".to_owned();
            return Err(TestkitError::Manifest { path, reason });
        };
        let lib = manifest.lib.unwrap_or(Lib {
            name: None,
            crate_type: None,
        });
        let types = lib.crate_type.unwrap_or_default();
        if !types.iter().any(|t| t == "cdylib") {
            return Err(TestkitError::NotACdylib {
                package: package.name,
            });
        }
        let lib_name = lib.name.unwrap_or_else(|| package.name.replace('-', "_"));
        Ok(Self {
            dir: dir.to_owned(),
            file_name: format!(
                "{}{lib_name}{}",
                std::env::consts::DLL_PREFIX,
                std::env::consts::DLL_SUFFIX
            ),
            package: package.name,
        })
    }

    /// The folders cargo may have built the library into, most likely first: the profile
    /// folder of the running test binary (the build that built this test), then
    /// `$CARGO_TARGET_DIR`, the crate's own `target/`, and the `target/` of each enclosing
    /// workspace, each in the test binary's profile (`debug` unless the test runs in another).
    pub(crate) fn candidate_dirs(&self) -> Vec<PathBuf> {
        let exe_profile_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.parent()?.to_owned()))
            .filter(|dir| {
                dir.parent()
                    .is_some_and(|t| t.join("CACHEDIR.TAG").is_file())
            });
        let profile = exe_profile_dir
            .as_ref()
            .and_then(|dir| dir.file_name())
            .map_or_else(|| "debug".to_owned(), |p| p.to_string_lossy().into_owned());
        let mut targets = Vec::new();
        if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
            targets.push(PathBuf::from(dir));
        }
        targets.push(self.dir.join("target"));
        for ancestor in self.dir.ancestors().skip(1) {
            if is_workspace_root(ancestor) {
                targets.push(ancestor.join("target"));
            }
        }
        let mut dirs: Vec<PathBuf> = exe_profile_dir.into_iter().collect();
        for target in targets {
            let dir = target.join(&profile);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }

    /// The first candidate that holds the library, or which were looked at.
    pub(crate) fn find_library(&self) -> Result<PathBuf, TestkitError> {
        let looked: Vec<PathBuf> = self
            .candidate_dirs()
            .into_iter()
            .map(|dir| dir.join(&self.file_name))
            .collect();
        match looked.iter().find(|path| path.is_file()) {
            Some(found) => Ok(found.clone()),
            None => Err(TestkitError::NotBuilt {
                package: self.package.clone(),
                looked,
            }),
        }
    }
}

/// `<target dir>/<profile>` of the running test binary (`target/debug/deps/<test>-<hash>`),
/// if it runs from a cargo target folder.
pub(crate) fn exe_profile_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_owned()))
        .filter(|dir| {
            dir.parent()
                .is_some_and(|t| t.join("CACHEDIR.TAG").is_file())
        })
}

/// Whether `dir` holds a `Cargo.toml` with a `[workspace]` table.
fn is_workspace_root(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .is_some_and(|table| table.contains_key("workspace"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_the_library_name_and_refuses_a_plain_lib() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "a/Cargo.toml",
            "[package]\nname = \"my-tool\"\n[lib]\ncrate-type = [\"cdylib\"]\n",
        );
        let krate = PluginCrate::read(&root.join("a")).unwrap();
        assert_eq!(krate.package, "my-tool");
        assert!(krate.file_name.contains("my_tool"), "{}", krate.file_name);
        write(
            root,
            "b/Cargo.toml",
            "[package]\nname = \"b\"\n[lib]\nname = \"other\"\ncrate-type = [\"cdylib\", \"rlib\"]\n",
        );
        assert!(PluginCrate::read(&root.join("b"))
            .unwrap()
            .file_name
            .contains("other"));
        write(root, "c/Cargo.toml", "[package]\nname = \"c\"\n");
        let e = PluginCrate::read(&root.join("c")).unwrap_err();
        assert!(e.to_string().contains("cdylib"), "{e}");
        let e = PluginCrate::read(&root.join("missing")).unwrap_err();
        assert!(e.to_string().contains("Cargo.toml"), "{e}");
    }

    #[test]
    fn looks_in_the_crate_and_workspace_targets_and_names_them_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "Cargo.toml", "[workspace]\nmembers = [\"tools/x\"]\n");
        write(
            root,
            "tools/x/Cargo.toml",
            "[package]\nname = \"x\"\n[lib]\ncrate-type = [\"cdylib\"]\n",
        );
        let krate = PluginCrate::read(&root.join("tools/x")).unwrap();
        let dirs = krate.candidate_dirs();
        assert!(
            dirs.iter()
                .any(|d| d.starts_with(root.join("tools/x/target"))),
            "{dirs:?}"
        );
        assert!(
            dirs.iter().any(|d| d.starts_with(root.join("target"))),
            "{dirs:?}"
        );
        let e = krate.find_library().unwrap_err();
        assert!(!e.to_string().contains('\n'), "one line: {e}");
        assert!(e.to_string().contains("cargo build"), "{e}");
        let profile = dirs.last().unwrap().file_name().unwrap().to_owned();
        write(
            root,
            &format!("target/{}/{}", profile.to_string_lossy(), krate.file_name),
            "x",
        );
        assert!(krate
            .find_library()
            .unwrap()
            .starts_with(root.join("target")));
    }
}
