//! The fleet page (docs/src/guide/fleet.md) as a tested recipe: three `toolhost serve-mcp
//! --http` (watching, with a token) over one root behind a real HAProxy (Debian's `haproxy`,
//! installed by [`peers::haproxy`] where missing; under `CI=true` its absence fails), each
//! started with the page's command and HAProxy with the page's config, read from the page
//! (free loopback ports in place of 8080 to 8083).
//!
//! Driven by concurrent MCP clients: every call succeeds whichever instance serves it; a
//! rolling update of a plugin (its library rebuilt and swapped in) fails no call and every
//! call begun after the switch answers from the new build; an instance killed mid-run is
//! taken out by the health check and only the calls in flight on it fail; the shared audit log
//! verifies and holds exactly one record per completed call, matched by the call's id. And a
//! rolling restart (SIGTERM to each instance in turn, as the page does it) under 16 clients on
//! kept-alive connections loses no call, with no step at the balancer, and the audit log
//! holds one record per call.
//!
//! And a call of MCP 2026-07-28 that asks twice (`InputRequiredResult` rounds): through two
//! stateless instances sharing a token (and so the key of `requestState`) but not a root,
//! behind HAProxy, its rounds go to both instances and the call completes with both answers.

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost_tests::balancer::{free_port, post_mcp_with, Balancer, KeepAlive};
use toolhost_tests::{peers, toolhost_bin, Fixture, TestRoot};

use crate::mcp_server::HttpServer;

/// How many clients call at once.
const CLIENTS: usize = 8;

/// The fleet page.
const PAGE: &str = include_str!("../../docs/src/guide/fleet.md");

/// The token of the page's `MCP_TOKEN`, in the root's `usr/secrets.env`.
const TOKEN: &str = "fleet-token-5e8d1c";

/// The `Authorization` header of the clients.
const AUTHORIZATION: (&str, &str) = ("Authorization", "Bearer fleet-token-5e8d1c");

/// The page's HAProxy config: the fenced block with `frontend mcp`.
fn page_config() -> &'static str {
    PAGE.split("```")
        .skip(1)
        .step_by(2)
        .find(|block| block.contains("frontend mcp"))
        .and_then(|block| block.split_once('\n').map(|(_, config)| config))
        .expect("the fleet page's HAProxy config")
}

/// The arguments of the page's command for the instance on `8081`, `8082` or `8083` (after
/// `toolhost`), with `port` in place of the page's; every instance's line is the same command
/// but for its port.
fn page_command(page_port: u16, port: u16) -> Vec<String> {
    let line = |p: u16| {
        let start = format!("toolhost serve-mcp --http 127.0.0.1:{p} ");
        PAGE.lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("no `{start}...` line on the fleet page"))
    };
    let first = line(8081).replace("8081", "PORT");
    assert_eq!(
        line(page_port).replace(&page_port.to_string(), "PORT"),
        first
    );
    first
        .replace("PORT", &port.to_string())
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// A root with the `versioned` tool and the page's token.
fn fleet_root() -> TestRoot {
    let root = TestRoot::new();
    root.tool("usr", "versioned", Fixture::Versioned);
    root.write("usr/secrets.env", format!("MCP_TOKEN={TOKEN}\n"));
    root
}

/// The page's fleet: HAProxy on a free port in front of `instances` (the page's three
/// servers, in order).
fn page_balancer(root: &TestRoot, instances: &[u16]) -> Balancer {
    let port = free_port();
    let mut config = page_config().replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"));
    for (i, instance) in instances.iter().enumerate() {
        let page = format!("127.0.0.1:{}", 8081 + i);
        assert!(config.contains(&page), "{page} in the page's config");
        config = config.replace(&page, &format!("127.0.0.1:{instance}"));
    }
    Balancer::with_config(root, &config, port)
}

