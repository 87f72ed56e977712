//! `test_multiple_content_types`: returns text, an image and an embedded resource, in that order. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Content, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

/// A red pixel, as PNG (the resource `test://static-binary` too).
const RED_PIXEL: &[u8] = include_bytes!("../../../resources/red-pixel.png");

#[derive(Default)]
struct TestMultipleContentTypes;

impl Tool for TestMultipleContentTypes {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Returns text, an image and an embedded resource, in that order.")
            .risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        let data = Content::resource_text(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        );
        Ok(Response::text("Multiple content types test:")
            .with_content(Content::image(RED_PIXEL, "image/png"))
            .with_content(data))
    }
}

plugin_api::export_tool!(TestMultipleContentTypes);
