//! `.dll` plugins for real: the minimal Windows host (tests/windows_host) and plugins built for
//! Windows with Debian's Rust, run under Wine (tests/src/windows.rs). Discovery, the contract
//! check, a call and a reload of a replaced `.dll` (Windows locks a loaded file: the loader's
//! private copy is what makes the copy over it possible).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use toolhost_tests::windows::{self, wine_path, WindowsBuild};
use toolhost_tests::{wait_for, Fixture, TestRoot};

/// The Windows host under Wine, answering commands on its stdin.
struct WineHost {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl WineHost {
    fn start(build: &WindowsBuild, root: &TestRoot) -> Self {
        let temp = root.path().join("temp");
        std::fs::create_dir_all(&temp).expect("the host's temp folder");
        let mut child = build
            .wine(&build.host())
            .arg(wine_path(root.path()))
            .arg(wine_path(&temp))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the Windows host under Wine");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends `command`; the lines of its answer (up to the line `.`).
    fn ask(&mut self, command: &str) -> Vec<String> {
        writeln!(self.stdin, "{command}").expect("writing to the Windows host");
        self.stdin.flush().expect("flushing");
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("reading the host");
            assert!(
                n > 0,
                "the Windows host ended; it answered {lines:?} to {command:?}"
            );
            let line = line.trim_end_matches(['\r', '\n']).to_owned();
            if line == "." {
                return lines;
            }
            lines.push(line);
        }
    }
}

impl Drop for WineHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_windows_host_under_wine_finds_checks_calls_and_reloads_dll_plugins() {
    let Some(build) = windows::build() else {
        return; // noted as skipped, in one line naming the apt-get install
    };
    // The reason the Linux host gives for a library built against another layout of the
    // contract: the Windows host must give the same one.
    let linux = TestRoot::new();
    linux.tool("usr", "bad", Fixture::IncompatibleLayout);
    let listing = linux.host().list("default");
    assert_eq!(listing.skipped.len(), 1, "{:?}", listing.skipped);
    let linux_reason = listing.skipped[0].reason.clone();

    let root = TestRoot::new();
    let dll = |name: &str| build.file(&format!("{name}.dll"));
    let install = |from: &str, to: &str| {
        let dest = root.path().join("usr/tools").join(format!("{to}.dll"));
        std::fs::create_dir_all(dest.parent().expect("usr/tools")).expect("mkdir");
        std::fs::copy(dll(from), &dest).expect("installing a .dll");
        dest
    };
    install("example_greet", "greet");
    install("fx_versioned", "versioned");
    let bad = install("fx_incompatible_layout", "bad");
    let mut host = WineHost::start(build, &root);

    let listed = host.ask("list default");
    eprintln!("the Windows host lists:\n{}", listed.join("\n"));
    assert!(
        listed.contains(&r"tool greet usr\tools\greet.dll".to_owned()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&r"tool versioned usr\tools\versioned.dll".to_owned()),
        "{listed:?}"
    );
    let refused = format!("skipping {}: {linux_reason}", wine_path(&bad));
    assert!(
        listed.contains(&refused),
        "{listed:?} should hold {refused:?}"
    );
    assert!(
        !listed.iter().any(|l| l.starts_with("tool bad ")),
        "{listed:?}"
    );

    let greeted = host.ask(r#"call default greet {"name":"Ada"}"#);
    assert_eq!(greeted, ["ok Hello, Ada!"]);
    assert_eq!(host.ask("call default versioned {}"), ["ok v1"]);

    // Replaced by the Windows process itself, as a rebuild would: the copy over the loaded
    // file succeeds (the host mapped a private copy), and the watcher reloads it.
    let versioned = wine_path(&root.path().join(r"usr/tools/versioned.dll"));
    let copied = host.ask(&format!(
        "copy {} {versioned}",
        wine_path(&dll("fx_versioned_v2"))
    ));
    assert_eq!(copied, ["ok"]);
    wait_for("the Windows host to reload versioned.dll", || {
        match host.ask("call default versioned {}") {
            answer if answer == ["ok v2"] => Ok(()),
            answer => Err(answer),
        }
    });
    assert_eq!(
        host.ask(r#"call default greet {"name":"Ada"}"#),
        ["ok Hello, Ada!"]
    );
    eprintln!("greet answered Hello, Ada!; versioned.dll reloaded from v1 to v2");
}
