//! Approvals on the terminal: the tool, its method and masked arguments, then approve once,
//! for this session, always, or deny.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use toolhost::governance::{
    ApprovalAnswer, ApprovalRequest, Approver, FormAnswer, FormRequest, SampleApproval,
};
use toolhost::Agent;

/// Sets up an agent's approvals for a command: `--yes` approves writes; on a terminal, the
/// user is asked (through `lines` when another reader owns standard input).
pub(crate) fn set_up(agent: &Agent, yes: bool, lines: Option<Arc<Lines>>) {
    agent.approve_writes(yes);
    // A completion a plugin or an MCP server asks for goes to the profile's model.
    crate::sampling::set_up(agent.host(), None);
    if std::io::stdin().is_terminal() {
        agent.set_approver(Arc::new(TerminalApprover { lines }));
    }
}

/// Hands the next typed line to a waiting approval instead of its usual reader.
#[derive(Default)]
pub(crate) struct Lines {
    waiting: Mutex<Option<Sender<String>>>,
}

impl Lines {
    /// Gives `line` to a waiting approval; `false` if none waits.
    pub(crate) fn answer(&self, line: &str) -> bool {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match waiting {
            Some(sender) => sender.send(line.to_owned()).is_ok(),
            None => false,
        }
    }

    fn next(&self) -> Option<String> {
        let (sender, receiver) = mpsc::channel();
        *self.waiting.lock().unwrap_or_else(|e| e.into_inner()) = Some(sender);
        receiver.recv().ok()
    }
}

struct TerminalApprover {
    lines: Option<Arc<Lines>>,
}

impl Approver for TerminalApprover {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let method = request
            .method
            .as_deref()
            .map_or(String::new(), |m| format!(":{m}"));
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\n{} wants to call tool '{}{method}' (risk {}) with:\n{}",
            request.agent,
            request.tool,
            request.risk.as_str(),
            request.args
        );
        let _ = write!(
            err,
            "Approve? [o]nce, for this [s]ession, [a]lways, [d]eny: "
        );
        let _ = err.flush();
        drop(err);
        let line = self.line();
        let (answer, said) = match line.as_deref().map(str::trim) {
            Some("o" | "once" | "y" | "yes") => (ApprovalAnswer::Once, "approved once".to_owned()),
            Some("s" | "session") => (
                ApprovalAnswer::Session,
                format!(
                    "approved: '{}' is not asked about again in this session",
                    request.tool
                ),
            ),
            Some("a" | "always") => (
                ApprovalAnswer::Always,
                format!(
                    "approved always: saving [tools.{}] policy = \"allow\" in {}",
                    request.tool,
                    toolhost::Escaped(&request.saves_to)
                ),
            ),
            _ => (ApprovalAnswer::Deny, "denied".to_owned()),
        };
        let _ = writeln!(std::io::stderr(), "{said}");
        answer
    }

    fn sample(&self, request: &SampleApproval) -> ApprovalAnswer {
        self.sampling(request)
    }

    /// The server's form, field by field, required ones first (an empty line keeps the
    /// field's default), then send, decline or cancel. The server's words are shown escaped.
    fn fill(&self, request: &FormRequest) -> FormAnswer {
        let who = match request.server.as_str() {
            "" => format!(
                "Tool '{}' asks, during {}'s call",
                request.tool, request.agent
            ),
            server => format!(
                "MCP server '{server}' asks, during {}'s call of tool '{}'",
                request.agent, request.tool
            ),
        };
        say(format!("\n{who}:\n{}\n", shown(&request.message)));
        let schema = &request.schema;
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut answers = Map::new();
        let no_fields = Map::new();
        // Required fields first (the schema's order does not survive its parsing).
        let mut fields: Vec<_> = schema["properties"]
            .as_object()
            .unwrap_or(&no_fields)
            .iter()
            .collect();
        fields.sort_by_key(|(name, _)| !required.contains(&name.as_str()));
        for (name, field) in fields {
            let kind = field["type"].as_str().unwrap_or("string");
            let hint = hint(field, kind);
            let needed = if required.contains(&name.as_str()) {
                " (required)"
            } else {
                ""
            };
            let about = field["description"]
                .as_str()
                .map_or(String::new(), |d| format!(" {d}"));
            say(format!(
                "  {}{needed}{} [{}]: ",
                shown(name),
                shown(&about),
                shown(&hint)
            ));
            let Some(line) = self.line() else {
                return FormAnswer::Cancel;
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match field_value(field, kind, line) {
                Some(value) => drop(answers.insert(name.clone(), value)),
                None => say(format!("  not {}: left empty\n", shown(&hint))),
            }
        }
        say("Send? [y]es, [d]ecline, [c]ancel: ".to_owned());
        match self.line().as_deref().map(str::trim) {
            Some("y" | "yes" | "s" | "send") => FormAnswer::Accept(answers),
            Some("d" | "decline") => FormAnswer::Decline,
            _ => FormAnswer::Cancel,
        }
    }
}

