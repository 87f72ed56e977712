//! A model request's span, `chat {model}`, with the model asked for and the tokens used, and
//! the tokens counted in the metrics.

use tracing::field::Empty;
use tracing::Span;

use super::names::*;
use super::{masked, metrics, TARGET};
use crate::model::{ModelError, ModelReply};

/// One model request's span.
pub(crate) struct ChatSpan {
    span: Span,
    model: Option<String>,
}

impl ChatSpan {
    /// The span of a request to `model` (its name, if the model says), a child of the current
    /// span.
    pub(crate) fn start(model: Option<&str>) -> Self {
        let span = tracing::info_span!(
            target: TARGET,
            "chat",
            { OTEL_NAME } = Empty,
            { OTEL_KIND } = "client",
            { GEN_AI_OPERATION_NAME } = CHAT,
            { GEN_AI_REQUEST_MODEL } = Empty,
            { GEN_AI_USAGE_INPUT_TOKENS } = Empty,
            { GEN_AI_USAGE_OUTPUT_TOKENS } = Empty,
            { ERROR_TYPE } = Empty,
            { OTEL_STATUS_CODE } = Empty,
            { OTEL_STATUS_DESCRIPTION } = Empty,
        );
        let model = model.map(masked);
        if !span.is_disabled() {
            match &model {
                Some(model) => {
                    span.record(OTEL_NAME, format!("{CHAT} {model}"));
                    span.record(GEN_AI_REQUEST_MODEL, model.as_str());
                }
                None => {
                    span.record(OTEL_NAME, CHAT);
                }
            }
        }
        Self { span, model }
    }

    /// The span itself (to instrument the request with).
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Records how the request ended: the tokens used, or the error.
    pub(crate) fn ended(&self, outcome: Result<&ModelReply, &ModelError>) {
        match outcome {
            Ok(reply) => {
                let Some(usage) = reply.usage else { return };
                let (input, output) = (usage.prompt_tokens, usage.completion_tokens);
                if !self.span.is_disabled() {
                    self.span.record(GEN_AI_USAGE_INPUT_TOKENS, input);
                    self.span.record(GEN_AI_USAGE_OUTPUT_TOKENS, output);
                }
                let model = self.model.as_deref().unwrap_or("(unnamed)");
                metrics::tokens(model, input, output);
            }
            Err(e) if !self.span.is_disabled() => {
                self.span
                    .record(ERROR_TYPE, format!("{:?}", e.kind()).to_lowercase());
                self.span.record(OTEL_STATUS_CODE, "error");
                self.span
                    .record(OTEL_STATUS_DESCRIPTION, masked(&e.to_string()));
            }
            Err(_) => {}
        }
    }
}
