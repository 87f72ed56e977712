//! One loaded copy of a library file, and what happens when its last user lets go.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use plugin_abi::wire::PluginModuleRef;

use crate::layout::Escaped;
use crate::sync::lock;

/// One load of a library file.
///
/// Each rebuild of a plugin that the host picks up is a new generation: a new private copy,
/// mapped at a new address, with its own statics and its own tokio runtime. The tool or
/// extension handles created from it hold it, and so does every call running on them, so a
/// call always finishes on the generation it started with.
///
/// abi_stable never unmaps a library, so a generation's code stays mapped for the life of the
/// process. What it can give back is given back when its last handle drops: the instance is
/// dropped first, then the host calls the module's `shutdown` (on a thread of its own), which
/// stops the plugin's runtime thread and drops the tasks still spawned on it.
pub(crate) struct Generation {
    pub(crate) module: PluginModuleRef,
    /// The file as found in its layer.
    pub(crate) path: PathBuf,
    /// 1 for the first load of this path in this host, then one more per reload (counting again
    /// from 1 after the file was removed).
    pub(crate) number: u64,
    /// `CARGO_PKG_VERSION` of the crate that built it.
    pub(crate) version: String,
    /// The plugin-abi version (the wire contract) it was built against.
    pub(crate) contract: String,
    /// Generations of this host still held by a handle or a running call.
    live: Arc<AtomicUsize>,
}

impl Generation {
    pub(crate) fn new(
        module: &crate::load::loader::Module,
        path: &Path,
        number: u64,
        live: Arc<AtomicUsize>,
    ) -> Self {
        live.fetch_add(1, Ordering::Relaxed);
        let root = module.root;
        Self {
            module: root,
            path: path.to_owned(),
            number,
            version: root.package_version().as_str().to_owned(),
            contract: module.contract.clone(),
            live,
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        // The plugin's shutdown runs its code (task destructors, thread joins), so it runs on
        // a thread of its own: never under one of the host's locks, nor on a caller's thread.
        let module = self.module;
        let live = self.live.clone();
        let what = format!("{} (generation {})", Escaped(&self.path), self.number);
        reaper().send(Box::new(move || {
            tracing::debug!("{what} is no longer used; shutting it down");
            // The export glue catches panics inside `shutdown`, so this cannot unwind.
            (module.shutdown())();
            live.fetch_sub(1, Ordering::Relaxed);
        }));
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The thread that runs the shutdown hooks of retired generations, one after another.
struct Reaper(Mutex<mpsc::Sender<Job>>);

impl Reaper {
    fn send(&self, job: Job) {
        let sender = lock(&self.0);
        if let Err(mpsc::SendError(job)) = sender.send(job) {
            job(); // the thread could not start: run it here rather than never
        }
    }
}

fn reaper() -> &'static Reaper {
    static REAPER: OnceLock<Reaper> = OnceLock::new();
    REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("toolhost-shutdown".to_owned())
            .spawn(move || rx.into_iter().for_each(|job| job()));
        if let Err(e) = started {
            tracing::warn!("cannot start the shutdown thread ({e}); shutting down in place");
        }
        Reaper(Mutex::new(tx))
    })
}
