//! `.dll` plugins for real: the minimal Windows host (tests/windows_host) and plugins built for
//! Windows with Debian's Rust, run under Wine (tests/src/windows.rs). Discovery, the contract
//! check, a call and a reload of a replaced `.dll` (Windows locks a loaded file: the loader's
//! private copy is what makes the copy over it possible). Then `toolhost.exe`, the command
//! line built for Windows: the demo's session as on Linux, and `watch` reloading a `.dll`
//! copied over the loaded one.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use super::watch_mode::WatchProcess;
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

/// The demo's libraries (`cargo xtask demo` installs them): where each goes in a root, the
/// file stem cargo builds it as, and the same library built for Linux.
const DEMO_LIBRARIES: [(&str, &str, Fixture); 6] = [
    ("core/tools/response", "core_response", Fixture::Response),
    (
        "core/extensions/tool_execute_before/_10_unmask_secrets",
        "core_unmask_secrets",
        Fixture::UnmaskSecrets,
    ),
    (
        "core/extensions/tool_execute_after/_10_mask_secrets",
        "core_mask_secrets",
        Fixture::MaskSecrets,
    ),
    (
        "plugins/example/tools/greet",
        "example_greet",
        Fixture::Greet,
    ),
    (
        "plugins/example/agents/example/tools/response",
        "example_profile_response",
        Fixture::ProfileResponse,
    ),
    (
        "plugins/example/agents/example/extensions/tool_execute_after/_50_truncate_output",
        "example_truncate_output",
        Fixture::TruncateOutput,
    ),
];

/// What a `toolhost run` of the demo printed, made comparable between the two systems: its
/// standard output as it is; its log (standard error) with each call's duration and the
/// session's folder left out, sorted (the two greetings run at once, in either order).
fn demo_printed(out: &std::process::Output) -> (String, Vec<String>) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut log: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(
            |line| match line.trim_start().strip_prefix("\"duration_ms\": ") {
                Some(_) => "\"duration_ms\": ...".to_owned(),
                None if line.starts_with("session saved in ") => "session saved in ...".to_owned(),
                None => line.to_owned(),
            },
        )
        .collect();
    log.sort();
    (stdout, log)
}

#[test]
fn toolhost_exe_under_wine_runs_the_demo_as_toolhost_does_on_linux() {
    let Some(build) = windows::build() else {
        return; // said on stderr, in a NOTE line naming the apt-get install
    };
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds tests/");
    let session = workspace.join("plugins/example/demo/session.txt");
    let secrets = workspace.join("plugins/example/demo/secrets.env");
    let args = |session: &str, secrets: &str| {
        ["run", session, "--profile", "example", "--secrets", secrets].map(str::to_owned)
    };

    let linux = TestRoot::new();
    for (place, _, fixture) in DEMO_LIBRARIES {
        linux.copy(fixture, &format!("{place}.so"));
    }
    let session_arg = session.display().to_string();
    let secrets_arg = secrets.display().to_string();
    let on_linux = linux.run_cli(
        &args(&session_arg, &secrets_arg)
            .each_ref()
            .map(String::as_str),
    );
    assert!(on_linux.status.success(), "{on_linux:?}");

    let root = TestRoot::new();
    for (place, stem, _) in DEMO_LIBRARIES {
        let built = build.file(&format!("{stem}.dll"));
        root.write(
            &format!("{place}.dll"),
            std::fs::read(&built).expect("a .dll"),
        );
    }
    let on_windows = build
        .wine(&build.cli())
        .arg("--root")
        .arg(wine_path(root.path()))
        .args(args(&wine_path(&session), &wine_path(&secrets)))
        .env("NO_COLOR", "1")
        .output()
        .expect("running toolhost.exe under Wine");
    assert!(
        on_windows.status.success(),
        "toolhost.exe run failed ({}):\n{}{}",
        on_windows.status,
        String::from_utf8_lossy(&on_windows.stdout),
        String::from_utf8_lossy(&on_windows.stderr)
    );
    let (linux_stdout, linux_log) = demo_printed(&on_linux);
    let (windows_stdout, windows_log) = demo_printed(&on_windows);
    assert!(
        linux_stdout.contains("I greeted §§secret(GUEST_NAME) and Grace (loudly), both at once."),
        "{linux_stdout}"
    );
    assert_eq!(windows_stdout, linux_stdout);
    assert_eq!(windows_log, linux_log);
    assert!(
        root.path()
            .join("usr/sessions")
            .read_dir()
            .expect("usr/sessions")
            .count()
            == 1,
        "toolhost.exe saved its session"
    );
    eprintln!("toolhost.exe printed what toolhost prints on Linux:\n{windows_stdout}");
}

