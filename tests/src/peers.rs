//! Real peers installed by the tests themselves, pinned, into a cache under `target/peers/`
//! (a fresh clone needs nothing else): `fakellm`, an OpenAI-compatible mock server from PyPI.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The pinned version of `fakellm`.
pub const FAKELLM: &str = "fakellm==0.3.5";

/// The Python of a virtual environment holding [`FAKELLM`], installed on first use (about a
/// minute) into `target/peers/fakellm-0.3.5/`.
///
/// # Panics
///
/// If `python3 -m venv` or `pip install` fails (no Python, no network).
pub fn fakellm_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let target = crate::build_dir().parent().expect("target dir").to_owned();
            let dir = target.join("peers").join("fakellm-0.3.5");
            let python = dir.join("bin").join("python");
            let done = dir.join(".installed");
            if done.exists() {
                return python;
            }
            let _ = std::fs::remove_dir_all(&dir);
            let venv = Command::new("python3")
                .arg("-m")
                .arg("venv")
                .arg(&dir)
                .status();
            assert!(
                venv.is_ok_and(|s| s.success()),
                "python3 -m venv {} failed",
                dir.display()
            );
            let pip = Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    FAKELLM,
                ])
                .status();
            assert!(
                pip.is_ok_and(|s| s.success()),
                "pip install {FAKELLM} failed"
            );
            std::fs::write(&done, FAKELLM).expect("marker");
            python
        })
        .clone()
}

/// A running `fakellm serve`, stopped when dropped.
pub struct Fakellm {
    child: Child,
    port: u16,
}

impl Fakellm {
    /// Starts `fakellm serve` on a free port with `config` (its YAML rules) and waits until it
    /// answers (at most 30 s).
    pub fn start(config: &str, dir: &std::path::Path) -> Self {
        let python = fakellm_python();
        let file = dir.join("fakellm.yaml");
        std::fs::write(&file, config).expect("write fakellm.yaml");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(python)
            .args([
                "-m",
                "fakellm.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
            ])
            .arg(port.to_string())
            .arg("--config")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start fakellm");
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "fakellm did not listen on {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Fakellm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
