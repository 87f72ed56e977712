//! `models.toml`: the models a profile can talk to, layered like everything else, and the API
//! key each one uses (read once, never shown).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use toml::{Table, Value};

use toolhost::Layout;
use toolhost::Secrets;
use toolhost::{read_text, Escaped, ReadErrorKind};
use toolhost::{ModelError, ModelErrorKind, ToolProtocol};

/// The file name of a layer's model configuration.
pub const MODELS_FILE: &str = "models.toml";

/// One model: a `[models.NAME]` table of `models.toml`.
///
/// ```
/// let config: toolhost_openai::ModelConfig = toml::from_str(r#"
///     base_url = "http://127.0.0.1:8080/v1"
///     model = "qwen2.5-7b-instruct"
///     tool_protocol = "native"
/// "#).unwrap();
/// assert_eq!(config.tool_protocol, toolhost::ToolProtocol::Native);
/// assert!(config.stream);
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ModelConfig {
    /// The table's name (`local` for `[models.local]`).
    #[serde(skip)]
    pub name: String,
    /// The server's OpenAI-compatible base URL, up to `/v1`: `/chat/completions` is appended.
    pub base_url: String,
    /// The model's name on that server.
    pub model: String,
    /// `json` (the default: Agent Zero's JSON request in the text) or `native` (function calls).
    #[serde(default)]
    pub tool_protocol: ToolProtocol,
    /// Under the JSON protocol, send `response_format` with a JSON Schema of the tool request
    /// built from the profile's tools (servers that support it constrain the reply to it):
    /// `false` (the default), `"names"`, `"tools"` or `true` ([`StructuredOutput`]).
    #[serde(default)]
    pub structured_output: StructuredOutput,
    /// Where a structured reply's `thoughts` and `headline` go ([`Thoughts`]): `"last"` (the
    /// default: after `tool_name` and `tool_args`), `"first"` (Agent Zero's order) or `"none"`
    /// (left out).
    #[serde(default)]
    pub thoughts: Thoughts,
    /// The most `thoughts` a structured reply may have. Default 2; at least 1.
    #[serde(default = "defaults::max_thoughts")]
    pub max_thoughts: u64,
    /// The most characters of one thought in a structured reply. Default 120; at least 1.
    #[serde(default = "defaults::max_thought_chars")]
    pub max_thought_chars: u64,
    /// The most characters of a structured reply's `headline`. Default 80; at least 1.
    #[serde(default = "defaults::max_headline_chars")]
    pub max_headline_chars: u64,
    /// The most characters of a string argument in a structured reply, where the tool's
    /// parameters set none (a top-level `string` property without `maxLength`): a small model
    /// constrained by a grammar may otherwise repeat itself until its token limit. Not bounded
    /// unless set; at least 1.
    pub max_arg_chars: Option<u64>,
    /// Under `structured_output = "tools"`, keep each tool's optional arguments (the
    /// properties its parameters do not list as `required`) in the schema. Default true: each
    /// combination of them is a branch of its own (`oneOf`, every property of a branch
    /// required), so a grammar that makes every listed property required (node-llama-cpp's
    /// does) can still leave one out; a tool with more than four optional arguments keeps its
    /// schema as it is. `false` leaves them out.
    #[serde(default = "defaults::yes")]
    pub optional_args: bool,
    /// Under the JSON protocol, send the example exchanges of the system prompt (a line
    /// `User: MESSAGE` followed at once by a fenced block, ```` ``` ```` or `~~~`, holding the
    /// reply) as conversation turns instead: each a user message and the assistant's reply,
    /// after the system prompt and before the history (the first messages left out when the
    /// context window is short), and no longer in the system prompt's text. A small model
    /// copies from a reply to a request better than from text. Default true.
    #[serde(default = "defaults::yes")]
    pub example_turns: bool,
    /// Send `"strict": true` with the schema (OpenAI's structured outputs; llama.cpp and vLLM
    /// constrain the reply either way). Default false.
    #[serde(default)]
    pub strict: bool,
    /// Under the native protocol, `tool_choice` as sent: `"auto"`, `"required"`, `"none"`, or
    /// a tool's name (that function is forced). Not sent unless set.
    pub tool_choice: Option<String>,
    /// Under the native protocol, `parallel_tool_calls` as sent. Not sent unless set.
    pub parallel_tool_calls: Option<bool>,
    /// The environment variable that holds the API key.
    pub api_key_env: Option<String>,
    /// The key in `usr/secrets.env` that holds the API key.
    pub api_key_secret: Option<String>,
    /// The model's context window in tokens; older history is shortened to fit. Default 8192;
    /// at least 1.
    #[serde(default = "defaults::context_tokens")]
    pub context_tokens: u64,
    /// The most tokens of one tool answer sent to the model: a longer answer is cut, with a
    /// note, and kept whole in the session folder (`outputs/`), so that one runaway answer
    /// cannot overflow the context. Default half of what the context leaves for messages
    /// (`context_tokens` less the reply's room); at least 1. Tokens are counted as 3 bytes.
    pub max_tool_answer_tokens: Option<u64>,
    /// The model reads images: an image a tool returns goes to it as an image part
    /// (`image_url` with a `data:` URL) of the message that carries the tool's result, or,
    /// under the native protocol, of a user message right after the tool messages. Without
    /// it, an image is described in text. Default false.
    #[serde(default)]
    pub vision: bool,
    /// Stream the reply (server-sent events). Default true.
    #[serde(default = "defaults::yes")]
    pub stream: bool,
    /// The longest wait for the server: for its answer to begin, and between two pieces of a
    /// streamed reply. Default 120; from 0.001 to 1,000,000,000
    /// ([`numbers::seconds`](toolhost::config::numbers::seconds)).
    #[serde(default = "defaults::timeout_seconds")]
    pub timeout_seconds: f64,
    /// The longest a whole reply may take once the server has begun to answer, however often
    /// data arrives (a stream that never ends, or sends empty events forever, stops here).
    /// Default 600; from 0.001 to 1,000,000,000.
    #[serde(default = "defaults::max_reply_seconds")]
    pub max_reply_seconds: f64,
    /// The most bytes of a reply's body (a stream's events, or one JSON body); beyond it the
    /// reply broke off, with the text received so far. Default 16 MiB (16777216); at least 1.
    #[serde(default = "defaults::max_reply_bytes")]
    pub max_reply_bytes: u64,
    /// The most bytes of one event of a streamed reply. Default 4 MiB (4194304); at least 1.
    #[serde(default = "defaults::max_event_bytes")]
    pub max_event_bytes: u64,
    /// Retries of a request that got 429, a 5xx status or no connection. Default 3.
    #[serde(default = "defaults::max_retries")]
    pub max_retries: u32,
    /// The first retry's wait in milliseconds (doubled each time, unless the server says
    /// `Retry-After`). Default 500; at most 1,000,000,000,000.
    #[serde(default = "defaults::retry_initial_ms")]
    pub retry_initial_ms: u64,
    /// The sampling temperature, if set: from 0 to 2.
    pub temperature: Option<f64>,
    /// The most tokens of a reply, if set: at least 1.
    pub max_tokens: Option<u64>,
    /// Extra HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// What `response_format` constrains under the JSON protocol (`structured_output`).
///
/// ```
/// use toolhost_openai::{ModelConfig, StructuredOutput};
/// let read = |v: &str| toml::from_str::<ModelConfig>(&format!(
///     "base_url = \"http://x/v1\"\nmodel = \"m\"\nstructured_output = {v}")).unwrap();
/// assert_eq!(read("true").structured_output, StructuredOutput::Best);
/// assert_eq!(read("\"names\"").structured_output, StructuredOutput::Names);
/// assert_eq!(read("false").structured_output, StructuredOutput::Off);
/// assert!(toml::from_str::<ModelConfig>("base_url = \"x\"\nmodel = \"m\"\nstructured_output = \"all\"").is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StructuredOutput {
    /// `false`: no `response_format`.
    #[default]
    Off,
    /// `"names"`: `tool_name` is one of the tools' names, `tool_args` any object.
    Names,
    /// `"tools"`: one branch per tool (`oneOf`): `tool_name` its name, `tool_args` its
    /// parameters.
    Tools,
    /// `true`: as `"tools"`; a reply that is `null` or empty (a server whose grammar cannot
    /// take the branches) makes this model use `"names"` from then on, with one line saying so.
    Best,
}

