//! The extension points the host fires, around a tool call and in the message loop: their names
//! and the type of each one's data.
//!
//! An extension reads its point's data with [`PointData::read`](crate::PointData::read) and,
//! if it changed something the point lets it change, gives it back with
//! [`PointData::write`](crate::PointData::write):
//!
//! ```
//! use plugin_api::points::SystemPrompt;
//! use plugin_api::{Context, Extension, PointData, ToolError};
//!
//! /// Adds one line to the system prompt.
//! #[derive(Default)]
//! struct Polite;
//!
//! impl Extension for Polite {
//!     async fn execute(&self, _ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
//!         let mut prompt: SystemPrompt = data.read()?;
//!         prompt.parts.push("Always say please.".to_owned());
//!         data.write(&prompt)
//!     }
//! }
//! plugin_api::export_extension!(Polite);
//! ```
//!
//! A change to a field the point does not let an extension change is ignored by the host.
//! A plugin may also fire a point of its own with
//! [`Context::call_extensions`](crate::Context::call_extensions); its extensions use the untyped
//! [`PointData::value`](crate::PointData::value) and [`PointData::set`](crate::PointData::set).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Response;

/// The data of one built-in extension point, and the point's name.
///
/// The JSON form of each type is exactly what the host sends and reads back.
pub trait Point: Serialize + DeserializeOwned + Send + 'static {
    /// The point's name: the folder its extensions live in (`extensions/<NAME>/`).
    const NAME: &'static str;
}

/// [`AgentInit`]'s name.
pub const AGENT_INIT: &str = "agent_init";
/// [`MonologueStart`]'s name.
pub const MONOLOGUE_START: &str = "monologue_start";
/// [`MonologueEnd`]'s name.
pub const MONOLOGUE_END: &str = "monologue_end";
/// [`MessageLoopStart`]'s name.
pub const MESSAGE_LOOP_START: &str = "message_loop_start";
/// [`MessageLoopEnd`]'s name.
pub const MESSAGE_LOOP_END: &str = "message_loop_end";
/// [`HistAddBefore`]'s name.
pub const HIST_ADD_BEFORE: &str = "hist_add_before";
/// [`HistAddToolResult`]'s name.
pub const HIST_ADD_TOOL_RESULT: &str = "hist_add_tool_result";
/// [`ErrorFormat`]'s name.
pub const ERROR_FORMAT: &str = "error_format";
/// [`SystemPrompt`]'s name.
pub const SYSTEM_PROMPT: &str = "system_prompt";
/// [`ToolExecuteBefore`]'s name.
pub const TOOL_EXECUTE_BEFORE: &str = "tool_execute_before";
/// [`ToolExecuteAfter`]'s name.
pub const TOOL_EXECUTE_AFTER: &str = "tool_execute_after";
/// [`ToolOutputUpdate`]'s name.
pub const TOOL_OUTPUT_UPDATE: &str = "tool_output_update";

/// [`MessageLoopPromptsBefore`]'s name.
pub const MESSAGE_LOOP_PROMPTS_BEFORE: &str = "message_loop_prompts_before";
/// [`MessageLoopPromptsAfter`]'s name.
pub const MESSAGE_LOOP_PROMPTS_AFTER: &str = "message_loop_prompts_after";
/// [`BeforeMainLlmCall`]'s name.
pub const BEFORE_MAIN_LLM_CALL: &str = "before_main_llm_call";
/// [`ToolExecuteError`]'s name.
pub const TOOL_EXECUTE_ERROR: &str = "tool_execute_error";
/// [`ProcessChainEnd`]'s name.
pub const PROCESS_CHAIN_END: &str = "process_chain_end";
/// [`UtilModelCallBefore`]'s name.
pub const UTIL_MODEL_CALL_BEFORE: &str = "util_model_call_before";
/// [`ResponseStreamChunk`]'s name.
pub const RESPONSE_STREAM_CHUNK: &str = "response_stream_chunk";
/// [`ResponseStream`]'s name.
pub const RESPONSE_STREAM: &str = "response_stream";
/// [`ResponseStreamEnd`]'s name.
pub const RESPONSE_STREAM_END: &str = "response_stream_end";
/// [`ReasoningStreamChunk`]'s name.
pub const REASONING_STREAM_CHUNK: &str = "reasoning_stream_chunk";
/// [`ReasoningStream`]'s name.
pub const REASONING_STREAM: &str = "reasoning_stream";
/// [`ReasoningStreamEnd`]'s name.
pub const REASONING_STREAM_END: &str = "reasoning_stream_end";

