//! First occurrence wins: profile over user over plugin over core.

use serde_json::json;
use toolhost::LayerKind;
use toolhost_tests::{block_on, Fixture, TestRoot};

fn winner(root: &TestRoot, profile: &str, name: &str) -> (LayerKind, String, String) {
    let host = root.host();
    let found = host
        .resolve(profile, name)
        .found
        .clone()
        .expect("tool found");
    let rel = found
        .path
        .strip_prefix(root.path())
        .unwrap()
        .display()
        .to_string();
    (found.layer.kind, rel, found.handle.package().to_owned())
}

#[test]
fn each_layer_overrides_the_next() {
    let root = TestRoot::new();
    let core = root.tool("core", "t", Fixture::Response);
    let plugin = root.tool("plugins/web", "t", Fixture::Hooked);
    let user = root.tool("usr", "t", Fixture::Echo);
    let profile = root.tool("usr/agents/dev", "t", Fixture::Noop);

    assert_eq!(
        winner(&root, "dev", "t"),
        (
            LayerKind::Profile,
            "usr/agents/dev/tools/t.so".into(),
            "fx-noop".into()
        )
    );
    // Another profile does not see dev's folder.
    assert_eq!(winner(&root, "other", "t").0, LayerKind::User);

    std::fs::remove_file(&profile).unwrap();
    assert_eq!(
        winner(&root, "dev", "t"),
        (LayerKind::User, "usr/tools/t.so".into(), "fx-echo".into())
    );

    std::fs::remove_file(&user).unwrap();
    assert_eq!(
        winner(&root, "dev", "t"),
        (
            LayerKind::Plugin,
            "plugins/web/tools/t.so".into(),
            "fx-hooked".into()
        )
    );

    std::fs::remove_file(&plugin).unwrap();
    assert_eq!(
        winner(&root, "dev", "t"),
        (
            LayerKind::Core,
            "core/tools/t.so".into(),
            "core-response".into()
        )
    );

    std::fs::remove_file(&core).unwrap();
    assert!(root.host().resolve("dev", "t").found.is_none());
}

#[test]
fn the_winning_library_answers_the_call() {
    let root = TestRoot::new();
    root.tool("core", "answer", Fixture::Response);
    root.tool("usr", "answer", Fixture::Echo);
    let (agent, _) = root.agent("default");
    let r = block_on(agent.call_tool("answer", json!({"text": "hi"}))).unwrap();
    // fx-echo echoes its arguments and does not end the loop; core's response would.
    assert_eq!(r.message, r#"{"text":"hi"}"#);
    assert!(!r.break_loop);
}

#[test]
fn profile_folders_are_ordered_user_then_plugin_then_builtin() {
    let root = TestRoot::new();
    root.tool("core/agents/dev", "t", Fixture::Response);
    root.tool("plugins/web/agents/dev", "t", Fixture::Hooked);
    assert_eq!(
        winner(&root, "dev", "t").1,
        "plugins/web/agents/dev/tools/t.so"
    );
    root.tool("usr/agents/dev", "t", Fixture::Echo);
    assert_eq!(winner(&root, "dev", "t").1, "usr/agents/dev/tools/t.so");
    // Every profile folder beats the user's own folder.
    root.tool("usr", "u", Fixture::Echo);
    root.tool("core/agents/dev", "u", Fixture::Noop);
    assert_eq!(winner(&root, "dev", "u").0, LayerKind::Profile);
}

#[test]
fn plugins_are_ordered_by_folder_name_and_user_plugins_hide_builtins() {
    let root = TestRoot::new();
    root.tool("plugins/b_second", "t", Fixture::Echo);
    root.tool("plugins/a_first", "t", Fixture::Noop);
    assert_eq!(
        winner(&root, "default", "t").1,
        "plugins/a_first/tools/t.so"
    );

    // usr/plugins/a_first hides plugins/a_first entirely, even for tools it lacks.
    root.tool("plugins/a_first", "only_builtin", Fixture::Echo);
    root.tool("usr/plugins/a_first", "t", Fixture::Hooked);
    assert_eq!(
        winner(&root, "default", "t").1,
        "usr/plugins/a_first/tools/t.so"
    );
    assert!(root
        .host()
        .resolve("default", "only_builtin")
        .found
        .is_none());
}

#[test]
fn a_toggled_off_plugin_is_ignored() {
    let root = TestRoot::new();
    root.tool("plugins/web", "t", Fixture::Echo);
    // The control: toggled on, the plugin's tool is found.
    assert!(root.host().resolve("default", "t").found.is_some());
    root.write("plugins/web/.toggle-0", "");
    assert!(root.host().resolve("default", "t").found.is_none());
}

#[test]
fn list_shows_winner_layer_and_shadows() {
    let root = TestRoot::new();
    root.tool("core", "response", Fixture::Response);
    root.tool("usr/agents/dev", "response", Fixture::ProfileResponse);
    root.tool("plugins/web", "echo", Fixture::Echo);
    let listing = root.host().list("dev");
    let names: Vec<_> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "response"]);
    let response = &listing.tools[1];
    assert_eq!(response.layer.label, "usr/agents/dev");
    assert_eq!(
        response.shadows,
        vec![root.path().join("core/tools/response.so")]
    );
    assert_eq!(
        response.info().description,
        "Ends the task with a final answer, signed by the agent."
    );
    assert!(listing.tools[0].shadows.is_empty());
    assert!(listing.skipped.is_empty());
}

