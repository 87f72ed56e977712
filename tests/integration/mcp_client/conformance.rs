//! The official conformance suite's client scenarios against this client, through a driver
//! the test owns: a shell script the suite runs with its test server's URL as the last
//! argument, which points `usr/mcp.json` at that URL and runs the `toolhost` command the
//! scenario needs (`MCP_CONFORMANCE_SCENARIO` names it).
//!
//! The `auth/*` scenarios: the driver writes the server's `oauth` settings (the client ID
//! metadata document's URL the suite accepts, and the pre-registered client the scenario's
//! context gives, if any), runs `toolhost mcp login conf` and then calls the server's
//! `test-tool`, with `TOOLHOST_MCP_LOGIN_FETCH=1`: the suite's authorization server approves
//! without a person, so the browser step is a GET of the authorization URL that follows the
//! redirect to the loopback listener, and a step-up in the middle of the call signs in the
//! same way. Every scenario of the pinned suite for 2025-06-18 or 2025-11-25 runs, and those
//! of other versions that pass: `auth/client-credentials-basic` (extension: the machine's
//! `"grant": "client_credentials"`), `auth/resource-mismatch`, `auth/offline-access-scope`,
//! `auth/offline-access-not-supported` (draft) and `auth/2025-03-26-oauth-endpoint-fallback`.
//!
//! The 2026-07-28 client scenarios of the 0.2.0 line (`@modelcontextprotocol/conformance`
//! 0.2.0-alpha.12, every one that revision scores) run with a driver that has no step of its
//! own for any scenario, as a user would drive the client: it points `usr/mcp.json` at the
//! URL (with the `oauth` settings above for `auth/*`, then `toolhost mcp login conf`), runs
//! `toolhost mcp --json` and calls every tool listed with `toolhost --yes call conf.TOOL`,
//! giving each required argument a value of its type (a string with spaces and non-ASCII
//! letters, so that a header carrying it must be Base64-encoded).
//!
//! Not run here, with the suite's reason (its `specVersions`) and what this client does:
//! `auth/2025-03-26-oauth-metadata-backcompat` (2025-03-26 only; rmcp refuses its authorization
//! server metadata, whose `issuer` has a path the server's URL has not: "issuer mismatch"),
//! `auth/client-credentials-jwt` and `auth/cross-app-access-complete-flow` (extension:
//! `private_key_jwt` client assertions and enterprise token exchange, which this client does
//! not offer).

use std::process::Command;

use serde_json::Value;
use toolhost_tests::{peers, TestRoot};

