//! Servers and plugins that ask the host's model (sampling): a Python `MCPServer` tool whose
//! `sampling/createMessage` is answered by the model of `models.toml` (`fakellm`, a real
//! OpenAI-compatible server) once the person at the terminal approves it, the server named
//! in the prompt and the audit; declined where nobody can approve or no model is
//! configured. A plugin's `Context::sample` outside `serve-mcp` goes the same way, and its
//! `Context::elicit` asks on the terminal with the MCP client's form.

use serde_json::{json, Value};
use toolhost_tests::peers::Fakellm;
use toolhost_tests::{peers, Fixture, TestRoot};

use super::servers;

/// A server whose tool `summarise` asks the client's model to summarise a text.
const SAMPLING_SERVER: &str = r#"
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent

app = MCPServer("sampler")

@app.tool()
async def summarise(text: str, ctx: Context) -> str:
    """Summarises a text with the client's model."""
    try:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text="Summarise: " + text))],
            max_tokens=40,
            system_prompt="Answer in one line. \x1b[2J",
        )
    except Exception as e:
        return "no summary: " + str(e)
    return "summary: " + result.content.text + " (by " + result.model + ")"

app.run("stdio")
"#;

/// fakellm's rule: the sampling model answers with one line.
const RULES: &str = r#"
rules:
  - name: summary
    when: {model_matches: "fake-sampler"}
    respond: {content: "Ada wrote the first program."}
"#;

fn models(root: &TestRoot, server: &Fakellm) {
    root.write(
        "usr/models.toml",
        format!(
            "[models.small]\nbase_url = \"{}\"\nmodel = \"fake-sampler\"\nstream = false\n",
            server.url()
        ),
    );
}