/// Declares one point type: the struct, its constructor and its [`Point`] impl.
macro_rules! point {
    (
        $(#[$doc:meta])*
        $name:ident = $const:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty),+ $(,)? }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        #[non_exhaustive]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)+
        }

        impl $name {
            #[doc = concat!("A `", stringify!($name), "` with every field given.")]
            pub fn new($($field: $ty),+) -> Self {
                Self { $($field),+ }
            }
        }

        impl Point for $name {
            const NAME: &'static str = $const;
        }
    };
}

point! {
    /// `agent_init`: once per agent, before its first monologue. Read only.
    AgentInit = AGENT_INIT {
        /// The agent's display name.
        agent: String,
        /// The active profile.
        profile: String,
    }
}

point! {
    /// `monologue_start`: when a user message starts a monologue. Read only.
    MonologueStart = MONOLOGUE_START {
        /// The user's message (with secret values masked).
        message: String,
    }
}

point! {
    /// `monologue_end`: when a monologue ends, with or without an answer. Read only.
    MonologueEnd = MONOLOGUE_END {
        /// The final answer, or `None` when the monologue failed or was stopped.
        result: Option<String>,
    }
}

point! {
    /// `message_loop_start`: at the start of each iteration of the message loop. Read only.
    MessageLoopStart = MESSAGE_LOOP_START {
        /// The iteration's number, from 1.
        iteration: u64,
    }
}

point! {
    /// `message_loop_end`: at the end of each iteration of the message loop. Read only.
    MessageLoopEnd = MESSAGE_LOOP_END {
        /// The iteration's number, from 1.
        iteration: u64,
    }
}

point! {
    /// `hist_add_before`: before a message joins the agent's history. An extension may change
    /// `content` (what is stored).
    HistAddBefore = HIST_ADD_BEFORE {
        /// `user`, `ai`, `tool` or `warning`.
        role: String,
        /// The message's text.
        content: String,
    }
}

point! {
    /// `hist_add_tool_result`: after a tool's result joined the history. Read only.
    HistAddToolResult = HIST_ADD_TOOL_RESULT {
        /// The tool that answered.
        tool_name: String,
        /// Its answer, as stored.
        result: String,
    }
}

point! {
    /// `error_format`: when an error goes back to the model. An extension may change `text`,
    /// what the model sees.
    ErrorFormat = ERROR_FORMAT {
        /// The [`ErrorKind`](crate::ErrorKind) as text (`repairable`, `internal`, ...).
        kind: String,
        /// The error's message.
        message: String,
        /// The text the model will see.
        text: String,
    }
}

point! {
    /// `system_prompt`: when the system prompt is assembled. An extension may change, add or
    /// remove `parts`; the host joins them.
    SystemPrompt = SYSTEM_PROMPT {
        /// The prompt's parts, in order.
        parts: Vec<String>,
    }
}

point! {
    /// `tool_execute_before`: after `before_execution`, before the tool's `execute`. An
    /// extension may change `args` (it must stay an object), which changes the call.
    ToolExecuteBefore = TOOL_EXECUTE_BEFORE {
        /// The tool being called.
        tool_name: String,
        /// The call's arguments.
        args: Map<String, Value>,
    }
}

point! {
    /// `tool_execute_after`: after `execute`, before `after_execution`. An extension may change
    /// `response.message` and `response.additional`; the host restores `response.break_loop`.
    ToolExecuteAfter = TOOL_EXECUTE_AFTER {
        /// The tool that answered.
        tool_name: String,
        /// Its answer.
        response: Response,
    }
}

point! {
    /// `tool_output_update`: when a tool sets its progress. An extension may change `progress`,
    /// what is shown and logged.
    ToolOutputUpdate = TOOL_OUTPUT_UPDATE {
        /// The tool reporting progress.
        tool_name: String,
        /// The progress text.
        progress: String,
    }
}

