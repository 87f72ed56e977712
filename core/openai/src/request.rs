//! The body of a chat-completions request: the history as OpenAI messages (tool results as
//! user messages under the JSON protocol; `tool_calls` and `role: tool` messages under the
//! native one), fitted to the context window, with the tools or a `response_format`.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::{json, Value};

use super::config::ModelConfig;
use super::examples;
use super::schema::{request_schema, Form, Ordered};
use super::window;
use toolhost::{HistoryMessage, Role};
use toolhost::{ModelRequest, ToolProtocol};

/// What the system prompt gains under the native protocol (the core prompt asks for JSON).
pub const NATIVE_NOTE: &str = "# Tool calls\nIn this session the tools are functions: \
call them with function calls, not with JSON in your text. Several calls in one reply run in \
parallel. When you are done, call `response` with your final answer (a reply with text and no \
call is taken as the final answer).";

/// One message as the server reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Wire {
    pub(crate) role: &'static str,
    pub(crate) content: Option<String>,
    pub(crate) tool_calls: Vec<Value>,
    pub(crate) tool_call_id: Option<String>,
    /// A tool result: shortened first when the history is too long.
    pub(crate) tool_result: bool,
    /// Images, as `data:` URLs: with any, `content` is sent as parts (its text, then one
    /// `image_url` part each).
    pub(crate) images: Vec<String>,
}

impl Serialize for Wire {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = out.serialize_map(None)?;
        map.serialize_entry("role", self.role)?;
        match self.images.is_empty() {
            true => map.serialize_entry("content", &self.content)?,
            false => {
                let text = self.content.as_deref().filter(|t| !t.is_empty());
                let text = text.map(|text| json!({"type": "text", "text": text}));
                let images = self
                    .images
                    .iter()
                    .map(|url| json!({"type": "image_url", "image_url": {"url": url}}));
                let parts: Vec<Value> = text.into_iter().chain(images).collect();
                map.serialize_entry("content", &parts)?;
            }
        }
        if !self.tool_calls.is_empty() {
            map.serialize_entry("tool_calls", &self.tool_calls)?;
        }
        if let Some(id) = &self.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        map.end()
    }
}

impl Wire {
    pub(crate) fn new(role: &'static str, content: String) -> Self {
        Self {
            role,
            content: Some(content),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_result: false,
            images: Vec::new(),
        }
    }

    /// The same message with the images of `message`, if the model sees images.
    fn seeing(mut self, message: &HistoryMessage, vision: bool) -> Self {
        if vision {
            self.images = message.images.iter().map(|i| i.data_url()).collect();
        }
        self
    }

    fn result(role: &'static str, id: Option<String>, content: String) -> Self {
        Self {
            tool_call_id: id,
            tool_result: true,
            ..Self::new(role, content)
        }
    }
}

/// A request body: its fields, then `response_format`, whose schema keeps its keys in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Body {
    /// Every field but `response_format` (an object).
    pub(crate) fields: Value,
    /// The `response_format`, if the reply is constrained.
    pub(crate) response_format: Option<Ordered>,
}

impl Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fields = self.fields.as_object();
        let mut map = out.serialize_map(None)?;
        for (key, value) in fields.into_iter().flatten() {
            map.serialize_entry(key, value)?;
        }
        if let Some(format) = &self.response_format {
            map.serialize_entry("response_format", format)?;
        }
        map.end()
    }
}

