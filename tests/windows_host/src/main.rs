//! A minimal host over the toolhost library, for the Windows test (tests/integration/windows.rs
//! runs it under Wine): the same discovery, loader, contract check, call lifecycle and reload
//! as `toolhost`, without MCP (its dependencies need a newer Rust than the one that builds
//! for Windows here).
//!
//! `toolhost-windows-host ROOT [TEMP]` serves the root `ROOT`, watching it for changes; `TEMP`
//! is the temporary folder for the loader's private copies (the test's own, so a Wine prefix
//! keeps nothing). It reads one command per line on stdin and answers each with lines ending
//! in a line `.`:
//!
//! - `list PROFILE`: `tool NAME PATH` for each tool (PATH relative to ROOT), then the
//!   loader's line `skipping PATH: REASON` for each file that failed to load;
//! - `call PROFILE NAME JSON`: `ok TEXT` or `error MESSAGE`;
//! - `copy FROM TO`: copies a file as this process sees it (on Windows, a loaded library is
//!   locked: the copy over it must succeed because the host loaded a private copy), `ok` or
//!   `error MESSAGE`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost::output::Captured;
use toolhost::{Agent, Host};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(root) = args.next().map(PathBuf::from) else {
        eprintln!("usage: toolhost-windows-host ROOT [TEMP]");
        std::process::exit(2);
    };
    if let Some(temp) = args.next() {
        // Read by std::env::temp_dir() on Windows (GetTempPath2W), before the host starts.
        // SAFETY: the only thread: the runtime is made after this.
        unsafe {
            std::env::set_var("TMP", &temp);
            std::env::set_var("TEMP", &temp);
        }
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let host = match Host::new(&root) {
        Ok(host) => Arc::new(host),
        Err(e) => {
            eprintln!("toolhost-windows-host: {e}");
            std::process::exit(1);
        }
    };
    let _watcher = {
        let _entered = runtime.enter();
        host.watch().unwrap_or_else(|e| {
            eprintln!(
                "toolhost-windows-host: cannot watch {}: {e}",
                root.display()
            );
            std::process::exit(1);
        })
    };
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut out = stdout.lock();
        for answer in answer(&runtime, &host, &root, &line) {
            let _ = writeln!(out, "{answer}");
        }
        let _ = writeln!(out, ".");
        let _ = out.flush();
    }
}

/// The answer's lines to one command.
fn answer(
    runtime: &tokio::runtime::Runtime,
    host: &Arc<Host>,
    root: &Path,
    line: &str,
) -> Vec<String> {
    let mut words = line.splitn(4, ' ');
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("list"), Some(profile), None, None) => {
            let catalog = host.list(profile);
            let tools = catalog.tools.iter().map(|tool| {
                let path = tool.path.strip_prefix(root).unwrap_or(&tool.path);
                format!("tool {} {}", tool.name, path.display())
            });
            let skipped = catalog.skipped.iter().map(ToString::to_string);
            tools.chain(skipped).collect()
        }
        (Some("call"), Some(profile), Some(name), Some(json)) => {
            let args = match serde_json::from_str(json) {
                Ok(args) => args,
                Err(e) => return vec![format!("error the arguments are not JSON: {e}")],
            };
            let output = Arc::new(Captured::default());
            let called = Agent::with_output(host.clone(), "A0", profile, output)
                .map_err(|e| e.to_string())
                .and_then(|agent| {
                    runtime
                        .block_on(agent.call_tool(name, args))
                        .map_err(|e| e.to_string())
                });
            match called {
                Ok(response) => vec![format!("ok {}", response.message)],
                Err(e) => vec![format!("error {e}")],
            }
        }
        (Some("copy"), Some(from), Some(to), None) => match std::fs::copy(from, to) {
            Ok(_) => vec!["ok".to_owned()],
            Err(e) => vec![format!("error {e}")],
        },
        _ => vec![format!(
            "error unknown command {line:?}: list, call or copy"
        )],
    }
}