/// Checks the root's audit log with `toolhost audit verify`; its call records of `versioned`
/// counted by the call's id (its `call` argument), over every segment.
fn audit_records(root: &TestRoot) -> HashMap<u64, usize> {
    let verify = root.run_cli(&["audit", "verify"]);
    assert!(
        verify.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let mut recorded: HashMap<u64, usize> = HashMap::new();
    for entry in std::fs::read_dir(root.path().join("usr/audit")).expect("the audit folder") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("audit.") && name.ends_with(".jsonl")) {
            continue;
        }
        let log = std::fs::read_to_string(&path).expect("a segment");
        for record in log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            if record["type"] == "call" && record["tool"] == "versioned" {
                let id = record["args"]["call"].as_u64().expect("the call's id");
                *recorded.entry(id).or_default() += 1;
            }
        }
    }
    recorded
}

/// One `toolhost serve-mcp --http` of the fleet, killed when dropped.
struct Instance {
    server: HttpServer,
    port: u16,
}

impl Instance {
    /// The page's command for its server `page_port` (8081...), run from the root on `port`.
    fn start(root: &TestRoot, page_port: u16, port: u16) -> Self {
        let mut command = Command::new(toolhost_bin());
        command
            .current_dir(root.path())
            .args(page_command(page_port, port));
        let server = HttpServer::spawn(command);
        Self { server, port }
    }

    /// Three instances on free ports.
    fn fleet(root: &TestRoot) -> Vec<Self> {
        (0..3u16)
            .map(|i| Self::start(root, 8081 + i, free_port()))
            .collect()
    }

    /// Waits (at most 20 s) for the line saying `versioned.so` was reloaded.
    fn wait_for_reload(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.server.stderr.recv_timeout(left) {
                Ok(line) if line.contains("reloaded") && line.contains("versioned.so") => return,
                Ok(_) => {}
                Err(_) => panic!("instance on port {} did not reload versioned.so", self.port),
            }
        }
    }
}