#[test]
fn toolhost_exe_watch_under_wine_calls_a_dll_rebuilt_over_the_loaded_one() {
    let Some(build) = windows::build() else {
        return; // said on stderr, in a NOTE line naming the apt-get install
    };
    let root = TestRoot::new();
    let tool = root.write(
        "usr/tools/versioned.dll",
        std::fs::read(build.file("fx_versioned.dll")).expect("fx_versioned.dll"),
    );
    let mut watch = build.wine(&build.cli());
    watch.arg("--root").arg(wine_path(root.path())).arg("watch");
    let mut watch = WatchProcess::spawn(&root, watch, std::time::Duration::from_secs(60));
    watch.expect_line("announcing the tools", |l| {
        l.starts_with("watching ") && l.contains("1 tool (versioned)")
    });
    watch.send("versioned");
    watch.expect_line("answering v1", |l| l == "v1");

    // Dropped over the loaded library by a Windows process, as a rebuild's copy would be:
    // Windows refuses to replace a mapped file, so this succeeds only because the host
    // loaded a private copy.
    let copied = build
        .wine(std::path::Path::new("cmd"))
        .args(["/c", "copy", "/y"])
        .arg(wine_path(&build.file("fx_versioned_v2.dll")))
        .arg(wine_path(&tool))
        .output()
        .expect("running cmd /c copy under Wine");
    assert!(
        copied.status.success(),
        "copying v2 over the loaded versioned.dll: {copied:?}"
    );
    let report = watch.expect_line("reporting the reload", |l| l.starts_with("reloaded "));
    assert!(
        report.starts_with(
            r"reloaded usr\tools\versioned.dll [layer usr]: 0.1.0 (generation 1) -> 0.2.0 (generation 2) in "
        ),
        "{report}"
    );
    watch.send("versioned");
    watch.expect_line("answering v2", |l| l == "v2");
    eprintln!("toolhost.exe watch: {report}");
}

