//! The context window: when the request would not fit the model's window, older tool results
//! are shortened first (each with a note), then the oldest messages are left out (with a
//! note), so a long session keeps going. Tokens are estimated from bytes (3 bytes a token,
//! on the safe side of English text and code).

use super::config::ModelConfig;
use super::request::Wire;

/// Bytes of an old tool result kept when it is shortened.
const KEPT: usize = 400;

/// Bytes counted as one token.
pub(crate) const BYTES_PER_TOKEN: u64 = 3;

/// The tokens an image part is counted as (OpenAI counts 765 for a 1024x1024 image in
/// detail; servers of local models differ).
const IMAGE_TOKENS: u64 = 1000;

/// The estimated tokens of `text`.
pub(crate) fn tokens(text: &str) -> u64 {
    text.len() as u64 / BYTES_PER_TOKEN
}

fn message_tokens(message: &Wire) -> u64 {
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|c| {
            let function = &c["function"];
            let text = |key: &str| function[key].as_str().map_or(0, str::len);
            40 + text("name") + text("arguments")
        })
        .sum();
    let images = message.images.len() as u64 * IMAGE_TOKENS;
    4 + tokens(message.content.as_deref().unwrap_or_default()) + calls as u64 / 3 + images
}

fn total(messages: &[Wire]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The tokens the messages may take: the window less room for the reply (`max_tokens`, else a
/// quarter of the window up to 4,096).
pub(crate) fn budget(config: &ModelConfig) -> u64 {
    let window = config.context_tokens.max(256);
    let reply = config.max_tokens.unwrap_or((window / 4).min(4096));
    window.saturating_sub(reply).max(window / 4)
}

/// Fits `messages` (the system prompt first) into `budget` tokens. Returns what was done, if
/// anything.
pub(crate) fn fit(messages: &mut Vec<Wire>, budget: u64) -> Option<String> {
    let mut total = total(messages);
    if total <= budget {
        return None;
    }
    let last = messages.len().saturating_sub(1);
    let mut shortened = 0;
    for message in &mut messages[1..last] {
        if total <= budget {
            break;
        }
        let before = message_tokens(message);
        let cut = message.tool_result && shorten(message, KEPT, "an old tool result");
        let unseen = message.tool_result && leave_out_images(message);
        if cut || unseen {
            total = total - before + message_tokens(message);
            shortened += 1;
        }
    }
    // The oldest messages go, from just after the system prompt up to `end`; a tool result
    // whose call went cannot stay.
    let mut end = 1;
    while end < last && (total > budget || messages[end].role == "tool") {
        total -= message_tokens(&messages[end]);
        end += 1;
    }
    let dropped = end - 1;
    if dropped > 0 {
        messages.drain(1..end);
        let note =
            format!("[{dropped} older messages were left out to fit the model's context window]");
        messages.insert(1, Wire::note(note));
        total += message_tokens(&messages[1]);
    }
    // Still too long: the longest messages left are cut down (the system prompt too).
    while total > budget {
        let Some(longest) = (0..messages.len()).max_by_key(|&i| message_tokens(&messages[i]))
        else {
            break;
        };
        let before = message_tokens(&messages[longest]);
        let len = messages[longest].content.as_deref().map_or(0, str::len);
        if len <= KEPT || !shorten(&mut messages[longest], len / 2, "a message") {
            break;
        }
        total = total - before + message_tokens(&messages[longest]);
    }
    let what = format!("{shortened} old tool results shortened, {dropped} older messages left out");
    tracing::debug!("fitting the history to the context window: {what}");
    Some(what)
}

/// Leaves out a message's images, with a note; false if it had none.
fn leave_out_images(message: &mut Wire) -> bool {
    if message.images.is_empty() {
        return false;
    }
    let count = message.images.len();
    message.images.clear();
    let text = message.content.get_or_insert_with(String::new);
    text.push_str(&format!(
        "\n[{count} images were left out to fit the model's context window]"
    ));
    true
}

/// Keeps the first `keep` bytes of a message's text and notes how much was cut.
fn shorten(message: &mut Wire, keep: usize, what: &str) -> bool {
    let Some(text) = message.content.as_mut() else {
        return false;
    };
    if text.len() <= keep + 200 {
        return false;
    }
    let mut end = keep;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    text.push_str(&format!(
        "\n[... {cut} bytes of {what} were cut to fit the model's context window]"
    ));
    true
}

impl Wire {
    fn note(text: String) -> Self {
        Self {
            role: "user",
            content: Some(text),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_result: false,
            images: Vec::new(),
        }
    }
}
