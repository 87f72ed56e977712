//! `toolhost inspect FILE`: a library's contract version, kind, metadata, size and SHA-256,
//! or the one-line reason discovery would skip it.

use std::path::Path;
use std::process::ExitCode;

use crate::Global;
use anyhow::Result;
use serde_json::{json, Value};
use std::path::PathBuf;
use toolhost::{Declared, Host, Inspection, RunsAs};

/// What a library file is: its plugin-abi version, kind (tool or extension), metadata
/// (description, schema and whether it compiles, risk, timeout, retries, capabilities),
/// size and SHA-256; or the one-line reason discovery would skip it. Runs no plugin code
/// but its metadata.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The library file (`.so`, `.dylib`, `.dll`).
    file: PathBuf,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

impl Args {
    /// `toolhost inspect`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        inspect(&self.file, self.json, global.host().ok().as_ref())
    }
}

pub(crate) fn inspect(file: &Path, json: bool, host: Option<&Host>) -> Result<ExitCode> {
    // How the profile `default` of the root runs it, if it is a tool of one of its layers.
    let runs = host.and_then(|h| h.runs_as("default", file));
    // A library the profile isolates is read in its worker (and sandbox): its constructor
    // never runs in this process.
    let report = host
        .and_then(|h| h.inspect_isolated("default", file))
        .unwrap_or_else(|| toolhost::inspect(file));
    match report {
        Ok(report) if json => {
            let mut value = as_json(&report);
            if let (Value::Object(out), Some(runs)) = (&mut value, &runs) {
                out.insert("runs".to_owned(), runs_json(runs));
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(ExitCode::SUCCESS)
        }
        Ok(report) => {
            print(&report);
            if let Some(runs) = &runs {
                println!("  runs         {}", runs_text(runs));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if json {
                let value =
                    json!({"file": file, "error": {"kind": e.kind.as_str(), "reason": e.reason}});
                println!("{}", serde_json::to_string_pretty(&value)?);
            }
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print(r: &Inspection) {
    let file = toolhost::Escaped(&r.path);
    println!("{file}");
    println!("  contract     plugin-abi {}", r.contract);
    println!("  package      {} {}", r.package, r.version);
    println!("  size         {} bytes", r.size);
    println!("  sha256       {}", r.sha256);
    match &r.kind {
        Declared::Tool { info, schema_error } => {
            println!("  kind         tool (goes in a tools/ folder)");
            println!("  description  {}", shown(&info.description));
            println!("  risk         {}", info.risk_level.as_str());
            println!("  timeout      {} s", info.timeout_seconds);
            println!("  retries      {}", info.max_retries);
            let capabilities = match info.capabilities.is_empty() {
                true => "(none)".to_owned(),
                false => info.capabilities.join(", "),
            };
            println!("  capabilities {capabilities}");
            let schema = match schema_error {
                None => "compiles".to_owned(),
                Some(e) => format!("does NOT compile: {e}"),
            };
            println!("  schema       {schema}");
            println!("               {}", info.parameters);
        }
        Declared::Extension(info) => {
            println!("  kind         extension (goes in an extensions/<point>/ folder)");
            println!("  description  {}", shown(&info.description));
        }
    }
}

/// `in a worker process, sandboxed; granted: net:443`.
fn runs_text(runs: &RunsAs) -> String {
    match runs {
        RunsAs::InProcess => "in the host's process (profile default)".to_owned(),
        RunsAs::Isolated { sandbox: None } => {
            "in a worker process, not sandboxed (profile default)".to_owned()
        }
        RunsAs::Isolated {
            sandbox: Some(sandbox),
        } => match &sandbox.limits {
            Some(limits) => {
                format!("in a worker process, {sandbox} (profile default)\n  limits       {limits}")
            }
            None => format!("in a worker process, {sandbox} (profile default)"),
        },
        _ => "(unknown)".to_owned(),
    }
}

fn runs_json(runs: &RunsAs) -> Value {
    match runs {
        RunsAs::Isolated { sandbox } => json!({
            "isolated": true,
            "sandbox": sandbox.as_ref().map(|s| json!({"enforced": s.enforced, "grants": s.grants, "limits": s.limits})),
        }),
        _ => json!({"isolated": false, "sandbox": null}),
    }
}

fn shown(text: &str) -> &str {
    match text.trim() {
        "" => "(none: the model would see only the name)",
        text => text,
    }
}

fn as_json(r: &Inspection) -> Value {
    let mut value = json!({
        "file": r.path,
        "contract": r.contract,
        "package": r.package,
        "version": r.version,
        "size": r.size,
        "sha256": r.sha256,
    });
    let declared = match &r.kind {
        Declared::Tool { info, schema_error } => json!({
            "kind": "tool",
            "description": info.description,
            "risk_level": info.risk_level.as_str(),
            "timeout_seconds": info.timeout_seconds,
            "max_retries": info.max_retries,
            "capabilities": info.capabilities,
            "parameters": info.parameters,
            "schema_compiles": schema_error.is_none(),
            "schema_error": schema_error,
        }),
        Declared::Extension(info) => json!({
            "kind": "extension",
            "description": info.description,
        }),
    };
    if let (Value::Object(out), Value::Object(more)) = (&mut value, declared) {
        out.extend(more);
    }
    value
}
