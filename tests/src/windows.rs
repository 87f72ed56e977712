//! Windows builds run under Wine, for the Windows tests (tests/integration/windows.rs): the
//! minimal host `tests/windows_host`, `toolhost.exe` (the CLI without its `mcp` feature) and
//! plugins of this workspace built for
//! `x86_64-pc-windows-gnu` with Debian's packages only ([`PACKAGES`]), and a Wine prefix of
//! the tests' own to run them in. docs/src/guide/building.md ("Windows under Wine") is the
//! recipe for people; this is the same recipe for the tests.
//!
//! Debian's `rustc-web` 1.85 is the only Rust here with a Windows target in reach: its std is
//! built from `rust-web-src` (`-Zbuild-std`, allowed by `RUSTC_BOOTSTRAP=1`), linked by mingw.
//! What the workspace and its dependencies use of Rust 1.86 to 1.89 is enabled by name, crate
//! by crate, by `tests/windows_host/rustc-wrapper.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::peers;

/// The Debian 12 packages of the Windows build and of Wine (versions in
/// docs/src/guide/building.md).
pub const PACKAGES: [&str; 5] = [
    "rustc-web",
    "cargo-web",
    "rust-web-src",
    "gcc-mingw-w64-x86-64",
    "wine64",
];

/// The Rust target.
pub const TARGET: &str = "x86_64-pc-windows-gnu";

/// Debian's rustc and cargo (rustc-web, cargo-web), not rustup's.
const RUSTC: &str = "/usr/bin/rustc";
const CARGO: &str = "/usr/bin/cargo";
/// The sources rust-web-src installs, std's included.
const RUST_SRC: &str = "/usr/lib/rustlib/src/rust";
const LINKER: &str = "x86_64-w64-mingw32-gcc";
/// The wrapper that enables what crates use of newer Rust, in the workspace.
const WRAPPER: &str = "tests/windows_host/rustc-wrapper.sh";
/// Debian's wine64 package puts its loader here (no `wine64` on the PATH).
const WINE: &str = "/usr/lib/wine/wine64";
const WINESERVER: &str = "/usr/lib/wine/wineserver";

/// The packages built for Windows: the hosts and the plugins the tests load (the demo's
/// built-in and example libraries among them).
const BUILT: [&str; 11] = [
    "toolhost-windows-host",
    "toolhost-cli",
    "core-response",
    "core-unmask-secrets",
    "core-mask-secrets",
    "example-greet",
    "example-profile-response",
    "example-truncate-output",
    "fx-versioned",
    "fx-versioned-v2",
    "fx-incompatible-layout",
];

/// The Windows build: `target/windows/`, its binaries and its Wine prefix.
#[derive(Debug)]
pub struct WindowsBuild {
    dir: PathBuf,
}

impl WindowsBuild {
    /// `target/windows/x86_64-pc-windows-gnu/debug/NAME` (`toolhost-windows-host.exe`,
    /// `example_greet.dll`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(TARGET).join("debug").join(name)
    }

    /// The minimal host.
    pub fn host(&self) -> PathBuf {
        self.file("toolhost-windows-host.exe")
    }

    /// `toolhost.exe`, the command line without its `mcp` feature.
    pub fn cli(&self) -> PathBuf {
        self.file("toolhost.exe")
    }

    /// Sets up `command` (a cargo, or a program that runs cargo, such as `toolhost pack`) to
    /// build with this route into `target/windows/`: Debian's cargo and rustc, std built from
    /// its sources (`CARGO_UNSTABLE_BUILD_STD`), the wrapper, mingw's linker.
    pub fn route(&self, command: &mut Command) {
        let workspace = crate::workspace_dir();
        crate::shell_env::as_from_a_shell(command);
        for inherited in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTDOCFLAGS",
            "CARGO_BUILD_TARGET",
        ] {
            command.env_remove(inherited);
        }
        command
            .env("CARGO", CARGO)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTC", RUSTC)
            .env("RUSTC_WRAPPER", workspace.join(WRAPPER))
            .env("CARGO_UNSTABLE_BUILD_STD", "std panic_abort")
            .env("CARGO_TARGET_DIR", &self.dir)
            .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", LINKER)
            // rustc links rsbegin.o and rsend.o from the target's sysroot, which a std built
            // by -Zbuild-std does not have; they are looked for on the library path first.
            .env(
                "RUSTFLAGS",
                format!("-L native={}", self.dir.join("rtstartup").display()),
            );
    }

    /// A command that runs `program` under Wine, headless, in the tests' own prefix.
    pub fn wine(&self, program: &Path) -> Command {
        let mut wine = Command::new(WINE);
        self.wine_env(&mut wine);
        wine.arg(program);
        wine
    }

    fn prefix(&self) -> PathBuf {
        self.dir.join("wine-prefix")
    }

    fn wine_env(&self, command: &mut Command) {
        command
            .env("WINEPREFIX", self.prefix())
            .env("WINEDEBUG", "-all")
            // No Mono or Gecko installer dialogs, no display.
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
    }
}

