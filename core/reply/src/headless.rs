//! A request whose head was cut off: the reply starts inside it (in its `thoughts` array, say)
//! and its opening brace is gone, but its tool key follows at the start of a line:
//!
//! ```text
//!     "I will answer now."
//! ],
//! "tool_name": "response",
//! "tool_args": {"text": "Hi!"}
//! }
//! ```
//!
//! Read only when nothing else in the reply is a request: the first `"tool_name"` or `"tool"`
//! key that starts its line, right after a `,` that ends the line before (or at the reply's
//! start), is read as the first member of an object that runs from there. What came before it
//! (the thoughts) is lost with the head.

use serde_json::Value;

use super::lenient::{self, Quotes};
use super::shapes::{self, Reading};

const KEYS: [&str; 2] = ["\"tool_name\"", "\"tool\""];

/// The request made of the rest of the reply from its first tool key, if that key is where a
/// cut object's member would be; `None` if there is no such key.
pub(super) fn read(text: &str) -> Option<Reading> {
    let at = KEYS.iter().filter_map(|k| text.find(k)).min()?;
    let before = text[..at].trim_end_matches([' ', '\t']);
    let line_start = before.is_empty() || before.ends_with('\n');
    let after_comma = before.trim_end().is_empty() || before.trim_end().ends_with(',');
    let key_len = KEYS.iter().find(|k| text[at..].starts_with(**k))?.len();
    let colon = text[at + key_len..].trim_start().starts_with(':');
    if !(line_start && after_comma && colon) {
        return None;
    }
    let object = format!("{{{}", &text[at..]);
    for quotes in [Quotes::Strict, Quotes::Lenient] {
        if let Ok((value @ Value::Object(_), _)) = lenient::read_value(&object, 0, quotes, true) {
            return Some(shapes::classify(value));
        }
    }
    None
}
