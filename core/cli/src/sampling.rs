//! The model sampling requests go to (a plugin's `Context::sample` outside `serve-mcp`, an MCP
//! server's `sampling/createMessage`): the profile's model in `models.toml`, as `chat` picks
//! it (the one named, else the default, else the only one), its answer bounded by the
//! request's `max_tokens`.

use std::sync::{Arc, Weak};

use toolhost::{Host, SamplingModel, SamplingModels};
use toolhost_openai::{ModelsConfig, OpenAiModel};

/// Reads `models.toml` at each request (a model added while the host runs is used).
struct ModelsToml {
    host: Weak<Host>,
    /// The model named on the command line (`chat --model`), if one was.
    named: Option<String>,
}

impl SamplingModels for ModelsToml {
    fn model(&self, profile: &str, max_tokens: u32) -> Result<SamplingModel, String> {
        let host = self.host.upgrade().ok_or("the host is shutting down")?;
        let models = ModelsConfig::load(host.layout(), profile).map_err(|e| e.to_string())?;
        let mut config = models
            .get(self.named.as_deref())
            .map_err(|e| e.to_string())?
            .clone();
        let asked = u64::from(max_tokens.max(1));
        config.max_tokens = Some(config.max_tokens.map_or(asked, |own| own.min(asked)));
        let name = config.model.clone();
        let model = OpenAiModel::new(config, &host.secrets()).map_err(|e| e.to_string())?;
        Ok(SamplingModel {
            model: Arc::new(model),
            name,
        })
    }
}

/// Lets `host` answer sampling requests with the profile's model (`named`, else the default).
pub(crate) fn set_up(host: &Arc<Host>, named: Option<&str>) {
    host.set_sampling_models(Arc::new(ModelsToml {
        host: Arc::downgrade(host),
        named: named.map(str::to_owned),
    }));
}
