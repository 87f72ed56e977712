//! The host's own agent reads the skills of its layers: a plugin folder's
//! `skills/<name>/SKILL.md` reaches the model in the system prompt (name, description and
//! instructions), shown by `toolhost prompt` and sent by `toolhost chat` to a real
//! OpenAI-compatible server (fakellm).

use toolhost_tests::peers::Fakellm;
use toolhost_tests::{Fixture, TestRoot};

const SKILL: &str = "---\nname: trip\ndescription: Plans a trip day by day\n---\n# How to plan a trip\nOne day per city, museums first.\n";

/// fakellm's rules: the answer says whether the skill's instructions were in the request.
const RULES: &str = r#"
rules:
  - name: skill-seen
    when: {model_matches: "fake-skilled", messages_contain: "One day per city, museums first."}
    respond: {content: '{"thoughts": ["seen"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "The skill reached me."}}'}
  - name: skill-unseen
    when: {model_matches: "fake-skilled"}
    respond: {content: '{"thoughts": ["seen"], "headline": "Answering", "tool_name": "response", "tool_args": {"text": "No skill."}}'}
"#;

#[test]
fn a_plugin_folders_skill_reaches_the_agents_model_in_the_system_prompt() {
    let dir = TestRoot::new();
    let server = Fakellm::start(RULES, dir.path());
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.write(
        "usr/models.toml",
        format!(
            "[models.skilled]\nbase_url = \"{}\"\nmodel = \"fake-skilled\"\n",
            server.url()
        ),
    );
    let chat = |root: &TestRoot| {
        let out = std::process::Command::new(toolhost_tests::toolhost_bin())
            .arg("--root")
            .arg(root.path())
            .args(["chat", "--model", "skilled"])
            .env("NO_COLOR", "1")
            .stdin(std::fs::File::open(root.write("line.txt", "Plan Rome.\n")).unwrap())
            .output()
            .expect("toolhost chat");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(chat(&root), "No skill.\n");

    // A plugin folder (a layer under usr/plugins/) holding the skill.
    root.write("usr/plugins/trips/skills/trip/SKILL.md", SKILL);
    root.write(
        "usr/plugins/trips/skills/trip/notes.md",
        "not in the prompt\n",
    );
    // One whose frontmatter names another skill is left out.
    root.write(
        "usr/plugins/trips/skills/other/SKILL.md",
        "---\nname: trip\ndescription: x\n---\nWRONG\n",
    );
    let prompt = root.run_cli(&["prompt"]);
    let prompt = String::from_utf8_lossy(&prompt.stdout);
    assert!(
        prompt.ends_with("## Skills available:\nFollow a skill's instructions when a task is of its kind.\n\n### trip: Plans a trip day by day\n# How to plan a trip\nOne day per city, museums first.\n"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("WRONG") && !prompt.contains("not in the prompt"),
        "{prompt}"
    );
    assert_eq!(chat(&root), "The skill reached me.\n");
}