/// The request body for `request` under `config`; under the JSON protocol, `form` says how
/// `response_format` constrains the reply (none without it), and with `example_turns` the
/// system prompt's example exchanges go as turns before the history.
pub(crate) fn body(config: &ModelConfig, request: &ModelRequest<'_>, form: Option<Form>) -> Body {
    let native = config.tool_protocol == ToolProtocol::Native;
    let mut system = request.system.as_str().to_owned();
    if native {
        system.push_str("\n\n");
        system.push_str(NATIVE_NOTE);
    }
    let tools: Vec<Value> = match native {
        true => request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": t}))
            .collect(),
        false => Vec::new(),
    };
    let exchanges = match !native && config.example_turns {
        true => {
            let (text, exchanges) = examples::split(&system);
            system = text;
            exchanges
        }
        false => Vec::new(),
    };
    let mut messages = vec![Wire::new("system", system)];
    for (user, reply) in exchanges {
        messages.push(Wire::new("user", user));
        messages.push(Wire::new("assistant", reply));
    }
    messages.extend(history(request.history, native, config.vision));
    let tools_tokens = window::tokens(&serde_json::to_string(&tools).unwrap_or_default());
    window::fit(
        &mut messages,
        window::budget(config) - tools_tokens.min(window::budget(config)),
    );
    let mut body = json!({
        "model": config.model,
        "messages": merge_users(messages),
        "stream": config.stream,
    });
    if config.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(t) = config.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = config.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
        if let Some(choice) = &config.tool_choice {
            body["tool_choice"] = match choice.as_str() {
                "auto" | "required" | "none" => json!(choice),
                name => json!({"type": "function", "function": {"name": name}}),
            };
        }
        if let Some(parallel) = config.parallel_tool_calls {
            body["parallel_tool_calls"] = json!(parallel);
        }
    }
    let response_format = form.filter(|_| !native).map(|form| {
        let schema = request_schema(config, request.tools, form);
        let json_schema = Ordered::Object(vec![
            ("name", json!("tool_request").into()),
            ("strict", json!(config.strict).into()),
            ("schema", schema),
        ]);
        Ordered::Object(vec![
            ("type", json!("json_schema").into()),
            ("json_schema", json_schema),
        ])
    });
    Body {
        fields: body,
        response_format,
    }
}

/// The history as messages. Under the native protocol each call of an assistant message gets
/// one `role: tool` message: the result marked with its id, else the next result or warning in
/// order (the result of several calls, run as one `parallel`, is split into one per call); a
/// call left without any gets a note.
///
/// With `vision`, a tool result's images go with it as image parts; a `role: tool` message
/// cannot carry images, so under the native protocol they go in a user message right after
/// the tool messages.
fn history(history: &[HistoryMessage], native: bool, vision: bool) -> Vec<Wire> {
    let mut out = Vec::with_capacity(history.len());
    let mut pending: VecDeque<String> = VecDeque::new();
    for message in history {
        let content = message.content.as_str().to_owned();
        match message.role {
            Role::Ai if native && !message.tool_calls.is_empty() => {
                flush(&mut pending, &mut out);
                let calls = message.tool_calls.iter().map(|c| {
                    pending.push_back(c.id.clone());
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                });
                out.push(Wire {
                    tool_calls: calls.collect(),
                    content: (!content.is_empty()).then_some(content),
                    ..Wire::new("assistant", String::new())
                });
            }
            Role::Tool | Role::Warning if !pending.is_empty() => {
                answer_calls(message, &mut pending, &mut out, vision)
            }
            role => {
                flush(&mut pending, &mut out);
                out.push(plain(role, message, content).seeing(message, vision));
            }
        }
    }
    flush(&mut pending, &mut out);
    lift_images(out)
}

/// The images of `role: tool` messages moved to a user message after the run of tool
/// messages they are in (the tool messages must follow their calls with nothing between).
fn lift_images(messages: Vec<Wire>) -> Vec<Wire> {
    let mut out = Vec::with_capacity(messages.len());
    let mut lifted: Vec<String> = Vec::new();
    for mut message in messages {
        if message.role != "tool" && !lifted.is_empty() {
            out.push(images_note(std::mem::take(&mut lifted)));
        }
        if message.role == "tool" {
            lifted.append(&mut message.images);
        }
        out.push(message);
    }
    if !lifted.is_empty() {
        out.push(images_note(lifted));
    }
    out
}

/// A user message that carries the images of the tool results before it.
fn images_note(images: Vec<String>) -> Wire {
    let text = "(the images the tools above returned)".to_owned();
    Wire {
        images,
        tool_result: true,
        ..Wire::new("user", text)
    }
}

