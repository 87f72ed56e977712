//! Reading a reply, within its bounds ([`Bounds`]): server-sent events ([`SseReader`]) or
//! one JSON body,
//! assembled into a [`ModelReply`]: text pieces passed on as they arrive, `tool_calls` deltas
//! joined per call (arguments may arrive in many pieces), and the usage, which may come in a
//! last chunk with no choices.

use std::time::Duration;

use serde_json::Value;

use toolhost::Secrets;
use toolhost::ToolCall;
use toolhost::{Delta, ModelError, ModelReply, Usage};

use crate::sse::{SseError, SseReader};

/// A call being assembled from its deltas.
#[derive(Debug, Default)]
struct Partial {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

/// A reply being assembled.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    text: String,
    /// The reasoning deltas (`reasoning_content`, `reasoning`), apart from the text.
    reasoning: String,
    calls: Vec<Partial>,
    usage: Option<Usage>,
    /// A `finish_reason` or `[DONE]` was seen: the reply is whole.
    finished: bool,
    /// The API key's forms: a chunk quoted in an error is masked before it is cut short.
    key: Secrets,
}

impl Assembler {
    /// An assembler whose error texts mask `key` (before any cut).
    pub(crate) fn masking(key: &Secrets) -> Self {
        Self {
            key: key.clone(),
            ..Self::default()
        }
    }

    /// The reply broke off: `reason`, with the text so far.
    pub(crate) fn broken(&self, reason: String) -> ModelError {
        ModelError::Broken {
            reason,
            partial: self.text.clone(),
        }
    }

