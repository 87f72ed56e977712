//! Multi round-trip calls (MCP 2026-07-28, SEP-2322): a server of that version may not send
//! requests to its client, so what a call needs from the client (an approval, a tool's
//! elicitation or sampling) goes back as an `InputRequiredResult`. The client answers each
//! input request and retries the call with its `inputResponses` and the `requestState` it was
//! given; the call runs again from the start with every answer so far, and a tool that asks
//! the same things in the same order gets them answered. An answer that does not fit what
//! was asked (an elicitation's answer without an `action`, a sampling's without `content`,
//! roots without `roots`) is asked again; answers sent without a `requestState` are taken
//! where the tool asks their keys.
//!
//! The `requestState` holds the answers of earlier rounds and the ids of the requests it
//! waits for, sealed with HMAC-SHA256 (rmcp's `RequestStateCodec`) under the server's
//! [`StateKey`], bound to the call (its tool and a digest of its arguments) and valid for
//! [`STATE_TTL`], and it is good for one retry: each state carries a random id, and a
//! process refuses an id it has already accepted (a state replayed to another instance that
//! shares the key is not caught: the ids are kept per process). A state that fails
//! verification (changed, forged, expired, issued for another call or by a server with
//! another key) or was used before is refused with invalid params (`-32602`) and the call
//! does not run.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, GetPromptRequestParams, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, JsonObject, RequestStateCodec, SealOptions,
};
use rmcp::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::lock;

/// How long a `requestState` may be echoed back: the user's time to answer.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(600);

/// The id of the approval's input request.
pub(crate) const APPROVAL: &str = "approval";

/// The key that seals and opens `requestState`s: random for each process, or derived from
/// the HTTP listener's bearer token, so that instances sharing a token (behind one load
/// balancer) open each other's states. It keeps the ids of the states it accepted, until
/// they expire, so that each is used once.
#[derive(Clone)]
pub(crate) struct StateKey {
    codec: RequestStateCodec,
    used: Arc<Mutex<HashMap<u128, Instant>>>,
}

impl StateKey {
    fn new(key: Vec<u8>) -> Self {
        Self {
            codec: RequestStateCodec::new_unchecked(key),
            used: Arc::default(),
        }
    }

    /// A key of 32 random bytes from the operating system.
    pub(crate) fn random() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self::new(key.to_vec()))
    }

    /// The key of every listener given `token`: SHA-256 of a label and the token.
    pub(crate) fn from_token(token: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(b"toolhost/mcp/request-state/v1\0");
        hash.update(token.as_bytes());
        let key: [u8; 32] = hash.finalize().into();
        Self::new(key.to_vec())
    }

    /// Marks the state `id` used; false if it was used before. Forgets ids older than
    /// [`STATE_TTL`] (their states no longer open).
    fn use_once(&self, id: u128) -> bool {
        let now = Instant::now();
        let mut used = lock(&self.used);
        used.retain(|_, at| now.duration_since(*at) < STATE_TTL);
        used.insert(id, now).is_none()
    }
}

/// What a `requestState` holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// A random id, accepted once.
    id: u128,
    /// Every answer so far, by input request id.
    answers: BTreeMap<String, Value>,
    /// The ids of the requests the client was asked in the last round.
    asked: Vec<String>,
}

/// A request that may be retried with answers: `tools/call`, `prompts/get`.
pub(crate) trait Retried {
    /// Its method, which the state is bound to.
    const METHOD: &'static str;
    /// The tool or prompt.
    fn name(&self) -> &str;
    /// Its arguments, whose digest the state is bound to.
    fn arguments(&self) -> &Option<JsonObject>;
    /// The state it echoes, if any.
    fn request_state(&self) -> &Option<String>;
    /// The answers it brings, if any.
    fn input_responses(&self) -> &Option<InputResponses>;
}

impl Retried for CallToolRequestParams {
    const METHOD: &'static str = "tools/call";
    fn name(&self) -> &str {
        &self.name
    }
    fn arguments(&self) -> &Option<JsonObject> {
        &self.arguments
    }
    fn request_state(&self) -> &Option<String> {
        &self.request_state
    }
    fn input_responses(&self) -> &Option<InputResponses> {
        &self.input_responses
    }
}

