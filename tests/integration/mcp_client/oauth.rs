//! OAuth 2.1 against a small MCP server behind its own authorization server
//! (`oauth_server.js`, run with the pinned Node): a server that asks to sign in fails with
//! the line that says to log in; `toolhost mcp login` registers the client dynamically, signs
//! in with PKCE through the loopback redirect (fetched, as the server approves at once) and
//! keeps the tokens in a file of mode 0600; once the access token has expired, a call
//! refreshes it with the refresh token; and no token or secret the server issued shows in
//! any output, log line or file of the root but the token file, even one the server echoes in
//! a result.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use toolhost_tests::{peers, TestRoot};

use super::servers;

/// How long the server's access tokens live.
const ACCESS_SECONDS: u64 = 2;

/// The server process, killed when dropped.
struct OAuthServer {
    child: Child,
    url: String,
}

impl OAuthServer {
    fn start(root: &TestRoot) -> Self {
        let script = root.write("oauth_server.js", include_str!("oauth_server.js"));
        let mut child = Command::new(peers::node22())
            .arg(script)
            .arg(root.path().join("issued.txt"))
            .arg(root.path().join("events.txt"))
            .arg(ACCESS_SECONDS.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs the OAuth server");
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        let url = format!("http://127.0.0.1:{}/mcp", port.trim());
        Self { child, url }
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `dir` but the token files, with its text.
fn files(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.ends_with("usr/mcp-tokens") || path.ends_with("issued.txt") {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path.display().to_string(), text));
        }
    }
}

#[test]
fn login_keeps_private_tokens_a_call_refreshes_them_and_none_is_shown() {
    let root = TestRoot::new();
    let server = OAuthServer::start(&root);
    servers(&root, "usr/mcp.json", json!({"notes": {"url": server.url}}));
    let run = |args: &[&str]| {
        let out = Command::new(toolhost_tests::toolhost_bin())
            .arg("--root")
            .arg(root.path())
            .args(args)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "debug")
            .env_remove(toolhost::mcp::oauth::FETCH_ENV)
            .output()
            .expect("running toolhost");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    };
    let mut said = Vec::new();

    // Not signed in: the server fails with the line that says what to do.
    let (ok, before) = run(&["mcp"]);
    assert!(!ok, "{before}");
    assert!(
        before.contains(&format!(
            "notes: failed: {} asks to sign in (OAuth): run `toolhost mcp login notes`",
            server.url
        )),
        "{before}"
    );
    said.push(before);

    let (ok, login) = run(&["mcp", "login", "notes", "--fetch"]);
    assert!(ok, "{login}");
    assert!(
        login.contains(
            "notes: signed in (scopes: notes); the tokens are in usr/mcp-tokens/notes.json (mode 0600)"
        ),
        "{login}"
    );
    said.push(login);
    let file = root.path().join("usr/mcp-tokens/notes.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
    }
    let issued = std::fs::read_to_string(root.path().join("issued.txt")).unwrap();
    let first: Vec<&str> = issued.lines().collect();
    assert_eq!(
        first.len(),
        3,
        "a client secret, an access and a refresh token: {issued}"
    );
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(
        first.iter().all(|t| stored.contains(t)),
        "the file keeps them"
    );

    // The access token expires; the next command refreshes it and the call goes through.
    std::thread::sleep(Duration::from_secs(ACCESS_SECONDS + 1));
    let (ok, called) = run(&["call", "notes.whoami", "--args", "{}"]);
    assert!(ok, "{called}");
    assert!(called.contains("signed in with scope notes"), "{called}");
    said.push(called);
    let events = std::fs::read_to_string(root.path().join("events.txt")).unwrap();
    assert!(
        events.lines().any(|l| l == "refresh_token"),
        "the call refreshed the token: {events}"
    );
    assert_eq!(
        events
            .lines()
            .filter(|l| *l == "authorization_code")
            .count(),
        1,
        "no second sign-in: {events}"
    );
    let stored = std::fs::read_to_string(&file).unwrap();
    let issued = std::fs::read_to_string(root.path().join("issued.txt")).unwrap();
    let all: Vec<&str> = issued.lines().collect();
    assert_eq!(all.len(), 5, "the refresh issued two tokens: {issued}");
    assert!(
        all[3..].iter().all(|t| stored.contains(t)),
        "the file keeps the new tokens"
    );

    // A server that echoes the access token in a result: masked like a secret.
    let (ok, echoed) = run(&["call", "notes.echo_token", "--args", "{}"]);
    assert!(ok, "{echoed}");
    assert!(
        echoed.contains("your token is §§secret(MCP_TOKEN_NOTES_ACCESS)"),
        "{echoed}"
    );
    said.push(echoed);

    // Nothing the server issued shows in any output (debug logs included), the audit, the
    // session or any file of the root but the token file.
    let (ok, listed) = run(&["mcp", "--json"]);
    assert!(ok, "{listed}");
    said.push(listed);
    let mut texts: Vec<(String, String)> = said
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("output {i}"), s))
        .collect();
    files(root.path(), &mut texts);
    assert!(
        texts.iter().any(|(name, _)| name.contains("usr/audit")),
        "the call was audited: {:?}",
        texts.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    for token in &all {
        for (name, text) in &texts {
            assert!(
                !text.contains(token),
                "{name} shows an issued token or secret:\n{text}"
            );
        }
    }
}
