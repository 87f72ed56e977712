//! The book in `docs/` and the README: the book builds with the pinned mdbook, every relative
//! link and anchor resolves, every code block says its language, every Rust block is compiled
//! (as a doctest, or as the test it is a copy of), and the command-line page is what clap says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use toolhost_tests::{build_dir, peers, toolhost_bin};

/// The languages a code block may declare: Rust is compiled, the rest is shown as written.
const LANGUAGES: &[&str] = &["rust", "text", "sh", "toml", "json"];

/// The files whose Rust blocks are doctests of `toolhost-tests` (tests/src/lib.rs, `docs`).
const DOCTESTS: &str = include_str!("../src/lib.rs");

/// The page generated from clap, and the variable that rewrites it.
const CLI_PAGE: &str = "docs/src/reference/cli.md";
const BLESS: &str = "TOOLHOST_BLESS";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_owned()
}

/// The Markdown files checked, relative to the workspace: the README, the benchmarks, the
/// user layer's README and every page under docs/src.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "BENCHMARKS.md", "usr/README.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut stack = vec![workspace().join("docs/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path.strip_prefix(workspace()).unwrap().to_owned());
            }
        }
    }
    files.sort();
    files
}

/// What one Markdown file holds that the checks look at.
#[derive(Default)]
struct Page {
    /// Link destinations, with the line each is on.
    links: Vec<(usize, String)>,
    /// The anchors of its headings, as mdbook and GitHub make them.
    anchors: BTreeSet<String>,
    /// Fenced code blocks: the line, the info string, the text.
    blocks: Vec<(usize, String, String)>,
}

/// A heading's anchor: lower case, letters, digits, `-` and `_` kept, spaces made `-`,
/// everything else dropped (mdbook's `normalize_id`, which GitHub's matches for these pages).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

fn read_page(file: &Path) -> Page {
    let text = std::fs::read_to_string(workspace().join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut page = Page::default();
    let mut heading: Option<String> = None;
    let mut block: Option<(usize, String, String)> = None;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                let id = anchor(&heading.take().unwrap_or_default());
                // A repeated heading gets `-1`, `-2`, ... as in mdbook and on GitHub.
                let n = seen.entry(id.clone()).or_insert(0);
                let id = if *n == 0 { id } else { format!("{id}-{n}") };
                *n += 1;
                page.anchors.insert(id);
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                if let Some((_, _, body)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                page.links
                    .push((line_of(range.start), dest_url.to_string()));
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                block = Some((line_of(range.start), info.to_string(), String::new()));
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)) => {
                block = Some((line_of(range.start), "(indented)".into(), String::new()));
            }
            Event::End(TagEnd::CodeBlock) => page.blocks.extend(block.take()),
            _ => {}
        }
    }
    page
}

