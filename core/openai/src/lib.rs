//! # toolhost-openai: real models for toolhost
//!
//! Real models through OpenAI-compatible chat completions, the protocol that OpenAI, vLLM,
//! llama.cpp's server, Ollama (`/v1`), LM Studio, OpenRouter and LiteLLM all speak.
//!
//! [`OpenAiModel`] is a [`Model`]: it streams the reply (server-sent events) into the loop's
//! masked output as it arrives, or reads one JSON body; it speaks either tool protocol
//! ([`ToolProtocol`]); it reports the token usage of each request. A 429, a 5xx status or a
//! failed connection is retried with a doubling backoff that honours `Retry-After`; each wait
//! for the server has a timeout, and each reply a total time and size (and each streamed
//! event a size); a stream cut mid-way, or one that breaks a bound, is
//! [`ModelError::Broken`], an error of that iteration. The API key goes into the `Authorization` header and nowhere else: it is
//! cut out of every error text and reply.
//!
//! Models are configured in `models.toml` ([`ModelsConfig`]):
//!
//! ```no_run
//! use toolhost_openai::{ModelsConfig, OpenAiModel};
//! use toolhost::{Agent, Host, LoopOptions};
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Arc::new(Host::new(".")?);
//! let models = ModelsConfig::load(host.layout(), "default")?;
//! let model = OpenAiModel::new(models.get(None)?.clone(), &host.secrets())?;
//! let agent = Agent::new(host, "A0", "default")?;
//! let answer = agent.monologue(&model, "What time is it?", &LoopOptions::default()).await?;
//! println!("{answer} ({})", agent.usage());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod config;
mod examples;
mod request;
mod retry;
mod schema;
mod sse;
mod stream;
mod window;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::{Response, StatusCode};
use serde_json::Value;

pub use config::{ModelConfig, ModelsConfig, OutOfRange, StructuredOutput, Thoughts, MODELS_FILE};
pub use request::NATIVE_NOTE;

use config::ApiKey;
use schema::Form;
use stream::chain;
use toolhost::Secrets;
use toolhost::{
    Delta, Model, ModelError, ModelErrorKind, ModelFuture, ModelReply, ModelRequest, ReplyFuture,
    ToolProtocol,
};

/// A model behind an OpenAI-compatible server.
#[derive(Debug)]
pub struct OpenAiModel {
    config: ModelConfig,
    key: Option<ApiKey>,
    /// The key as a secret (`§§secret(<api_key_secret or api_key_env>)`), so every form of it
    /// masking knows (upper case, base64, hex, ...) is cut out of replies and errors.
    key_forms: Secrets,
    /// The same, for every log line of the process while this model lives.
    _in_logs: toolhost::MaskedInLogs,
    client: reqwest::Client,
    url: String,
    /// Under `structured_output = true`, the server answered the per-tool schema with `null`
    /// or nothing: the names form is used from then on.
    names_only: AtomicBool,
}

/// Why a request got no usable answer, and whether asking again may help.
enum Failure {
    Retry(ModelError, Option<Duration>),
    Fatal(ModelError),
}

