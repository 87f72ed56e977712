//! A model request's span, `chat {model}`, with the model asked for and the tokens used, and
//! the tokens counted in the metrics.

use std::borrow::Cow;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

use super::names::*;
use super::span::Span;
use super::{masked, metrics};
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
        let model = model.map(masked);
        let span = Span::start(
            || match &model {
                Some(model) => Cow::Owned(format!("{CHAT} {model}")),
                None => Cow::Borrowed(CHAT),
            },
            SpanKind::Client,
            || {
                let mut attributes = vec![KeyValue::new(GEN_AI_OPERATION_NAME, CHAT)];
                if let Some(model) = &model {
                    attributes.push(KeyValue::new(GEN_AI_REQUEST_MODEL, model.clone()));
                }
                attributes
            },
        );
        Self { span, model }
    }

    /// The span itself (to run the request in).
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Records how the request ended: the tokens used, or the error.
    pub(crate) fn ended(&self, outcome: Result<&ModelReply, &ModelError>) {
        match outcome {
            Ok(reply) => {
                let Some(usage) = reply.usage else { return };
                let (input, output) = (usage.prompt_tokens, usage.completion_tokens);
                self.span.set(|| {
                    vec![
                        KeyValue::new(
                            GEN_AI_USAGE_INPUT_TOKENS,
                            i64::try_from(input).unwrap_or(i64::MAX),
                        ),
                        KeyValue::new(
                            GEN_AI_USAGE_OUTPUT_TOKENS,
                            i64::try_from(output).unwrap_or(i64::MAX),
                        ),
                    ]
                });
                let model = self.model.as_deref().unwrap_or("(unnamed)");
                metrics::tokens(model, input, output);
            }
            Err(e) => {
                let kind = format!("{:?}", e.kind()).to_lowercase();
                self.span.failed(&kind, &e.to_string());
            }
        }
    }
}