/// `path` as a Windows program under Wine sees it: `Z:` is `/`.
pub fn wine_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// The Windows build, made once per process (and kept in `target/windows/` between runs), or
/// `None` where the packages are missing off CI (the test noted as
/// [`skipped`](crate::skip::skipped), in one line naming the `apt-get install` that gets
/// them). As root, missing packages are installed first.
///
/// # Panics
///
/// Under `CI=true`, if the packages are missing and cannot be installed; anywhere, if the
/// build fails (with cargo's or the tool's own output above).
pub fn build() -> Option<&'static WindowsBuild> {
    static BUILD: OnceLock<Result<WindowsBuild, String>> = OnceLock::new();
    let built = BUILD.get_or_init(|| {
        if !packages_there() {
            let why = match peers::apt_install(&PACKAGES) {
                Ok(()) if packages_there() => String::new(),
                Ok(()) => "apt-get installed them but they are still missing".to_owned(),
                Err(why) => why,
            };
            if !why.is_empty() {
                return Err(format!(
                    "the Windows build's packages are missing ({why}): `apt-get install -y {}`; \
                     the Windows test needs them",
                    PACKAGES.join(" ")
                ));
            }
        }
        Ok(make())
    });
    match built {
        Ok(build) => Some(build),
        Err(why) => {
            crate::skip::skipped(why);
            None
        }
    }
}

fn packages_there() -> bool {
    [RUSTC, CARGO, WINE, WINESERVER]
        .iter()
        .all(|p| Path::new(p).is_file())
        && Path::new(RUST_SRC).join("library/std/Cargo.toml").is_file()
        && Command::new(LINKER).arg("--version").output().is_ok()
}

/// Builds into `target/windows/` under a lock (test binaries of other runs may build too).
fn make() -> WindowsBuild {
    let dir = crate::target_dir().join("windows");
    std::fs::create_dir_all(&dir).expect("target/windows");
    let lock = std::fs::File::create(dir.join(".lock")).expect("target/windows/.lock");
    lock.lock().expect("locking target/windows/.lock");
    let build = WindowsBuild { dir };
    rtstartup(&build.dir);
    let workspace = crate::workspace_dir();
    forget_builds_of_another_wrapper(&build.dir, &workspace.join(WRAPPER));
    let mut cargo = peers::lowest_priority(CARGO);
    build.route(&mut cargo);
    cargo
        .current_dir(workspace)
        .args(["build", "--quiet", "--locked", "--ignore-rust-version"])
        .args(["-Zbuild-std=std,panic_abort", "--target", TARGET])
        // toolhost-cli without `mcp` (rmcp needs Rust 1.88); the flag applies to every package
        // built, so fx-versioned-v2's default feature is named.
        .args(["--no-default-features", "--features", "fx-versioned-v2/v2"]);
    for package in BUILT {
        cargo.args(["-p", package]);
    }
    // The prefix is made meanwhile: wineboot waits on its own processes more than it computes
    // (about 11 s of a fresh run's end otherwise).
    std::thread::scope(|s| {
        s.spawn(|| prefix(&build));
        run(
            &mut cargo,
            "building the Windows host and plugins with Debian's Rust",
        );
    });
    build
}

/// Removes what cargo built in `dir` if it was built with another `rustc-wrapper.sh` than
/// `wrapper` is now: cargo does not see a change of the wrapper's content, and a crate built
/// with a feature the wrapper no longer gives it would hide that it now fails without.
fn forget_builds_of_another_wrapper(dir: &Path, wrapper: &Path) {
    let now = std::fs::read(wrapper).expect("tests/windows_host/rustc-wrapper.sh");
    let stamp = dir.join(".wrapper");
    if std::fs::read(&stamp).ok().as_ref() == Some(&now) {
        return;
    }
    for built in [TARGET, "debug"] {
        let _ = std::fs::remove_dir_all(dir.join(built));
    }
    std::fs::write(&stamp, now).expect("target/windows/.wrapper");
}

/// `rsbegin.o` and `rsend.o` for the target, from std's sources, in `target/windows/rtstartup`.
fn rtstartup(dir: &Path) -> PathBuf {
    let out = dir.join("rtstartup");
    std::fs::create_dir_all(&out).expect("target/windows/rtstartup");
    for name in ["rsbegin", "rsend"] {
        let object = out.join(format!("{name}.o"));
        if object.is_file() {
            continue;
        }
        let source = Path::new(RUST_SRC).join(format!("library/rtstartup/{name}.rs"));
        let mut rustc = Command::new(RUSTC);
        rustc
            .env("RUSTC_BOOTSTRAP", "1")
            .args(["--target", TARGET, "--emit=obj", "-O", "-C", "panic=abort"])
            .arg("-o")
            .arg(&object)
            .arg(&source);
        run(&mut rustc, &format!("compiling {}", source.display()));
    }
    out
}

/// The tests' Wine prefix, made once (`wineboot --init`) with the `bcryptprimitives.dll`
/// stand-in Wine 8 needs (tests/windows_host/bcryptprimitives.c).
fn prefix(build: &WindowsBuild) {
    let prefix = build.prefix();
    let made = prefix.join(".made");
    if made.is_file() {
        return;
    }
    let mut boot = Command::new(WINE);
    build.wine_env(&mut boot);
    boot.args(["wineboot", "--init"]);
    run(&mut boot, "making the tests' Wine prefix (wineboot --init)");
    let mut wait = Command::new(WINESERVER);
    build.wine_env(&mut wait);
    run(
        wait.arg("-w"),
        "waiting for wineserver to finish the prefix",
    );
    let system32 = prefix.join("drive_c/windows/system32");
    let source = crate::workspace_dir().join("tests/windows_host/bcryptprimitives.c");
    let mut gcc = Command::new(LINKER);
    gcc.args(["-shared", "-O2", "-o"])
        .arg(system32.join("bcryptprimitives.dll"))
        .arg(&source)
        .arg("-ladvapi32");
    run(&mut gcc, "building the bcryptprimitives.dll stand-in");
    std::fs::write(&made, "").expect("the prefix's marker");
}

/// Runs `command`, its output kept and shown only if it fails (Wine and a build in the
/// background would otherwise write into the tests' output).
fn run(command: &mut Command, what: &str) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: {:?} could not start: {e}", command.get_program()));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