#[test]
fn one_library_file_is_loaded_once_for_all_profiles() {
    let root = TestRoot::new();
    root.tool("usr", "echo", Fixture::Echo);
    let host = root.host();
    let a = host.resolve("one", "echo").found.clone().unwrap().handle;
    let b = host.resolve("two", "echo").found.clone().unwrap().handle;
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

/// The example plugin's greet and its prompt fragment, as the repository has them.
fn example_plugin(root: &TestRoot) {
    root.tool("plugins/example", "greet", Fixture::Greet);
    let fragment = "prompts/agent.system.tool.greet.md";
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let text = std::fs::read_to_string(workspace.join("plugins/example").join(fragment)).unwrap();
    assert!(text.contains("greet:shout"), "{text}");
    root.write(&format!("plugins/example/{fragment}"), text);
}

#[test]
fn the_prompt_describes_the_tool_that_wins_not_the_one_it_shadows() {
    let root = TestRoot::new();
    example_plugin(&root);
    // Profile p's own greet: another library, without greet's `shout` method.
    root.tool("usr/agents/p", "greet", Fixture::Echo);
    let host = root.host();

    let default = host.tools_prompt("default");
    assert!(default.contains("greet:shout"), "{default}");

    let own = host.tools_prompt("p");
    assert!(
        !own.contains("greet:shout"),
        "the shadowed greet's fragment: {own}"
    );
    let listing = host.catalog("p");
    let greet = listing.tools.iter().find(|t| t.name == "greet").unwrap();
    assert_eq!(greet.package(), "fx-echo");
    let description = greet.info().description.trim().to_owned();
    assert!(!description.is_empty());
    assert!(own.contains(&format!("### greet\n{description}")), "{own}");

    // A fragment of the override's own layer, or of a layer over the tool's, is used.
    root.write(
        "usr/agents/p/prompts/agent.system.tool.greet.md",
        "### greet\nEchoes.",
    );
    root.write(
        "usr/prompts/agent.system.tool.greet.md",
        "### greet\nThe user's words.",
    );
    let host = root.host();
    assert!(host.tools_prompt("p").contains("### greet\nEchoes."));
    let default = host.tools_prompt("default");
    assert!(default.contains("The user's words."), "{default}");
    assert!(!default.contains("greet:shout"), "{default}");
}