impl Retried for GetPromptRequestParams {
    const METHOD: &'static str = "prompts/get";
    fn name(&self) -> &str {
        &self.name
    }
    fn arguments(&self) -> &Option<JsonObject> {
        &self.arguments
    }
    fn request_state(&self) -> &Option<String> {
        &self.request_state
    }
    fn input_responses(&self) -> &Option<InputResponses> {
        &self.input_responses
    }
}

/// One round of a call of a 2026-07-28 client: the answers it brought, and what it is asked.
pub(crate) struct RoundTrip {
    answers: BTreeMap<String, Value>,
    asked: Mutex<InputRequests>,
    /// How many elicitations and samplings the tool asked so far in this round.
    counts: Mutex<BTreeMap<&'static str, usize>>,
    capabilities: ClientCapabilities,
    /// What the tool asked for that the client did not declare (`sampling`, ...).
    lacking: Mutex<std::collections::BTreeSet<&'static str>>,
}

impl RoundTrip {
    /// The round of `request`: the answers of its verified `requestState` and, for the
    /// requests that state was waiting for, its `inputResponses`.
    pub(crate) fn begin<R: Retried>(
        key: &StateKey,
        request: &R,
        capabilities: ClientCapabilities,
    ) -> Result<Self, ErrorData> {
        let mut state = State::default();
        if let Some(sealed) = request.request_state() {
            let bound = binding(request);
            state = key.codec.open_json_with(sealed, &bound).map_err(|e| {
                tracing::info!("{} {}: requestState refused: {e}", R::METHOD, request.name());
                ErrorData::invalid_params(
                    "requestState failed verification (changed, expired, or issued for another call): call the tool again without requestState and inputResponses",
                    None,
                )
            })?;
            if !key.use_once(state.id) {
                tracing::info!("{} {}: requestState used again", R::METHOD, request.name());
                return Err(ErrorData::invalid_params(
                    "requestState was already used (each is good for one retry): call the tool again without requestState and inputResponses",
                    None,
                ));
            }
        }
        let mut answers = state.answers;
        match (request.input_responses(), request.request_state()) {
            // A retry: only the answers to what its state asked.
            (Some(responses), Some(_)) => {
                for id in &state.asked {
                    if let Some(answer) = responses.get(id) {
                        answers.insert(id.clone(), answer.clone());
                    }
                }
            }
            // Answers given up front, without a state: each is taken where the tool asks
            // its key (the client could give the same answers when asked), the rest ignored.
            (Some(responses), None) => {
                answers.extend(responses.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            (None, _) => {}
        }
        Ok(Self {
            answers,
            asked: Mutex::default(),
            counts: Mutex::default(),
            capabilities,
            lacking: Mutex::default(),
        })
    }

    /// The client's answer to input request `id`, if it gave one.
    pub(crate) fn answer(&self, id: &str) -> Option<&Value> {
        self.answers.get(id)
    }

    /// The ids of the input requests the client answered.
    pub(crate) fn answered(&self) -> impl Iterator<Item = &str> {
        self.answers.keys().map(String::as_str)
    }

    /// The id of the next request of `kind` (`elicit-1`, `elicit-2`, ...): the tool asks in
    /// the same order in every round.
    pub(crate) fn next_id(&self, kind: &'static str) -> String {
        let mut counts = lock(&self.counts);
        let count = counts.entry(kind).or_insert(0);
        *count += 1;
        format!("{kind}-{count}")
    }

    /// Asks the client `request` (as `id`) in this round's `InputRequiredResult`.
    pub(crate) fn ask(&self, id: String, request: InputRequest) {
        lock(&self.asked).insert(id, request);
    }

    /// Whether anything was asked in this round.
    pub(crate) fn asks(&self) -> bool {
        !lock(&self.asked).is_empty()
    }

    /// Whether the client declared form elicitation.
    pub(crate) fn elicits(&self) -> bool {
        self.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    }

    /// Whether the client declared sampling.
    pub(crate) fn samples(&self) -> bool {
        #[allow(deprecated)] // sampling is deprecated by SEP-2577, and still in 2026-07-28
        self.capabilities.sampling.is_some()
    }

    /// Whether the client declared roots.
    pub(crate) fn lists_roots(&self) -> bool {
        self.capabilities.roots.is_some()
    }

    /// Notes that the tool asked for `what` (`elicitation`, `sampling`, `roots`), which the
    /// client did not declare.
    pub(crate) fn lacks(&self, what: &'static str) {
        lock(&self.lacking).insert(what);
    }

    /// The error of a run that failed having asked only for what the client did not declare:
    /// `MissingRequiredClientCapabilityError` (-32021) naming those capabilities, as
    /// 2026-07-28 says a server must answer; `None` if the tool asked for nothing undeclared.
    pub(crate) fn missing_capabilities(&self) -> Option<ErrorData> {
        let lacking = lock(&self.lacking);
        if lacking.is_empty() {
            return None;
        }
        let required: serde_json::Map<String, Value> = lacking
            .iter()
            .map(|what| (what.to_string(), Value::Object(Default::default())))
            .collect();
        let required: ClientCapabilities = serde_json::from_value(Value::Object(required)).ok()?;
        Some(ErrorData::missing_required_client_capability(required))
    }

    /// This round's `InputRequiredResult`: what was asked, and the state (every answer so
    /// far, the ids asked) sealed for `request`.
    pub(crate) fn input_required<R: Retried>(
        &self,
        key: &StateKey,
        request: &R,
    ) -> Result<InputRequiredResult, ErrorData> {
        let asked = std::mem::take(&mut *lock(&self.asked));
        let mut id = [0u8; 16];
        getrandom::fill(&mut id)
            .map_err(|e| ErrorData::internal_error(format!("a requestState id: {e}"), None))?;
        let state = State {
            id: u128::from_le_bytes(id),
            answers: self.answers.clone(),
            asked: asked.keys().cloned().collect(),
        };
        let bound = binding(request);
        let options = SealOptions::new().associated_data(&bound).ttl(STATE_TTL);
        let sealed = key.codec.seal_json_with(&state, &options).map_err(|e| {
            ErrorData::internal_error(format!("sealing the requestState: {e}"), None)
        })?;
        Ok(InputRequiredResult::new(Some(asked), Some(sealed)))
    }
}

/// What a state is bound to: the method, the tool or prompt as asked and a digest of its
/// arguments.
fn binding<R: Retried>(request: &R) -> Vec<u8> {
    let args = serde_json::to_vec(request.arguments()).unwrap_or_default();
    let digest: [u8; 32] = Sha256::digest(&args).into();
    let mut bound = R::METHOD.as_bytes().to_vec();
    bound.push(0);
    bound.extend_from_slice(request.name().as_bytes());
    bound.push(0);
    bound.extend_from_slice(&digest);
    bound
}

/// Whether `answer` has the shape of a result of `method`: an elicitation's says its
/// `action`, a sampling's has `content`, roots' are a `roots` list. One that does not is
/// asked again.
pub(crate) fn fits(method: &str, answer: &Value) -> bool {
    match method {
        "elicitation/create" => {
            matches!(
                answer["action"].as_str(),
                Some("accept" | "decline" | "cancel")
            )
        }
        "sampling/createMessage" => answer["content"].is_object() || answer["content"].is_array(),
        "roots/list" => answer["roots"].is_array(),
        _ => answer.is_object(),
    }
}

/// An input request from its method and params (`elicitation/create`,
/// `sampling/createMessage`).
pub(crate) fn input_request(method: &str, params: Value) -> Result<InputRequest, String> {
    let request = serde_json::json!({"method": method, "params": params});
    serde_json::from_value(request).map_err(|e| format!("{method}: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(args: Value) -> CallToolRequestParams {
        let Value::Object(args) = args else {
            unreachable!()
        };
        CallToolRequestParams::new("noop").with_arguments(args)
    }

    fn elicitation() -> InputRequest {
        let params = json!({"mode": "form", "message": "ok?", "requestedSchema": {"type": "object", "properties": {}}});
        input_request("elicitation/create", params).unwrap()
    }

    #[test]
    fn a_state_carries_the_answers_into_the_retry_of_the_same_call_only() {
        let key = StateKey::random().unwrap();
        let first = call(json!({"city": "Paris"}));
        let round = RoundTrip::begin(&key, &first, ClientCapabilities::default()).unwrap();
        assert!(round.answer(APPROVAL).is_none());
        round.ask(APPROVAL.to_owned(), elicitation());
        assert!(round.asks());
        let result = round.input_required(&key, &first).unwrap();
        let state = result.request_state.clone().unwrap();
        let answer = json!({"action": "accept", "content": {"decision": "once"}});

        let retry = call(json!({"city": "Paris"}))
            .with_input_responses(BTreeMap::from([
                (APPROVAL.to_owned(), answer.clone()),
                ("unasked".to_owned(), json!(1)),
            ]))
            .with_request_state(state.clone());
        let round = RoundTrip::begin(&key, &retry, ClientCapabilities::default()).unwrap();
        assert_eq!(round.answer(APPROVAL), Some(&answer));
        assert_eq!(round.answer("unasked"), None);
        // Used once: the same retry again is refused.
        let again = RoundTrip::begin(&key, &retry, ClientCapabilities::default());
        let error = again.err().expect("a state used twice");
        assert!(error.message.contains("already used"), "{error:?}");

        // The same state on another call, a changed state, another server's key: refused.
        let other = call(json!({"city": "Rome"})).with_request_state(state.clone());
        let mut changed = state.clone();
        changed.insert(changed.len() / 2, 'x');
        let changed = call(json!({"city": "Paris"})).with_request_state(changed);
        let another_key = StateKey::from_token("tok");
        for (key, request) in [(&key, &other), (&key, &changed), (&another_key, &retry)] {
            let refused = RoundTrip::begin(key, request, ClientCapabilities::default());
            let code = refused.err().map(|e| e.code);
            assert_eq!(code, Some(rmcp::model::ErrorCode::INVALID_PARAMS));
        }
    }

    #[test]
    fn keys_from_one_token_open_each_others_states() {
        let (a, b) = (StateKey::from_token("tok"), StateKey::from_token("tok"));
        let request = call(json!({}));
        let round = RoundTrip::begin(&a, &request, ClientCapabilities::default()).unwrap();
        round.ask("elicit-1".to_owned(), elicitation());
        let state = round.input_required(&a, &request).unwrap().request_state;
        let retry = call(json!({})).with_request_state(state.unwrap());
        assert!(RoundTrip::begin(&b, &retry, ClientCapabilities::default()).is_ok());
    }

    #[test]
    fn requests_of_a_kind_are_numbered_in_order() {
        let key = StateKey::random().unwrap();
        let round = RoundTrip::begin(&key, &call(json!({})), ClientCapabilities::default());
        let round = round.unwrap();
        assert_eq!(round.next_id("elicit"), "elicit-1");
        assert_eq!(round.next_id("sample"), "sample-1");
        assert_eq!(round.next_id("elicit"), "elicit-2");
    }

    #[test]
    fn answers_without_a_state_are_taken_by_key_and_a_misfit_answer_is_not_an_answer() {
        let key = StateKey::random().unwrap();
        let accepted = json!({"action": "accept", "content": {"name": "Ada"}});
        let request = call(json!({})).with_input_responses(BTreeMap::from([
            ("user_name".to_owned(), accepted.clone()),
            ("other".to_owned(), json!(12345)),
        ]));
        let round = RoundTrip::begin(&key, &request, ClientCapabilities::default()).unwrap();
        assert_eq!(round.answer("user_name"), Some(&accepted));
        assert!(fits("elicitation/create", &accepted));
        assert!(!fits("elicitation/create", round.answer("other").unwrap()));
        assert!(!fits("roots/list", &json!({"roots": 1})));
        assert!(fits("roots/list", &json!({"roots": []})));
        assert!(fits(
            "sampling/createMessage",
            &json!({"content": {"type": "text"}})
        ));
    }

    #[test]
    fn a_run_that_asked_only_for_undeclared_capabilities_is_minus_32021_naming_them() {
        let key = StateKey::random().unwrap();
        let round = RoundTrip::begin(&key, &call(json!({})), ClientCapabilities::default());
        let round = round.unwrap();
        assert!(round.missing_capabilities().is_none());
        round.lacks("sampling");
        let error = round.missing_capabilities().expect("an error");
        assert_eq!(error.code.0, -32021);
        let data = error.data.expect("data");
        assert!(
            data["requiredCapabilities"]["sampling"].is_object(),
            "{data}"
        );
    }
}
