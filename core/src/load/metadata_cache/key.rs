//! What the cache is keyed by: a file's identity on disk ([`FileKey`]), and the identity of this
//! host's contract ([`host_contract`]).

use std::path::Path;
use std::sync::OnceLock;

/// A file's identity on disk: when none of these changed, its bytes are taken to be the same
/// (as git's index does). A rewrite, a rename over it, `touch` or a new hard link changes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileKey {
    /// The key of `path` (following symbolic links), or `None` if it is not a regular file or
    /// cannot be read.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        meta.is_file().then(|| Self::from_metadata(&meta))
    }

    #[cfg(unix)]
    fn from_metadata(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    #[cfg(not(unix))]
    fn from_metadata(meta: &std::fs::Metadata) -> Self {
        let ns = |t: std::io::Result<std::time::SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i128)
        };
        Self {
            dev: 0,
            ino: 0,
            size: meta.len(),
            mtime_ns: ns(meta.modified()),
            ctime_ns: ns(meta.created()),
        }
    }
}

/// The identity of this host build's contract with its plugins: an entry written by a host with
/// another identity is not trusted.
///
/// It holds the plugin-api version this host speaks (what the loader's version check compares),
/// this crate's version, and the identity on disk of the running executable: whether a library
/// loads at all (abi_stable's layout check of the root module) and how its metadata reads depend
/// on the host's build, and a rebuilt host is a new executable. This is stricter than the
/// contract itself (a rebuild with the same contract starts from a cold cache once), never laxer.
pub(crate) fn host_contract() -> &'static str {
    static CONTRACT: OnceLock<String> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|exe| FileKey::of(&exe))
            .map_or_else(
                || "unknown".to_owned(),
                |k| {
                    format!(
                        "{}:{}:{}:{}:{}",
                        k.dev, k.ino, k.size, k.mtime_ns, k.ctime_ns
                    )
                },
            );
        format!(
            "plugin-api {}; toolhost {}; executable {exe}",
            plugin_api::API_VERSION,
            env!("CARGO_PKG_VERSION")
        )
    })
}
