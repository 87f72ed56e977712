//! Unit tests of the layout: temporary folders, no plugin built.
use super::*;

fn lib(stem: &str) -> String {
    format!("{stem}.{LIBRARY_EXTENSION}")
}

fn tree(paths: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for path in paths {
        let path = dir.path().join(path);
        if path.to_string_lossy().ends_with('/') {
            fs::create_dir_all(&path).unwrap();
        } else {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, b"x").unwrap();
        }
    }
    dir
}

#[test]
fn layers_come_most_specific_first_and_user_plugins_hide_built_ins() {
    let dir = tree(&[
        "usr/plugins/b/",
        "plugins/a/",
        "plugins/b/",
        "plugins/c/.toggle-0",
    ]);
    let labels: Vec<String> = Layout::new(dir.path())
        .layers("p")
        .into_iter()
        .map(|l| format!("{}:{}", l.kind.as_str(), l.label))
        .collect();
    assert_eq!(
        labels,
        [
            "profile:usr/agents/p",
            "profile:usr/plugins/b/agents/p",
            "profile:plugins/a/agents/p",
            "profile:core/agents/p",
            "user:usr",
            "plugin:usr/plugins/b",
            "plugin:plugins/a",
            "core:core",
        ]
    );
}

#[test]
fn every_role_is_recognised() {
    let layout = Layout::new("/r");
    let tool = format!("/r/usr/tools/{}", lib("greet"));
    let extension = format!("/r/core/extensions/tool_execute_after/{}", lib("_10_m"));
    let hidden = format!("/r/usr/tools/{}", lib(".hidden"));
    let loose = format!("/r/usr/{}", lib("x"));
    let role = |p: &'static str| layout.role(Path::new(p));
    assert_eq!(
        layout.role(Path::new(&tool)),
        FileRole::Tool {
            layer: Path::new("/r/usr"),
            name: "greet"
        }
    );
    assert_eq!(
        layout.role(Path::new(&extension)),
        FileRole::Extension {
            layer: Path::new("/r/core"),
            point: "tool_execute_after",
            name: "_10_m"
        }
    );
    assert_eq!(
        role("/r/usr/prompts/agent.system.tool.x.md"),
        FileRole::Prompt
    );
    assert_eq!(role("/r/plugins/x/.toggle-0"), FileRole::Toggle);
    assert_eq!(role("/r/usr/secrets.env"), FileRole::Secrets);
    assert_eq!(
        role("/r/usr/toolhost.toml"),
        FileRole::Config { profile: None }
    );
    assert_eq!(
        role("/r/usr/agents/dev/toolhost.toml"),
        FileRole::Config {
            profile: Some("dev")
        }
    );
    for other in [
        "/r/toolhost.toml",
        "/r/core/toolhost.toml",
        "/r/plugins/a/agents/dev/toolhost.toml",
        "/r/usr/agents/.hidden/toolhost.toml",
        "/r/usr/agents/dev/tools/toolhost.toml",
    ] {
        assert_eq!(role(other), FileRole::Other, "{other}");
    }
    assert_eq!(role("/r/usr/tools/readme.txt"), FileRole::Other);
    for other in [&hidden, &loose] {
        assert_eq!(layout.role(Path::new(other)), FileRole::Other, "{other}");
    }
}

#[test]
fn layer_paths() {
    let layer = Layer {
        kind: LayerKind::User,
        label: "usr".into(),
        dir: PathBuf::from("/r/usr"),
    };
    assert_eq!(
        layer.tool_file("x"),
        Path::new("/r/usr/tools").join(lib("x"))
    );
    assert_eq!(layer.point_dir("p"), Path::new("/r/usr/extensions/p"));
    assert_eq!(layer.prompts_dir(), Path::new("/r/usr/prompts"));
    let layout = Layout::new("/r");
    assert_eq!(layout.sessions_dir(), Path::new("/r/usr/sessions"));
    assert_eq!(layout.config_file(), Path::new("/r/usr/toolhost.toml"));
    assert_eq!(
        layout.profile_config_file("dev"),
        Path::new("/r/usr/agents/dev/toolhost.toml")
    );
}

#[test]
fn watch_targets_cover_existing_layer_folders_and_follow_links() {
    let dir = tree(&[
        "usr/tools/",
        "usr/agents/p/prompts/",
        "plugins/a/extensions/monologue_start/",
        "plugins/a/.toggle-0",
        "target/debug/",
        "usr/.cache/metadata.json",
    ]);
    let root = dir.path();
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        root.join("target/debug").join(lib("libx")),
        root.join("usr/tools").join(lib("x")),
    )
    .unwrap();
    let targets = Layout::new(root).watch_targets();
    for want in [
        "",
        "usr",
        "usr/tools",
        "usr/agents",
        "usr/agents/p",
        "usr/agents/p/prompts",
        "plugins/a",
        "plugins/a/extensions",
        "plugins/a/extensions/monologue_start",
    ] {
        assert!(
            targets.dirs.contains(&root.join(want)),
            "{want} not watched"
        );
    }
    assert!(!targets.dirs.contains(&root.join("target/debug")));
    // The metadata cache's folder holds no plugins: not watched, never a layer.
    assert!(!targets.dirs.contains(&root.join("usr/.cache")));
    let layout = Layout::new(root);
    assert_eq!(
        layout.metadata_cache_file(),
        root.join("usr/.cache/metadata.json")
    );
    assert!(layout
        .layers("default")
        .iter()
        .all(|l| !l.label.contains(".cache")));
    assert!(layout.profiles().iter().all(|p| !p.contains("cache")));
    assert!(
        !targets.dirs.contains(&root.join("usr/prompts")),
        "missing folders are not listed"
    );
    #[cfg(unix)]
    assert_eq!(
        targets.links,
        [(
            root.join("usr/tools").join(lib("x")),
            fs::canonicalize(root.join("target/debug"))
                .unwrap()
                .join(lib("libx"))
        )]
    );
}

#[test]
fn points_and_prompts_merge_by_name() {
    let dir = tree(&[
        "usr/extensions/b/",
        "core/extensions/a/",
        "core/extensions/.hidden/",
        "usr/prompts/agent.system.tool.x.md",
        "core/prompts/agent.system.tool.x.md",
        "core/prompts/agent.system.main.md",
        "core/prompts/notes.txt",
    ]);
    let layers = Layout::new(dir.path()).layers("default");
    assert_eq!(extension_points(&layers), ["a", "b"]);
    let prompts = prompt_files(&layers, |f| f.starts_with("agent.system."));
    let found: Vec<(&str, bool)> = prompts
        .iter()
        .map(|(f, p)| (f.as_str(), p.starts_with(dir.path().join("usr"))))
        .collect();
    assert_eq!(
        found,
        [
            ("agent.system.main.md", false),
            ("agent.system.tool.x.md", true)
        ]
    );
}

#[test]
fn the_line_of_an_offset_counts_from_one_and_a_line_start_is_its_own_line() {
    let text = "a = 1\nb = 2\n\nc";
    assert_eq!(super::line_of(text, 0), 1);
    assert_eq!(super::line_of(text, 5), 1, "the newline ends line 1");
    assert_eq!(
        super::line_of(text, 6),
        2,
        "the start of line 2 (one off before)"
    );
    assert_eq!(super::line_of(text, 12), 3, "an empty line");
    assert_eq!(super::line_of(text, 13), 4);
    assert_eq!(super::line_of(text, 99), 4, "past the end: the last line");
}