/// A message outside native calls: tool results and warnings are the user's messages, as in
/// Agent Zero; a reply that was only native calls shows them as JSON.
fn plain(role: Role, message: &HistoryMessage, content: String) -> Wire {
    match role {
        Role::User | Role::Warning => Wire::new("user", content),
        Role::Ai if content.is_empty() && !message.tool_calls.is_empty() => {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|c| json!({"tool_name": c.name, "tool_args": c.arguments}))
                .collect();
            Wire::new("assistant", Value::Array(calls).to_string())
        }
        Role::Ai => Wire::new("assistant", content),
        Role::Tool => {
            let name = message.tool_name.as_deref().unwrap_or("tool");
            let text = json!({"tool_name": name, "tool_result": content}).to_string();
            Wire::result("user", None, text)
        }
    }
}

/// A tool result or warning that answers pending native calls.
///
/// A `parallel` result answers each call with its own entry, in order. When it has fewer
/// entries than calls, its last entry says why the calls beyond the others were not run (more
/// calls than [`toolhost::MAX_CALLS`]), and it answers each of them.
fn answer_calls(
    message: &HistoryMessage,
    pending: &mut VecDeque<String>,
    out: &mut Vec<Wire>,
    vision: bool,
) {
    let results = message
        .additional
        .as_ref()
        .and_then(|a| a.get().get("results"))
        .and_then(Value::as_array)
        .filter(|r| message.role == Role::Tool && r.len() <= pending.len() && r.len() > 1);
    if let Some(results) = results {
        let ran = match results.len() < pending.len() {
            true => results.len() - 1,
            false => results.len(),
        };
        let not_run = results.get(ran).map(call_result).unwrap_or_default();
        for (i, id) in pending.drain(..).enumerate() {
            let text = match results.get(i) {
                Some(result) if i < ran => call_result(result),
                _ => not_run.clone(),
            };
            out.push(Wire::result("tool", Some(id), text));
        }
        return;
    }
    let id = match &message.tool_call_id {
        Some(id) if pending.contains(id) => {
            pending.retain(|p| p != id);
            id.clone()
        }
        _ => pending.pop_front().unwrap_or_default(),
    };
    let result = Wire::result("tool", Some(id), message.content.as_str().to_owned());
    out.push(result.seeing(message, vision));
}

/// One call's entry of a `parallel` result: its message, or its state and error.
fn call_result(result: &Value) -> String {
    match result.get("message").and_then(Value::as_str) {
        Some(message) if result["state"] == "success" => message.to_owned(),
        _ => result.to_string(),
    }
}

/// Calls that got no result (the loop stopped before them) still get a `role: tool` message.
fn flush(pending: &mut VecDeque<String>, out: &mut Vec<Wire>) {
    for id in pending.drain(..) {
        let note = "(no result: the call did not run)".to_owned();
        out.push(Wire::result("tool", Some(id), note));
    }
}

/// Consecutive user messages joined into one: some chat templates refuse two in a row.
fn merge_users(messages: Vec<Wire>) -> Vec<Wire> {
    let mut out: Vec<Wire> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some(last) if last.role == "user" && message.role == "user" => {
                let text = last.content.get_or_insert_with(String::new);
                text.push_str("\n\n");
                text.push_str(message.content.as_deref().unwrap_or_default());
                last.images.extend(message.images);
            }
            _ => out.push(message),
        }
    }
    out
}

#[cfg(test)]
mod tests {

    use serde_json::{json, Value};

    use super::*;
    use toolhost::Secrets;
    use toolhost::ToolCall;
    use toolhost::ToolSpec;

    fn message(role: Role, text: &str) -> HistoryMessage {
        let content = Secrets::empty().mask(text);
        match role {
            Role::Tool => HistoryMessage::tool_result("greet", content, None),
            _ => HistoryMessage::new(role, content),
        }
    }

    fn calls(ids: &[&str]) -> HistoryMessage {
        let calls = ids
            .iter()
            .map(|id| ToolCall {
                id: (*id).to_owned(),
                name: "greet".to_owned(),
                arguments: r#"{"name":"Ada"}"#.to_owned(),
            })
            .collect();
        message(Role::Ai, "").with_tool_calls(Secrets::empty().mask_each(calls))
    }

