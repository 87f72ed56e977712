//! `test_elicitation_sep1330_enums`: asks the user to choose, in each of the five enum forms (SEP-1330). A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::json;

#[derive(Default)]
struct TestElicitationSep1330Enums;

impl Tool for TestElicitationSep1330Enums {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Asks the user to choose, in each of the five enum forms (SEP-1330).")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]},
                },
            },
        });
        let answer = ctx.elicit("Please choose", schema).await?;
        Ok(Response::text(format!(
            "Elicitation completed: action={}, content={}",
            json!(answer.action),
            json!(answer.content)
        )))
    }
}

plugin_api::export_tool!(TestElicitationSep1330Enums);
