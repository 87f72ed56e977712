//! The arguments a 2026-07-28 client left out of `prompts/get`, asked for in a round.

use super::*;

impl Session {
    /// The arguments a 2026-07-28 client left out of `prompts/get` whose prompt says what to
    /// ask instead: each answered one (in the retry's `inputResponses`) filled into
    /// `request`; the others asked in an `InputRequiredResult`, returned when there are any.
    pub(super) async fn ask_for_arguments(
        &self,
        request: &mut GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<rmcp::model::InputRequiredResult>, ErrorData> {
        let asking = request.clone();
        let questions = self
            .blocking("reading the prompt", move |host, profile| {
                prompts::questions(host, profile, &asking)
            })
            .await?;
        if questions.is_empty() {
            return Ok(None);
        }
        let capabilities = context.client_capabilities().unwrap_or_default();
        let round = RoundTrip::begin(self.state_key(), &*request, capabilities)?;
        let asked = request.clone();
        let mut filled = request.arguments.clone().unwrap_or_default();
        for (name, question) in questions {
            let answer = round
                .answer(&name)
                .filter(|a| round_trip::fits("elicitation/create", a));
            if let Some(value) = answer.and_then(|a| a["content"].get(&name).cloned()) {
                filled.insert(name, value);
                continue;
            }
            if !round.elicits() {
                continue;
            }
            let params = serde_json::json!({
                "mode": "form",
                "message": question,
                "requestedSchema": {
                    "type": "object",
                    "properties": {name.clone(): {"type": "string"}},
                    "required": [name.clone()],
                },
            });
            let input = round_trip::input_request("elicitation/create", params)
                .map_err(|e| ErrorData::internal_error(e, None))?;
            round.ask(name, input);
        }
        if round.asks() {
            return Ok(Some(round.input_required(self.state_key(), &asked)?));
        }
        request.arguments = Some(filled);
        Ok(None)
    }
}
