//! Support for the integration tests and benchmarks: real plugin libraries built from this
//! workspace, and temporary roots to lay them out in.
//!
//! ```no_run
//! use toolhost_tests::{Fixture, TestRoot};
//!
//! let root = TestRoot::new();
//! root.tool("usr", "echo", Fixture::Echo);
//! let listing = root.host().list("default");
//! assert_eq!(listing.tools[0].name, "echo");
//! ```

pub mod audit;
pub mod balancer;
pub mod fake_llm;
pub mod peers;
pub mod shell_env;
pub mod skip;
pub mod windows;

/// The Rust blocks of the README and of the book's pages, compiled and run as this crate's
/// doctests (`cargo test --workspace` runs them). A page with a ```` ```rust ```` block must be
/// listed here (tests/integration/book.rs checks it); a ```` ```rust,ignore ```` block must be a
/// copy of a test that compiles elsewhere (checked there too).
#[cfg(doctest)]
pub mod docs {
    #[doc = include_str!("../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../docs/src/guide/typed-tools.md")]
    pub struct TypedTools;
}

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use toolhost::output::Captured;
use toolhost::{Agent, Host, LIBRARY_EXTENSION};

include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));

impl Fixture {
    /// The built library (builds every fixture, and the `toolhost` binary, on first use).
    pub fn path(self) -> PathBuf {
        let file = format!(
            "{}{}{}",
            std::env::consts::DLL_PREFIX,
            self.stem(),
            std::env::consts::DLL_SUFFIX
        );
        match self.example() {
            Some(_) => build_dir().join("examples").join(file),
            None => build_dir().join(file),
        }
    }
}

/// `target/<profile>` of the running test or bench binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("binary in target/<profile>/deps")
        .to_owned()
}

/// `target/` of the running test or bench binary (the peers are installed under it).
pub(crate) fn target_dir() -> PathBuf {
    profile_dir().parent().expect("target dir").to_owned()
}

/// The workspace's folder.
pub(crate) fn workspace_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
}

/// `cargo`, as the running `cargo test` is (its `CARGO`), with the environment a shell gives
/// it (cargo runs a test binary with the variables of the package under test).
pub fn cargo_command() -> Command {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    shell_env::as_from_a_shell(&mut cargo);
    cargo
}

/// Builds all fixtures and the `toolhost` binary once per process, with the same profile as
/// the running binary, and returns `target/<profile>`.
pub fn build_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        // The tests (debug profile; benchmarks run from target/release and need no peers):
        // the peers install while the fixtures build and the tests run.
        if dir.file_name().is_some_and(|n| n == "debug") {
            peers::prefetch();
        }
        let target = dir.parent().expect("target dir");
        let workspace = workspace_dir();
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        // Cargo runs this binary with the variables of the package under test: the inner
        // build must see the environment the outer one saw.
        shell_env::as_from_a_shell(&mut cargo);
        cargo
            .current_dir(workspace)
            .arg("build")
            .arg("--quiet")
            .arg("--target-dir")
            .arg(target);
        let profile = dir.file_name().and_then(|n| n.to_str());
        if profile == Some("debug") {
            // The tests: what `cargo test --workspace` builds (its libraries, binaries and
            // examples, with the features unified over the whole workspace and its
            // dev-dependencies), so this build is the one that command already made and costs
            // nothing. Naming only the fixtures' packages resolved other features (tokio, the
            // host, ...): a second build of most of the graph, 30 to 72 s of a warm rerun after
            // an edit, more on a fresh clone.
            cargo.args(["--workspace", "--lib", "--bins", "--examples"]);
        } else {
            // Benchmarks run from target/release: their plugins are built like their binary,
            // with the bench profile (the dist profile's LTO), and only those.
            match profile {
                Some("release") => cargo.args(["--profile", "bench"]),
                Some(other) => cargo.args(["--profile", other]),
                None => &mut cargo,
            };
            cargo.args(["--lib", "--bins", "-p", "toolhost-cli"]);
            for f in Fixture::ALL {
                cargo.args(["-p", f.package()]);
                if let Some(example) = f.example() {
                    cargo.args(["--example", example]);
                }
            }
        }
        let status = cargo
            .status()
            .expect("running cargo build for the fixtures");
        assert!(status.success(), "building the fixture plugins failed");
        dir
    })
}

/// The `toolhost` binary.
pub fn toolhost_bin() -> PathBuf {
    build_dir().join(format!("toolhost{}", std::env::consts::EXE_SUFFIX))
}