/// Writes `text` on standard error at once (a question waits on the same line).
fn say(text: String) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

/// What a form's field takes: its type or choices, and its default.
fn hint(field: &Value, kind: &str) -> String {
    let mut hint = kind.to_owned();
    if let Some(choices) = field["enum"].as_array() {
        let choices: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
        hint = format!("one of {}", choices.join(", "));
    }
    if let Some(default) = field.get("default") {
        hint.push_str(&format!(", empty for {default}"));
    }
    hint
}

/// The value the line typed gives a field of type `kind`, if it is one (and one of its
/// choices, if it has them).
fn field_value(field: &Value, kind: &str, line: &str) -> Option<Value> {
    let value = match kind {
        "integer" => line.parse::<i64>().ok().map(Value::from),
        "number" => line.parse::<f64>().ok().map(Value::from),
        "boolean" => match line {
            "y" | "yes" | "true" => Some(Value::Bool(true)),
            "n" | "no" | "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => Some(Value::String(line.to_owned())),
    };
    let allowed = field["enum"]
        .as_array()
        .is_none_or(|choices| value.as_ref().is_some_and(|v| choices.contains(v)));
    value.filter(|_| allowed)
}

impl TerminalApprover {
    /// A sampling request: who asks, the model, the conversation (escaped), then approve
    /// once, for this session, always, or deny.
    fn sampling(&self, request: &SampleApproval) -> ApprovalAnswer {
        let mut text = format!(
            "\n{} asks model '{}' for a completion (at most {} tokens), during {}'s call of tool \
             '{}':\n",
            shown(&request.requester),
            shown(&request.model),
            request.max_tokens,
            request.agent,
            shown(&request.tool)
        );
        if let Some(system) = &request.system_prompt {
            text.push_str(&format!("  system: {}\n", shown(system)));
        }
        for (role, said) in &request.messages {
            text.push_str(&format!("  {role}: {}\n", shown(said)));
        }
        text.push_str("Approve? [o]nce, for this [s]ession, [a]lways, [d]eny: ");
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{text}");
        let _ = err.flush();
        drop(err);
        let (answer, said) = match self.line().as_deref().map(str::trim) {
            Some("o" | "once" | "y" | "yes") => (ApprovalAnswer::Once, "approved once".to_owned()),
            Some("s" | "session") => (
                ApprovalAnswer::Session,
                "approved for this session".to_owned(),
            ),
            Some("a" | "always") => (
                ApprovalAnswer::Always,
                format!(
                    "approved always: saving [tools.\"{}\"] policy = \"allow\" in {}",
                    request.key,
                    toolhost::Escaped(&request.saves_to)
                ),
            ),
            _ => (ApprovalAnswer::Deny, "denied".to_owned()),
        };
        let _ = writeln!(std::io::stderr(), "{said}");
        answer
    }

    /// The next line the user types.
    fn line(&self) -> Option<String> {
        match &self.lines {
            Some(lines) => lines.next(),
            // The terminal itself: standard input may be held by the command's own reader.
            None => match std::fs::File::open("/dev/tty") {
                Ok(tty) => std::io::BufReader::new(tty)
                    .lines()
                    .next()
                    .and_then(Result::ok),
                Err(_) => std::io::stdin().lock().lines().next().and_then(Result::ok),
            },
        }
    }
}

/// `text` safe for a terminal, since a server's text is a peer's: control characters (escape
/// sequences, carriage returns) and bidirectional or invisible formatting characters shown
/// escaped, as [`toolhost::package::Shown`] shows a package's text; line breaks kept.
pub(crate) fn shown(text: &str) -> String {
    text.split('\n')
        .map(|line| toolhost::package::Shown(line).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
