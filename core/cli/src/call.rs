//! `toolhost call`: one tool call through the whole lifecycle.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use crate::Global;
use anyhow::Result;
use serde_json::{json, Map, Value};
use toolhost::output::{OutputKind, Terminal};
use toolhost::{Agent, Host, Masked, MaskedError, Response, ToolError};

/// A call's response with every secret value masked: what may be printed.
pub(crate) struct Shown {
    pub(crate) message: Masked,
    pub(crate) break_loop: bool,
    pub(crate) additional: Option<Masked<Map<String, Value>>>,
}

/// A call's result with every secret value masked, for printing.
pub(crate) fn masked(
    agent: &Agent,
    result: Result<Response, ToolError>,
) -> Result<Shown, MaskedError> {
    let secrets = agent.host().secrets();
    match result {
        Ok(response) => Ok(Shown {
            message: secrets.mask_owned(response.message),
            break_loop: response.break_loop,
            additional: response.additional.map(|a| secrets.mask_map(a)),
        }),
        Err(e) => Err(secrets.mask_error(&e)),
    }
}

/// Call one tool through the full lifecycle and print its response. The exit code says how
/// the call ended (the list is at the end of `toolhost --help`).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// `name` or `name:method`.
    name: String,
    /// The arguments, a JSON object.
    #[arg(long, short, default_value = "{}")]
    args: String,
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
    /// The agent's name.
    #[arg(long, default_value = "A0")]
    agent: String,
    /// Print the response as JSON.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// `toolhost call`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let host = global.host()?;
        crate::mcp::ask_inputs(&host, &self.profile)?;
        let (name, args) = (&self.name, &self.args);
        let (profile, agent) = (&self.profile, &self.agent);
        call(
            Arc::new(host),
            name,
            args,
            profile,
            agent,
            self.json,
            global.yes,
        )
    }
}

pub(crate) fn call(
    host: Arc<Host>,
    name: &str,
    args: &str,
    profile: &str,
    agent: &str,
    json: bool,
    yes: bool,
) -> Result<ExitCode> {
    crate::check_profile(&host, profile)?;
    let args: Value = match serde_json::from_str(args) {
        Ok(args @ Value::Object(_)) => args,
        Ok(_) => crate::exit::usage!(
            "--args must be a JSON object, such as '{{\"name\": \"Ada\"}}' (got {args})"
        ),
        Err(e) => crate::exit::usage!("--args is not valid JSON ({e}): {args}"),
    };
    // The response goes to the host's standard output (a private descriptor: fd 1 points at
    // standard error while the tool runs, so nothing it prints or closes reaches the answer),
    // and the live log (stderr) leaves it out.
    let mut stdout = host_stdout()?;
    let output = Arc::new(Terminal::default().without(OutputKind::ToolResponse));
    let agent = Agent::with_output(host, agent, profile, output.clone())?;
    crate::approve::set_up(&agent, yes, None);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = {
        let _armed = crate::plugin_exit::arm(name);
        runtime.block_on(agent.call_tool(name, args))
    };
    output.end_progress();
    let code = shown(&mut stdout, &agent, result, name, profile, json)?;
    match agent.audit_failure() {
        Some(e) => {
            let e = agent.host().secrets().mask_owned(e.to_string());
            // A call that failed has its one error line already; this one is a note to it.
            match code == ExitCode::SUCCESS {
                true => eprintln!("error: the call's audit record could not be written: {e}"),
                false => {
                    eprintln!("note: the call's audit record could not be written either: {e}")
                }
            }
            Ok(ExitCode::from(crate::exit::AUDIT_FAILED))
        }
        None => Ok(code),
    }
}

/// The host's own standard output ([`toolhost::fds::host_stdout`]); where that cannot be had
/// (not Unix), standard output itself.
pub(crate) fn host_stdout() -> Result<Box<dyn Write>> {
    match toolhost::fds::host_stdout() {
        Ok(file) => Ok(Box::new(file)),
        Err(_) if cfg!(not(unix)) => Ok(Box::new(std::io::stdout())),
        Err(e) => Err(anyhow::anyhow!(
            "cannot keep standard output for the answer: {e}"
        )),
    }
}

/// Prints a call's result to `out`; the exit code it gives.
fn shown(
    out: &mut dyn Write,
    agent: &Agent,
    result: Result<Response, ToolError>,
    name: &str,
    profile: &str,
    json: bool,
) -> Result<ExitCode> {
    if result.is_ok() && !agent.has_tool(name) {
        // The Unknown tool answered: its text (what a model would get) on stdout, the
        // mistake on stderr, and an exit code of its own.
        if let Ok(shown) = masked(agent, result) {
            writeln!(out, "{}", shown.message)?;
        }
        let name = toolhost::Escaped(std::path::Path::new(name));
        eprintln!(
            "error: no tool '{name}' in profile '{profile}' (see `toolhost list --profile {profile}`)"
        );
        return Ok(ExitCode::from(crate::exit::UNKNOWN_TOOL));
    }
    match masked(agent, result) {
        Ok(shown) if json => {
            let value = json!({
                "message": shown.message,
                "break_loop": shown.break_loop,
                "additional": shown.additional,
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(shown) => {
            writeln!(out, "{}", shown.message)?;
            if shown.break_loop {
                eprintln!("(final answer: this ends the agent's loop)");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if json {
                let err = json!({"error": {"kind": e.kind().as_str(), "message": e.message()}});
                writeln!(out, "{}", serde_json::to_string_pretty(&err)?)?;
            }
            let (kind, message) = (e.kind(), e.message());
            let name = toolhost::Escaped(std::path::Path::new(name)); // on one line
            eprintln!("error: tool '{name}' failed ({kind} error): {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}
