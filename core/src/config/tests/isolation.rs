//! `isolate` and `[isolation]`: which tools run in a worker process, and its limits.

use super::*;
use crate::layout::{Layer, LayerKind};

fn layer(kind: LayerKind, label: &str) -> Layer {
    Layer {
        kind,
        label: label.to_owned(),
        dir: Path::new("/root").join(label),
    }
}

#[test]
fn selectors_pick_tools_by_name_plugin_layer_or_all() {
    let text = "isolate = [\"shell\", \"plugin:web\", \"core\"]\n";
    let config = load(&root(&[(GLOBAL, text)])).unwrap();
    let usr = layer(LayerKind::User, "usr");
    assert!(config.isolated("shell", &usr));
    assert!(!config.isolated("greet", &usr));
    for web in ["plugins/web", "usr/plugins/web", "plugins/web/agents/dev"] {
        let kind = match web.contains("agents") {
            true => LayerKind::Profile,
            false => LayerKind::Plugin,
        };
        assert!(config.isolated("fetch", &layer(kind, web)), "{web}");
    }
    assert!(!config.isolated("fetch", &layer(LayerKind::Plugin, "plugins/webby")));
    assert!(config.isolated("response", &layer(LayerKind::Core, "core")));

    let all = load(&root(&[(DEV, "isolate = [\"*\"]\n")])).unwrap();
    assert!(all.isolated("anything", &usr));
    let by_layer = load(&root(&[(GLOBAL, "isolate = [\"usr\", \"profile\"]\n")])).unwrap();
    assert!(by_layer.isolated("x", &usr));
    assert!(by_layer.isolated("x", &layer(LayerKind::Profile, "usr/agents/dev")));
    assert!(!by_layer.isolated("x", &layer(LayerKind::Plugin, "plugins/web")));
    assert!(
        !load(&root(&[])).unwrap().isolated("x", &usr),
        "in-process by default"
    );
}

#[test]
fn the_profile_replaces_the_list_and_limits_have_defaults() {
    let global = "isolate = [\"shell\"]\n\n[isolation]\nmemory_mb = 512\n";
    let dev = "isolate = [\"greet\"]\n\n[isolation]\ncpu_seconds = 30\ngrace_ms = 250\n";
    let config = load(&root(&[(GLOBAL, global), (DEV, dev)])).unwrap();
    let usr = layer(LayerKind::User, "usr");
    assert!(config.isolated("greet", &usr));
    assert!(
        !config.isolated("shell", &usr),
        "an array is replaced, not appended to"
    );
    let settings = config.isolation();
    assert_eq!(settings.memory_mb, Some(512));
    assert_eq!(settings.cpu_seconds, Some(30));
    assert_eq!(settings.grace, Duration::from_millis(250));
    assert_eq!(
        load(&root(&[])).unwrap().isolation(),
        crate::config::IsolationSettings::default()
    );
}

#[test]
fn a_sandboxed_worker_is_bounded_by_default_and_grants_raise_or_give_more() {
    use crate::config::sandbox_defaults as default;
    let text = "isolate = [\"*\"]\n\n[isolation]\ncpu_seconds = 30\n\n\
                [sandbox]\ngrant = [\"secret:SHARED\"]\n\n\
                [tools.big]\ngrant = [\"memory:4096\", \"tasks:1000\", \"cpus:2\", \"env:LANGUAGE_MODEL\"]\n\n\
                [tools.loose]\nsandbox = \"off\"\ngrant = [\"secret:OWN\"]\n";
    let config = load(&root(&[(GLOBAL, text)])).unwrap();
    let usr = layer(LayerKind::User, "usr");
    let plain = config.isolation_of(Some("plain"), &usr);
    assert_eq!(plain.memory_mb, Some(default::MEMORY_MB));
    assert_eq!(plain.cpu_seconds, Some(30), "[isolation] over the default");
    assert_eq!(plain.tasks, Some(default::TASKS));
    assert_eq!(plain.cpus, None, "a cap on CPUs at once is asked for");
    assert_eq!(plain.secrets, ["SHARED"]);
    let big = config.isolation_of(Some("big"), &usr);
    assert_eq!((big.memory_mb, big.tasks), (Some(4096), Some(1000)));
    assert_eq!(big.cpus, Some(2));
    assert_eq!(big.env, ["LANGUAGE_MODEL"]);
    // Without a sandbox: no default limits, but secrets only by name all the same.
    let loose = config.isolation_of(Some("loose"), &usr);
    assert!(loose.sandbox.is_none());
    assert_eq!((loose.memory_mb, loose.tasks), (None, None));
    assert_eq!(loose.secrets, ["SHARED", "OWN"]);
}

