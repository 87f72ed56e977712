//! Writes `Fixture`, the plugin libraries the tests and benchmarks load, from the folders of
//! `tests/fixtures/`: each crate there is a fixture named after its folder (`noop_ext` is
//! `Fixture::NoopExt`), and each of its `cdylib` examples one more, named after the example.
//! Adding a fixture is adding its folder (the workspace's members take `tests/fixtures/*`).
//! The built-in libraries the tests install as a real root has them are listed below.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The built-in crates the tests load: the variant, and the crate's folder in the workspace.
const BUILT_IN: &[(&str, &str)] = &[
    (
        "UnmaskSecrets",
        "core/extensions/tool_execute_before/_10_unmask_secrets",
    ),
    (
        "MaskSecrets",
        "core/extensions/tool_execute_after/_10_mask_secrets",
    ),
    ("Response", "core/tools/response"),
    ("Greet", "plugins/example/tools/greet"),
    (
        "TruncateOutput",
        "plugins/example/agents/example/extensions/tool_execute_after/_50_truncate_output",
    ),
    (
        "ProfileResponse",
        "plugins/example/agents/example/tools/response",
    ),
];

/// The folder of the MCP conformance suite's tools, one crate each: every crate there is a
/// fixture named `Conformance` and its folder in camel case (`test_simple_text` is
/// `Fixture::ConformanceTestSimpleText`), so adding a tool there is adding its folder.
const CONFORMANCE_TOOLS: &str = "plugins/conformance/agents/conformance/tools";

/// One built library.
struct Library {
    variant: String,
    doc: String,
    package: String,
    /// `None` for the package's library, the example's name for an example.
    example: Option<String>,
    /// The file name without platform prefix and suffix (`fx_echo`).
    stem: String,
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let workspace = manifest.parent().expect("the workspace holds tests/");
    let fixtures = manifest.join("fixtures");
    println!("cargo::rerun-if-changed={}", fixtures.display());

    let mut folders: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .unwrap_or_else(|e| panic!("reading {}: {e}", fixtures.display()))
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    folders.sort();

    let mut libraries = Vec::new();
    for folder in &folders {
        let name = folder.file_name().and_then(|n| n.to_str()).expect("UTF-8");
        libraries.extend(crate_libraries(workspace, folder, camel_case(name)));
    }
    let conformance = workspace.join(CONFORMANCE_TOOLS);
    println!("cargo::rerun-if-changed={}", conformance.display());
    let mut tools: Vec<PathBuf> = std::fs::read_dir(&conformance)
        .unwrap_or_else(|e| panic!("reading {}: {e}", conformance.display()))
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    tools.sort();
    for folder in &tools {
        let name = folder.file_name().and_then(|n| n.to_str()).expect("UTF-8");
        let variant = format!("Conformance{}", camel_case(name));
        libraries.extend(crate_libraries(workspace, folder, variant));
    }
    for (variant, dir) in BUILT_IN {
        let folder = workspace.join(dir);
        println!(
            "cargo::rerun-if-changed={}",
            folder.join("Cargo.toml").display()
        );
        libraries.extend(crate_libraries(workspace, &folder, (*variant).to_owned()));
    }
    let mut seen = std::collections::HashSet::new();
    for library in &libraries {
        assert!(
            seen.insert(&library.variant),
            "two fixtures are both named Fixture::{}: rename a folder or an example",
            library.variant
        );
    }

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("fixtures.rs");
    std::fs::write(&out, generate(&libraries))
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}

/// The libraries the crate in `folder` builds: its own, as `variant`, and one per `cdylib`
/// example.
fn crate_libraries(workspace: &Path, folder: &Path, variant: String) -> Vec<Library> {
    let file = folder.join("Cargo.toml");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let manifest: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let package = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or_else(|| panic!("{} names no package", file.display()))
        .to_owned();
    let description = manifest
        .get("package")
        .and_then(|p| p.get("description"))
        .and_then(|d| d.as_str());
    let lib_name = manifest
        .get("lib")
        .and_then(|l| l.get("name"))
        .and_then(|n| n.as_str())
        .map_or_else(|| package.replace('-', "_"), str::to_owned);
    let dir = folder
        .strip_prefix(workspace)
        .unwrap_or(folder)
        .display()
        .to_string();
    let mut doc = format!("`{dir}` (package `{package}`)");
    if let Some(description) = description {
        write!(doc, ": {description}").expect("a String");
    }
    let mut libraries = vec![Library {
        variant,
        doc,
        package: package.clone(),
        example: None,
        stem: lib_name,
    }];
    let examples = manifest.get("example").and_then(|e| e.as_array());
    for example in examples.into_iter().flatten() {
        let cdylib = example
            .get("crate-type")
            .and_then(|t| t.as_array())
            .is_some_and(|types| types.iter().any(|t| t.as_str() == Some("cdylib")));
        let Some(name) = example.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        if !cdylib {
            continue;
        }
        libraries.push(Library {
            variant: camel_case(name),
            doc: format!(
                "`{dir}/examples/{name}.rs`, an example of package `{package}`: {}",
                leading_doc(&folder.join("examples").join(format!("{name}.rs")))
            ),
            package: package.clone(),
            example: Some(name.to_owned()),
            stem: name.replace('-', "_"),
        });
    }
    libraries
}

/// The `//!` lines that open `file`, as one line.
fn leading_doc(file: &Path) -> String {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    text.lines()
        .map_while(|line| line.strip_prefix("//!"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `not_a_plugin` -> `NotAPlugin`, `versioned_v2` -> `VersionedV2`.
fn camel_case(name: &str) -> String {
    name.split(['_', '-'])
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect()
}

fn generate(libraries: &[Library]) -> String {
    let mut code = String::from(
        "/// A plugin library built from this workspace: each crate of `tests/fixtures/` (named\n\
         /// after its folder, its `cdylib` examples after themselves) and the built-in libraries\n\
         /// the tests install. Written by `tests/build.rs` from those folders.\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq)]\n\
         pub enum Fixture {\n",
    );
    for library in libraries {
        let doc = library.doc.replace('\n', " ");
        writeln!(code, "    /// {doc}\n    {},", library.variant).expect("a String");
    }
    code.push_str("}\n\nimpl Fixture {\n    /// Every fixture.\n");
    writeln!(
        code,
        "    pub const ALL: [Fixture; {}] = [",
        libraries.len()
    )
    .expect("a String");
    for library in libraries {
        writeln!(code, "        Self::{},", library.variant).expect("a String");
    }
    code.push_str(
        "    ];\n\n    /// The cargo package that builds it.\n    \
         pub fn package(self) -> &'static str {\n        match self {\n",
    );
    for library in libraries {
        writeln!(
            code,
            "            Self::{} => {:?},",
            library.variant, library.package
        )
        .expect("a String");
    }
    code.push_str(
        "        }\n    }\n\n    /// The example of its package that builds it, if an example does.\n    \
         pub fn example(self) -> Option<&'static str> {\n        match self {\n",
    );
    for library in libraries {
        writeln!(
            code,
            "            Self::{} => {:?},",
            library.variant, library.example
        )
        .expect("a String");
    }
    code.push_str(
        "        }\n    }\n\n    /// The built file's name without the platform's prefix and suffix.\n    \
         fn stem(self) -> &'static str {\n        match self {\n",
    );
    for library in libraries {
        writeln!(
            code,
            "            Self::{} => {:?},",
            library.variant, library.stem
        )
        .expect("a String");
    }
    code.push_str("        }\n    }\n}\n");
    code
}