    /// One chunk (or a whole non-streamed body): `choices[0].delta` or `.message`, `usage`.
    pub(crate) fn chunk(
        &mut self,
        data: &str,
        shown: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<(), ModelError> {
        let mut value: Value = serde_json::from_str(data).map_err(|e| {
            // Masked first, then cut: a cut through the key would leave its start in plain.
            let seen: String = self.key.mask(data).chars().take(80).collect();
            self.broken(format!("a chunk of the stream is not JSON ({e}): {seen}"))
        })?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(self.broken(format!("the server sent an error: {message}")));
        }
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            self.usage = serde_json::from_value(usage.clone()).ok();
        }
        let Some(choice) = value.get("choices").and_then(|c| c.get(0)) else {
            return Ok(()); // a usage chunk, or a keep-alive
        };
        let finished = choice.get("finish_reason").is_some_and(|r| !r.is_null());
        let delta = match choice.get("delta") {
            Some(_) => "/choices/0/delta",
            None => "/choices/0/message",
        };
        if let Some(delta) = value.pointer_mut(delta) {
            if let Some(Value::String(text)) = delta.get_mut("content") {
                if !text.is_empty() {
                    let start = self.text.len();
                    match start {
                        // The first text moves in, not copied: one long token costs it once.
                        0 => self.text = std::mem::take(text),
                        _ => self.text.push_str(text),
                    }
                    shown(Delta::Text(&self.text[start..]));
                }
            }
            let reasoning = delta
                .get("reasoning_content")
                .or_else(|| delta.get("reasoning"))
                .and_then(Value::as_str);
            if let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) {
                self.reasoning.push_str(reasoning);
                shown(Delta::Reasoning(reasoning));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in calls.iter().enumerate() {
                    self.call_delta(call, position);
                }
            }
        }
        if finished {
            self.finished = true;
        }
        Ok(())
    }

    /// Adds a `tool_calls` delta to its call: the one with its `index` (a different id at the
    /// same index starts a new call, as some servers send whole calls all at index 0).
    fn call_delta(&mut self, delta: &Value, position: usize) {
        let index = delta.get("index").and_then(Value::as_u64);
        let id = delta.get("id").and_then(Value::as_str).unwrap_or_default();
        let function = delta.get("function");
        let field = |name: &str| function.and_then(|f| f.get(name));
        let same = |call: &Partial| id.is_empty() || call.id.is_empty() || call.id == id;
        let found = match index {
            Some(i) => self
                .calls
                .iter()
                .rposition(|c| c.index == Some(i) && same(c)),
            None if position == 0 => self
                .calls
                .len()
                .checked_sub(1)
                .filter(|&last| same(&self.calls[last])),
            None => None,
        };
        let slot = found.unwrap_or_else(|| {
            self.calls.push(Partial {
                index,
                ..Partial::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            call.id = id.to_owned();
        }
        if let Some(name) = field("name").and_then(Value::as_str) {
            if call.name != name {
                call.name.push_str(name);
            }
        }
        match field("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            Some(object) => call.arguments.push_str(&object.to_string()),
        }
    }

    /// The whole reply; a stream that ended before its reply was finished broke off.
    pub(crate) fn finish(self) -> Result<ModelReply, ModelError> {
        if !self.finished {
            return Err(self.broken("the stream ended before the reply was finished".to_owned()));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.name.is_empty())
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(ModelReply {
            text: self.text,
            tool_calls,
            usage: self.usage,
            reasoning: self.reasoning,
        })
    }
}

/// The bounds on reading one reply, from the model's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// The model's name, for the errors.
    pub(crate) model: String,
    /// The longest wait for the next bytes (`timeout_seconds`).
    pub(crate) idle: Duration,
    /// The longest a whole reply may take (`max_reply_seconds`), from the request's answer on.
    pub(crate) total: Duration,
    /// The most bytes of a reply's body (`max_reply_bytes`).
    pub(crate) max_bytes: usize,
    /// The most bytes of one event of a stream (`max_event_bytes`).
    pub(crate) max_event: usize,
}

/// Reads the body's pieces within the bounds: each piece within `idle`, all of them within
/// `total`, at most `max_bytes` in all.
struct Body {
    response: reqwest::Response,
    deadline: tokio::time::Instant,
    read: usize,
}

impl Body {
    fn new(response: reqwest::Response, bounds: &Bounds) -> Self {
        let now = tokio::time::Instant::now();
        Self {
            response,
            deadline: toolhost::config::numbers::later(now, bounds.total),
            read: 0,
        }
    }

    /// The next piece, `None` at the end; `Err` is why reading stops, one line.
    async fn next(&mut self, bounds: &Bounds) -> Result<Option<impl AsRef<[u8]> + use<>>, String> {
        let now = tokio::time::Instant::now();
        let left = self.deadline.saturating_duration_since(now);
        let over_time = || {
            format!(
                "the reply took longer than {} s in all (max_reply_seconds of model '{}' in \
                 models.toml)",
                bounds.total.as_secs_f64(),
                bounds.model
            )
        };
        if left.is_zero() {
            return Err(over_time());
        }
        match tokio::time::timeout(bounds.idle.min(left), self.response.chunk()).await {
            Err(_) if bounds.idle >= left => Err(over_time()),
            Err(_) => Err(format!(
                "no data for {} s (timeout_seconds of model '{}' in models.toml)",
                bounds.idle.as_secs_f64(),
                bounds.model
            )),
            Ok(Err(e)) => Err(format!("the stream was cut: {}", chain(&e))),
            Ok(Ok(None)) => Ok(None),
            Ok(Ok(Some(piece))) => {
                self.read = self.read.saturating_add(piece.len());
                if self.read > bounds.max_bytes {
                    return Err(format!(
                        "the reply is longer than {} bytes (max_reply_bytes of model '{}' in \
                         models.toml)",
                        bounds.max_bytes, bounds.model
                    ));
                }
                Ok(Some(piece))
            }
        }
    }
}

/// Reads a streamed reply within `bounds`; one that breaks them broke off, with the text that
/// arrived before (never more than `max_bytes`).
pub(crate) async fn read_events(
    response: reqwest::Response,
    bounds: &Bounds,
    key: &Secrets,
    shown: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<ModelReply, ModelError> {
    let mut body = Body::new(response, bounds);
    let mut reader = SseReader::new(bounds.max_event);
    let mut reply = Assembler::masking(key);
    let mut events = Vec::new();
    'read: loop {
        let piece = match body.next(bounds).await {
            Ok(Some(piece)) => piece,
            Ok(None) => break,
            Err(reason) => return Err(reply.broken(reason)),
        };
        if let Err(e) = reader.feed(piece.as_ref(), &mut events) {
            let reason = match e {
                SseError::TooLong { max } => format!(
                    "one event of the stream is longer than {max} bytes (max_event_bytes of \
                     model '{}' in models.toml)",
                    bounds.model
                ),
                SseError::NotUtf8 => "an event of the stream is not UTF-8".to_owned(),
            };
            return Err(reply.broken(reason));
        }
        for data in events.drain(..) {
            match data.trim() {
                "[DONE]" => {
                    reply.finished = true;
                    // The body's end is read too (it follows at once; at most 100 ms are
                    // given), so the connection goes back to the pool: a body dropped before
                    // its end closes the connection.
                    let rest = async { while let Ok(Some(_)) = body.next(bounds).await {} };
                    let _ = tokio::time::timeout(Duration::from_millis(100), rest).await;
                    break 'read;
                }
                "" => {}
                _ => reply.chunk(&data, shown)?,
            }
        }
    }
    reply.finish()
}

/// Reads a reply that is one JSON body, within `bounds`.
pub(crate) async fn read_body(
    response: reqwest::Response,
    bounds: &Bounds,
    key: &Secrets,
    shown: &mut (dyn FnMut(Delta<'_>) + Send),
) -> Result<ModelReply, ModelError> {
    let mut reply = Assembler::masking(key);
    let mut body = Body::new(response, bounds);
    let mut bytes = Vec::new();
    loop {
        match body.next(bounds).await {
            Ok(Some(piece)) => bytes.extend_from_slice(piece.as_ref()),
            Ok(None) => break,
            Err(reason) => return Err(reply.broken(reason)),
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    reply.chunk(&text, shown)?;
    reply.finished = true;
    reply.finish()
}

/// At most `max` bytes of an error response's body (the rest is not read), within `wait`.
pub(crate) async fn read_error_body(
    mut response: reqwest::Response,
    max: usize,
    wait: Duration,
) -> String {
    let read = async {
        let mut bytes = Vec::new();
        while let Ok(Some(piece)) = response.chunk().await {
            let room = max - bytes.len();
            bytes.extend_from_slice(&piece[..piece.len().min(room)]);
            if bytes.len() == max {
                break;
            }
        }
        bytes
    };
    let bytes = tokio::time::timeout(wait, read).await.unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An error and its sources, on one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assemble(chunks: &[&str]) -> (Result<ModelReply, ModelError>, String) {
        let mut shown = String::new();
        let mut reply = Assembler::default();
        for chunk in chunks {
            let mut show = |delta: Delta<'_>| {
                if let Delta::Text(text) = delta {
                    shown.push_str(text);
                }
            };
            if let Err(e) = reply.chunk(chunk, &mut show) {
                return (Err(e), shown);
            }
        }
        (reply.finish(), shown)
    }

    #[test]
    fn tool_call_arguments_in_pieces_are_joined_per_call() {
        let (reply, _) = assemble(&[
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"greet","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"n"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"noop","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ame\": \"Ada\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#,
        ]);
        let reply = reply.unwrap();
        let calls: Vec<_> = reply
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [("a", "greet", r#"{"name": "Ada"}"#), ("b", "noop", "{}")]
        );
        assert_eq!(reply.usage.unwrap().total_tokens, 10);
    }

    #[test]
    fn whole_calls_at_index_zero_with_new_ids_are_separate_calls() {
        let (reply, _) = assemble(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":{"k":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"y","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        let reply = reply.unwrap();
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].arguments, r#"{"k":1}"#);
    }

    #[test]
    fn text_is_shown_as_it_arrives_and_a_reply_without_an_end_broke_off() {
        let (reply, shown) = assemble(&[
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"}}]}"#,
        ]);
        assert_eq!(shown, "Hello");
        match reply {
            Err(ModelError::Broken { partial, .. }) => assert_eq!(partial, "Hello"),
            other => panic!("{other:?}"),
        }
        let (bad, _) = assemble(&[r#"{"choices":[{"delta":{"content":"Hi"}}]}"#, "{not json"]);
        assert!(
            matches!(bad, Err(ModelError::Broken { ref reason, .. }) if reason.contains("not JSON")),
            "{bad:?}"
        );
    }
}