#[test]
fn toolhost_exe_under_wine_isolates_a_dll_in_a_worker_and_refuses_limits_it_cannot_enforce() {
    let Some(build) = windows::build() else {
        return; // said on stderr, in a NOTE line naming the apt-get install
    };
    let root = TestRoot::new();
    root.write(
        "usr/tools/greet.dll",
        std::fs::read(build.file("example_greet.dll")).expect("example_greet.dll"),
    );
    let toolhost = |args: &[&str]| {
        build
            .wine(&build.cli())
            .arg("--root")
            .arg(wine_path(root.path()))
            .arg("--isolate")
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("running toolhost.exe under Wine")
    };
    let call = ["call", "greet", "--args", r#"{"name":"Ada"}"#];

    // An isolated tool is sandboxed, with memory and CPU limits: Windows has neither the
    // sandbox (Landlock, seccomp) nor the limits (rlimits), so it is refused, in one line.
    let refused = toolhost(&call);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "its limits (memory 1024 MiB, CPU 600 s) cannot be enforced on this system (they are Unix rlimits)"
        ),
        "{stderr}"
    );

    // Allowed to run without them, it runs in a worker process of its own, which says so.
    root.write("usr/toolhost.toml", "[sandbox]\nweaker = true\n");
    let called = toolhost(&call);
    assert!(called.status.success(), "{called:?}");
    assert_eq!(String::from_utf8_lossy(&called.stdout), "Hello, Ada!\n");
    let listed = toolhost(&["list", "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let tool = &listed["tools"][0];
    assert_eq!(tool["isolated"], true, "{tool}");
    assert_eq!(
        tool["sandbox"]["enforced"],
        "not sandboxed: this system has no Landlock or seccomp ([sandbox] weaker = true allows it)",
        "{tool}"
    );
}

/// `toolhost add` of `archive` (signed by `public`) into `root`, then a call of `greet`, by the
/// command line `toolhost` (`run` gives it its arguments, paths as the program sees them).
fn add_and_greet(
    run: &dyn Fn(&[&str]) -> std::process::Output,
    public: &str,
    archive: &str,
) -> Vec<std::process::Output> {
    let greet = ["call", "greet", "--args", r#"{"name":"Ada"}"#];
    [
        &["trust", "add", public][..],
        &["--yes", "add", archive][..],
        &greet[..],
    ]
    .iter()
    .map(|args| run(args))
    .collect()
}

#[test]
fn a_signed_package_for_linux_and_windows_installs_its_dll_under_wine_and_its_so_on_linux() {
    use std::collections::BTreeMap;
    use toolhost::package::{pack, signature};
    let Some(build) = windows::build() else {
        return; // said on stderr, in a NOTE line naming the apt-get install
    };
    let work = tempfile::tempdir().expect("a work folder");
    let keys = TestRoot::new();
    let made = keys.run_cli(&[
        "keygen",
        "--out",
        &work.path().display().to_string(),
        "--no-password",
    ]);
    assert!(made.status.success(), "{made:?}");
    let (secret, public) = (
        work.path().join("toolhost.key"),
        work.path().join("toolhost.pub"),
    );

    // One package, greet for both systems: libraries declared per triple, each hashed, the
    // archive signed.
    let folder = work.path().join("greet");
    std::fs::create_dir_all(&folder).expect("the plugin folder");
    std::fs::write(
        folder.join("toolhost-plugin.toml"),
        "name = \"greet\"\nversion = \"1.0.0\"\ndescription = \"Greets.\"\nauthors = [\"Ada\"]\nlicense = \"MIT\"\n",
    )
    .expect("the manifest template");
    let linux = toolhost::package::host_target().to_owned();
    let for_linux = BTreeMap::from([("tools/greet.so".to_owned(), Fixture::Greet.path())]);
    let for_windows = BTreeMap::from([(
        "tools/greet.dll".to_owned(),
        build.file("example_greet.dll"),
    )]);
    // The .dll cannot be opened here: both are the same tool, described by the Linux build.
    let describe = |_: &std::path::Path| match toolhost::inspect(&Fixture::Greet.path()).ok()?.kind
    {
        toolhost::Declared::Tool { info, .. } => Some((info.description, info.capabilities)),
        toolhost::Declared::Extension(_) => None,
    };
    let packed = |built: &BTreeMap<String, BTreeMap<String, std::path::PathBuf>>, out: &str| {
        let targets: Vec<String> = built.keys().cloned().collect();
        let packed = pack::pack(
            &folder,
            &pack::PackOptions {
                built,
                targets: &targets,
                out: &work.path().join(out),
                describe: &describe,
                mcpb_binary: None,
                bundle_key: None,
            },
        )
        .expect("packing");
        signature::sign(&packed.archive, &secret, None).expect("signing");
        packed.archive
    };
    let both = packed(
        &BTreeMap::from([
            (linux.clone(), for_linux.clone()),
            (windows::TARGET.to_owned(), for_windows),
        ]),
        "both",
    );
    let linux_only = packed(&BTreeMap::from([(linux.clone(), for_linux)]), "linux");

    let on_linux = TestRoot::new();
    let outputs = add_and_greet(
        &|args| on_linux.run_cli(args),
        &public.display().to_string(),
        &both.display().to_string(),
    );
    for out in &outputs {
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(String::from_utf8_lossy(&outputs[2].stdout), "Hello, Ada!\n");
    let installed = on_linux.path().join("usr/plugins/greet/tools");
    assert!(installed.join("greet.so").is_file());
    assert!(!installed.join("greet.dll").exists());

    let on_windows = TestRoot::new();
    let toolhost_exe = |args: &[&str]| {
        build
            .wine(&build.cli())
            .arg("--root")
            .arg(wine_path(on_windows.path()))
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("running toolhost.exe under Wine")
    };
    let outputs = add_and_greet(&toolhost_exe, &wine_path(&public), &wine_path(&both));
    for out in &outputs[..2] {
        assert!(out.status.success(), "{out:?}");
    }
    // An installed package runs isolated and sandboxed: on Windows, only once allowed to run
    // without the sandbox and its limits.
    let refused = String::from_utf8_lossy(&outputs[2].stderr);
    assert!(
        refused
            .contains("its limits (memory 1024 MiB, CPU 600 s) cannot be enforced on this system"),
        "{refused}"
    );
    on_windows.write("usr/toolhost.toml", "[sandbox]\nweaker = true\n");
    let greeted = toolhost_exe(&["call", "greet", "--args", r#"{"name":"Ada"}"#]);
    assert!(greeted.status.success(), "{greeted:?}");
    assert_eq!(String::from_utf8_lossy(&greeted.stdout), "Hello, Ada!\n");
    let installed = on_windows.path().join("usr/plugins/greet/tools");
    assert!(installed.join("greet.dll").is_file());
    assert!(!installed.join("greet.so").exists());

    // A package with no library for Windows: refused in one line naming what it has.
    let refused = toolhost_exe(&["--yes", "add", &wine_path(&linux_only)]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no library for this host ({}); it has libraries for: {linux}",
            windows::TARGET
        )),
        "{stderr}"
    );
}

#[test]
fn toolhost_pack_target_builds_the_example_for_windows_and_toolhost_exe_adds_and_calls_it() {
    let Some(build) = windows::build() else {
        return; // said on stderr, in a NOTE line naming the apt-get install
    };
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds tests/");
    let out = tempfile::tempdir().expect("an output folder");
    let made = TestRoot::new().run_cli(&[
        "keygen",
        "--out",
        &out.path().display().to_string(),
        "--no-password",
    ]);
    assert!(made.status.success(), "{made:?}");
    // `toolhost pack --target` on Linux, its cargo the route to Windows (the tests' build's).
    let mut pack = std::process::Command::new(toolhost_tests::toolhost_bin());
    build.route(&mut pack);
    let packed = pack
        .current_dir(workspace)
        .arg("pack")
        .arg(workspace.join("plugins/example"))
        .arg("--out")
        .arg(out.path())
        .args([
            "--target",
            windows::TARGET,
            "--cargo-profile",
            "dev",
            "--sign",
        ])
        .arg(out.path().join("toolhost.key"))
        .output()
        .expect("running toolhost pack");
    assert!(packed.status.success(), "{packed:?}");
    let printed = String::from_utf8_lossy(&packed.stdout);
    let archive = printed
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("packed "))
        .and_then(|l| l.split(" (").next())
        .unwrap_or_else(|| panic!("no archive in {printed:?}"));
    let file = std::fs::File::open(archive).expect("the archive");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let libraries: Vec<String> = tar
        .entries()
        .expect("its entries")
        .map(|e| {
            e.expect("an entry")
                .path()
                .expect("a path")
                .display()
                .to_string()
        })
        .filter(|p| p.starts_with("lib/"))
        .collect();
    let greet = format!("lib/{}/tools/greet.dll", windows::TARGET);
    assert!(libraries.contains(&greet), "{libraries:?}");
    assert!(
        libraries
            .iter()
            .all(|l| l.starts_with(&format!("lib/{}/", windows::TARGET))),
        "only Windows libraries: {libraries:?}"
    );

    let root = TestRoot::new();
    root.write("usr/toolhost.toml", "[sandbox]\nweaker = true\n");
    let toolhost_exe = |args: &[&str]| {
        build
            .wine(&build.cli())
            .arg("--root")
            .arg(wine_path(root.path()))
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("running toolhost.exe under Wine")
    };
    let trusted = toolhost_exe(&["trust", "add", &wine_path(&out.path().join("toolhost.pub"))]);
    assert!(trusted.status.success(), "{trusted:?}");
    let added = toolhost_exe(&["--yes", "add", &wine_path(std::path::Path::new(archive))]);
    assert!(added.status.success(), "{added:?}");
    let greeted = toolhost_exe(&["call", "greet", "--args", r#"{"name":"Ada"}"#]);
    assert!(greeted.status.success(), "{greeted:?}");
    assert_eq!(String::from_utf8_lossy(&greeted.stdout), "Hello, Ada!\n");
}