    fn config(protocol: &str) -> ModelConfig {
        let mut config: ModelConfig = toml::from_str(&format!(
            "base_url = \"http://x/v1\"\nmodel = \"m\"\ntool_protocol = \"{protocol}\""
        ))
        .unwrap();
        config.structured_output = crate::StructuredOutput::Names;
        config
    }

    fn body_of(config: &ModelConfig, history: &[HistoryMessage], tools: &[ToolSpec]) -> Value {
        let system = Secrets::empty().mask("You are A0.");
        let request = ModelRequest {
            system: &system,
            history,
            tools,
        };
        serde_json::to_value(body(config, &request, Some(Form::Names))).unwrap()
    }

    fn roles(body: &Value) -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn example_exchanges_go_as_turns_before_the_history_when_asked() {
        let system = Secrets::empty().mask(
            "You are A0.\nExample:\nUser: Greet Ada.\n~~~json\n{\"tool_name\": \"greet\"}\n~~~\n",
        );
        let history = [message(Role::User, "Greet Omar.")];
        let body_with = |config: &ModelConfig| {
            let request = ModelRequest {
                system: &system,
                history: &history,
                tools: &[],
            };
            serde_json::to_value(body(config, &request, Some(Form::Names))).unwrap()
        };
        // On (the default).
        let body = body_with(&config("json"));
        assert_eq!(roles(&body), ["system", "user", "assistant", "user"]);
        let content = |i: usize| body["messages"][i]["content"].as_str().unwrap().to_owned();
        assert_eq!(
            [content(0), content(1), content(2), content(3)],
            [
                "You are A0.\n",
                "Greet Ada.",
                "{\"tool_name\": \"greet\"}",
                "Greet Omar."
            ]
        );
        // Off, and under the native protocol, the prompt goes as written.
        let mut off = config("json");
        off.example_turns = false;
        for config in [off, config("native")] {
            let body = body_with(&config);
            assert_eq!(roles(&body), ["system", "user"]);
            assert!(body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with(system.as_str()));
        }
    }

    #[test]
    fn the_json_protocol_sends_results_as_user_messages_and_the_request_schema() {
        let history = [
            message(Role::User, "Hi"),
            message(Role::Ai, "{...}"),
            message(Role::Tool, "Hello"),
            message(Role::Warning, "careful"),
        ];
        let body = body_of(&config("json"), &history, &[]);
        assert_eq!(roles(&body), ["system", "user", "assistant", "user"]);
        let merged = body["messages"][3]["content"].as_str().unwrap();
        assert!(
            merged.starts_with(r#"{"tool_name":"greet","tool_result":"Hello"}"#)
                && merged.ends_with("careful"),
            "{merged}"
        );
        let schema = serde_json::to_value(request_schema(&config("json"), &[], Form::Names));
        assert_eq!(
            body["response_format"]["json_schema"]["schema"],
            schema.unwrap()
        );
        assert!(body.get("tools").is_none());
        assert_eq!(body["stream_options"]["include_usage"], true);
    }

    #[test]
    fn native_calls_beyond_the_cap_each_get_the_parallel_note() {
        let mut parallel = message(Role::Tool, "[...]");
        let results = json!({"results": [
            {"state": "success", "message": "one"},
            {"state": "success", "message": "two"},
            {"state": "error", "error": {"kind": "repairable", "message": "2 more calls were not run"}}
        ]});
        parallel.additional = Some(Secrets::empty().mask_map(results.as_object().unwrap().clone()));
        let history = [
            message(Role::User, "Hi"),
            calls(&["a", "b", "c", "d"]),
            parallel,
        ];
        let body = body_of(&config("native"), &history, &[]);
        let answers: Vec<(String, String)> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| (m["tool_call_id"].to_string(), m["content"].to_string()))
            .collect();
        assert_eq!(answers.len(), 4, "{answers:?}");
        assert!(
            answers[0].1.contains("one") && answers[1].1.contains("two"),
            "{answers:?}"
        );
        for (_, text) in &answers[2..] {
            assert!(text.contains("2 more calls were not run"), "{answers:?}");
        }
    }