#[test]
fn mistakes_are_one_line_naming_file_line_and_key() {
    let line = error(&[(GLOBAL, "isolate = [\"plugin:\"]\n")]);
    assert!(line.starts_with("usr/toolhost.toml:1: "), "{line}");
    assert!(line.contains("plugin:<folder>"), "{line}");
    let line = error(&[(DEV, "[isolation]\nmemory_mb = 0\n")]);
    assert!(
        line.starts_with("usr/agents/dev/toolhost.toml:2: [isolation] memory_mb = 0"),
        "{line}"
    );
    let line = error(&[(GLOBAL, "[isolation]\nmemory = 5\n")]);
    assert!(
        line.contains("unknown key `memory` in [isolation]"),
        "{line}"
    );
    assert!(line.contains("memory_mb, cpu_seconds, grace_ms"), "{line}");
}

#[test]
fn grants_add_up_from_the_profile_the_plugin_and_the_tool() {
    let global = "[sandbox]\ngrant = [\"net:udp\"]\n\n[sandbox.plugins.maps]\ngrant = [\"read:/srv/tiles\"]\n\n\
                  [tools.fetch]\ngrant = [\"net:443\", \"write:/var/cache/fetch\"]\n\n[tools.legacy]\nsandbox = \"off\"\n";
    let config = load(&root(&[(GLOBAL, global)])).unwrap();
    let usr = layer(LayerKind::User, "usr");
    let fetch = config.sandbox(Some("fetch"), &usr).unwrap();
    let texts: Vec<String> = fetch.grants.iter().map(|(g, _)| g.to_string()).collect();
    assert_eq!(texts, ["net:udp", "net:443", "write:/var/cache/fetch"]);
    assert_eq!(fetch.grants[1].1, "usr/toolhost.toml:8 [tools.fetch] grant");
    assert!(!fetch.weaker);
    let maps = config
        .sandbox(Some("tile"), &layer(LayerKind::Plugin, "usr/plugins/maps"))
        .unwrap();
    assert_eq!(maps.grants_text(), "net:udp, read:/srv/tiles");
    assert_eq!(
        config.sandbox(Some("legacy"), &usr),
        None,
        "sandbox = \"off\""
    );
    let extension = config.sandbox(None, &usr).unwrap();
    assert_eq!(extension.grants_text(), "net:udp");
    assert!(config.isolate_packages());
    let weaker = load(&root(&[(
        GLOBAL,
        "[sandbox]\nweaker = true\n\n[packages]\nisolate = false\n",
    )]))
    .unwrap();
    assert!(weaker.sandbox(Some("x"), &usr).unwrap().weaker);
    assert!(!weaker.isolate_packages());
}

#[test]
fn a_bad_grant_is_one_line_with_its_file_line_and_key() {
    let cases = [
        (
            "[tools.fetch]\ngrant = [\"net:http\"]\n",
            "usr/toolhost.toml:2: [tools.fetch] grant = \"net:http\": `net:http`: expected a port (1 to 65535) or * after `net:`",
        ),
        (
            "[sandbox]\ngrant = [\"network\"]\n",
            "usr/toolhost.toml:2: [sandbox] grant = \"network\": `network` is not a capability: expected read:/path, write:/path, net:PORT, net:*, net:udp, bind:PORT, bind:*, exec, secret:KEY, env:NAME, memory:MB, cpu:SECONDS, tasks:N or cpus:N",
        ),
        (
            "[tools.fetch]\ngrant = [\"secret:API-KEY\"]\n",
            "usr/toolhost.toml:2: [tools.fetch] grant = \"secret:API-KEY\": `secret:API-KEY`: expected a name of letters, digits and _ after `secret:`",
        ),
        (
            "[tools.fetch]\ngrant = [\"memory:lots\"]\n",
            "usr/toolhost.toml:2: [tools.fetch] grant = \"memory:lots\": `memory:lots`: expected a whole number above 0 after `memory:`",
        ),
        (
            "[sandbox.plugins.maps]\ngrant = [\"read:tiles\"]\n",
            "usr/toolhost.toml:2: [sandbox.plugins.maps] grant = \"read:tiles\": `read:tiles`: expected an absolute path (or ~/...) without . or ..",
        ),
        (
            "[tools.fetch]\nsandbox = \"no\"\n",
            "usr/toolhost.toml:2: [tools.fetch] sandbox = \"no\": expected \"on\" or \"off\"",
        ),
    ];
    for (text, want) in cases {
        let err = load(&root(&[(GLOBAL, text)])).unwrap_err();
        assert_eq!(err.to_string(), want, "{text}");
    }
}