impl OpenAiModel {
    /// A model for `config`; its API key is read now (from `secrets` or the environment), so a
    /// missing key is an error here, before any request.
    pub fn new(config: ModelConfig, secrets: &Secrets) -> Result<Self, ModelError> {
        if let Err(wrong) = config.check() {
            let (name, key) = (&config.name, wrong.key);
            let message = format!(
                "model '{name}': {key}: expected {}: {}; fix it in models.toml",
                wrong.expected, wrong.reason
            );
            return Err(ModelError::request(ModelErrorKind::Config, message));
        }
        let key = config.api_key(secrets)?;
        let key_forms = match &key {
            Some(ApiKey(value)) => {
                let name = config
                    .api_key_secret
                    .as_ref()
                    .or(config.api_key_env.as_ref());
                let name = name.map_or("API_KEY", String::as_str);
                Secrets::from_pairs([(name.to_owned(), value.clone())])
            }
            None => Secrets::empty(),
        };
        let in_logs = toolhost::MaskedInLogs::new(key_forms.clone());
        // HTTPS through rustls with ring (installed once; a provider set earlier stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A request's last bytes go at once, not after the server's delayed ACK.
            .tcp_nodelay(true)
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ModelError::request(ModelErrorKind::Other, chain(&e)))?;
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        if reqwest::Url::parse(&url).is_err() {
            let message = format!(
                "model '{}': base_url {:?} is not a URL: write it like http://127.0.0.1:8080/v1",
                config.name, config.base_url
            );
            return Err(ModelError::request(ModelErrorKind::Config, message));
        }
        Ok(Self {
            config,
            key,
            key_forms,
            _in_logs: in_logs,
            client,
            url,
            names_only: AtomicBool::new(false),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The request body for `request`, as it would be sent (for tests and debugging); its
    /// objects' keys sorted, unlike [`request_text`](Self::request_text).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        serde_json::to_value(request::body(&self.config, request, self.form())).unwrap_or_default()
    }

    /// The request body for `request` as the bytes sent: the schema's keys in their order.
    pub fn request_text(&self, request: &ModelRequest<'_>) -> String {
        serde_json::to_string(&request::body(&self.config, request, self.form()))
            .unwrap_or_default()
    }

    /// How `response_format` constrains the next reply, if it does.
    fn form(&self) -> Option<Form> {
        match self.config.structured_output {
            StructuredOutput::Off => None,
            StructuredOutput::Names => Some(Form::Names),
            StructuredOutput::Tools => Some(Form::Tools),
            StructuredOutput::Best if self.names_only.load(Ordering::Relaxed) => Some(Form::Names),
            StructuredOutput::Best => Some(Form::Tools),
        }
    }

    /// Asks, and under `structured_output = true` asks again with the names form if the
    /// server answered the per-tool form with `null` or nothing (its grammar cannot take it).
    async fn answer(
        &self,
        request: ModelRequest<'_>,
        shown: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<ModelReply, ModelError> {
        let form = self.form();
        let reply = self.complete(request, shown, form).await?;
        let empty = reply.tool_calls.is_empty() && matches!(reply.text.trim(), "" | "null");
        let per_tool = form == Some(Form::Tools) && !request.tools.is_empty();
        if !(empty && per_tool && self.config.structured_output == StructuredOutput::Best) {
            return Ok(reply);
        }
        self.names_only.store(true, Ordering::Relaxed);
        tracing::warn!(
            "model '{}': the server answered the per-tool schema with {:?}: asking again with \
             the tool names only (structured_output = \"names\") from now on",
            self.config.name,
            reply.text.trim()
        );
        let mut again = self.complete(request, shown, Some(Form::Names)).await?;
        if let (Some(first), Some(second)) = (reply.usage, again.usage.as_mut()) {
            *second += first;
        }
        Ok(again)
    }

    fn timeout(&self) -> Duration {
        // Checked in `new`; a value that is not (a NaN set by hand later) saturates.
        toolhost::config::numbers::saturating_seconds(self.config.timeout_seconds)
            .unwrap_or(toolhost::config::numbers::MAX_DURATION)
            .max(toolhost::config::numbers::MIN_DURATION)
    }

    /// The bounds on reading one reply.
    fn bounds(&self) -> stream::Bounds {
        use toolhost::config::numbers;
        let bytes = |value: u64| usize::try_from(value).unwrap_or(usize::MAX).max(1);
        stream::Bounds {
            model: self.config.name.clone(),
            idle: self.timeout(),
            // Checked in `new`, saturating like `timeout`.
            total: numbers::saturating_seconds(self.config.max_reply_seconds)
                .unwrap_or(numbers::MAX_DURATION)
                .max(numbers::MIN_DURATION),
            max_bytes: bytes(self.config.max_reply_bytes),
            max_event: bytes(self.config.max_event_bytes),
        }
    }

    /// `text` with every form of the API key masked.
    fn hide_key(&self, text: String) -> String {
        self.key_forms.mask_owned(text).into_inner()
    }

    /// Sends the request (again after a retryable failure) and reads the reply.
    async fn complete(
        &self,
        request: ModelRequest<'_>,
        shown: &mut (dyn FnMut(Delta<'_>) + Send),
        form: Option<Form>,
    ) -> Result<ModelReply, ModelError> {
        let body = request::body(&self.config, &request, form);
        let initial = Duration::from_millis(self.config.retry_initial_ms);
        let mut attempt = 0;
        let response = loop {
            let error = match self.send(&body).await {
                Ok(response) => break response,
                Err(Failure::Retry(error, asked)) if attempt < self.config.max_retries => {
                    match asked {
                        Some(wait) if wait > retry::MAX_RETRY_AFTER => {
                            let message = format!(
                                "{error}; the server asks to wait {} s: try again later",
                                wait.as_secs()
                            );
                            return Err(ModelError::request(error.kind(), message));
                        }
                        _ => (error, asked),
                    }
                }
                Err(Failure::Retry(error, _) | Failure::Fatal(error)) => return Err(error),
            };
            attempt += 1;
            let wait = retry::backoff(attempt, initial, error.1);
            tracing::warn!(
                "{}; retrying in {:.1} s ({attempt} of {})",
                error.0,
                wait.as_secs_f64(),
                self.config.max_retries
            );
            tokio::time::sleep(wait).await;
        };
        // What is shown live is masked as it arrives (the end held back while it could still
        // become the key), and the rest once the reply is read; the reasoning the same.
        let mut live = self.key_forms.stream();
        let mut live_reasoning = self.key_forms.stream();
        let mut masked = |delta: Delta<'_>| {
            let (stream, text) = match delta {
                Delta::Text(text) => (&mut live, text),
                Delta::Reasoning(text) => (&mut live_reasoning, text),
                _ => return,
            };
            let ready = stream.push(text);
            match (ready.is_empty(), delta) {
                (true, _) => {}
                (false, Delta::Reasoning(_)) => shown(Delta::Reasoning(&ready)),
                (false, _) => shown(Delta::Text(&ready)),
            }
        };
        let (bounds, key) = (self.bounds(), &self.key_forms);
        let reply = match self.config.stream {
            true => stream::read_events(response, &bounds, key, &mut masked).await,
            false => stream::read_body(response, &bounds, key, &mut masked).await,
        };
        let rest = live_reasoning.finish();
        if !rest.is_empty() {
            shown(Delta::Reasoning(&rest));
        }
        let rest = live.finish();
        if !rest.is_empty() {
            shown(Delta::Text(&rest));
        }
        let mut reply = reply.map_err(|e| match e {
            ModelError::Broken { reason, partial } => ModelError::Broken {
                reason: self.hide_key(reason),
                partial: self.hide_key(partial),
            },
            other => other,
        })?;
        reply.text = self.hide_key(reply.text);
        reply.reasoning = self.hide_key(reply.reasoning);
        for call in &mut reply.tool_calls {
            call.arguments = self.hide_key(std::mem::take(&mut call.arguments));
        }
        Ok(reply)
    }

    /// One request: the response if its status is a success.
    async fn send(&self, body: &request::Body) -> Result<Response, Failure> {
        let mut builder = self.client.post(&self.url).json(body);
        for (name, value) in &self.config.headers {
            builder = builder.header(name, value);
        }
        if let Some(ApiKey(key)) = &self.key {
            builder = builder.bearer_auth(key);
        }
        // The request's trace goes on at the server, when it is exported.
        if let Some(traceparent) = toolhost::telemetry::traceparent() {
            builder = builder.header("traceparent", traceparent);
        }
        let url = &self.url;
        let response = match tokio::time::timeout(self.timeout(), builder.send()).await {
            Err(_) => {
                let message = format!(
                    "no answer from {url} within {:.0} s: is the server overloaded? raise \
                     timeout_seconds for model '{}' in models.toml",
                    self.timeout().as_secs_f64(),
                    self.config.name
                );
                return Err(Failure::Fatal(ModelError::request(
                    ModelErrorKind::Timeout,
                    message,
                )));
            }
            Ok(Err(e)) => {
                // The innermost cause says it best ("Connection refused"); the URL is ours.
                let reason = match e.is_connect() {
                    true => root_cause(&e),
                    false => chain(&e),
                };
                let reason = self.hide_key(reason);
                let message = format!("cannot reach {url} ({reason}): is the server running?");
                let error = ModelError::request(ModelErrorKind::Unreachable, message);
                return Err(Failure::Retry(error, None));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let asked = retry::retry_after(response.headers());
        // At most 64 KiB of an error body is read, then masked before error_detail cuts it to
        // its budget.
        let body = stream::read_error_body(response, 64 << 10, Duration::from_secs(5)).await;
        let detail = error_detail(&self.hide_key(body));
        let error = self.status_error(status, &detail);
        match retry::retryable(status) {
            true => Err(Failure::Retry(error, asked)),
            false => Err(Failure::Fatal(error)),
        }
    }

    /// One line for an error status: what the server said, and what to check.
    fn status_error(&self, status: StatusCode, detail: &str) -> ModelError {
        let (url, name) = (&self.url, &self.config.name);
        let said = match detail.is_empty() {
            true => String::new(),
            false => format!(": {detail}"),
        };
        let (kind, fix) = match status.as_u16() {
            401 | 403 => (
                ModelErrorKind::Key,
                format!("check the API key of model '{name}' (api_key_env or api_key_secret)"),
            ),
            404 => (
                ModelErrorKind::Status,
                format!("check base_url (it usually ends in /v1) and model of model '{name}'"),
            ),
            429 => (
                ModelErrorKind::Status,
                "rate limited: try again later".to_owned(),
            ),
            _ => (
                ModelErrorKind::Status,
                format!("check the server and model '{name}'"),
            ),
        };
        ModelError::request(kind, format!("{url} answered {status}{said}; {fix}"))
    }
}

/// The text pieces of a stream passed to `chunk`; the reasoning left out.
fn text_only<'a>(chunk: &'a mut (dyn FnMut(&str) + Send)) -> impl FnMut(Delta<'_>) + Send + 'a {
    move |delta| {
        if let Delta::Text(text) = delta {
            chunk(text);
        }
    }
}

/// The innermost source of an error.
fn root_cause(error: &dyn std::error::Error) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The message of an error body (`{"error": {"message": ...}}` or text), on one line, short.
fn error_detail(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.get("message").or(Some(e)))
        .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
        .unwrap_or_else(|| body.to_owned());
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line,
    }
}

impl Model for OpenAiModel {
    fn reply<'a>(
        &'a self,
        request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ModelFuture<'a> {
        Box::pin(async move {
            let mut text = text_only(chunk);
            self.answer(request, &mut text).await.map(|r| r.text)
        })
    }

    fn respond<'a>(
        &'a self,
        request: ModelRequest<'a>,
        chunk: &'a mut (dyn FnMut(&str) + Send),
    ) -> ReplyFuture<'a> {
        Box::pin(async move {
            let mut text = text_only(chunk);
            self.answer(request, &mut text).await
        })
    }

    fn stream<'a>(
        &'a self,
        request: ModelRequest<'a>,
        delta: &'a mut (dyn FnMut(Delta<'_>) + Send),
    ) -> ReplyFuture<'a> {
        Box::pin(self.answer(request, delta))
    }

    fn max_tool_answer_bytes(&self) -> Option<usize> {
        let tokens = self.config.tool_answer_tokens();
        let bytes = tokens.saturating_mul(window::BYTES_PER_TOKEN);
        Some(usize::try_from(bytes).unwrap_or(usize::MAX))
    }

    fn protocol(&self) -> ToolProtocol {
        self.config.tool_protocol
    }

    fn model_name(&self) -> Option<&str> {
        Some(&self.config.model)
    }
}
