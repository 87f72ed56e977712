//! Everything a person or a model reads is masked: a secret pushed through every sink (a
//! hostile MCP server's standard error, failure, tool description, schema and call error; a
//! model server echoing its API key from `api_key_env` in errors, a chunk that is not JSON and
//! the live stream) never shows, in any encoding masking knows, on standard output, standard
//! error (WARN and ERROR lines, the host's and rmcp's), the session files, `toolhost mcp`
//! (and `--json`), `list` (and `--json`), `prompt`, or the requests sent to the model under
//! either tool protocol.

use std::process::{Command, Stdio};

use serde_json::{json, Value};
use toolhost_tests::fake_llm::{chunk, sse, Answer, FakeLlm, Piece};
use toolhost_tests::{toolhost_bin, Fixture, TestRoot};

use super::secrets::encodings;

/// In `usr/secrets.env`.
const TOKEN: &str = "tok-9f8e7d6c5b4a-secret";
/// The model's API key, in an environment variable only.
const API_KEY: &str = "sk-env-1a2b3c4d5e6f7a8b9c0d";
const KEY_VAR: &str = "TOOLHOST_TEST_MODEL_KEY";

/// The forms a hostile peer sends a value in: plain, upper case, base64, hex.
fn forms(value: &str) -> String {
    let mut text = value.to_owned();
    for probe in encodings::probes(value) {
        if ["upper", "base64", "hex"].contains(&probe.label) {
            text = format!("{text} {}", probe.shown);
        }
    }
    text
}

/// A stdio MCP server in plain Python: with `fail`, it writes the token in every form to its
/// standard error and exits before the handshake; otherwise it offers `leak`, whose
/// description and schema carry the token, and whose calls fail echoing it.
const HOSTILE_SERVER: &str = r#"
import json, sys
leak = sys.argv[2]
if sys.argv[1] == "fail":
    sys.stderr.write("starting with Authorization: Bearer " + leak + "\n")
    sys.stderr.flush()
    sys.exit(3)
sys.stderr.write("serving; token " + leak + "\n")
sys.stderr.flush()
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "hostile " + leak, "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "leak", "description": "Leaks " + leak,
                  "inputSchema": {"type": "object",
                                  "properties": {"x": {"type": "string", "description": leak}}}}]}
    elif method == "tools/call":
        out = {"jsonrpc": "2.0", "id": mid,
               "error": {"code": -32000, "message": "refused for " + leak}}
        print(json.dumps(out), flush=True)
        continue
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
"#;

/// Every form of `value` masking must catch (the encoder fixture's probes), and its first 12
/// characters (what a cut before masking leaves).
fn assert_never_shows(value: &str, places: &[(String, String)]) {
    for (place, text) in places {
        assert!(
            !text.contains(&value[..12]),
            "the start of {value} shows in {place}:\n{text}"
        );
    }
    for probe in encodings::probes(value) {
        for (place, text) in places {
            assert!(
                !text.contains(&probe.secret),
                "{value} as {} ({}) shows in {place}:\n{text}",
                probe.label,
                probe.secret
            );
        }
    }
}

fn python() -> &'static str {
    "python3"
}

fn hostile_root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr", "echo", Fixture::Echo);
    root.secret_extensions();
    root.write("usr/secrets.env", format!("TOKEN={TOKEN}\n"));
    let script = root.write("hostile.py", HOSTILE_SERVER);
    let script = script.to_string_lossy().into_owned();
    let leak = forms(TOKEN);
    let servers = json!({"mcpServers": {
        "leaky": {"command": python(), "args": [script, "serve", leak]},
        "broken": {"command": python(), "args": [script, "fail", leak]},
    }});
    root.write("usr/mcp.json", servers.to_string());
    root
}

