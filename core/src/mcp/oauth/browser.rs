//! The browser step of a sign-in: a listener on a loopback address (`127.0.0.1`, a port the
//! system picks) that takes the authorization server's redirect with the code, and the way
//! the authorization URL reaches a browser.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The environment variable that makes every sign-in fetch the authorization URL itself
/// ([`BrowserStep::Fetch`]): for headless machines whose authorization server approves
/// without a person, and for tests. It also lets a command other than `login` sign in when
/// a server asks (a step-up to more scopes in the middle of a `call`).
pub const FETCH_ENV: &str = "TOOLHOST_MCP_LOGIN_FETCH";

/// How long a sign-in waits for the browser to come back.
pub const WAIT: Duration = Duration::from_secs(300);

/// How the authorization URL reaches a browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowserStep {
    /// Printed on standard error and opened in the desktop's browser (`xdg-open`, `open`).
    Open,
    /// Printed only: the person opens it (on this machine, since the redirect comes back to
    /// its loopback address).
    Print,
    /// Fetched with a plain GET that follows the redirects to the loopback listener: for an
    /// authorization server that approves without a person (headless use, tests).
    Fetch,
}

impl BrowserStep {
    /// [`Fetch`](Self::Fetch) when [`FETCH_ENV`] is `1`, else `None`: a command that is not
    /// `login` cannot ask a person to sign in.
    pub fn from_env() -> Option<Self> {
        match std::env::var(FETCH_ENV).as_deref() {
            Ok("1") => Some(Self::Fetch),
            _ => None,
        }
    }
}

/// The loopback listener of one sign-in.
pub(crate) struct Loopback {
    listener: TcpListener,
    /// `http://127.0.0.1:PORT/callback`.
    pub(crate) redirect_uri: String,
}

impl Loopback {
    pub(crate) async fn bind() -> Result<Self, String> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1 for the sign-in's redirect: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        Ok(Self {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// Sends `url` to the browser as `step` says, then waits (at most [`WAIT`]) for the
    /// redirect to `/callback`; the redirect's full URL (its query has the code and state).
    pub(crate) async fn complete(
        self,
        server: &str,
        url: &str,
        step: BrowserStep,
    ) -> Result<String, String> {
        // The redirect must carry the `state` the authorization URL sends.
        let state = query_value(url, "state");
        let waited = async {
            match tokio::time::timeout(WAIT, self.callback(state.as_deref())).await {
                Ok(found) => found,
                Err(_) => Err(format!(
                    "no sign-in came back within {} s (the browser is sent to {})",
                    WAIT.as_secs(),
                    self.redirect_uri
                )),
            }
        };
        match step {
            BrowserStep::Open | BrowserStep::Print => {
                eprintln!(
                    "To sign in to MCP server '{server}', open this URL in a browser on this machine:\n  {url}"
                );
                if step == BrowserStep::Open {
                    open(url);
                }
                waited.await
            }
            BrowserStep::Fetch => {
                let fetch = async {
                    let client = reqwest::Client::builder()
                        .tcp_nodelay(true)
                        .redirect(reqwest::redirect::Policy::limited(10))
                        .build()
                        .map_err(|e| e.to_string())?;
                    let answer = client
                        .get(url)
                        .send()
                        .await
                        .map_err(|e| format!("fetching the authorization URL failed: {e}"))?;
                    Ok::<_, String>(answer.status())
                };
                tokio::pin!(waited);
                let fetched = tokio::select! {
                    found = &mut waited => return found,
                    fetched = fetch => fetched,
                };
                let status = fetched?;
                match tokio::time::timeout(Duration::from_secs(2), waited).await {
                    Ok(found) => found,
                    Err(_) => Err(format!(
                        "the authorization URL answered HTTP {status} without sending the browser \
                         back (it needs a person: run `toolhost mcp login {server}` without \
                         --fetch or {FETCH_ENV})"
                    )),
                }
            }
        }
    }

    /// Answers requests, each connection on its own (a connection that sends nothing is
    /// dropped after [`HEAD_WAIT`], and never holds up another), until one is for `/callback`
    /// with the sign-in's `state` (another `state` is answered 400: a forged redirect cannot
    /// end the wait); its URL. `state` `None` takes the first `/callback`.
    async fn callback(&self, state: Option<&str>) -> Result<String, String> {
        let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let (found, mut came) = tokio::sync::mpsc::channel::<String>(1);
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                Some(target) = came.recv() => {
                    let base = self.redirect_uri.trim_end_matches("/callback");
                    return Ok(format!("{base}{target}"));
                }
            };
            let (stream, _) =
                accepted.map_err(|e| format!("the sign-in's listener failed: {e}"))?;
            // Over the bound, a connection is closed at once: it cannot queue the others.
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                continue;
            };
            let (found, state) = (found.clone(), state.map(str::to_owned));
            tokio::spawn(async move {
                let _permit = permit;
                if let Some(target) = answer(stream, state.as_deref()).await {
                    let _ = found.send(target).await;
                }
            });
        }
    }
}