/// Where the schema of a structured reply puts `thoughts` and `headline`. A server that turns
/// the schema into a grammar makes the model write the keys in the schema's order, and a small
/// model fills `thoughts` with text copied from the prompt that then steers its choice of tool
/// and arguments; written after the call (the default) or not at all, they cannot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Thoughts {
    /// `"first"`: `thoughts`, `headline`, `tool_name`, `tool_args` (Agent Zero's order).
    First,
    /// `"last"` (the default): `tool_name`, `tool_args`, `thoughts`, `headline`.
    #[default]
    Last,
    /// `"none"`: `tool_name` and `tool_args` only.
    None,
}

impl<'de> Deserialize<'de> for StructuredOutput {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Form(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Flag(true) => Ok(Self::Best),
            Written::Flag(false) => Ok(Self::Off),
            Written::Form(form) => match form.as_str() {
                "names" => Ok(Self::Names),
                "tools" => Ok(Self::Tools),
                other => Err(serde::de::Error::custom(format!(
                    "structured_output is true, false, \"names\" or \"tools\", not \"{other}\""
                ))),
            },
        }
    }
}

mod defaults {
    pub(super) fn max_thoughts() -> u64 {
        2
    }
    pub(super) fn max_thought_chars() -> u64 {
        120
    }
    pub(super) fn max_headline_chars() -> u64 {
        80
    }
    pub(super) fn context_tokens() -> u64 {
        8192
    }
    pub(super) fn yes() -> bool {
        true
    }
    pub(super) fn timeout_seconds() -> f64 {
        120.0
    }
    pub(super) fn max_reply_seconds() -> f64 {
        600.0
    }
    pub(super) fn max_reply_bytes() -> u64 {
        16 << 20
    }
    pub(super) fn max_event_bytes() -> u64 {
        4 << 20
    }
    pub(super) fn max_retries() -> u32 {
        3
    }
    pub(super) fn retry_initial_ms() -> u64 {
        500
    }
}