point! {
    /// `message_loop_prompts_before`: in each iteration, before the system prompt is assembled.
    /// An extension may add to `extras`: text for this iteration's prompt only (recalled
    /// memories, the date, the agent's info), appended after the system prompt.
    MessageLoopPromptsBefore = MESSAGE_LOOP_PROMPTS_BEFORE {
        /// The iteration's number, from 1.
        iteration: u64,
        /// This iteration's extra prompt texts, in order.
        extras: Vec<String>,
    }
}

point! {
    /// `message_loop_prompts_after`: in each iteration, after the system prompt was assembled
    /// (through `system_prompt`). An extension may change `system` and `extras`.
    MessageLoopPromptsAfter = MESSAGE_LOOP_PROMPTS_AFTER {
        /// The iteration's number, from 1.
        iteration: u64,
        /// The system prompt.
        system: String,
        /// This iteration's extra prompt texts, in order.
        extras: Vec<String>,
    }
}

point! {
    /// `before_main_llm_call`: the last look at a request before the model is asked, with the
    /// system prompt as sent (extras joined, secret values masked). An extension may change
    /// `system`; the host masks it again.
    BeforeMainLlmCall = BEFORE_MAIN_LLM_CALL {
        /// The system prompt as it will be sent.
        system: String,
        /// How many messages of history go with it.
        messages: u64,
    }
}

point! {
    /// `tool_execute_error`: when a tool's call failed, before the failure is formatted for
    /// the model (`error_format`). Read only.
    ToolExecuteError = TOOL_EXECUTE_ERROR {
        /// The request (`name[:method]`).
        tool_name: String,
        /// The [`ErrorKind`](crate::ErrorKind) as text.
        kind: String,
        /// The error's message (secret values masked).
        message: String,
    }
}

point! {
    /// `process_chain_end`: when the agent's work on a user message is over, after
    /// `monologue_end`. Read only.
    ProcessChainEnd = PROCESS_CHAIN_END {
        /// The final answer, or `None` when the monologue failed or was stopped.
        result: Option<String>,
    }
}

/// One message of a model request, as [`UtilModelCallBefore`] shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CallMessage {
    /// `user`, `ai`, `tool` or `warning`.
    pub role: String,
    /// Its text.
    pub content: String,
}

impl CallMessage {
    /// A message of `role` with `content`.
    pub fn new(role: String, content: String) -> Self {
        Self { role, content }
    }
}

point! {
    /// `util_model_call_before`: the very last look at a model request, after
    /// `before_main_llm_call`, just before it is sent: the system prompt and every message of
    /// history as sent (secret values masked). An extension may change `system` and the
    /// `content` of each message, for this request only (the history keeps its text); a
    /// message added or removed, or a changed `role`, is ignored. The host masks the texts
    /// again.
    UtilModelCallBefore = UTIL_MODEL_CALL_BEFORE {
        /// The system prompt as it will be sent.
        system: String,
        /// The history as it will be sent, oldest first.
        messages: Vec<CallMessage>,
    }
}

point! {
    /// `response_stream_chunk`: each piece of the model's reply text as it streams in
    /// (secret values masked). An extension may change `chunk`, what is shown live; the
    /// reply the loop reads and keeps is the model's.
    ResponseStreamChunk = RESPONSE_STREAM_CHUNK {
        /// The new piece.
        chunk: String,
        /// The reply so far, this piece included.
        full: String,
    }
}

point! {
    /// `response_stream`: after each piece of the reply (`response_stream_chunk`), with the
    /// reply so far. Read only.
    ResponseStream = RESPONSE_STREAM {
        /// The reply so far (secret values masked).
        text: String,
    }
}

point! {
    /// `response_stream_end`: when the reply's stream ended (whole, broken off, or dropped by
    /// an intervention). Read only.
    ResponseStreamEnd = RESPONSE_STREAM_END {
        /// The whole text that arrived (secret values masked).
        text: String,
    }
}

point! {
    /// `reasoning_stream_chunk`: each piece of the model's reasoning as it streams in (servers
    /// that send `reasoning_content` apart from the text; secret values masked). An extension
    /// may change `chunk`. Reasoning goes to the log, never to the history.
    ReasoningStreamChunk = REASONING_STREAM_CHUNK {
        /// The new piece.
        chunk: String,
        /// The reasoning so far, this piece included.
        full: String,
    }
}

point! {
    /// `reasoning_stream`: after each piece of reasoning (`reasoning_stream_chunk`), with the
    /// reasoning so far. Read only.
    ReasoningStream = REASONING_STREAM {
        /// The reasoning so far (secret values masked).
        text: String,
    }
}