/// The data folder (`XDG_DATA_HOME`) of the `toolhost` the tests run: `toolhost new` unpacks
/// its plugin SDK there (target/test-data-home/), not in the data folder of whoever runs the
/// tests; shared by the tests, as a user's is by their crates.
pub fn data_home() -> PathBuf {
    build_dir()
        .parent()
        .expect("the build folder is in target/")
        .join("test-data-home")
}

/// A temporary root folder (core/, plugins/, usr/), removed when dropped.
pub struct TestRoot {
    dir: tempfile::TempDir,
}

impl Default for TestRoot {
    fn default() -> Self {
        Self::new()
    }
}

impl TestRoot {
    /// An empty root.
    pub fn new() -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("toolhost-test-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// The root folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies `fixture` to `<layer>/tools/<name>.<ext>`; `layer` is relative to the root, e.g.
    /// `usr`, `core`, `plugins/web`, `usr/agents/dev`. Returns the file's path.
    pub fn tool(&self, layer: &str, name: &str, fixture: Fixture) -> PathBuf {
        self.copy(
            fixture,
            &format!("{layer}/tools/{name}.{LIBRARY_EXTENSION}"),
        )
    }

    /// Copies `fixture` to `<layer>/extensions/<point>/<file>.<ext>`.
    pub fn extension(&self, layer: &str, point: &str, file: &str, fixture: Fixture) -> PathBuf {
        self.copy(
            fixture,
            &format!("{layer}/extensions/{point}/{file}.{LIBRARY_EXTENSION}"),
        )
    }

    /// Installs the core's secret extensions, `_10_unmask_secrets` at `tool_execute_before`
    /// and `_10_mask_secrets` at `tool_execute_after`, as a real root has them.
    pub fn secret_extensions(&self) {
        let before = "tool_execute_before";
        self.extension("core", before, "_10_unmask_secrets", Fixture::UnmaskSecrets);
        let after = "tool_execute_after";
        self.extension("core", after, "_10_mask_secrets", Fixture::MaskSecrets);
    }

    /// Copies `fixture` to `rel` under the root.
    pub fn copy(&self, fixture: Fixture, rel: &str) -> PathBuf {
        let dest = self.path().join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::copy(fixture.path(), &dest)
            .unwrap_or_else(|e| panic!("copying {:?} to {}: {e}", fixture, dest.display()));
        dest
    }

    /// Puts `fixture` at `rel` the way installers and editors do: written to a temporary file
    /// in the same folder, then renamed over `rel` in one step.
    pub fn replace(&self, rel: &str, fixture: Fixture) -> PathBuf {
        let bytes = std::fs::read(fixture.path()).expect("read fixture");
        self.replace_bytes(rel, &bytes)
    }

    /// Writes `bytes` to a temporary file beside `rel`, then renames it over `rel`.
    pub fn replace_bytes(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let dest = self.path().join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        let tmp = dest.with_extension(format!("{LIBRARY_EXTENSION}.tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes).expect("write");
        std::fs::rename(&tmp, &dest).expect("rename");
        dest
    }

    /// Puts `fixture` at `rel` the way `cargo build` rewrites `target/<profile>/libX.so`: the
    /// linker writes `deps/X.tmpNNN` and renames it to `deps/X`, then cargo deletes `rel` and
    /// recreates it as a hard link to `deps/X` (a new inode, and no write event on `rel`).
    /// `deps` is `.deps/` under the root, outside every layer.
    pub fn replace_like_cargo(&self, rel: &str, fixture: Fixture) -> PathBuf {
        let dest = self.path().join(rel);
        let deps = self.path().join(".deps");
        std::fs::create_dir_all(&deps).expect("mkdir deps");
        let file = dest.file_name().expect("file name");
        let linked = deps.join(file);
        let tmp = deps.join(format!("{}.tmp123", file.to_string_lossy()));
        std::fs::copy(fixture.path(), &tmp).expect("link step");
        std::fs::rename(&tmp, &linked).expect("rename step");
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        match std::fs::remove_file(&dest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("removing {}: {e}", dest.display()),
        }
        std::fs::hard_link(&linked, &dest).expect("hard link step");
        dest
    }

    /// Writes `bytes` to `rel` under the root.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let dest = self.path().join(rel);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
        std::fs::write(&dest, bytes).expect("write");
        dest
    }

    /// A host for this root.
    pub fn host(&self) -> Arc<Host> {
        Arc::new(Host::new(self.path()).expect("host"))
    }

    /// A host and an agent named `A0` with `profile`, printing into a buffer.
    pub fn agent(&self, profile: &str) -> (Arc<Agent>, Arc<Captured>) {
        let output = Arc::new(Captured::default());
        let agent = Agent::with_output(self.host(), "A0", profile, output.clone()).expect("agent");
        (agent, output)
    }

    /// Writes a script (`user`'s message, then each of `replies` as the model's) to
    /// `script.txt` and runs it with `toolhost run`.
    pub fn run_script(&self, user: &str, replies: &[String]) -> std::process::Output {
        let script = std::iter::once(format!("=== user\n{user}"))
            .chain(replies.iter().map(|r| format!("=== model\n{r}")))
            .collect::<Vec<_>>()
            .join("\n");
        let path = self.write("script.txt", script);
        self.run_cli(&["run", path.to_str().expect("a UTF-8 temp path")])
    }

    /// Runs `toolhost --root <this root> ARGS` on a pseudo-terminal (util-linux `script`),
    /// typing `typed` after 1.5 s, in colour or not; returns what the terminal showed, or
    /// `None` (the test noted as [`skipped`](crate::skip::skipped)) where `script` is missing
    /// and cannot be installed ([`peers::script`]).
    ///
    /// # Panics
    ///
    /// Under `CI=true`, where `script` is missing and cannot be installed.
    pub fn run_on_terminal(&self, args: &str, typed: &str, color: bool) -> Option<String> {
        if !peers::script() {
            return None;
        }
        let command = format!(
            "{} --root {} {args}",
            toolhost_bin().display(),
            self.path().display()
        );
        let mut script = Command::new("script");
        match color {
            true => script.env_remove("NO_COLOR"),
            false => script.env("NO_COLOR", "1"),
        };
        let mut child = script
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running script");
        let mut stdin = child.stdin.take().expect("stdin");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        use std::io::Write as _;
        stdin.write_all(typed.as_bytes()).expect("typing");
        drop(stdin);
        let out = child.wait_with_output().expect("script's output");
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs the `toolhost` binary with `--root <this root>` and `args`.
    pub fn run_cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(toolhost_bin())
            .arg("--root")
            .arg(self.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("XDG_DATA_HOME", data_home())
            .output()
            .expect("running toolhost")
    }
}

/// Polls `check` every 5 ms until it returns `Some`, for at most 10 seconds (a bounded wait:
/// generous, because this machine is shared; the reload benchmark measures real latency).
///
/// # Panics
///
/// After 10 seconds, naming `what` and the last value seen.
pub fn wait_for<T, L: std::fmt::Debug>(what: &str, mut check: impl FnMut() -> Result<T, L>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match check() {
            Ok(v) => return v,
            Err(last) if std::time::Instant::now() > deadline => {
                panic!("waited 10 s for {what}; last seen: {last:?}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

/// Waits (as [`wait_for`]) until the file at `path` has some text, and returns it: a
/// plugin's `std::fs::write` creates the file before it writes it, so an empty file is not
/// written yet.
pub fn wait_for_text(what: &str, path: &Path) -> String {
    wait_for(what, || match std::fs::read_to_string(path) {
        Ok(text) if !text.is_empty() => Ok(text),
        other => Err(other),
    })
}

/// Waits (as [`wait_for`]) until `current` returns `expected`.
pub fn wait_for_value<T: PartialEq + std::fmt::Debug>(
    what: &str,
    expected: T,
    mut current: impl FnMut() -> T,
) {
    wait_for(what, || {
        let now = current();
        if now == expected {
            Ok(())
        } else {
            Err(now)
        }
    });
}

/// Starts `agent.call_tool(request, args)` as a task of the current tokio runtime.
pub fn spawn_call(
    agent: &Arc<Agent>,
    request: &str,
    args: serde_json::Value,
) -> tokio::task::JoinHandle<Result<plugin_api::Response, plugin_api::ToolError>> {
    let agent = agent.clone();
    let request = request.to_owned();
    tokio::spawn(async move { agent.call_tool(&request, args).await })
}

/// Runs a future to completion on a fresh multi-threaded runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// A deterministic pseudo-random generator (xorshift), so every run of a test or a benchmark
/// generates the same data.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `len` characters of `[a-z0-9_-]`.
    pub fn token(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())] as char)
            .collect()
    }
}
