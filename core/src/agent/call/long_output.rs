//! Long tool answers: what goes on to the model and the history is cut to
//! [`HostOptions::max_output`](crate::HostOptions::max_output) bytes (else the profile's
//! `[limits] max_output`, else [`DEFAULT_MAX_OUTPUT`]), with a note; the whole answer, masked,
//! goes to the session's `outputs/` folder. While a monologue runs, its model may bound an
//! answer lower, to fit its context ([`Model::max_tool_answer_bytes`](crate::Model::max_tool_answer_bytes)):
//! the same cut, its note saying why.
//!
//! The cut happens right after `execute`, before the `tool_execute_after` extensions, and on
//! the answer as it crossed the library boundary: the host copies only the part it keeps, and
//! writes the whole answer to the session piece by piece, so a 200 MB answer costs the host
//! little more than the plugin's own copy of it.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use plugin_api::Response;

use crate::agent::call::Call;
use crate::agent::Agent;
use crate::config::Config;
use crate::plugin::PluginAnswer;
use crate::secrets::Secrets;

/// The most bytes of a tool's answer that go on to the model when neither the
/// [`HostOptions`](crate::HostOptions) nor the config set a limit: 64 KiB.
pub const DEFAULT_MAX_OUTPUT: usize = 64 * 1024;

/// Masked text is written to the output file in pieces of this size.
const PIECE: usize = 64 * 1024;

/// What `execute` produced: a plugin's answer, or one the host made (Unknown, `parallel`).
pub(crate) enum Answer {
    /// From a library.
    Plugin(PluginAnswer),
    /// From the host.
    Host(Response),
}

impl Answer {
    fn message(&self) -> &str {
        match self {
            Self::Plugin(answer) => answer.message(),
            Self::Host(response) => &response.message,
        }
    }

    /// The length of the whole answer, what was cut before it reached the host included.
    fn total_len(&self) -> usize {
        match self {
            Self::Plugin(answer) => answer.total_len(),
            Self::Host(response) => response.message.len(),
        }
    }

    /// The response, its message cut to its first `keep` bytes.
    fn into_response(self, keep: usize) -> Response {
        match self {
            Self::Plugin(answer) => answer.into_response(keep),
            Self::Host(mut response) => {
                response.message.truncate(keep);
                response.message.shrink_to_fit(); // give the long text's memory back now
                response
            }
        }
    }
}

/// The most bytes of a tool's answer that go on to the model (see the module docs).
pub(crate) fn output_limit(agent: &Agent, config: Option<&Config>) -> usize {
    agent
        .host
        .options()
        .max_output
        .unwrap_or_else(|| config.map_or(DEFAULT_MAX_OUTPUT, |c| c.max_output(DEFAULT_MAX_OUTPUT)))
}

impl Call {
    /// The response, its message cut to the host's limit, or lower to the model's (see the
    /// module docs). An isolated tool's answer was cut in its worker already (to the host's
    /// limit): its whole text never reached the host, so only what did is saved, and the
    /// note says so.
    pub(crate) fn limit_output(&self, config: Option<&Config>, answer: Answer) -> Response {
        let agent = self.agent();
        let host_limit = output_limit(agent, config);
        let limit = agent
            .state()
            .model_answer_limit
            .map_or(host_limit, |model| model.min(host_limit));
        let total = answer.total_len();
        let here = answer.message().len();
        if total <= limit {
            return answer.into_response(here);
        }
        let whole_here = here == total;
        let saved = match whole_here || here > limit {
            true => save_output(agent, self.context.log_id, answer.message()),
            false => None,
        };
        let cut = floor_char_boundary(answer.message(), limit);
        let mut response = answer.into_response(cut);
        let rest = total - cut;
        let why = match limit < host_limit {
            true => " to fit the model's context (max_tool_answer_tokens in models.toml)",
            false => "",
        };
        let note = match saved {
            Some(file) if whole_here => format!(
                "\n[... {rest} more bytes cut (of {total}){why}; the whole answer is in the \
                 session folder: {}]",
                file.display()
            ),
            Some(file) => format!(
                "\n[... {rest} more bytes cut (of {total}){why}; the first {here} bytes (the \
                 tool's worker process cut the rest) are in the session folder: {}]",
                file.display()
            ),
            None if !whole_here => {
                format!("\n[... {rest} more bytes cut (of {total}) by the tool's worker process]")
            }
            None => format!("\n[... {rest} more bytes cut (of {total}){why}]"),
        };
        response.message.push_str(&note);
        response
    }
}

/// Writes `text`, masked, to `outputs/<log id>.txt` in the session folder; returns that
/// path relative to the folder, or `None` without a session (or if writing failed, which
/// is logged).
fn save_output(agent: &Agent, log_id: u64, text: &str) -> Option<PathBuf> {
    let dir = agent.transcript.session_dir()?;
    let relative = Path::new("outputs").join(format!("{log_id}.txt"));
    let path = dir.join(&relative);
    match write_masked(&path, text, &agent.host.secrets()) {
        Ok(()) => Some(relative),
        Err(e) => {
            tracing::warn!(
                "cannot save a long tool answer to {}: {e}; only its beginning is kept",
                path.display()
            );
            None
        }
    }
}

/// Writes `text` masked, piece by piece, so that no second copy of it is ever made.
fn write_masked(path: &Path, text: &str, secrets: &Secrets) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut file = BufWriter::new(File::create(path)?);
    let mut stream = secrets.stream();
    let mut rest = text;
    while !rest.is_empty() {
        let (piece, after) = rest.split_at(floor_char_boundary(rest, PIECE).max(1));
        file.write_all(stream.push(piece).as_bytes())?;
        rest = after;
    }
    file.write_all(stream.finish().as_bytes())?;
    file.flush()
}

/// The largest index `<= at` that is a character boundary of `text` (`text.len()` if shorter).
pub(crate) fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    let mut cut = at;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "aé€😀";
        for at in 0..=text.len() + 1 {
            let cut = floor_char_boundary(text, at);
            assert!(text.is_char_boundary(cut) && cut <= at.max(text.len()));
        }
    }

    #[test]
    fn a_long_text_is_written_masked_in_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = Secrets::parse("K=secret-value-123").unwrap();
        let text = "é".repeat(PIECE) + "secret-value-123" + &"x".repeat(PIECE);
        let path = dir.path().join("outputs/1.txt");
        write_masked(&path, &text, &secrets).unwrap();
        let written = fs::read_to_string(&path).unwrap();
        assert_eq!(written, secrets.mask(&text).as_str());
        assert!(!written.contains("secret-value-123"));
    }
}
