//! The `inputs` of mcp.json (VS Code's prompted values): asked once on a terminal and kept
//! as secrets.

use super::*;

/// Asks, on a terminal, for each VS Code input (`inputs`, `${input:ID}`) of the profile's
/// `mcp.json` files that has no answer yet, and keeps the answers in `usr/secrets.env`
/// (as `MCP_INPUT_<ID>`, a secret: masked everywhere, a password typed without echo). Off a
/// terminal nothing is asked: a server that uses an unanswered input fails, naming its key.
/// Call it before the profile's servers start.
pub(crate) fn ask_inputs(host: &Host, profile: &str) -> Result<()> {
    use std::io::{IsTerminal, Write};
    let config = toolhost::mcp::config::McpConfig::load(
        host.layout(),
        profile,
        toolhost::DEFAULT_MAX_TEXT_BYTES,
    );
    let secrets = host.secrets();
    let missing: Vec<_> = config
        .inputs
        .iter()
        .filter(|i| {
            secrets
                .get(&toolhost::mcp::config::input_secret_name(&i.id))
                .is_none()
        })
        .collect();
    if missing.is_empty() || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let file = host.layout().secrets_file();
    let mut lines = String::new();
    for input in missing {
        let name = toolhost::mcp::config::input_secret_name(&input.id);
        let default = match (&input.default, input.password) {
            (Some(_), true) => " [empty for its default]".to_owned(),
            (Some(d), false) => format!(" [empty for {}]", shown(d)),
            (None, _) => String::new(),
        };
        let prompt = format!(
            "MCP input '{}': {}{default} (kept in usr/secrets.env as {name}): ",
            shown(&input.id),
            shown(&input.description)
        );
        let typed = match input.password {
            true => rpassword::prompt_password(&prompt)?,
            false => {
                eprint!("{prompt}");
                std::io::stderr().flush()?;
                let mut line = String::new();
                std::io::stdin().read_line(&mut line)?;
                line
            }
        };
        let typed = typed.trim_end_matches(['\r', '\n']).to_owned();
        let value = match (typed.is_empty(), &input.default) {
            (true, Some(default)) => default.clone(),
            _ => typed,
        };
        if value.contains('\n') {
            anyhow::bail!("input '{}': one line only", input.id);
        }
        lines.push_str(&format!("{name}={value}\n"));
    }
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&lines);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    write_private(&file, text.as_bytes())?;
    host.files_changed(std::slice::from_ref(&file));
    eprintln!("saved in {}", toolhost::Escaped(&file));
    Ok(())
}

/// Writes `bytes` to `file`, readable by its owner only.
fn write_private(file: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)?;
    out.write_all(bytes)?;
    Ok(())
}