/// `path` relative to the workspace with `.` and `..` resolved, or `None` if it leaves it.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every broken relative link of `files`, one line each (`file:line: why`).
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let pages: BTreeMap<PathBuf, Page> = files.iter().map(|f| (f.clone(), read_page(f))).collect();
    let mut broken = Vec::new();
    for (file, page) in &pages {
        for (line, dest) in &page.links {
            let at = format!("{}:{line}: {dest}", file.display());
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue; // not relative: no network in the tests
            }
            let (path, fragment) = match dest.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (dest.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                match normalize(&file.parent().unwrap().join(path)) {
                    Some(t) => t,
                    None => {
                        broken.push(format!("{at}: leaves the repository"));
                        continue;
                    }
                }
            };
            if !workspace().join(&target).exists() {
                broken.push(format!("{at}: no such file {}", target.display()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            let anchors = match pages.get(&target) {
                Some(p) => &p.anchors,
                None if target.extension().is_some_and(|e| e == "md") => {
                    &read_page(&target).anchors.clone()
                }
                None => {
                    broken.push(format!("{at}: an anchor into a file that is not Markdown"));
                    continue;
                }
            };
            if !anchors.contains(fragment) {
                broken.push(format!(
                    "{at}: {} has no heading #{fragment} (it has: {})",
                    target.display(),
                    anchors.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    broken
}

#[test]
fn the_anchor_of_a_heading_is_mdbooks() {
    assert_eq!(anchor("Two commands"), "two-commands");
    assert_eq!(
        anchor("Configuration: toolhost.toml"),
        "configuration-toolhosttoml"
    );
    assert_eq!(
        anchor("Isolated plugins (2026-12-01)"),
        "isolated-plugins-2026-12-01"
    );
    assert_eq!(
        anchor("The agent's `message_loop`"),
        "the-agents-message_loop"
    );
}

#[test]
fn the_checker_finds_a_broken_link_and_a_broken_anchor() {
    let dir = workspace().join("target").join("book-check-self-test");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.md"),
        "# Top\n\n[ok](b.md#there) [no file](c.md) [no anchor](b.md#nowhere) [self](#top)\n",
    )
    .unwrap();
    std::fs::write(dir.join("b.md"), "# There\n").unwrap();
    let rel = dir.strip_prefix(workspace()).unwrap().to_owned();
    let broken = broken_links(&[rel.join("a.md"), rel.join("b.md")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(broken.len(), 2, "{broken:#?}");
    assert!(broken[0].contains("c.md: no such file"), "{}", broken[0]);
    assert!(
        broken[1].contains("has no heading #nowhere"),
        "{}",
        broken[1]
    );
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let files = markdown_files();
    assert!(files.len() > 15, "{files:?}");
    let broken = broken_links(&files);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_in_the_summary() {
    let summary = read_page(Path::new("docs/src/SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = summary
        .links
        .iter()
        .map(|(_, l)| Path::new("docs/src").join(l))
        .collect();
    for file in markdown_files() {
        if file.starts_with("docs/src") && !file.ends_with("SUMMARY.md") {
            assert!(
                listed.contains(&file),
                "{} is not in SUMMARY.md",
                file.display()
            );
        }
    }
}

/// Every block says its language; every Rust block is compiled: a page with ```rust blocks
/// is a doctest of toolhost-tests, and each ```rust,ignore block is a copy of one of greet's
/// tests (which compile and run).
#[test]
fn every_rust_block_is_compiled() {
    let greet = workspace().join("plugins/example/tools/greet");
    let sources = ["src/tests.rs", "tests/loaded.rs"]
        .map(|f| std::fs::read_to_string(greet.join(f)).unwrap())
        .join("\n");
    let lines = |text: &str| -> Vec<String> { text.lines().map(|l| l.trim().to_owned()).collect() };
    let source_lines = lines(&sources);
    let mut copies = 0;
    for file in markdown_files() {
        let page = read_page(&file);
        for (line, info, body) in &page.blocks {
            let at = format!("{}:{line}", file.display());
            let language = info.split(',').next().unwrap_or("").trim();
            assert!(
                LANGUAGES.contains(&language),
                "{at}: a code block in `{info}`: give it one of {LANGUAGES:?} (rustdoc compiles \
                 a block without one as Rust)"
            );
            if language != "rust" {
                continue;
            }
            if info == "rust,ignore" {
                let wanted = lines(body.trim_end());
                let found = source_lines
                    .windows(wanted.len())
                    .any(|window| window == wanted.as_slice());
                assert!(found, "{at}: this block is not in greet's tests:\n{body}");
                copies += 1;
            } else {
                assert_eq!(
                    info, "rust",
                    "{at}: only `rust` and `rust,ignore` are checked"
                );
                let include = format!("include_str!(\"../../{}\")", file.display());
                assert!(
                    DOCTESTS.contains(&include),
                    "{at}: a Rust block in a page that is not a doctest: add \
                     `#[doc = {include}]` to `docs` in tests/src/lib.rs"
                );
            }
        }
    }
    assert!(copies >= 2, "the testing guide's blocks were not found");
}

/// One command's `--help`, and those of its subcommands, as Markdown sections.
fn help_sections(path: &[&str], out: &mut String) {
    let help = Command::new(toolhost_bin())
        .args(path)
        .arg("--help")
        .env_remove("TOOLHOST_ROOT")
        .env("NO_COLOR", "1")
        .output()
        .expect("running toolhost --help");
    assert!(help.status.success(), "toolhost {path:?} --help failed");
    let text = String::from_utf8(help.stdout).expect("UTF-8 help");
    let name = std::iter::once("toolhost")
        .chain(path.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    out.push_str(&format!(
        "\n## {name}\n\n```text\n{}\n```\n",
        text.trim_end()
    ));
    // The lines under `Commands:`, up to the blank line: `  name  what it does`.
    let commands: Vec<String> = text
        .split("\nCommands:\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .take_while(|l| !l.trim().is_empty())
                .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
                .filter(|c| c != "help")
                .collect()
        })
        .unwrap_or_default();
    for command in &commands {
        let mut sub = path.to_vec();
        sub.push(command);
        help_sections(&sub, out);
    }
}

fn cli_page() -> String {
    let mut page = format!(
        "# Every command's help\n\n<!-- Generated from clap by tests/integration/book.rs; do not \
         edit. To regenerate: {BLESS}=1 cargo test -p toolhost-tests --test integration book:: -->\n\n\
         The `--help` of `toolhost` and of each of its commands. The conventions they share \
         (exit codes, profiles, output) are on [the command line](command-line.md).\n"
    );
    help_sections(&[], &mut page);
    page
}

#[test]
fn the_command_line_page_is_clap_s_help() {
    let page = cli_page();
    for command in [
        "## toolhost list",
        "## toolhost audit verify",
        "## toolhost man",
    ] {
        assert!(page.contains(command), "no {command} in:\n{page}");
    }
    let file = workspace().join(CLI_PAGE);
    if std::env::var_os(BLESS).is_some() {
        std::fs::write(&file, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    let first_difference = committed
        .lines()
        .zip(page.lines())
        .position(|(a, b)| a != b)
        .map_or_else(String::new, |i| {
            let line = page.lines().nth(i).unwrap_or_default();
            format!(" (line {}: now `{line}`)", i + 1)
        });
    assert!(
        committed == page,
        "{CLI_PAGE} is not what `toolhost --help` says now{first_difference}: run \
         `{BLESS}=1 cargo test -p toolhost-tests --test integration book::` and commit it"
    );
}

#[test]
fn the_book_builds() {
    let mdbook = peers::mdbook();
    let dest = build_dir().parent().expect("target").join("book");
    let _ = std::fs::remove_dir_all(&dest);
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(workspace().join("docs"))
        .arg("--dest-dir")
        .arg(&dest)
        .output()
        .expect("running mdbook");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mdbook build failed:\n{log}");
    let problems: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    assert!(
        problems.is_empty(),
        "mdbook warned:\n{}",
        problems.join("\n")
    );
    // Every page of the summary became a page of the book.
    let summary = read_page(Path::new("docs/src/SUMMARY.md"));
    for (_, link) in &summary.links {
        let html = dest.join(link.replace(".md", ".html"));
        assert!(html.is_file(), "no {}", html.display());
    }
    let index = std::fs::read_to_string(dest.join("print.html")).unwrap();
    assert!(index.contains("Governance and the audit"), "print.html");
}

/// The architecture page's map of core/src names every folder and top-level file there is,
/// and nothing that is not there.
#[test]
fn the_architecture_page_maps_the_real_tree() {
    let map = architecture_map();
    let map = map.as_str();
    // The entries at the start of a line: `name/` or `name.rs` (top level), `  name/` (nested).
    let listed: BTreeSet<String> = map
        .lines()
        .filter(|l| !l.starts_with("    "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.ends_with('/') || w.ends_with(".rs"))
        .map(|w| w.trim_end_matches('/').to_owned())
        .collect();
    let src = workspace().join("core/src");
    let mut present = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            // Its folders are named in the map too (`call/`, or `catalog/` inside a line).
            for sub in std::fs::read_dir(&path).unwrap() {
                let sub = sub.unwrap().path();
                let sub_name = sub.file_name().unwrap().to_string_lossy().into_owned();
                if sub.is_dir() && sub_name != "tests" {
                    assert!(
                        map.contains(&format!("{sub_name}/")),
                        "core/src/{name}/{sub_name}/ is not on the architecture page"
                    );
                }
            }
            present.insert(name);
        } else if name.ends_with(".rs") {
            present.insert(name);
        }
    }
    let nested: BTreeSet<String> = listed.difference(&present).cloned().collect();
    for entry in &nested {
        assert!(
            map.lines().any(|l| l.starts_with(&format!("  {entry}/"))),
            "the architecture page lists {entry}, which core/src does not have"
        );
    }
    let missing: Vec<&String> = present.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "not on the architecture page: {missing:?}"
    );
}

/// The architecture page's map of core/src: the ```text block under "The host: core/src".
fn architecture_map() -> String {
    let page =
        std::fs::read_to_string(workspace().join("docs/src/reference/architecture.md")).unwrap();
    page.split("## The host: core/src")
        .nth(1)
        .and_then(|rest| rest.split("```text\n").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("a ```text block under \"The host: core/src\"")
        .to_owned()
}

/// The top-level entries of the architecture page's map of core/src, in its order (lib.rs
/// left out): `layout`, `sync`, ...
fn architecture_order() -> Vec<String> {
    architecture_map()
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches('/').trim_end_matches(".rs").to_owned())
        .filter(|name| name != "lib")
        .collect()
}

/// The names `crate::` is followed by in `code`: `crate::a::b` gives `a`, `crate::{a, b::c}`
/// gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            names.push(ident(rest));
            continue;
        };
        let (mut depth, mut start) = (0usize, 0usize);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    names.push(ident(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(ident(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Every module of core/src imports only modules the architecture page lists above it, so
/// there is no import circle between modules (an item re-exported by lib.rs counts as its
/// module's). Tests are left out: they may reach anything.
#[test]
fn the_modules_of_core_import_only_those_above_them_on_the_architecture_page() {
    let order = architecture_order();
    let position = |name: &str| order.iter().position(|m| m == name);
    let src = workspace().join("core/src");
    // lib.rs's re-exports: `pub use host::{Host, ...};` makes `crate::Host` mean host.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut reexported: BTreeMap<String, String> = BTreeMap::new();
    for statement in lib.split("pub use ").skip(1) {
        let statement = statement.split(';').next().unwrap_or_default();
        let module = statement.split("::").next().unwrap_or_default().trim();
        if position(module).is_none() {
            continue;
        }
        let items = statement.rsplit("::").next().unwrap_or_default();
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.split(" as ").last().unwrap_or_default().trim();
            reexported.insert(item.to_owned(), module.to_owned());
        }
    }
    let mut wrong = Vec::new();
    for module in &order {
        let (dir, file) = (src.join(module), src.join(format!("{module}.rs")));
        let files: Vec<PathBuf> = if dir.is_dir() {
            walk_rs(&dir)
        } else if file.is_file() {
            vec![file]
        } else {
            continue; // the_architecture_page_maps_the_real_tree says so
        };
        for path in files {
            let relative = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let is_test =
                relative.split('/').any(|part| part == "tests") || relative.ends_with("tests.rs");
            if is_test {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            for name in crate_paths(&code) {
                let target = match position(&name) {
                    Some(_) => name,
                    None => match reexported.get(&name) {
                        Some(module) => module.clone(),
                        None => continue, // an item of lib.rs itself
                    },
                };
                if &target != module && position(&target) > position(module) {
                    wrong.push(format!("core/src/{relative} imports crate::{target}"));
                }
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against the order of docs/src/reference/architecture.md (a module may \
         import only those above it; move the item down, or the module's entry):\n{}",
        wrong.join("\n")
    );
}

/// The `.rs` files under `dir`, at any depth.
fn walk_rs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk_rs(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// typed-tools.md's `weather`, built as the crate it says it is: with no warning, and loaded by
/// the host, it refuses a misspelled argument (and bad arguments before it says it is not
/// ready).
#[test]
fn the_typed_tools_weather_example_builds_without_warnings_and_refuses_unknown_fields() {
    if !cfg!(unix) {
        return; // the layer's link is a symbolic link
    }
    let page = read_page(Path::new("docs/src/guide/typed-tools.md"));
    let source = page
        .blocks
        .iter()
        .find(|(_, info, body)| info == "rust" && body.contains("struct Weather;"))
        .map(|(_, _, body)| body.clone())
        .expect("typed-tools.md has the weather block");
    let root = toolhost_tests::TestRoot::new();
    let dir = root.path().join("usr/tools/weather");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), source).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"weather\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [workspace]\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n\
             plugin-api = {{ path = {:?} }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\
             schemars = \"1\"\n",
            workspace().join("plugin-api").display().to_string()
        ),
    )
    .unwrap();
    let shared = toolhost_tests::build_dir().parent().unwrap().to_owned();
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("build")
        .current_dir(&dir)
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_BUILD_BUILD_DIR", &shared)
        .env("CARGO_BUILD_JOBS", "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        !said.contains("warning"),
        "the example builds with warnings: {said}"
    );
    std::os::unix::fs::symlink(
        dir.join("target/debug/libweather.so"),
        root.path().join("usr/tools/weather.so"),
    )
    .unwrap();
    let call = |args: &str, key: bool| {
        let mut command = Command::new(toolhost_bin());
        command
            .arg("--root")
            .arg(root.path())
            .args(["call", "weather", "--args", args])
            .env("NO_COLOR", "1");
        match key {
            true => command.env("WEATHER_API_KEY", "k"),
            false => command.env_remove("WEATHER_API_KEY"),
        };
        let out = command.output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, said) = call(r#"{"city": "Oslo", "units": "imperial"}"#, true);
    assert!(
        ok && said.contains("Sunny in Oslo, temperatures in °F"),
        "{said}"
    );
    let (ok, said) = call(r#"{"city": "Oslo", "unit": "imperial"}"#, true);
    assert!(!ok && said.contains("unknown argument \"unit\""), "{said}");
    let (ok, said) = call(r#"{"city": "Oslo", "unit": "imperial"}"#, false);
    assert!(
        !ok && said.contains("unknown argument \"unit\"") && !said.contains("not ready"),
        "{said}"
    );
    let (ok, said) = call(r#"{"city": "Oslo"}"#, false);
    assert!(
        !ok && said.contains("not ready: WEATHER_API_KEY not configured"),
        "{said}"
    );
}

/// Every `*.rs` file the architecture page names (in the repository's map and in core/src's)
/// is where the page puts it: in the folder of the entry it is named under, or, when named
/// with a path (`tests/src/fake_llm.rs`), at that path.
#[test]
fn the_architecture_page_names_only_files_that_are_where_it_says() {
    let page =
        std::fs::read_to_string(workspace().join("docs/src/reference/architecture.md")).unwrap();
    let root = workspace();
    let mut wrong = Vec::new();
    for (heading, base) in [
        ("## The repository", root.clone()),
        ("## The host: core/src", root.join("core/src")),
    ] {
        let block = page
            .split(heading)
            .nth(1)
            .and_then(|rest| rest.split("```text\n").nth(1))
            .and_then(|block| block.split("```").next())
            .unwrap_or_else(|| panic!("a ```text block under {heading:?}"));
        wrong.extend(misplaced_files(block, &base, &root));
    }
    assert!(
        wrong.is_empty(),
        "the architecture page names files that are not there: {wrong:?}"
    );
}

/// The `*.rs` names of a map `block` that are not under the folder of their entry (a line
/// `name/` at the start sets it from `base`, `  name/` from the last top-level entry).
fn misplaced_files(block: &str, base: &Path, root: &Path) -> Vec<String> {
    let mut top = base.to_owned();
    let mut folder = base.to_owned();
    let mut wrong = Vec::new();
    for line in block.lines() {
        let entry = line.split_whitespace().next().unwrap_or("");
        if !line.starts_with(' ') && entry.ends_with('/') {
            top = base.join(entry);
            folder = top.clone();
        } else if !line.starts_with(' ') {
            folder = base.to_owned();
            top = folder.clone();
        } else if line.starts_with("  ") && !line.starts_with("   ") && entry.ends_with('/') {
            folder = top.join(entry);
        }
        let words = line.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c)));
        for word in words.filter(|w| w.ends_with(".rs") && w.len() > 3) {
            let there = match word.contains('/') {
                true => {
                    root.join(word).is_file()
                        || folder.join(word).is_file()
                        || has_file(&folder, word)
                }
                false => has_file(&folder, word),
            };
            if !there {
                wrong.push(format!("{word} (under {})", folder.display()));
            }
        }
    }
    wrong
}

/// Whether a file whose path ends with `name` is in `dir` or below it (build output and
/// hidden folders left out).
fn has_file(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        let file = e.file_name();
        let file = file.to_string_lossy();
        if file == "target" || file.starts_with('.') || file == "node_modules" {
            return false;
        }
        match path.is_dir() {
            true => has_file(&path, name),
            false => path.to_string_lossy().ends_with(&format!("/{name}")),
        }
    })
}

/// Every file a module header of core/src names in backticks (`` `lifecycle.rs` ``,
/// `` `call/audit.rs` ``) is a file of the workspace: a header does not name a file by an old
/// path.
#[test]
fn the_module_headers_of_core_name_only_files_there_are() {
    let root = workspace();
    let mut wrong = Vec::new();
    for file in walk_rs(&root.join("core/src")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        for (i, quoted) in header.split('`').enumerate() {
            let named = i % 2 == 1 && quoted.ends_with(".rs") && !quoted.contains(' ');
            let dir = file.parent().unwrap();
            if named && !has_file(dir, quoted) && !has_file(&root, quoted) {
                wrong.push(format!(
                    "{}: {quoted}",
                    file.strip_prefix(&root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "module headers name files that are not there: {wrong:?}"
    );
}

/// Every crate's docs build, their private items too, with no broken intra-doc link (the
/// workspace's lints deny one, Cargo.toml `[workspace.lints.rustdoc]`). On one core: the other
/// tests keep running beside it.
#[test]
fn every_crate_s_docs_build_with_their_private_items() {
    let args = [
        "doc",
        "--workspace",
        "--no-deps",
        "--document-private-items",
        "--quiet",
    ];
    let out = toolhost_tests::cargo_command()
        .current_dir(workspace())
        .args(args)
        .env("CARGO_BUILD_JOBS", "1")
        .output()
        .expect("running cargo doc");
    assert!(
        out.status.success(),
        "cargo {}:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