/// The driver: `$1`... the suite's, the last one the URL.
const DRIVER: &str = r#"#!/bin/sh
for url; do :; done
mkdir -p "$ROOT/usr"
printf '{"mcpServers": {"conf": {"url": "%s"}}}' "$url" > "$ROOT/usr/mcp.json"
case "$MCP_CONFORMANCE_SCENARIO" in
  initialize) exec "$TOOLHOST" --root "$ROOT" mcp ;;
  tools_call) exec "$TOOLHOST" --root "$ROOT" call conf.add_numbers --args '{"a": 2, "b": 3}' ;;
  elicitation-sep1034-client-defaults)
    exec "$TOOLHOST" --root "$ROOT" $YES call conf.test_client_elicitation_defaults ;;
  sse-retry) exec "$TOOLHOST" --root "$ROOT" call conf.test_reconnection ;;
  auth/*)
    "$NODE" -e '
      const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
      const oauth = {client_metadata_url: "https://conformance-test.local/client-metadata.json"};
      if (ctx.client_id) oauth.client_id = ctx.client_id;
      if (ctx.client_secret) oauth.client_secret = ctx.client_secret;
      if (process.env.MCP_CONFORMANCE_SCENARIO.startsWith("auth/client-credentials"))
        oauth.grant = "client_credentials";
      const file = {mcpServers: {conf: {url: process.argv[2], oauth}}};
      require("fs").writeFileSync(process.argv[1], JSON.stringify(file));
    ' "$ROOT/usr/mcp.json" "$url"
    export TOOLHOST_MCP_LOGIN_FETCH=1
    "$TOOLHOST" --root "$ROOT" mcp login conf || exit 1
    exec "$TOOLHOST" --root "$ROOT" call conf.test-tool --args '{}' ;;
  *) echo "no step for scenario $MCP_CONFORMANCE_SCENARIO" >&2; exit 2 ;;
esac
"#;

/// The driver of the 2026-07-28 scenarios: no step of its own for any (see the module's
/// documentation).
const DRIVER_2026: &str = r#"#!/bin/sh
for url; do :; done
mkdir -p "$ROOT/usr"
"$NODE" -e '
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO || "";
  const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
  const server = {url: process.argv[2]};
  if (scenario.startsWith("auth/")) {
    server.oauth = {client_metadata_url: "https://conformance-test.local/client-metadata.json"};
    if (ctx.client_id) server.oauth.client_id = ctx.client_id;
    if (ctx.client_secret) server.oauth.client_secret = ctx.client_secret;
  }
  require("fs").writeFileSync(process.argv[1], JSON.stringify({mcpServers: {conf: server}}));
' "$ROOT/usr/mcp.json" "$url"
case "$MCP_CONFORMANCE_SCENARIO" in auth/*)
  export TOOLHOST_MCP_LOGIN_FETCH=1
  "$TOOLHOST" --root "$ROOT" mcp login conf || exit 1 ;;
esac
"$TOOLHOST" --root "$ROOT" mcp --json > "$ROOT/servers.json" || { cat "$ROOT/servers.json"; exit 1; }
"$NODE" -e '
  const listed = JSON.parse(require("fs").readFileSync(process.argv[1]));
  const example = {string: "naïve café ☕", number: 1, integer: 1, boolean: true};
  for (const server of listed.servers) for (const tool of server.tools || []) {
    const schema = tool.input_schema || {}, args = {};
    for (const key of schema.required || []) {
      const property = (schema.properties || {})[key] || {};
      args[key] = property.enum ? property.enum[0] : (example[property.type] ?? "x");
    }
    console.log(tool.name + "\t" + JSON.stringify(args));
  }
' "$ROOT/servers.json" > "$ROOT/calls.tsv"
status=0
while IFS="$(printf '\t')" read -r tool args; do
  "$TOOLHOST" --root "$ROOT" --yes call "$tool" --args "$args" || status=1
done < "$ROOT/calls.tsv"
exit $status
"#;

/// Runs one client scenario of the pinned 2025-11-25 suite; each check's status and name,
/// and the suite's report. `yes`: the driver's command gets `--yes`.
fn scenario(name: &str, yes: bool) -> (Vec<(String, String)>, String) {
    run(&peers::conformance(), DRIVER, name, yes)
}

/// Runs one client scenario of `suite` with `driver`, as [`scenario`] does.
fn run(
    suite: &std::path::Path,
    driver: &str,
    name: &str,
    yes: bool,
) -> (Vec<(String, String)>, String) {
    let node = peers::node22();
    let root = TestRoot::new();
    let driver = root.write("driver.sh", driver);
    let out_dir = root.path().join("results");
    let out = Command::new(node)
        .arg(suite)
        .args(["client", "--scenario", name, "--command"])
        .arg(format!("sh {}", driver.display()))
        .arg("-o")
        .arg(&out_dir)
        .env("ROOT", root.path())
        .env("TOOLHOST", toolhost_tests::toolhost_bin())
        .env("NODE", peers::node22())
        .env("NO_COLOR", "1")
        .env("YES", if yes { "--yes" } else { "" })
        .output()
        .expect("the conformance suite runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The results of `auth/x` are in `auth/x-<time>/`.
    let results = match name.split_once('/') {
        Some((group, _)) => out_dir.join(group),
        None => out_dir,
    };
    let checks = std::fs::read_dir(&results)
        .unwrap_or_else(|e| panic!("no results ({e}): {report}"))
        .flatten()
        .map(|d| d.path().join("checks.json"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no checks.json: {report}"));
    // The client's own standard error, which the suite prints only when it fails.
    let client_stderr = std::fs::read_to_string(checks.with_file_name("stderr.txt"));
    let report = format!(
        "{report}\nclient stderr:\n{}",
        client_stderr.unwrap_or_default()
    );
    let checks: Vec<Value> = serde_json::from_slice(&std::fs::read(checks).unwrap()).unwrap();
    let checks = checks
        .iter()
        .map(|c| {
            let status = c["status"].as_str().unwrap_or_default().to_owned();
            let what = format!("{}: {}", c["id"], c["errorMessage"].as_str().unwrap_or(""));
            (status, what)
        })
        .collect();
    (checks, report)
}

/// Asserts that the scenario passed: some check succeeded and none failed or warned.
fn passes(name: &str) {
    let (checks, report) = scenario(name, true);
    no_failures(name, &checks, &report);
}

/// Asserts that the 2026-07-28 scenario `name` of the 0.2.0 suite passed, as [`passes`]
/// does.
fn passes_2026(name: &str) {
    let (checks, report) = run(&peers::conformance_2026(), DRIVER_2026, name, true);
    no_failures(name, &checks, &report);
}

/// Some check succeeded, and none failed or warned. (A client scenario skips the checks of
/// what the client never does: `initialize` after a `server/discover` that worked, prompts
/// and resources, which this client does not read, roots, which it does not share.)
fn no_failures(name: &str, checks: &[(String, String)], report: &str) {
    let bad: Vec<&(String, String)> = checks
        .iter()
        .filter(|(status, _)| status == "FAILURE" || status == "WARNING")
        .collect();
    assert!(bad.is_empty(), "{name}: {bad:?}\n{report}");
    assert!(
        checks.iter().any(|(status, _)| status == "SUCCESS"),
        "{name}: no check succeeded\n{report}"
    );
}

#[test]
fn conformance_initialize() {
    passes("initialize");
}

#[test]
fn conformance_tools_call() {
    passes("tools_call");
}

#[test]
fn conformance_sse_retry() {
    passes("sse-retry");
}

/// SEP-1034: the server's form has a default for every field and asks for none; `--yes`
/// sends it with the defaults applied.
#[test]
fn conformance_elicitation_sep1034_client_defaults() {
    passes("elicitation-sep1034-client-defaults");
}

/// Without `--yes` and off a terminal no one can answer the form: it is declined, and the
/// reason is logged.
#[test]
fn a_form_no_one_can_answer_is_declined_with_the_reason() {
    let (checks, report) = scenario("elicitation-sep1034-client-defaults", false);
    assert!(
        checks.iter().any(|(status, what)| status == "FAILURE"
            && what.contains("Expected action 'accept', got 'decline'")),
        "{checks:?}\n{report}"
    );
    assert!(
        report.contains("declined, no one can answer here (not on a terminal; --yes sends a form whose required fields all have defaults)"),
        "{report}"
    );
}

/// One test per `auth/*` scenario (see the module's documentation).
macro_rules! auth_scenarios {
    ($($test:ident: $name:literal,)*) => {$(
        #[test]
        fn $test() {
            passes($name);
        }
    )*};
}

auth_scenarios! {
    conformance_auth_metadata_default: "auth/metadata-default",
    conformance_auth_metadata_var1: "auth/metadata-var1",
    conformance_auth_metadata_var2: "auth/metadata-var2",
    conformance_auth_metadata_var3: "auth/metadata-var3",
    conformance_auth_basic_cimd: "auth/basic-cimd",
    conformance_auth_scope_from_www_authenticate: "auth/scope-from-www-authenticate",
    conformance_auth_scope_from_scopes_supported: "auth/scope-from-scopes-supported",
    conformance_auth_scope_omitted_when_undefined: "auth/scope-omitted-when-undefined",
    conformance_auth_scope_step_up: "auth/scope-step-up",
    conformance_auth_scope_retry_limit: "auth/scope-retry-limit",
    conformance_auth_token_endpoint_auth_basic: "auth/token-endpoint-auth-basic",
    conformance_auth_token_endpoint_auth_post: "auth/token-endpoint-auth-post",
    conformance_auth_token_endpoint_auth_none: "auth/token-endpoint-auth-none",
    conformance_auth_pre_registration: "auth/pre-registration",
    conformance_auth_client_credentials_basic: "auth/client-credentials-basic",
    conformance_auth_resource_mismatch: "auth/resource-mismatch",
    conformance_auth_offline_access_scope: "auth/offline-access-scope",
    conformance_auth_offline_access_not_supported: "auth/offline-access-not-supported",
    conformance_auth_2025_03_26_oauth_endpoint_fallback: "auth/2025-03-26-oauth-endpoint-fallback",
}

/// One test per client scenario 0.2.0-alpha.12 scores for 2026-07-28 (all 32).
macro_rules! scenarios_2026 {
    ($($test:ident: $name:literal,)*) => {$(
        #[test]
        fn $test() {
            passes_2026($name);
        }
    )*};
}

scenarios_2026! {
    conformance_2026_tools_call: "tools_call",
    conformance_2026_request_metadata: "request-metadata",
    conformance_2026_auth_metadata_default: "auth/metadata-default",
    conformance_2026_auth_metadata_var1: "auth/metadata-var1",
    conformance_2026_auth_metadata_var2: "auth/metadata-var2",
    conformance_2026_auth_metadata_var3: "auth/metadata-var3",
    conformance_2026_auth_basic_cimd: "auth/basic-cimd",
    conformance_2026_auth_scope_from_www_authenticate: "auth/scope-from-www-authenticate",
    conformance_2026_auth_scope_from_scopes_supported: "auth/scope-from-scopes-supported",
    conformance_2026_auth_scope_omitted_when_undefined: "auth/scope-omitted-when-undefined",
    conformance_2026_auth_scope_step_up: "auth/scope-step-up",
    conformance_2026_auth_scope_retry_limit: "auth/scope-retry-limit",
    conformance_2026_auth_token_endpoint_auth_basic: "auth/token-endpoint-auth-basic",
    conformance_2026_auth_token_endpoint_auth_post: "auth/token-endpoint-auth-post",
    conformance_2026_auth_token_endpoint_auth_none: "auth/token-endpoint-auth-none",
    conformance_2026_auth_pre_registration: "auth/pre-registration",
    conformance_2026_auth_resource_mismatch: "auth/resource-mismatch",
    conformance_2026_auth_offline_access_scope: "auth/offline-access-scope",
    conformance_2026_auth_offline_access_not_supported: "auth/offline-access-not-supported",
    conformance_2026_auth_authorization_server_migration: "auth/authorization-server-migration",
    conformance_2026_auth_iss_supported: "auth/iss-supported",
    conformance_2026_auth_iss_not_advertised: "auth/iss-not-advertised",
    conformance_2026_auth_iss_supported_missing: "auth/iss-supported-missing",
    conformance_2026_auth_iss_wrong_issuer: "auth/iss-wrong-issuer",
    conformance_2026_auth_iss_unexpected: "auth/iss-unexpected",
    conformance_2026_auth_iss_normalized: "auth/iss-normalized",
    conformance_2026_auth_metadata_issuer_mismatch: "auth/metadata-issuer-mismatch",
    conformance_2026_sep_2322_client_request_state: "sep-2322-client-request-state",
    conformance_2026_http_standard_headers: "http-standard-headers",
    conformance_2026_http_custom_headers: "http-custom-headers",
    conformance_2026_http_invalid_tool_headers: "http-invalid-tool-headers",
    conformance_2026_json_schema_ref_no_deref: "json-schema-ref-no-deref",
}
