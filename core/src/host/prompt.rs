//! The system prompt: prompt fragments merged across the layers, and the tools section.

use std::collections::{BTreeMap, HashSet};

use super::Host;
use crate::config::Access;
use crate::layout::{prompt_files, read_text, Escaped};
use crate::model::ToolSpec;
use plugin_api::ToolInfo;

/// The file-name prefix of a tool's prompt fragment: `agent.system.tool.<name>.md`.
const TOOL_FRAGMENT: &str = "agent.system.tool.";

impl Host {
    /// The prompt fragments `prompts/agent.system.tool.<name>.md` of every layer, merged by file
    /// name (first occurrence wins) and sorted by file name: `(file name, text)`.
    pub fn prompt_fragments(&self, profile: &str) -> Vec<(String, String)> {
        self.fragments(profile, |file| file.starts_with(TOOL_FRAGMENT))
    }

    /// The parts of the system prompt, in order: the `prompts/agent.system.*.md` fragments
    /// other than the tools' (merged by file name, first occurrence wins, sorted by file name),
    /// then the tools section ([`tools_prompt`](Self::tools_prompt)), then the skills section
    /// when the profile has skills ([`skills_prompt`](Self::skills_prompt)).
    ///
    /// Each part is masked with the current secrets (a fragment, or an MCP server's text, may
    /// hold a value).
    pub fn system_prompt_parts(&self, profile: &str) -> Vec<String> {
        let mut parts: Vec<String> = self
            .fragments(profile, |file| {
                file.starts_with("agent.system.") && !file.starts_with(TOOL_FRAGMENT)
            })
            .into_iter()
            .map(|(_, text)| text.trim().to_owned())
            .collect();
        parts.push(self.tools_prompt(profile).trim().to_owned());
        let skills = self.skills_prompt(profile);
        if !skills.is_empty() {
            parts.push(skills.trim().to_owned());
        }
        let store = self.secret_store();
        parts
            .into_iter()
            .map(|part| store.text(part).into_inner())
            .collect()
    }

    /// The `prompts/*.md` files that `pick` accepts, merged by file name across the layers.
    fn fragments(&self, profile: &str, pick: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        prompt_files(&self.layers(profile), pick)
            .into_iter()
            .filter_map(|(file, path)| Some((file, self.fragment_text(&path)?)))
            .collect()
    }

    /// The text of the prompt fragment `path`, or `None` (with a warning) if it cannot be read.
    fn fragment_text(&self, path: &std::path::Path) -> Option<String> {
        let cap = self.options().max_text_bytes;
        match read_text(path, cap, "HostOptions::max_text_bytes") {
            Ok(text) => Some(text),
            Err(e) => {
                tracing::warn!("skipping prompt {}: {e}", Escaped(path));
                None
            }
        }
    }

