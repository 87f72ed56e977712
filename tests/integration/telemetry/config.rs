//! `[telemetry]` in `usr/toolhost.toml`: traces exported because of the file alone, and a
//! standard variable winning over the file's value.

use serde_json::{json, Value};

use super::{Receiver, Served};
use crate::mcp_server::root;

/// The `service.name` and the `x-team` header of the spans of a served `echo` call, sent with `env` to a server whose
/// `usr/toolhost.toml` points `[telemetry]` at a receiver.
fn service_of_a_call(env: &[(&str, String)]) -> (Value, Value) {
    let root = root();
    let receiver = Receiver::start(root.path());
    let text = format!(
        "[access]\ndeny = [\"hidden\"]\n[tools.noop]\npolicy = \"ask\"\n\n[telemetry]\n\
         endpoint = \"http://127.0.0.1:{}/\"\nservice_name = \"from-the-file\"\n\
         traces_exporter = \"otlp\"\n[telemetry.headers]\nx-team = \"tools\"\n",
        receiver.port
    );
    root.write("usr/toolhost.toml", &text);
    let server = Served::start(&root, &["--allow-writes-without-token"], env);
    let ok = server.call("1", "echo", json!({"x": 1}), json!({}));
    assert_eq!(ok["isError"], false, "{ok}");
    // The batch's default delay (5 s) applies: no variable shortens it.
    let spans = receiver.wait_for(|spans| spans.iter().any(|s| s["name"] == "execute_tool echo"));
    let span = spans
        .iter()
        .find(|s| s["name"] == "execute_tool echo")
        .expect("the call's span");
    (span["service"].clone(), span["x_headers"]["x-team"].clone())
}

#[test]
fn toolhost_toml_alone_turns_the_export_on() {
    let (service, team) = service_of_a_call(&[]);
    assert_eq!(service, "from-the-file");
    assert_eq!(team, "tools", "the file's headers are sent");
}

#[test]
fn a_standard_variable_wins_over_the_file() {
    let env = [("OTEL_SERVICE_NAME", "from-the-environment".to_owned())];
    assert_eq!(service_of_a_call(&env).0, "from-the-environment");
}