    #[test]
    fn native_calls_get_one_tool_message_each_by_id_order_or_parallel_split() {
        let mut result = message(Role::Tool, "Hello, Ada");
        result.tool_call_id = Some("b".to_owned());
        let mut parallel = message(Role::Tool, "[...]");
        let results = json!({"results": [
            {"state": "success", "message": "one"},
            {"state": "error", "error": {"kind": "business", "message": "no"}}
        ]});
        parallel.additional = Some(Secrets::empty().mask_map(results.as_object().unwrap().clone()));
        let history = [
            message(Role::User, "Hi"),
            calls(&["a", "b"]),
            result,
            message(Role::Warning, "bad arguments"),
            calls(&["c", "d"]),
            parallel,
            calls(&["e"]),
            message(Role::User, "stop"),
        ];
        let tools = [ToolSpec {
            name: "greet".into(),
            description: "Greets.".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = body_of(&config("native"), &history, &tools);
        let messages = body["messages"].as_array().unwrap();
        let ids: Vec<(&str, &str)> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap(),
                    m["content"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ids[..3],
            [("b", "Hello, Ada"), ("a", "bad arguments"), ("c", "one")]
        );
        assert!(ids[3].0 == "d" && ids[3].1.contains("business"), "{ids:?}");
        assert_eq!(ids[4], ("e", "(no result: the call did not run)"));
        assert_eq!(
            messages[2]["tool_calls"][1]["function"]["arguments"],
            r#"{"name":"Ada"}"#
        );
        assert!(messages[2]["content"].is_null());
        assert!(messages[0]["content"]
            .as_str()
            .unwrap()
            .ends_with(NATIVE_NOTE));
        assert_eq!(body["tools"][0]["function"]["name"], "greet");
        assert!(body.get("response_format").is_none());
    }

    #[test]
    fn native_sends_tool_choice_and_parallel_tool_calls_as_configured() {
        let tools = [ToolSpec {
            name: "greet".into(),
            description: "Greets.".into(),
            parameters: json!({"type": "object"}),
        }];
        let history = [message(Role::User, "Hi")];
        let plain = body_of(&config("native"), &history, &tools);
        assert!(plain.get("tool_choice").is_none() && plain.get("parallel_tool_calls").is_none());
        let mut forced = config("native");
        forced.tool_choice = Some("greet".to_owned());
        forced.parallel_tool_calls = Some(false);
        let body = body_of(&forced, &history, &tools);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "greet"}})
        );
        assert_eq!(body["parallel_tool_calls"], false);
        forced.tool_choice = Some("required".to_owned());
        assert_eq!(
            body_of(&forced, &history, &tools)["tool_choice"],
            "required"
        );
    }

    #[test]
    fn a_long_history_is_fitted_old_tool_results_first_then_old_turns() {
        let mut config = config("json");
        config.context_tokens = 4000; // 3,000 for the messages, about 9,000 bytes
        let big = "x".repeat(3000);
        let mut history = Vec::new();
        for i in 0..4 {
            history.push(message(Role::User, &format!("task {i}")));
            history.push(message(Role::Tool, &big));
        }
        let body = body_of(&config, &history, &[]);
        let text = body["messages"].to_string();
        assert!(text.len() < 9000 + 2000, "{}", text.len());
        assert!(
            text.contains("bytes of an old tool result were cut"),
            "{text}"
        );
        assert!(!text.contains("older messages were left out"), "{text}");
        assert!(text.contains(&big), "the latest result stays whole");

        // Too many turns even shortened: the oldest are left out, with a note.
        let history: Vec<_> = (0..200)
            .map(|i| message(Role::User, &format!("message {i} {}", "y".repeat(100))))
            .collect();
        let body = body_of(&config, &history, &[]);
        let text = body["messages"].to_string();
        assert!(
            text.contains("older messages were left out to fit"),
            "{text}"
        );
        assert!(text.contains("message 199") && !text.contains("message 0 "));
    }
}