/// One call through the balancer: `Ok(answer text)`, or why it failed (the HTTP status and
/// body, or the I/O error).
fn call(port: u16, id: u64) -> Result<String, String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"versioned:sleep","arguments":{{"ms":20,"call":{id}}}}}}}"#
    );
    let answer = post_mcp_with(port, &[AUTHORIZATION], &body)?;
    let status = answer.get(9..12).unwrap_or("???");
    if status != "200" {
        return Err(format!(
            "HTTP {status}: {}",
            answer.lines().last().unwrap_or("")
        ));
    }
    let data = answer
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .ok_or_else(|| format!("{CUT}: {answer}"))?;
    let message: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
    let result = &message["result"];
    if result["isError"] != false {
        return Err(format!("a tool error: {message}"));
    }
    if let Some(error) = result["_meta"].get("toolhost/audit_error") {
        return Err(format!("its audit record was not written: {error}"));
    }
    Ok(result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// How a call whose instance went away after answering 200 fails: its event stream ends
/// without a result.
const CUT: &str = "the answer's stream ended without a result";

/// What a call gave, and when it began and ended.
struct Outcome {
    /// The call's JSON-RPC id, also its `call` argument (in its audit record).
    id: u64,
    began: Instant,
    ended: Instant,
    result: Result<String, String>,
}

#[test]
fn a_fleet_behind_haproxy_serves_every_call_through_a_rolling_update_and_a_lost_instance() {
    if !peers::haproxy() {
        return;
    }
    let root = fleet_root();
    let instances = Instance::fleet(&root);
    let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
    let balancer = page_balancer(&root, &ports);

    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (stop, outcomes, port) = (stop.clone(), outcomes.clone(), balancer.port);
            std::thread::spawn(move || {
                let mut id = (c as u64) << 32;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let began = Instant::now();
                    let result = call(port, id);
                    let ended = Instant::now();
                    let outcome = Outcome {
                        id,
                        began,
                        ended,
                        result,
                    };
                    outcomes.lock().expect("outcomes").push(outcome);
                }
            })
        })
        .collect();
    let started = Instant::now();
    let count = |outcomes: &Mutex<Vec<Outcome>>| outcomes.lock().expect("outcomes").len();

    // Phase 1: v1 everywhere.
    std::thread::sleep(Duration::from_millis(1500));
    let before_update = count(&outcomes);
    // Phase 2: the rolling update: the rebuilt library swapped in; each instance's watcher
    // loads it while the calls go on.
    let replaced = Instant::now();
    root.replace("usr/tools/versioned.so", Fixture::VersionedV2);
    for instance in &instances {
        instance.wait_for_reload();
    }
    let switched = Instant::now();
    let replaced_at = replaced.duration_since(started).as_millis();
    let switched_at = switched.duration_since(started).as_millis();
    std::thread::sleep(Duration::from_millis(1500));
    let before_kill = count(&outcomes);
    // Phase 3: one instance lost.
    let mut instances = instances;
    let lost = instances.remove(0);
    let killing = Instant::now();
    drop(lost); // SIGKILL, and waited for: from here on nothing runs on it
    let killed = Instant::now();
    std::thread::sleep(Duration::from_millis(2000));
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client");
    }
    let outcomes = std::mem::take(&mut *outcomes.lock().expect("outcomes"));
    let total = outcomes.len();
    assert!(
        before_update > 20 && total > before_kill + 20,
        "too few calls: {before_update} before the update, {before_kill} before the kill, {total} in all"
    );

    // Until the kill: no call failed, and every call begun after the switch ran v2.
    let until_kill: Vec<&Outcome> = outcomes.iter().filter(|o| o.ended < killing).collect();
    let failed: Vec<String> = until_kill
        .iter()
        .filter_map(|o| {
            let error = o.result.as_ref().err()?;
            let at = o.began.duration_since(started).as_millis();
            Some(format!("began at {at} ms: {error}"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "calls failed before the kill (replaced at {replaced_at} ms, switched at {switched_at} ms): {failed:#?}"
    );
    let answers = |o: &&Outcome| o.result.as_deref().ok().map(str::to_owned);
    let first: Vec<String> = until_kill.iter().take(5).filter_map(answers).collect();
    assert!(first.iter().all(|a| a.contains("v1")), "{first:?}");
    let after: Vec<String> = outcomes
        .iter()
        .filter(|o| o.began > switched)
        .filter_map(|o| o.result.as_deref().ok().map(str::to_owned))
        .collect();
    assert!(!after.is_empty());
    let old: Vec<&String> = after.iter().filter(|a| !a.contains("v2")).collect();
    assert!(
        old.is_empty(),
        "answers after the switch from the old build: {old:?}"
    );

    // The kill: only calls in flight on the lost instance while it was being killed failed
    // (a few per client at most), each cut off or answered 50x by the balancer; every call
    // begun after it was served by the others.
    let failed_after: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.ended >= killing && o.result.is_err())
        .collect();
    assert!(
        failed_after.len() <= 2 * CLIENTS,
        "more calls failed than were in flight: {}",
        failed_after.len()
    );
    for failure in &failed_after {
        let error = failure.result.as_ref().expect_err("a failure");
        assert!(
            failure.began < killed,
            "a call begun after the kill failed: {error}"
        );
        let clear = error.starts_with("HTTP 50") || error.starts_with(CUT);
        assert!(clear, "unclear failure: {error}");
    }
    let since_kill: Vec<&Outcome> = outcomes.iter().filter(|o| o.began >= killed).collect();
    let served_after = since_kill.iter().filter(|o| o.result.is_ok()).count();
    assert!(
        served_after > 20,
        "only {served_after} calls served after the kill"
    );

    // The shared audit log verifies, and holds one record per completed call.
    let recorded = audit_records(&root);
    // One record per completed call, whichever instance served it, the killed one included
    // (a call's record is written before its answer is sent), and no call recorded twice.
    // (Concurrent calls in one instance once lost one record and wrote another twice: found by
    // this matching, 1,470 records for 1,471 calls; the audit writer now keeps its lock.)
    let at = |t: Instant| t.duration_since(started).as_millis();
    let missing: Vec<String> = outcomes
        .iter()
        .filter(|o| o.result.is_ok() && !recorded.contains_key(&o.id))
        .map(|o| format!("call {:#x}: {} ms to {} ms", o.id, at(o.began), at(o.ended)))
        .collect();
    assert!(
        missing.is_empty(),
        "completed calls without an audit record (killed from {} ms to {} ms): {missing:#?}",
        at(killing),
        at(killed)
    );
    let twice: Vec<&u64> = recorded
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id)
        .collect();
    assert!(twice.is_empty(), "calls recorded twice: {twice:?}");
    assert!(
        recorded.len() <= total,
        "{} records for {total} calls",
        recorded.len()
    );
}