/// The audit log's records of `kind`, in order.
fn audited(root: &TestRoot, kind: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(root.path().join("usr/audit/audit.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == kind)
        .collect()
}

fn out(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

#[test]
fn a_servers_sampling_is_answered_by_the_hosts_model_once_approved_and_audited() {
    let root = TestRoot::new();
    let llm = Fakellm::start(RULES, root.path());
    models(&root, &llm);
    let script = root.write("sampling_server.py", SAMPLING_SERVER);
    servers(
        &root,
        "usr/mcp.json",
        // Its tool asks in the middle of the call, as 2025-11-25 allows (the SDK speaks
        // 2026-07-28 too, where that is refused): greeted with `initialize` only.
        json!({"sampler": {"command": peers::mcp_python(), "args": [script], "protocol": "2025-11-25"}}),
    );
    let call = r#"call sampler.summarise --args '{"text": "Ada Lovelace wrote a program."}'"#;
    if let Some(shown) = root.run_on_terminal(call, "o\n", false) {
        assert!(
            shown.contains(
                "MCP server 'sampler' asks model 'fake-sampler' for a completion (at most 40 \
                 tokens), during A0's call of tool 'sampler.summarise':"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("system: Answer in one line. \\u{1b}[2J"),
            "escaped: {shown}"
        );
        assert!(
            shown.contains("user: Summarise: Ada Lovelace wrote a program."),
            "{shown}"
        );
        assert!(
            shown.contains("summary: Ada wrote the first program. (by fake-sampler)"),
            "{shown}"
        );
        let records = audited(&root, "sampling");
        let record = records.last().expect("the sampling is audited");
        assert_eq!(record["requester"], "mcp:sampler", "{record}");
        assert_eq!(record["tool"], "sampler.summarise", "{record}");
        assert_eq!(record["decision"], "allowed", "{record}");
        assert_eq!(record["source"], "user: approved once", "{record}");
        assert_eq!(record["outcome"], "success", "{record}");
        assert_eq!(record["model"], "fake-sampler", "{record}");
        assert_eq!(record["request"]["max_tokens"], 40, "{record}");
    } else {
        // No `script` here: noted as skipped (under CI=true, a failure).
    }

    // Off a terminal nobody can approve: declined, and the server is told why.
    let args = r#"{"text": "Ada Lovelace wrote a program."}"#;
    let output = root.run_cli(&["call", "sampler.summarise", "--args", args]);
    let text = out(&output);
    assert!(text.contains("no summary:"), "{text}");
    assert!(
        text.contains("policy asks, and there is no terminal to ask on"),
        "{text}"
    );
    assert!(
        text.contains("[tools.\"sampling.sampler\"] policy = \"allow\""),
        "the way to allow it: {text}"
    );
    let denied = audited(&root, "sampling");
    let denied = denied.last().unwrap();
    assert_eq!(denied["decision"], "denied", "{denied}");
    assert_eq!(denied["outcome"], "denied", "{denied}");

    // The policy allows it: answered without asking.
    root.write(
        "usr/toolhost.toml",
        "[tools.\"sampling.sampler\"]\npolicy = \"allow\"\n",
    );
    let output = root.run_cli(&["call", "sampler.summarise", "--args", args]);
    let text = out(&output);
    assert!(
        text.contains("summary: Ada wrote the first program. (by fake-sampler)"),
        "{text}"
    );

    // No model configured: declined, saying so.
    std::fs::remove_file(root.path().join("usr/models.toml")).unwrap();
    let output = root.run_cli(&["call", "sampler.summarise", "--args", args]);
    let text = out(&output);
    assert!(text.contains("no summary:"), "{text}");
    assert!(text.contains("no model is configured"), "{text}");
    let last = audited(&root, "sampling");
    assert_eq!(last.last().unwrap()["outcome"], "unavailable");
}

#[test]
fn a_plugins_sample_goes_to_the_hosts_model_and_its_elicit_to_the_terminal() {
    let root = TestRoot::new();
    root.tool("usr", "test_sampling", Fixture::ConformanceTestSampling);
    root.tool(
        "usr",
        "test_elicitation",
        Fixture::ConformanceTestElicitation,
    );
    let llm = Fakellm::start(RULES, root.path());
    models(&root, &llm);
    let prompt = r#"{"prompt": "Who wrote the first program?"}"#;

    // Off a terminal, the policy asks and nobody can approve.
    let output = root.run_cli(&["call", "test_sampling", "--args", prompt]);
    let text = out(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("tool 'test_sampling' asked for a completion of model 'fake-sampler'"),
        "{text}"
    );

    root.write(
        "usr/toolhost.toml",
        "[tools.\"sampling.test_sampling\"]\npolicy = \"allow\"\n",
    );
    let output = root.run_cli(&["call", "test_sampling", "--args", prompt]);
    let text = out(&output);
    assert!(output.status.success(), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "LLM response: Ada wrote the first program."
    );
    let records = audited(&root, "sampling");
    let record = records.last().unwrap();
    assert_eq!(record["requester"], "tool", "{record}");
    assert_eq!(record["tool"], "test_sampling", "{record}");
    assert_eq!(record["outcome"], "success", "{record}");

    // A form: on the terminal, with the MCP client's form code; refused off one.
    let args = r#"call test_elicitation --args '{"message": "Who are you? \u001b[2J"}'"#;
    if let Some(shown) = root.run_on_terminal(args, "ada@example.com\nAda\ny\n", false) {
        assert!(
            shown.contains("Tool 'test_elicitation' asks, during A0's call:"),
            "{shown}"
        );
        assert!(
            shown.contains("Who are you? \\u{1b}[2J"),
            "escaped: {shown}"
        );
        assert!(
            shown.contains("email (required) User's email address [string]:"),
            "{shown}"
        );
        assert!(
            shown.contains("username (required) User's response [string]:"),
            "{shown}"
        );
        assert!(
            shown.contains(
                r#"User response: action="accept", content={"email":"ada@example.com","username":"Ada"}"#
            ),
            "{shown}"
        );
    }
    let message = r#"{"message": "Who are you?"}"#;
    let output = root.run_cli(&["call", "test_elicitation", "--args", message]);
    let text = out(&output);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("tool 'test_elicitation' asked the user a question (elicitation), and no one can answer here (not on a terminal"),
        "{text}"
    );
}
