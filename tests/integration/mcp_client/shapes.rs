//! The shapes users already have: `toolhost mcp import` merges a Zed settings file
//! (`context_servers`, with comments and other settings), a VS Code `.vscode/mcp.json` (with
//! an `inputs` password) and refuses a Cursor file whose server name is taken; the VS Code
//! input is asked once on the terminal, kept in `usr/secrets.env` and never shown. Real
//! servers: `mcp-server-time` (PyPI) under each shape.

use serde_json::{json, Value};
use toolhost_tests::{peers, TestRoot};

use super::{servers, time};

fn run(root: &TestRoot, args: &[&str]) -> (Option<i32>, String, String) {
    let out = root.run_cli(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn import_merges_zed_and_vs_code_files_asks_an_input_once_and_refuses_a_clash() {
    let root = TestRoot::new();
    servers(&root, "usr/mcp.json", json!({"time": time()}));
    let python = peers::mcp_python();
    let python = python.to_str().unwrap();
    let zed = format!(
        r#"// Zed settings: comments, trailing commas and other settings
{{
  "theme": "One Dark",
  /* the servers */
  "context_servers": {{
    "zedtime": {{
      "source": "custom",
      "command": {{"path": "{python}", "args": ["-m", "mcp_server_time"], "env": {{}}}},
      "settings": {{}},
    }},
  }},
}}"#
    );
    // FILE is relative to the working directory, as any path given on the command line.
    let zed = root.write("zed-settings.json", zed);
    let zed = zed.to_str().unwrap();
    let (code, out, err) = run(&root, &["mcp", "import", zed]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out.trim(),
        format!("imported 1 server(s) from {zed} into usr/mcp.json: zedtime")
    );

    let vscode = json!({
        "inputs": [{"type": "promptString", "id": "tz", "description": "Time zone", "password": true}],
        "servers": {"vstime": {
            "type": "stdio",
            "command": python,
            "args": ["-m", "mcp_server_time", "--local-timezone", "${input:tz}"],
        }},
    });
    let vscode = root.write(".vscode/mcp.json", vscode.to_string());
    let (code, out, err) = run(&root, &["mcp", "import", vscode.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join("usr/mcp.json")).unwrap())
            .unwrap();
    let names: Vec<&String> = file["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["time", "vstime", "zedtime"], "{file}");
    assert_eq!(file["mcpServers"]["zedtime"]["command"], python, "{file}");
    assert_eq!(file["inputs"][0]["id"], "tz", "{file}");

    // A Cursor file whose server name is taken: one line, nothing imported.
    let cursor = root.write(
        ".cursor/mcp.json",
        json!({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}})
            .to_string(),
    );
    let cursor = cursor.to_str().unwrap();
    let before = std::fs::read_to_string(root.path().join("usr/mcp.json")).unwrap();
    let (code, out, err) = run(&root, &["mcp", "import", cursor]);
    assert_ne!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [format!(
            "error: usr/mcp.json already has a server 'time' and {cursor} has one too: rename one of them (nothing was imported)"
        )],
        "{err}"
    );
    let after = std::fs::read_to_string(root.path().join("usr/mcp.json")).unwrap();
    assert_eq!(before, after, "nothing was written");

    // Off a terminal the input is not asked: the server that uses it fails, naming it.
    let (code, out, err) = run(&root, &["mcp"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("zedtime: ready with 2 tools"), "{out}");
    assert!(
        out.contains("vstime: failed") && out.contains("MCP_INPUT_TZ"),
        "{out}"
    );

    // On a terminal it is asked once, typed without echo, and kept as a secret.
    if let Some(shown) = root.run_on_terminal("mcp", "Europe/Oslo\n", false) {
        assert!(
            shown.contains("MCP input 'tz': Time zone (kept in usr/secrets.env as MCP_INPUT_TZ): "),
            "{shown}"
        );
        assert!(!shown.contains("Europe/Oslo"), "never shown: {shown}");
        assert!(shown.contains("vstime: ready with 2 tools"), "{shown}");
        let secrets = std::fs::read_to_string(root.path().join("usr/secrets.env")).unwrap();
        assert!(secrets.contains("MCP_INPUT_TZ=Europe/Oslo\n"), "{secrets}");
        let again = root.run_on_terminal("mcp", "", false).unwrap();
        assert!(!again.contains("MCP input 'tz'"), "asked once: {again}");
    }
}