/// The page's rolling restart: each instance in turn gets SIGTERM, is waited for (it drains
/// and answers what it holds, then exits 0) and is started again with the same command; the
/// next waits until the new one answers `/ready` and the balancer's `rise` checks have passed.
/// 16 clients call through HAProxy on kept-alive connections all along: not one call fails.
#[test]
fn a_rolling_restart_behind_haproxy_loses_no_call() {
    if !peers::haproxy() {
        return;
    }
    let root = fleet_root();
    let mut instances = Instance::fleet(&root);
    let ports: Vec<u16> = instances.iter().map(|i| i.port).collect();
    let balancer = page_balancer(&root, &ports);
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(Mutex::new(Vec::<(u64, Result<(), String>)>::new()));
    let clients: Vec<_> = (0..16u64)
        .map(|c| {
            let (stop, calls, port) = (stop.clone(), calls.clone(), balancer.port);
            std::thread::spawn(move || {
                let mut client = KeepAlive::new(port, &[AUTHORIZATION]);
                let mut id = c << 32;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let body = format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"versioned:sleep","arguments":{{"ms":20,"call":{id}}}}}}}"#
                    );
                    let result = match client.post_mcp(&body) {
                        Ok((200, body)) if body.contains(r#""isError":false"#) => Ok(()),
                        Ok((status, body)) => Err(format!("call {id:#x}: HTTP {status}: {body}")),
                        Err(e) => Err(format!("call {id:#x}: {e}")),
                    };
                    calls.lock().expect("calls").push((id, result));
                }
            })
        })
        .collect();
    let count = || calls.lock().expect("calls").len();
    std::thread::sleep(Duration::from_millis(1000));
    let mut served_before = Vec::new();
    for (i, slot) in instances.iter_mut().enumerate() {
        served_before.push(count());
        slot.server.signal(libc::SIGTERM);
        let status = slot.server.wait(Duration::from_secs(60));
        assert!(status.success(), "instance {i} exited with {status}");
        let page_port = 8081 + i as u16;
        *slot = Instance::start(&root, page_port, slot.port);
        // The page's `until curl -sf .../ready; do sleep 0.1; done; sleep 0.6`.
        let mut ready = KeepAlive::new(slot.port, &[]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !matches!(ready.exchange("GET", "/ready", ""), Ok((200, _))) {
            assert!(Instant::now() < deadline, "instance {i} never ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(600));
    }
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("a client");
    }
    let calls = std::mem::take(&mut *calls.lock().expect("calls"));
    let failed: Vec<&String> = calls.iter().filter_map(|(_, c)| c.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} calls failed during the rolling restart (restarts began after {served_before:?} calls): {failed:#?}",
        failed.len(),
        calls.len()
    );
    assert!(calls.len() > 200, "only {} calls", calls.len());
    drop(balancer);
    // Each instance wrote its calls' records before it ended: one per call, none twice.
    let recorded = audit_records(&root);
    let wrong: Vec<String> = calls
        .iter()
        .filter(|(id, _)| recorded.get(id) != Some(&1))
        .map(|(id, _)| format!("call {id:#x}: {:?} records", recorded.get(id)))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_page_gives_the_readiness_check_and_the_token() {
    let config = page_config();
    assert!(config.contains("option httpchk GET /ready"), "{config}");
    let command = page_command(8081, 8081).join(" ");
    assert!(command.contains("--token-secret MCP_TOKEN"), "{command}");
    assert!(PAGE.contains("kill -TERM"), "the page's rolling restart");
}

/// The tool of the conformance plugin that asks a name, then a colour.
const TWO_ROUNDS: &str = "test_input_required_result_multi_round";

/// One 2026-07-28 `tools/call` of [`TWO_ROUNDS`] through the balancer on `port`, with
/// `extra` params (the answers and the state of a retry): its result.
fn call_2026(port: u16, id: u64, extra: &str) -> Value {
    let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"fleet-test","version":"1"}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{TWO_ROUNDS}","arguments":{{}},"_meta":{meta}{extra}}}}}"#
    );
    let headers = [
        AUTHORIZATION,
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", TWO_ROUNDS),
    ];
    let answer = post_mcp_with(port, &headers, &body).expect("an answer");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let json = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(body);
    let message: Value = serde_json::from_str(json.trim())
        .unwrap_or_else(|e| panic!("not a JSON-RPC answer ({e}): {answer}"));
    assert!(message["error"].is_null(), "{message}");
    message["result"].clone()
}

