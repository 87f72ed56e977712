//! `test_image_content`: returns an image: a red pixel, as PNG. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Content, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

/// A red pixel, as PNG (the resource `test://static-binary` too).
const RED_PIXEL: &[u8] = include_bytes!("../../../resources/red-pixel.png");

#[derive(Default)]
struct TestImageContent;

impl Tool for TestImageContent {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Returns an image: a red pixel, as PNG.").risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Ok(Response::text("").with_content(Content::image(RED_PIXEL, "image/png")))
    }
}

plugin_api::export_tool!(TestImageContent);