/// Every model a profile sees, read from `models.toml` in each of its layers.
///
/// A profile `P` reads `usr/agents/P/models.toml`, each plugin's `agents/P/models.toml`,
/// `core/agents/P/models.toml`, `usr/models.toml`, each plugin's `models.toml` and
/// `core/models.toml`: the tables of one model are merged key by key, and the most specific
/// layer wins each key; so does the top-level `default = "NAME"`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelsConfig {
    /// The models by name.
    pub models: BTreeMap<String, ModelConfig>,
    /// The model used when none is named.
    pub default: Option<String>,
    /// The files read, most specific first.
    pub files: Vec<PathBuf>,
}

fn config_error(message: String) -> ModelError {
    ModelError::request(ModelErrorKind::Config, message)
}

impl ModelsConfig {
    /// Reads and merges the `models.toml` files of `profile`'s layers.
    pub fn load(layout: &Layout, profile: &str) -> Result<Self, ModelError> {
        let mut merged = Table::new();
        let mut origins = Origins::new();
        let mut default = None;
        let mut files = Vec::new();
        for layer in layout.layers(profile) {
            let path = layer.dir.join(MODELS_FILE);
            let text = match read_text(&path, toolhost::DEFAULT_MAX_TEXT_BYTES, "a 1 MiB limit") {
                Ok(text) => text,
                Err(e) if e.kind() == ReadErrorKind::Missing => continue,
                Err(e) => return Err(config_error(format!("cannot read {}: {e}", Escaped(&path)))),
            };
            let table: Table = text.parse().map_err(|e: toml::de::Error| {
                let reason = e.message().replace('\n', " ");
                config_error(format!("{}: {reason}; fix the file", Escaped(&path)))
            })?;
            merge_file(&mut merged, &mut origins, &mut default, table, &path)?;
            files.push(path);
        }
        let mut models = BTreeMap::new();
        for (name, table) in merged {
            let file = |key: Option<&str>| {
                let found = key.and_then(|k| origins.get(&(name.clone(), k.to_owned())));
                found
                    .or_else(|| {
                        origins
                            .iter()
                            .find(|((n, _), _)| *n == name)
                            .map(|(_, p)| p)
                    })
                    .map_or_else(|| MODELS_FILE.to_owned(), |p| Escaped(p).to_string())
            };
            let raw = table.clone();
            let mut config: ModelConfig = table.try_into().map_err(|e: toml::de::Error| {
                let reason = e.message().replace('\n', " ");
                match wrong_key(&raw) {
                    Some((key, shown)) => config_error(format!(
                        "{}: [models.{name}] {key} = {shown}: {reason}",
                        file(Some(&key))
                    )),
                    None => config_error(format!("{}: [models.{name}]: {reason}", file(None))),
                }
            })?;
            config.name = name.clone();
            if let Err(wrong) = config.check() {
                let shown = raw
                    .get(wrong.key)
                    .map_or_else(String::new, ToString::to_string);
                let (key, expected, reason) = (wrong.key, wrong.expected, wrong.reason);
                return Err(config_error(format!(
                    "{}: [models.{name}] {key} = {shown}: expected {expected}: {reason}; fix it",
                    file(Some(key))
                )));
            }
            models.insert(name, config);
        }
        Ok(Self {
            models,
            default,
            files,
        })
    }