/// How long the sign-in's listener waits for a request's head on one connection.
const HEAD_WAIT: Duration = Duration::from_secs(10);

/// The most connections the sign-in's listener serves at once.
const MAX_CONNECTIONS: usize = 64;

/// Reads one request's head from `stream` (at most [`HEAD_WAIT`]) and answers it: the request
/// target if it is the sign-in's callback (with `state`, when given).
async fn answer(mut stream: tokio::net::TcpStream, state: Option<&str>) -> Option<String> {
    let mut buf = vec![0u8; 8192];
    let mut len = 0;
    let read = async {
        while len < buf.len() {
            match stream.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    };
    if tokio::time::timeout(HEAD_WAIT, read).await.is_err() {
        return None; // it sent nothing (or too little): dropped
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_default()
        .to_owned();
    let is_callback = target == "/callback" || target.starts_with("/callback?");
    let ours = is_callback
        && state.is_none_or(|state| query_value(&target, "state").as_deref() == Some(state));
    let (status, body) = match (is_callback, ours) {
        (_, true) => (
            "200 OK",
            "Signed in: you may close this tab and go back to toolhost.",
        ),
        (true, false) => (
            "400 Bad Request",
            "Not this sign-in's redirect (its state differs).",
        ),
        (false, _) => ("404 Not Found", "Not the sign-in's callback."),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
    ours.then_some(target)
}

/// The value of `key` in the query of `url` (a full URL or a request target), decoded.
fn query_value(url: &str, key: &str) -> Option<String> {
    let parsed = match url.starts_with('/') {
        true => reqwest::Url::parse(&format!("http://127.0.0.1{url}")),
        false => reqwest::Url::parse(url),
    };
    let parsed = parsed.ok()?;
    let found = parsed.query_pairs().find(|(k, _)| k == key)?.1;
    Some(found.into_owned())
}

/// Opens `url` in the desktop's browser, if there is one; the URL is printed either way.
fn open(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if spawned.is_err() {
        eprintln!("(no browser could be opened with `{opener}`: open the URL yourself)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status of a GET of `url`.
    async fn status(client: &reqwest::Client, url: String) -> u16 {
        client.get(url).send().await.unwrap().status().as_u16()
    }

    #[tokio::test]
    async fn the_listener_answers_other_paths_and_returns_the_callback() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = Loopback::bind().await.unwrap();
        let redirect = loopback.redirect_uri.clone();
        assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"));
        let base = redirect.trim_end_matches("/callback").to_owned();
        let browser = async move {
            let client = reqwest::Client::new();
            assert_eq!(status(&client, format!("{base}/favicon.ico")).await, 404);
            let back = format!("{base}/callback?code=c1&state=s1");
            assert_eq!(status(&client, back).await, 200);
        };
        let (found, ()) = tokio::join!(loopback.callback(Some("s1")), browser);
        assert_eq!(found.unwrap(), format!("{redirect}?code=c1&state=s1"));
    }

    /// A local process that connects and sends nothing, and one that sends a forged redirect,
    /// hold up nothing and lose nothing: the real redirect still ends the wait, before the
    /// silent connections are dropped.
    #[tokio::test]
    async fn silent_and_forged_connections_cannot_lose_the_real_redirect() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = Loopback::bind().await.unwrap();
        let base = loopback
            .redirect_uri
            .trim_end_matches("/callback")
            .to_owned();
        let addr = base.trim_start_matches("http://").to_owned();
        let browser = async move {
            let connects = (0..3).map(|_| tokio::net::TcpStream::connect(addr.clone()));
            let silent = futures_util::future::join_all(connects).await;
            let client = reqwest::Client::new();
            let forged = format!("{base}/callback?code=evil&state=guessed");
            assert_eq!(status(&client, forged).await, 400);
            let back = format!("{base}/callback?code=c1&state=s1");
            assert_eq!(status(&client, back).await, 200);
            silent
        };
        let waited = tokio::time::timeout(HEAD_WAIT, loopback.callback(Some("s1")));
        let (found, _silent) = tokio::join!(waited, browser);
        let found = found.expect("the real redirect waited for the silent connections");
        assert!(found.unwrap().ends_with("/callback?code=c1&state=s1"));
    }
}