    /// The tools section of the system prompt: for each tool, the fragment
    /// `prompts/agent.system.tool.<name>.md` of the first layer from the top down to the layer
    /// of the tool's winning file, else one generated from its description and parameters (a
    /// fragment of a layer the winner shadows describes the shadowed tool, so it is not used);
    /// the fragments of other names as merged across the layers; the
    /// tools of the profile's MCP servers that are ready included (their description and
    /// `inputSchema`). A tool that cannot be called now (denied by the profile's config, not
    /// ready, breaker open) is left out, fragment and all.
    pub fn tools_prompt(&self, profile: &str) -> String {
        let listing = self.catalog(profile);
        let config = self.config(profile).ok();
        let denied = |t: &super::ListedTool| {
            let capabilities = &t.info().capabilities;
            config
                .as_ref()
                .is_some_and(|c| matches!(c.access(&t.name, capabilities), Access::Denied { .. }))
        };
        let unavailable: HashSet<String> = listing
            .tools
            .iter()
            .filter(|t| t.unavailable().is_some() || denied(t))
            .map(|t| format!("{TOOL_FRAGMENT}{}.md", t.name))
            .collect();
        // A tool's own fragment comes from its layer or one that wins over it: a fragment
        // below the winning file describes the tool it shadows (a `greet:shout` the profile's
        // own greet may not have), so the winner is described by its own metadata.
        let layers = self.layers(profile);
        let mut parts: BTreeMap<String, String> = BTreeMap::new();
        for tool in &listing.tools {
            let file = format!("{TOOL_FRAGMENT}{}.md", tool.name);
            if unavailable.contains(&file) {
                continue;
            }
            let upto = layers
                .iter()
                .position(|l| l.dir == tool.layer.dir)
                .map_or(layers.len(), |i| i + 1);
            let text = layers[..upto]
                .iter()
                .map(|layer| layer.prompts_dir().join(&file))
                .find(|path| path.is_file())
                .and_then(|path| self.fragment_text(&path))
                .unwrap_or_else(|| generated_fragment(&tool.name, tool.info()));
            parts.insert(file, text.trim().to_owned());
        }
        // Fragments of names that are no native tool (an MCP tool's, say) are used as found.
        let natives: HashSet<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        let mut covered: HashSet<String> = HashSet::new();
        for (file, text) in self.prompt_fragments(profile) {
            let Some(name) = file
                .strip_prefix(TOOL_FRAGMENT)
                .and_then(|f| f.strip_suffix(".md"))
            else {
                continue;
            };
            if natives.contains(name) || unavailable.contains(&file) {
                continue;
            }
            covered.insert(name.to_owned());
            parts.insert(file, text.trim().to_owned());
        }
        #[cfg(feature = "mcp")]
        for listed in listing.mcp {
            let (name, info) = (listed.tool.name(), listed.tool.info());
            let denied = config.as_ref().is_some_and(|c| {
                matches!(c.access(name, &info.capabilities), Access::Denied { .. })
            });
            if !covered.contains(name) && !denied && listed.tool.unavailable().is_none() {
                let file = format!("{TOOL_FRAGMENT}{name}.md");
                parts.insert(file, generated_fragment(name, info));
            }
        }
        let mut prompt = String::from("## Tools available:\n");
        for text in parts.values() {
            prompt.push('\n');
            prompt.push_str(text);
            prompt.push('\n');
        }
        prompt
    }
}

impl Host {
    /// Every tool the profile sees as a function definition (for models that call tools
    /// natively): its name, description and the JSON Schema of its arguments (an empty object
    /// schema when it declares none). An MCP tool is named `<server>__<tool>` there, since
    /// function names may not hold a `.`; a call by that name finds it. A tool that cannot be
    /// called now (denied by the profile's config, not ready, breaker open) is left out, as
    /// from the [tools prompt](Self::tools_prompt).
    pub fn tool_specs(&self, profile: &str) -> Vec<ToolSpec> {
        let listing = self.catalog(profile);
        let config = self.config(profile).ok();
        let denied = |name: &str, info: &ToolInfo| {
            config.as_ref().is_some_and(|c| {
                matches!(c.access(name, &info.capabilities), Access::Denied { .. })
            })
        };
        let mut specs = Vec::with_capacity(listing.tools.len());
        #[cfg(feature = "mcp")]
        specs.extend(
            listing
                .mcp
                .iter()
                .filter(|m| m.tool.unavailable().is_none() && !denied(m.tool.name(), m.tool.info()))
                .map(|m| spec(m.tool.native_name(), m.tool.info())),
        );
        specs.extend(
            listing
                .tools
                .iter()
                .filter(|t| t.unavailable().is_none() && !denied(&t.name, t.info()))
                .map(|t| spec(t.name.clone(), t.info())),
        );
        specs
    }
}

/// A tool as a function definition.
fn spec(name: String, info: &ToolInfo) -> ToolSpec {
    let parameters = match info.parameters.get("type") {
        Some(kind) if kind == "object" => info.parameters.clone(),
        _ => serde_json::json!({"type": "object", "properties": {}}),
    };
    ToolSpec {
        description: info.description.trim().to_owned(),
        name,
        parameters,
    }
}

fn generated_fragment(name: &str, info: &ToolInfo) -> String {
    let mut text = format!("### {name}\n{}", info.description.trim());
    if info.parameters.get("properties").is_some() {
        text.push_str("\nArguments (JSON Schema): ");
        text.push_str(&info.parameters.to_string());
    }
    text
}