    /// The model named `name`, else the default one, else the only one.
    pub fn get(&self, name: Option<&str>) -> Result<&ModelConfig, ModelError> {
        let names = || self.models.keys().cloned().collect::<Vec<_>>().join(", ");
        if self.models.is_empty() {
            return Err(config_error(
                "no model is configured: add a [models.NAME] table with base_url and model to \
                 usr/models.toml (see docs/src/reference/models.md)"
                    .to_owned(),
            ));
        }
        let name = match name.or(self.default.as_deref()) {
            Some(name) => name,
            None if self.models.len() == 1 => {
                let only = self.models.values().next();
                return Ok(only.expect("the guard: exactly one model is configured"));
            }
            None => {
                return Err(config_error(format!(
                    "several models are configured ({}) and none is the default: pass --model \
                     NAME or set default = \"NAME\" in usr/models.toml",
                    names()
                )));
            }
        };
        self.models.get(name).ok_or_else(|| {
            config_error(format!(
                "no model named '{name}' in {MODELS_FILE}; configured: {}",
                names()
            ))
        })
    }
}

/// The key of a model's merged table that its schema refuses, and its value as written: the
/// table is written out one key a line and read again, so the error's span finds the line.
fn wrong_key(table: &Value) -> Option<(String, String)> {
    let text = toml::to_string(table).ok()?;
    let error = toml::from_str::<ModelConfig>(&text).err()?;
    let line_start = text[..error.span()?.start]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let line = text[line_start..].lines().next()?;
    let (key, value) = line.split_once(" = ")?;
    Some((key.trim().to_owned(), value.trim().to_owned()))
}

/// The file each `(model, key)` was taken from.
type Origins = BTreeMap<(String, String), PathBuf>;

/// Merges one file into `merged`: keys already there (from a more specific layer) stay.
fn merge_file(
    merged: &mut Table,
    origins: &mut Origins,
    default: &mut Option<String>,
    table: Table,
    path: &std::path::Path,
) -> Result<(), ModelError> {
    for (key, value) in table {
        match (key.as_str(), value) {
            ("default", Value::String(name)) => {
                default.get_or_insert(name);
            }
            ("models", Value::Table(models)) => {
                for (name, model) in models {
                    let Value::Table(model) = model else {
                        let message = format!("{}: models.{name} must be a table", Escaped(path));
                        return Err(config_error(message));
                    };
                    let entry = merged
                        .entry(name.clone())
                        .or_insert_with(|| Value::Table(Table::new()));
                    if let Value::Table(entry) = entry {
                        for (k, v) in model {
                            if !entry.contains_key(&k) {
                                origins.insert((name.clone(), k.clone()), path.to_owned());
                                entry.insert(k, v);
                            }
                        }
                    }
                }
            }
            (other, _) => {
                return Err(config_error(format!(
                    "{}: unknown key '{other}' (expected default = \"NAME\" and [models.NAME] \
                     tables)",
                    Escaped(path)
                )));
            }
        }
    }
    Ok(())
}

/// An API key. It is only ever written into the `Authorization` header: it has no `Display`,
/// and its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ApiKey(pub(crate) String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        out.write_str("ApiKey(hidden)")
    }
}

/// A key of a model whose value is out of range: what it must be, and why it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// The key (`timeout_seconds`).
    pub key: &'static str,
    /// What it must be (`a number of seconds from 0.001 to ...`).
    pub expected: String,
    /// Why it is not (`not a finite number`).
    pub reason: String,
}