fn cli(root: &TestRoot, args: &[&str], places: &mut Vec<(String, String)>) -> String {
    let out = root.run_cli(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    places.push((format!("{args:?} stdout"), stdout.clone()));
    places.push((format!("{args:?} stderr"), stderr));
    stdout
}

#[test]
fn a_hostile_mcp_servers_text_is_masked_in_every_command_and_log_line() {
    let root = hostile_root();
    let mut places = Vec::new();
    // --verbose: the debug lines (the servers' standard error, rmcp's own) go through the
    // same masking as WARN and ERROR.
    let mcp = cli(&root, &["--verbose", "mcp"], &mut places);
    assert!(mcp.contains("leaky: ready"), "{mcp}");
    assert!(mcp.contains("broken: failed"), "{mcp}");
    assert!(
        mcp.contains("§§secret(TOKEN)"),
        "the failure is shown, masked: {mcp}"
    );
    let json_mcp = cli(&root, &["mcp", "--json"], &mut places);
    assert!(json_mcp.contains("§§secret(TOKEN)"), "{json_mcp}");
    let list = cli(&root, &["--verbose", "list"], &mut places);
    assert!(list.contains("leaky.leak"), "{list}");
    assert!(list.contains("Leaks §§secret(TOKEN)"), "{list}");
    let json_list = cli(&root, &["list", "--json"], &mut places);
    assert!(json_list.contains("Leaks §§secret(TOKEN)"), "{json_list}");
    let prompt = cli(&root, &["prompt"], &mut places);
    assert!(
        prompt.contains("### leaky.leak\nLeaks §§secret(TOKEN)"),
        "{prompt}"
    );
    cli(
        &root,
        &["--verbose", "call", "leaky.leak", "--args", r#"{"x": "y"}"#],
        &mut places,
    );
    let stderr = &places.last().unwrap().1;
    assert!(stderr.contains("refused for §§secret(TOKEN)"), "{stderr}");
    // The servers' standard error reached the log, masked.
    let all_stderr: String = places
        .iter()
        .filter(|(p, _)| p.ends_with("stderr"))
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(
        all_stderr.contains("Authorization: Bearer §§secret(TOKEN)"),
        "{all_stderr}"
    );
    assert_never_shows(TOKEN, &places);
}

/// A model server that answers a 500 echoing the key (the cut of its detail falling inside the
/// key), then a chunk that is not JSON with the key at the 80-character cut, then a streamed
/// reply carrying the key in every form, split across chunks, and the MCP tool's text.
fn hostile_model() -> FakeLlm {
    let server = FakeLlm::start();
    // The detail is cut at 300 characters: the key starts at 294.
    let padding = "x".repeat(271);
    let body = json!({"error": {"message": format!("{padding} Authorization: Bearer {API_KEY} {}", forms(API_KEY))}});
    server.push(Answer::Status(500, Vec::new(), body.to_string()));
    let not_json = format!("{{oops {} {API_KEY}", "y".repeat(70));
    let mut broken = sse(&[chunk(json!({"content": "Hi"}), None)]);
    broken.insert(
        1,
        Piece::Bytes(format!("data: {not_json}\n\n").into_bytes()),
    );
    server.push(Answer::Stream(broken));
    let reply =
        json!({"tool_name": "response", "tool_args": {"text": format!("done {}", forms(API_KEY))}})
            .to_string();
    let at = reply.find(API_KEY).unwrap() + 5;
    let (first, second) = reply.split_at(at);
    let events = [
        chunk(json!({"role": "assistant", "content": first}), None),
        chunk(json!({"content": second}), Some("stop")),
    ];
    // The answer: the key's placeholder in it is text, not a secret to fill in.
    server.push(Answer::Stream(sse(&events)));
    server
}

#[test]
fn a_model_api_key_from_the_environment_never_shows_in_any_form() {
    let server = hostile_model();
    let root = hostile_root();
    root.write(
        "usr/models.toml",
        format!(
            "[models.fake]\nbase_url = \"{}\"\nmodel = \"fake-1\"\napi_key_env = \"{KEY_VAR}\"\n\
             retry_initial_ms = 10\n",
            server.url()
        ),
    );
    let out = Command::new(toolhost_bin())
        .args([
            "--root",
            &root.path().to_string_lossy(),
            "--verbose",
            "chat",
        ])
        .env(KEY_VAR, API_KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"Say it.\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("done §§secret(TOOLHOST_TEST_MODEL_KEY)"),
        "the answer, the key masked: {stdout}{stderr}"
    );
    let shown = "Text: done §§secret(TOOLHOST_TEST_MODEL_KEY)";
    assert!(stderr.contains(shown), "{stderr}");
    // The retry's WARN line and the broken chunk's error are there, masked.
    assert!(stderr.contains("retrying in"), "{stderr}");
    assert!(stderr.contains("not JSON"), "{stderr}");
    let mut places = vec![
        ("chat stdout".to_owned(), stdout),
        ("chat stderr".to_owned(), stderr),
    ];
    for entry in std::fs::read_dir(root.path().join("usr/sessions")).unwrap() {
        for file in ["history.jsonl", "log.jsonl"] {
            let text = std::fs::read_to_string(entry.as_ref().unwrap().path().join(file));
            places.push((format!("session {file}"), text.unwrap_or_default()));
        }
    }
    // What the model was sent: the MCP tool's description, masked.
    let requests = server.requests();
    let bodies: Vec<String> = requests.iter().map(|r| r.body.to_string()).collect();
    assert!(
        bodies.iter().any(|b| b.contains("Leaks §§secret(TOKEN)")),
        "{bodies:?}"
    );
    for body in bodies {
        places.push(("a request to the model".to_owned(), body));
    }
    assert_never_shows(API_KEY, &places);
    assert_never_shows(TOKEN, &places);
}

#[test]
fn mcp_tool_descriptions_reach_a_native_model_masked() {
    let root = hostile_root();
    let host = root.host();
    toolhost_tests::block_on(host.wait_for_mcp("default", std::time::Duration::from_secs(60)));
    let specs = host.tool_specs("default");
    let leak = specs
        .iter()
        .find(|s| s.name == "leaky__leak")
        .unwrap_or_else(|| panic!("{specs:?}"));
    assert!(
        leak.description.starts_with("Leaks §§secret(TOKEN)"),
        "{}",
        leak.description
    );
    let places: Vec<(String, String)> = specs
        .iter()
        .map(|s| {
            (
                format!("spec {}", s.name),
                serde_json::to_string(s).unwrap(),
            )
        })
        .collect();
    let schema: &Value = &leak.parameters["properties"]["x"]["description"];
    assert!(
        schema.as_str().unwrap().starts_with("§§secret(TOKEN)"),
        "{schema}"
    );
    assert_never_shows(TOKEN, &places);
    // Calls still validate against the schema as the server sent it.
    let tools = host.mcp_tools("default");
    assert!(tools.iter().any(|t| t.name() == "leaky.leak"));
}
