//! `test_audio_content`: returns a short sound, as WAV. A tool of the MCP conformance suite's server
//! (profile `conformance`), written as any author would write it.

use plugin_api::{Args, Content, Context, Response, RiskLevel, Tool, ToolError, ToolInfo};

/// Sixteen samples of 8-bit mono sound at 8 kHz, as WAV.
const BEEP: &[u8] = include_bytes!("../../../resources/beep.wav");

#[derive(Default)]
struct TestAudioContent;

impl Tool for TestAudioContent {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("Returns a short sound, as WAV.").risk(RiskLevel::Read)
    }

    async fn execute(&self, _ctx: &Context, _args: Args) -> Result<Response, ToolError> {
        Ok(Response::text("").with_content(Content::audio(BEEP, "audio/wav")))
    }
}

plugin_api::export_tool!(TestAudioContent);
