//! `json_schema_2020_12_tool`: tool with JSON Schema 2020-12 features: it says what it was given. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};
use serde_json::{json, Value};

#[derive(Default)]
struct JsonSchema202012Tool;

impl Tool for JsonSchema202012Tool {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Tool with JSON Schema 2020-12 features")
            .risk(RiskLevel::Read)
            .parameters(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {
                            "street": {"type": "string"},
                            "city": {"type": "string"},
                        },
                    },
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"},
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {
                    "properties": {"contactMethod": {"const": "phone"}},
                    "required": ["contactMethod"],
                },
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false,
            }))
    }

    async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
        Ok(Response::text(format!(
            "Received: {}",
            Value::Object(args.into_map())
        )))
    }
}

plugin_api::export_tool!(JsonSchema202012Tool);