point! {
    /// `reasoning_stream_end`: when the reply's stream ended, if any reasoning arrived. Read
    /// only.
    ReasoningStreamEnd = REASONING_STREAM_END {
        /// The whole reasoning that arrived (secret values masked).
        text: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip<P: Point + PartialEq + std::fmt::Debug>(value: Value, expected: P) {
        let read: P = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(read, expected, "{}", P::NAME);
        assert_eq!(serde_json::to_value(&read).unwrap(), value, "{}", P::NAME);
    }

    /// The JSON each point's data has is what the host sends today (core/src).
    #[test]
    fn shapes_match_the_host() {
        round_trip(
            json!({"agent": "A0", "profile": "default"}),
            AgentInit::new("A0".into(), "default".into()),
        );
        round_trip(json!({"message": "hi"}), MonologueStart::new("hi".into()));
        round_trip(json!({"result": null}), MonologueEnd::new(None));
        round_trip(
            json!({"result": "done"}),
            MonologueEnd::new(Some("done".into())),
        );
        round_trip(json!({"iteration": 3}), MessageLoopStart::new(3));
        round_trip(json!({"iteration": 3}), MessageLoopEnd::new(3));
        round_trip(
            json!({"role": "user", "content": "c"}),
            HistAddBefore::new("user".into(), "c".into()),
        );
        round_trip(
            json!({"tool_name": "t", "result": "r"}),
            HistAddToolResult::new("t".into(), "r".into()),
        );
        round_trip(
            json!({"kind": "repairable", "message": "m", "text": "x"}),
            ErrorFormat::new("repairable".into(), "m".into(), "x".into()),
        );
        round_trip(
            json!({"parts": ["a", "b"]}),
            SystemPrompt::new(vec!["a".into(), "b".into()]),
        );
        round_trip(
            json!({"iteration": 2, "extras": ["x"]}),
            MessageLoopPromptsBefore::new(2, vec!["x".into()]),
        );
        round_trip(
            json!({"iteration": 2, "system": "s", "extras": []}),
            MessageLoopPromptsAfter::new(2, "s".into(), Vec::new()),
        );
        round_trip(
            json!({"system": "s", "messages": 4}),
            BeforeMainLlmCall::new("s".into(), 4),
        );
        round_trip(
            json!({"tool_name": "t:m", "kind": "timeout", "message": "slow"}),
            ToolExecuteError::new("t:m".into(), "timeout".into(), "slow".into()),
        );
        round_trip(json!({"result": null}), ProcessChainEnd::new(None));
        round_trip(
            json!({"system": "s", "messages": [{"role": "user", "content": "hi"}]}),
            UtilModelCallBefore::new(
                "s".into(),
                vec![CallMessage::new("user".into(), "hi".into())],
            ),
        );
        round_trip(
            json!({"chunk": "b", "full": "ab"}),
            ResponseStreamChunk::new("b".into(), "ab".into()),
        );
        round_trip(json!({"text": "ab"}), ResponseStream::new("ab".into()));
        round_trip(json!({"text": "ab"}), ResponseStreamEnd::new("ab".into()));
        round_trip(
            json!({"chunk": "b", "full": "ab"}),
            ReasoningStreamChunk::new("b".into(), "ab".into()),
        );
        round_trip(json!({"text": "ab"}), ReasoningStream::new("ab".into()));
        round_trip(json!({"text": "ab"}), ReasoningStreamEnd::new("ab".into()));
        let args = json!({"q": 1}).as_object().unwrap().clone();
        round_trip(
            json!({"tool_name": "t", "args": {"q": 1}}),
            ToolExecuteBefore::new("t".into(), args),
        );
        round_trip(
            json!({"tool_name": "t", "response": {"message": "m", "break_loop": true, "additional": null}}),
            ToolExecuteAfter::new("t".into(), Response::final_answer("m")),
        );
        round_trip(
            json!({"tool_name": "t", "progress": "p"}),
            ToolOutputUpdate::new("t".into(), "p".into()),
        );
    }

    #[test]
    fn names() {
        assert_eq!(ToolExecuteAfter::NAME, "tool_execute_after");
        assert_eq!(MonologueEnd::NAME, MONOLOGUE_END);
    }
}
