//! The thread of `toolhost dev` that watches the crates' sources and builds each crate whose
//! source was saved: one build at a time, saves made during a build coalesced into the next.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result};
use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{new_debouncer_opt, Config, DebounceEventResult, Debouncer};
use toolhost::WriteWatcher;

use crate::dev::build::{build, Built};
use crate::dev::crates::{Crates, PluginCrate};

/// How often the layers are looked at again for crates made since (by `toolhost new`).
const RESCAN: Duration = Duration::from_secs(1);

enum Message {
    Events(DebounceEventResult),
    Stop,
}

/// Writes only: cargo reads the sources it watches, and a read is not a save.
type SourceDebouncer = Debouncer<WriteWatcher>;

/// Watches and builds until dropped (a build under way is finished first).
pub(crate) struct SourceWatcher {
    stop: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl SourceWatcher {
    /// Starts the thread; it builds every crate once, then each one whose source is saved.
    pub(crate) fn start(crates: Crates, debounce: Duration) -> Result<Self> {
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let config = Config::default().with_timeout(debounce);
        let debouncer = new_debouncer_opt::<_, WriteWatcher>(config, move |result| {
            let _ = events.send(Message::Events(result));
        })
        .context("cannot watch the plugin crates' sources")?;
        let thread = std::thread::Builder::new()
            .name("toolhost-dev".to_owned())
            .spawn(move || Loop::new(crates, debouncer).run(&rx))
            .context("cannot start the build thread")?;
        Ok(Self {
            stop: tx,
            thread: Some(thread),
        })
    }
}

impl Drop for SourceWatcher {
    fn drop(&mut self) {
        let _ = self.stop.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Loop {
    crates: Crates,
    debouncer: SourceDebouncer,
    /// The crates watched now.
    known: BTreeSet<PluginCrate>,
    /// The crates to build next.
    queued: BTreeSet<PluginCrate>,
}

impl Loop {
    fn new(crates: Crates, debouncer: SourceDebouncer) -> Self {
        Self {
            crates,
            debouncer,
            known: BTreeSet::new(),
            queued: BTreeSet::new(),
        }
    }

    fn run(mut self, rx: &mpsc::Receiver<Message>) {
        loop {
            self.rescan();
            // Saves that came during the last build are built now, each crate once.
            loop {
                match rx.try_recv() {
                    Ok(Message::Events(events)) => self.saved(events),
                    Ok(Message::Stop) | Err(mpsc::TryRecvError::Disconnected) => return,
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            if let Some(next) = self.queued.pop_first() {
                self.build(&next);
                continue;
            }
            match rx.recv_timeout(RESCAN) {
                Ok(Message::Events(events)) => self.saved(events),
                Ok(Message::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Watches the crates that appeared (and queues their first build), forgets those gone.
    fn rescan(&mut self) {
        let now = self.crates.scan();
        for krate in now.difference(&self.known) {
            let watcher = self.debouncer.watcher();
            // Cargo.toml and build.rs; then every file under src/.
            let root = watcher.watch(&krate.dir, RecursiveMode::NonRecursive);
            let src = krate.dir.join("src");
            let src = match src.is_dir() {
                true => watcher.watch(&src, RecursiveMode::Recursive),
                false => Ok(()),
            };
            if let Err(e) = root.and(src) {
                println!(
                    "cannot watch {}: {e}; it is built now, not on each save",
                    krate.shown(self.crates.host())
                );
            }
            self.queued.insert(krate.clone());
        }
        for krate in self.known.difference(&now) {
            let watcher = self.debouncer.watcher();
            let _ = watcher.unwatch(&krate.dir);
            let _ = watcher.unwatch(&krate.dir.join("src"));
            self.queued.remove(krate);
        }
        self.known = now;
    }

    /// Queues the crates whose sources these events name.
    fn saved(&mut self, events: DebounceEventResult) {
        let Ok(events) = events else {
            return;
        };
        for event in events {
            if let Some(krate) = self.known.iter().find(|k| is_source(&k.dir, &event.path)) {
                self.queued.insert(krate.clone());
            }
        }
    }

    fn build(&self, krate: &PluginCrate) {
        let host = self.crates.host();
        let shown = krate.shown(host);
        match build(&self.crates, krate) {
            Built::Done {
                took,
                loaded_in,
                entries,
                libraries,
            } => {
                let took = format!("{:.2} s", took.as_secs_f64());
                if entries.is_empty() {
                    let library = libraries
                        .first()
                        .map(|l| toolhost::Escaped(l).to_string())
                        .unwrap_or_else(|| "no library (is its crate-type cdylib?)".to_owned());
                    println!(
                        "built {shown} in {took}: {library} is in no layer of this profile \
                         (link it into one, as `toolhost new` does)"
                    );
                } else {
                    let ms = loaded_in.as_secs_f64() * 1e3;
                    println!("built {shown} in {took}, live {ms:.1} ms later");
                }
            }
            Built::Failed => println!(
                "build of {shown} failed (cargo's errors are above): the last good build keeps \
                 serving"
            ),
            Built::NoCargo(e) => println!(
                "cannot run cargo to build {shown}: {e} (install Rust with rustup, or set \
                 CARGO to cargo's path)"
            ),
        }
    }
}

/// Whether a change of `path` changes what crate `dir` builds: its Cargo.toml, its build.rs,
/// or a file under src/ (not an editor's hidden or backup file).
fn is_source(dir: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(dir) else {
        return false;
    };
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    let hidden = |p: &&std::ffi::OsStr| {
        let p = p.to_string_lossy();
        p.starts_with('.') || p.ends_with('~')
    };
    // An editor's temporary file, gone by the time its events come (sed -i and many editors
    // write `src/sedXXXXXX` and rename it over the source): the rename's event on the source
    // is the save. A removed `.rs` file is still one (a module deleted).
    let vanished_temporary = !path.exists() && path.extension().is_none_or(|e| e != "rs");
    match parts.as_slice() {
        [file] => *file == "Cargo.toml" || *file == "build.rs",
        [first, ..] => *first == "src" && !parts.iter().any(hidden) && !vanished_temporary,
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_source;

    #[test]
    fn sources_are_the_manifest_the_build_script_and_files_under_src() {
        let dir = std::env::temp_dir().join(format!("toolhost-is-source-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        // A file other than Rust counts while it exists (`include_str!`).
        std::fs::write(dir.join("src/data.json"), "{}").unwrap();
        let dir = dir.as_path();
        for source in [
            "Cargo.toml",
            "build.rs",
            "src/lib.rs",
            "src/a/b.rs",
            "src/data.json",
        ] {
            assert!(is_source(dir, &dir.join(source)), "{source}");
        }
        for other in [
            "Cargo.lock",
            "target/debug/libhello.so",
            "src/.lib.rs.swp",
            "src/lib.rs~",
            // sed -i's temporary file, renamed over the source before its events come.
            "src/sedq8Zx1K",
            "README.md",
            "/c/other/src/lib.rs",
        ] {
            assert!(!is_source(dir, &dir.join(other)), "{other}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
