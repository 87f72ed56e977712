//! The plugin SDK this binary carries (plugin-api and plugin-abi, embedded by build.rs), unpacked
//! once per version and content into the user's data folder, so that `toolhost new` works in
//! any folder: the scaffolded crate depends on that copy by path, which is the exact contract
//! this host speaks, with no checkout of the toolhost repository.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

mod files {
    include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));
}

/// The version of plugin-api this binary carries (and speaks, through its plugin-abi).
pub(crate) const VERSION: &str = plugin_api::API_VERSION;

/// Set when this binary was built for crates that are on crates.io
/// (`TOOLHOST_SDK_FROM_REGISTRY=1 cargo install ...`): scaffolds then depend on the registry's
/// `plugin-api = "=VERSION"` and nothing is unpacked.
const FROM_REGISTRY: Option<&str> = option_env!("TOOLHOST_SDK_FROM_REGISTRY");

/// The `plugin-api` dependency of a scaffolded crate (the value after `plugin-api = `), with the
/// `testing` feature for its dev-dependencies when `testing`.
pub(crate) fn dependency(testing: bool) -> Result<String> {
    let features = if testing {
        ", features = [\"testing\"]"
    } else {
        ""
    };
    if FROM_REGISTRY.is_some_and(|v| !v.is_empty() && v != "0") {
        return Ok(format!("{{ version = \"={VERSION}\"{features} }}"));
    }
    let dir = unpacked()?.join("plugin-api");
    // A TOML literal string: no escapes, so a Windows path stays as it is.
    Ok(format!(
        "{{ version = \"={VERSION}\", path = '{}'{features} }}",
        dir.display()
    ))
}

/// The folder of the unpacked SDK (`<data>/toolhost/sdk/plugin-api-VERSION-HASH`), unpacked if
/// it is not there yet.
pub(crate) fn unpacked() -> Result<PathBuf> {
    let data = dirs::data_dir().context(
        "no data folder for the plugin SDK: set XDG_DATA_HOME (or HOME) so that toolhost can \
         unpack plugin-api there",
    )?;
    let sdk = data.join("toolhost").join("sdk");
    let dir = sdk.join(format!("plugin-api-{VERSION}-{}", files::HASH));
    if dir.join("plugin-api").join("Cargo.toml").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&sdk).with_context(|| format!("cannot create {}", sdk.display()))?;
    // Written beside, then renamed into place: a copy cut short is never used, and two
    // `toolhost new` at once both end with a whole copy.
    let partial = tempfile_dir(&sdk)?;
    write_files(&partial)?;
    match std::fs::rename(&partial, &dir) {
        Ok(()) => Ok(dir),
        Err(_) if dir.join("plugin-api").join("Cargo.toml").is_file() => {
            let _ = std::fs::remove_dir_all(&partial);
            Ok(dir)
        }
        Err(e) => {
            Err(e).with_context(|| format!("cannot unpack the plugin SDK into {}", dir.display()))
        }
    }
}

fn tempfile_dir(sdk: &Path) -> Result<PathBuf> {
    let dir = sdk.join(format!(".unpacking-{}-{}", std::process::id(), files::HASH));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

fn write_files(dir: &Path) -> Result<()> {
    for (relative, bytes) in files::FILES {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