/// The retry's extra params: `answer` to the question `key`, and the state to echo.
fn retry(key: &str, answer: Value, state: &Value) -> String {
    let responses = serde_json::json!({key: {"action": "accept", "content": answer}});
    format!(r#","inputResponses":{responses},"requestState":{state}"#)
}

#[test]
fn a_call_that_asks_twice_continues_on_another_instance_of_a_stateless_fleet() {
    if !peers::haproxy() {
        return;
    }
    // Two roots: what an instance knows of the call is only what the client brings back.
    let roots: Vec<TestRoot> = (0..2)
        .map(|_| {
            let root = TestRoot::new();
            let tool = crate::mcp_server::conformance_fixture(TWO_ROUNDS);
            root.tool("usr", TWO_ROUNDS, tool);
            root.write("usr/secrets.env", format!("MCP_TOKEN={TOKEN}\n"));
            root
        })
        .collect();
    let servers: Vec<HttpServer> = roots
        .iter()
        .map(|root| HttpServer::start(root, &["--token-secret", "MCP_TOKEN"]))
        .collect();
    let ports: Vec<u16> = servers
        .iter()
        .map(|s| {
            let port = s.url.rsplit(':').next().and_then(|p| p.split('/').next());
            port.and_then(|p| p.parse().ok()).expect("a port")
        })
        .collect();
    let balancer = Balancer::start(&roots[0], &ports);

    let first = call_2026(balancer.port, 1, "");
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert!(first["inputRequests"]["step1"].is_object(), "{first}");
    let name = serde_json::json!({"name": "Ada"});
    let second = call_2026(
        balancer.port,
        2,
        &retry("step1", name, &first["requestState"]),
    );
    assert_eq!(second["resultType"], "input_required", "{second}");
    assert!(second["inputRequests"]["step2"].is_object(), "{second}");
    let colour = serde_json::json!({"color": "green"});
    let done = call_2026(
        balancer.port,
        3,
        &retry("step2", colour, &second["requestState"]),
    );
    assert_eq!(done["content"][0]["text"], "Ada likes green", "{done}");

    // Round robin: the rounds alternated, so each instance ran the tool (round 1 and 3 on
    // one, round 2 on the other), each time from the start with the answers so far.
    let runs: Vec<usize> = roots
        .iter()
        .map(|root| crate::mcp_server::audited_calls(root, TWO_ROUNDS).len())
        .collect();
    assert_eq!(runs.iter().sum::<usize>(), 3, "runs per instance: {runs:?}");
    assert!(runs.iter().all(|&n| n >= 1), "runs per instance: {runs:?}");
    // A state is good for one retry, on any instance: the first one again is refused.
    let again = retry(
        "step1",
        serde_json::json!({"name": "Eve"}),
        &first["requestState"],
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"{TWO_ROUNDS}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}}}},"io.modelcontextprotocol/clientInfo":{{"name":"fleet-test","version":"1"}}}}{again}}}}}"#
    );
    let headers = [
        AUTHORIZATION,
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", TWO_ROUNDS),
    ];
    // Sent to each instance directly: the one that took it refuses it (the ids of used
    // states are kept per process, as mcp.md says; the other one would run the round again).
    let refused = post_mcp_with(ports[0], &headers, &body).expect("an answer");
    let refused_too = post_mcp_with(ports[1], &headers, &body).expect("an answer");
    let said = format!("{refused}{refused_too}");
    assert!(said.contains("already used"), "{said}");
}