impl ModelConfig {
    /// Checks every number against its range, through the host's conversions
    /// ([`toolhost::config::numbers`]): `timeout_seconds` and `max_reply_seconds` (not `nan`,
    /// not 0 or less, not below 1 ms, not above 1,000,000,000 s), `max_reply_bytes` and
    /// `max_event_bytes` (1 or more), `retry_initial_ms`, `context_tokens` and `max_tokens`
    /// (1 or more), `temperature` (0 to 2); and that each of `headers` is one HTTP allows.
    pub fn check(&self) -> Result<(), OutOfRange> {
        use toolhost::config::numbers;
        fn wrong(
            key: &'static str,
            expected: &'static str,
        ) -> impl Fn(numbers::NumberError) -> OutOfRange {
            move |e| OutOfRange {
                key,
                expected: expected.to_owned(),
                reason: e.to_string(),
            }
        }
        numbers::seconds(self.timeout_seconds)
            .map_err(wrong("timeout_seconds", numbers::SECONDS_EXPECTED))?;
        numbers::seconds(self.max_reply_seconds)
            .map_err(wrong("max_reply_seconds", numbers::SECONDS_EXPECTED))?;
        let bytes = "a whole number of bytes, 1 or more";
        let max = usize::MAX as u64;
        numbers::whole(self.max_reply_bytes.into(), 1, max)
            .map_err(wrong("max_reply_bytes", bytes))?;
        numbers::whole(self.max_event_bytes.into(), 1, max)
            .map_err(wrong("max_event_bytes", bytes))?;
        let max_ms = "a whole number of milliseconds, at most 1000000000000";
        numbers::millis(self.retry_initial_ms).map_err(wrong("retry_initial_ms", max_ms))?;
        let tokens = "a whole number of tokens, 1 or more";
        numbers::whole(self.context_tokens.into(), 1, u64::MAX)
            .map_err(wrong("context_tokens", tokens))?;
        let count = "a whole number, 1 or more";
        numbers::whole(self.max_thoughts.into(), 1, u64::MAX)
            .map_err(wrong("max_thoughts", count))?;
        numbers::whole(self.max_thought_chars.into(), 1, u64::MAX)
            .map_err(wrong("max_thought_chars", count))?;
        numbers::whole(self.max_headline_chars.into(), 1, u64::MAX)
            .map_err(wrong("max_headline_chars", count))?;
        if let Some(chars) = self.max_arg_chars {
            numbers::whole(chars.into(), 1, u64::MAX).map_err(wrong("max_arg_chars", count))?;
        }
        if let Some(max_tokens) = self.max_tokens {
            numbers::whole(max_tokens.into(), 1, u64::MAX).map_err(wrong("max_tokens", tokens))?;
        }
        if let Some(answer) = self.max_tool_answer_tokens {
            numbers::whole(answer.into(), 1, u64::MAX)
                .map_err(wrong("max_tool_answer_tokens", tokens))?;
        }
        if let Some(temperature) = self.temperature {
            numbers::finite(temperature, 0.0, 2.0)
                .map_err(wrong("temperature", "a number from 0 to 2"))?;
        }
        for (name, value) in &self.headers {
            let header = |reason: String| OutOfRange {
                key: "headers",
                expected: "HTTP headers: names of letters, digits and `-_.!#$%&'*+^`|~`, values \
                           of visible characters and spaces"
                    .to_owned(),
                reason,
            };
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(header(format!("{name:?} is not a header name")));
            }
            if reqwest::header::HeaderValue::from_str(value).is_err() {
                return Err(header(format!(
                    "the value of {name:?} is not a header value"
                )));
            }
        }
        Ok(())
    }

    /// The most tokens of one tool answer: `max_tool_answer_tokens`, else half of what the
    /// context window leaves for messages.
    pub fn tool_answer_tokens(&self) -> u64 {
        self.max_tool_answer_tokens
            .unwrap_or_else(|| crate::window::budget(self) / 2)
            .max(1)
    }

    /// The API key, from `api_key_secret` (in `secrets`) or `api_key_env`; `None` when neither
    /// is set (a local server). A key that is named but missing is an error that says where
    /// to put it.
    pub(crate) fn api_key(&self, secrets: &Secrets) -> Result<Option<ApiKey>, ModelError> {
        let key_error = |message: String| ModelError::request(ModelErrorKind::Key, message);
        if let Some(key) = &self.api_key_secret {
            return match secrets.get(key) {
                Some(value) if !value.is_empty() => Ok(Some(ApiKey(value.to_owned()))),
                _ => Err(key_error(format!(
                    "model '{}': the secret {key} (api_key_secret) is not in {}: add a line \
                     {key}=<your key> to it",
                    self.name,
                    secrets.origin()
                ))),
            };
        }
        if let Some(var) = &self.api_key_env {
            return match std::env::var(var) {
                Ok(value) if !value.is_empty() => Ok(Some(ApiKey(value))),
                _ => Err(key_error(format!(
                    "model '{}': the environment variable {var} (api_key_env) is not set: export \
                     {var}=<your key>, or use api_key_secret with a key in usr/secrets.env",
                    self.name
                ))),
            };
        }
        Ok(None)
    }
}
