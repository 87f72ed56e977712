//! Where `add` and `update` get a package from: a path, an http(s) URL (downloaded with its
//! `.minisig`), or a plugin folder built here (`path+DIR`, `git+URL[#REV]`); then verified.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use toolhost::package::archive::MAX_UNPACKED_BYTES;
use toolhost::package::{install, signature, Policy, Verified};
use toolhost::{Escaped, Layout};

use super::AddOptions;

/// Verifies SOURCE: a path (archive or folder), an http(s) URL (downloaded first with its
/// `.minisig`), `path+DIR` (a plugin folder built and packed here) or `git+URL[#REV]` (a
/// repository cloned, then the same).
pub(crate) fn fetch_and_verify(
    layout: &Layout,
    source: &str,
    options: &AddOptions,
) -> Result<Verified> {
    let policy = &options.policy;
    if let Some(dir) = source.strip_prefix("path+") {
        return from_source(layout, Path::new(dir), source, options);
    }
    if let Some(rest) = source.strip_prefix("git+") {
        let (url, rev) = match rest.split_once('#') {
            Some((url, rev)) => (url, Some(rev)),
            None => (rest, None),
        };
        let dir = scratch(layout, "git")?;
        let result = (|| {
            git(&["clone", "--quiet", url], Some(&dir))?;
            if let Some(rev) = rev {
                git(
                    &["-C", &dir.to_string_lossy(), "checkout", "--quiet", rev],
                    None,
                )?;
            }
            from_source(layout, &dir, source, options)
        })();
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    if source.starts_with("https://") || source.starts_with("http://") {
        let dir = scratch(layout, "download")?;
        let result = (|| {
            let file = download(source, &dir, options.ca.as_deref())?;
            Ok(install::verify(layout, &file, source, policy)?)
        })();
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    let path = PathBuf::from(source);
    if std::fs::symlink_metadata(&path).is_err() {
        crate::exit::usage!(
            "{}: no such file or folder (give a package archive, an unpacked package folder, or an https:// URL)",
            Escaped(&path)
        );
    }
    let shown = std::fs::canonicalize(&path).unwrap_or(path.clone());
    Ok(install::verify(
        layout,
        &path,
        &shown.to_string_lossy(),
        policy,
    )?)
}

/// An empty folder `usr/.cache/packages/<what>-<pid>/` (the caller removes it).
fn scratch(layout: &Layout, what: &str) -> Result<PathBuf> {
    let dir = layout
        .cache_dir()
        .join("packages")
        .join(format!("{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", Escaped(&dir)))?;
    Ok(dir)
}

/// Runs git with `args` (and `into` as the last argument), failing with its last line.
fn git(args: &[&str], into: Option<&Path>) -> Result<()> {
    let mut command = std::process::Command::new("git");
    command.args(args);
    if let Some(dir) = into {
        command.arg(dir);
    }
    let out = command
        .output()
        .context("cannot run git (is it on PATH?)")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!("git {} failed: {}", args.join(" "), last.trim());
    }
    Ok(())
}

/// Builds and packs the plugin folder `dir` here, then verifies the package as any other
/// (it has no signature: the user trusts the source they named).
fn from_source(
    layout: &Layout,
    dir: &Path,
    source: &str,
    options: &AddOptions,
) -> Result<Verified> {
    if !dir.join(toolhost::package::MANIFEST_FILE_NAME).is_file() {
        crate::exit::usage!(
            "{}: no toolhost-plugin.toml: a plugin folder to build has one (docs/src/reference/packages.md)",
            Escaped(dir)
        );
    }
    let out = scratch(layout, "build")?;
    let result = (|| {
        let packed =
            crate::pack::build_and_pack(dir, &out, &options.cargo_profile, false, &[], None)?;
        let built_here = Policy {
            require_signature: false,
            signers: Vec::new(),
        };
        Ok(install::verify(
            layout,
            &packed.archive,
            source,
            &built_here,
        )?)
    })();
    let _ = std::fs::remove_dir_all(&out);
    result
}

/// Downloads `url` and `url.minisig` (if the server has it) into `dir`, trusting the
/// certificate authorities in the PEM file `ca` besides the system's.
fn download(url: &str, dir: &Path, ca: Option<&Path>) -> Result<PathBuf> {
    let name = url
        .rsplit('/')
        .next()
        .filter(|n| toolhost::is_safe_name(n))
        .unwrap_or("package.tar.gz");
    let file = dir.join(name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().tcp_nodelay(true);
        if let Some(ca) = ca {
            builder = builder.tls_certs_merge(authorities(ca)?);
        }
        let client = builder.build()?;
        if !get(&client, url, &file, MAX_UNPACKED_BYTES).await? {
            bail!("{url}: not found (404)");
        }
        let signature = signature::signature_path(&file);
        get(&client, &format!("{url}.minisig"), &signature, 64 << 10).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(file)
}

/// The certificates of the PEM file `ca` (`--ca`).
fn authorities(ca: &Path) -> Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(ca).with_context(|| format!("--ca {}: cannot read it", Escaped(ca)))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        _ => crate::exit::usage!(
            "--ca {}: no PEM certificate in it (give the certificate of the authority that signed the server's, -----BEGIN CERTIFICATE-----)",
            Escaped(ca)
        ),
    }
}

/// Streams the body of `url` into the file `to` (never held in memory), at most `limit`
/// bytes; `false` for a 404 (nothing written).
async fn get(client: &reqwest::Client, url: &str, to: &Path, limit: u64) -> Result<bool> {
    let mut response = match client.get(url).send().await {
        Ok(response) => response,
        Err(e) => match certificate_refused(&e) {
            Some((why, true)) => bail!(
                "cannot download {url}: the server's TLS certificate is for another name ({why}): use the URL with a name the certificate is for, or give the server a certificate for this one (--ca does not change the name)"
            ),
            Some((why, false)) => bail!(
                "cannot download {url}: the server's TLS certificate is not trusted ({why}): pass --ca FILE with the certificate of the authority that signed it, or set SSL_CERT_FILE"
            ),
            None => return Err(e).with_context(|| format!("cannot download {url}")),
        },
    };
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(false);
    }
    if !response.status().is_success() {
        bail!("cannot download {url}: HTTP {}", response.status());
    }
    let mut file =
        std::fs::File::create(to).with_context(|| format!("cannot write {}", Escaped(to)))?;
    let mut written = 0u64;
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("cannot download {url}"))?
    {
        written += chunk.len() as u64;
        if written > limit {
            bail!(
                "{url}: larger than {} KiB: not a package; nothing was installed",
                limit >> 10
            );
        }
        file.write_all(&chunk)
            .with_context(|| format!("cannot write {}", Escaped(to)))?;
    }
    Ok(true)
}

/// Why the server's certificate was refused, if that is why `e` failed: a rustls error in its
/// chain of causes (wrapped in I/O errors, whose payload `source` skips), and whether it is
/// for another name (which no `--ca` mends).
fn certificate_refused(e: &reqwest::Error) -> Option<(String, bool)> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(mut error) = cause {
        while let Some(inner) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            error = inner;
        }
        if let Some(
            tls @ (rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented),
        ) = error.downcast_ref::<rustls::Error>()
        {
            let wrong_name = matches!(
                tls,
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. }
                )
            );
            return Some((tls.to_string(), wrong_name));
        }
        cause = error.source();
    }
    None
}
