//! Signatures, in minisign's formats (Ed25519; the secret key protected with a password
//! through scrypt, as the `minisign` program does): key pairs, signing an archive, and
//! checking a signature against the user's trusted keys (`usr/trusted-keys/`).

use std::fs;
use std::path::{Path, PathBuf};

use super::{PackageError, PackageErrorKind};
use crate::layout::Escaped;

/// The environment variable holding the password of an encrypted secret key, for signing
/// without a terminal (otherwise it is asked for on the terminal).
pub const PASSWORD_ENV: &str = "TOOLHOST_KEY_PASSWORD";

pub use crate::layout::TRUSTED_KEYS_DIR;

/// The largest key or signature file read (a minisign one is a few hundred bytes).
const MAX_KEY_BYTES: u64 = 64 << 10;

pub use crate::load::package_lock::is_key_id;

fn key_error(message: String) -> PackageError {
    PackageError::new(PackageErrorKind::Key, message)
}

/// A public key: its minisign key id (16 hex digits, as `minisign` prints it) and the key.
#[derive(Clone)]
pub struct PublicKey {
    /// The key id, upper-case hex as minisign shows it.
    pub id: String,
    /// The key in minisign's one-line base64 form (`RWQ...`), as on the second line of a
    /// `.pub` file.
    pub base64: String,
    key: minisign::PublicKey,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.id)
    }
}

impl PublicKey {
    /// Reads a minisign public key file (`untrusted comment: ...` then the key), or the bare
    /// base64 key.
    ///
    /// A path that is not a regular file (a FIFO, a device) is refused at once, never
    /// waited on.
    pub fn read(path: &Path) -> Result<Self, PackageError> {
        let text = crate::layout::read_text(path, MAX_KEY_BYTES, "a key file's limit of 64 KiB")
            .map_err(|e| key_error(format!("cannot read the public key {}: {e}", Escaped(path))))?;
        Self::parse(&text).map_err(|e| {
            key_error(format!(
                "{}: not a minisign public key ({e}): give the .pub file that `toolhost keygen` or `minisign -G` wrote",
                Escaped(path)
            ))
        })
    }

    /// Parses a public key file's text, or the bare base64 key; a [`PackageErrorKind::Key`]
    /// error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, PackageError> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
            .ok_or_else(|| key_error("no key in it".to_owned()))?;
        let key = minisign::PublicKey::from_base64(line).map_err(|e| key_error(e.to_string()))?;
        Ok(Self {
            id: key_id(key.keynum()),
            base64: line.to_owned(),
            key,
        })
    }
}

/// A key id as minisign prints it: the 8 bytes read little-endian, in upper-case hex.
fn key_id(keynum: &[u8]) -> String {
    let mut n = [0u8; 8];
    n.copy_from_slice(&keynum[..8]);
    format!("{:016X}", u64::from_le_bytes(n))
}

/// Makes a key pair and writes `dir/<name>.pub` and `dir/<name>.key` in minisign's formats;
/// the secret key encrypted with `password` (`None`: not encrypted, as `minisign -W`).
/// Refuses to overwrite an existing key.
pub fn keygen(dir: &Path, name: &str, password: Option<String>) -> Result<PublicKey, PackageError> {
    let public = dir.join(format!("{name}.pub"));
    let secret = dir.join(format!("{name}.key"));
    for file in [&public, &secret] {
        if fs::symlink_metadata(file).is_ok() {
            return Err(key_error(format!(
                "{} exists: keygen does not overwrite a key (remove it, or choose another --out)",
                Escaped(file)
            )));
        }
    }
    let failed = |e: minisign::PError| key_error(format!("cannot make a key pair: {e}"));
    let pair = match &password {
        Some(p) => minisign::KeyPair::generate_encrypted_keypair(Some(p.clone())),
        None => minisign::KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(failed)?;
    let pk = pair.pk.to_box().map_err(failed)?.into_string();
    let comment = match password {
        Some(_) => "minisign encrypted secret key",
        None => "minisign secret key (not encrypted)",
    };
    let sk = pair.sk.to_box(Some(comment)).map_err(failed)?.into_string();
    fs::create_dir_all(dir).map_err(|e| PackageError::io("cannot create", dir, e))?;
    write_new(&secret, sk.as_bytes(), 0o600)?;
    write_new(&public, pk.as_bytes(), 0o644)?;
    PublicKey::parse(&pk)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PackageError> {
    use std::io::Write as _;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    options
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| PackageError::io("cannot write", path, e))
}

/// The signature file of `file`: `<file>.minisig`.
pub fn signature_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// Signs `file` with the secret key in `key_file` and writes `<file>.minisig` (a prehashed
/// minisign signature, which `minisign -Vm FILE -p KEY.pub` verifies). The password of an
/// encrypted key comes from `password`, else [`PASSWORD_ENV`], else the terminal.
pub fn sign(
    file: &Path,
    key_file: &Path,
    password: Option<String>,
) -> Result<PathBuf, PackageError> {
    let sk = secret_key(key_file, password)?;
    let data = fs::File::open(file).map_err(|e| PackageError::io("cannot read", file, e))?;
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let trusted = format!("file:{name}");
    let signature = minisign::sign(None, &sk, data, Some(&trusted), None)
        .map_err(|e| key_error(format!("cannot sign {}: {e}", Escaped(file))))?;
    let out = signature_path(file);
    crate::layout::write_atomically(&out, signature.into_string().as_bytes())
        .map_err(|e| PackageError::io("cannot write", &out, e))?;
    Ok(out)
}

/// Signs `bytes` (a file named `name`) with the secret key in `key_file`, as [`sign`] does:
/// the signature's text (a `.minisig` file's) and the key's public half.
pub fn sign_bytes(
    bytes: &[u8],
    name: &str,
    key_file: &Path,
    password: Option<String>,
) -> Result<(String, PublicKey), PackageError> {
    let sk = secret_key(key_file, password)?;
    let trusted = format!("file:{name}");
    let signature = minisign::sign(None, &sk, std::io::Cursor::new(bytes), Some(&trusted), None)
        .map_err(|e| key_error(format!("cannot sign {name}: {e}")))?;
    let public = minisign::PublicKey::from_secret_key(&sk).map_err(|e| {
        key_error(format!(
            "{}: cannot derive its public key: {e}",
            Escaped(key_file)
        ))
    })?;
    let public = PublicKey::parse(&public.to_base64())?;
    Ok((signature.into_string(), public))
}

/// The secret key in `key_file`, decrypted with `password`, else [`PASSWORD_ENV`], else the
/// terminal's.
fn secret_key(
    key_file: &Path,
    password: Option<String>,
) -> Result<minisign::SecretKey, PackageError> {
    let text = fs::read_to_string(key_file).map_err(|e| {
        key_error(format!(
            "cannot read the secret key {}: {e}",
            Escaped(key_file)
        ))
    })?;
    let password = password.or_else(|| std::env::var(PASSWORD_ENV).ok());
    // A key made without a password (`minisign -W`, `keygen --no-password`) is read as it
    // is; any other is decrypted.
    let sk = match minisign::SecretKey::from_unencrypted_box(text.clone().into()) {
        Ok(sk) => Ok(sk),
        Err(_) => minisign::SecretKey::from_box(text.into(), password),
    };
    sk.map_err(|e| {
        key_error(format!(
            "{}: cannot use this secret key: {e} (a minisign secret key, and its password in {PASSWORD_ENV} or on the terminal)",
            Escaped(key_file)
        ))
    })
}

/// The trusted public keys: every `*.pub` in `dir` (`usr/trusted-keys/`), by file name.
///
/// One that is not a regular file (a FIFO, a device, a folder: links are followed) is
/// refused with one line naming it, before anything is opened: nothing waits on it.
pub fn trusted_keys(dir: &Path) -> Result<Vec<PublicKey>, PackageError> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pub"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            // Not a let chain: the Windows build's Rust (1.85) has none.
            let odd = fs::metadata(path)
                .ok()
                .and_then(|metadata| crate::layout::not_regular(&metadata));
            if let Some(what) = odd {
                return Err(key_error(format!(
                    "{}: refused: it is {what}, not a regular file; a trusted key is a .pub file written by `toolhost trust add`: remove it",
                    Escaped(path)
                )));
            }
            PublicKey::read(path)
        })
        .collect()
}

/// Stops trusting the key `key` (its id, as `toolhost trust list` shows it, or its `.pub`
/// file): removes `dir/<id>.pub`. Packages it signed no longer load until they are signed by
/// a trusted key and added again, or removed.
pub fn untrust(dir: &Path, key: &str) -> Result<String, PackageError> {
    let id = match is_key_id(key) {
        true => key.to_ascii_uppercase(),
        false => PublicKey::read(Path::new(key))
            .map_err(|e| {
                key_error(format!(
                    "{key:?} is neither a key id (16 hex digits, as `toolhost trust list` shows) nor a public key file: {}",
                    e.message
                ))
            })?
            .id,
    };
    let path = dir.join(format!("{id}.pub"));
    match fs::symlink_metadata(&path) {
        Ok(_) => fs::remove_file(&path).map_err(|e| PackageError::io("cannot remove", &path, e))?,
        Err(_) => {
            return Err(key_error(format!(
                "key {id} is not trusted ({} does not exist): `toolhost trust list` shows the trusted keys",
                Escaped(&path)
            )));
        }
    }
    Ok(id)
}

/// Adds the public key in `key_file` to the trusted keys in `dir`, as `<key id>.pub`.
pub fn trust(dir: &Path, key_file: &Path) -> Result<PublicKey, PackageError> {
    let key = PublicKey::read(key_file)?;
    fs::create_dir_all(dir).map_err(|e| PackageError::io("cannot create", dir, e))?;
    let text = format!(
        "untrusted comment: minisign public key {}\n{}\n",
        key.id, key.base64
    );
    let path = dir.join(format!("{}.pub", key.id));
    crate::layout::write_atomically(&path, text.as_bytes())
        .map_err(|e| PackageError::io("cannot write", &path, e))?;
    Ok(key)
}

/// Checks the signature `sig_file` of `file` against `keys`: the key that made it, or one
/// line saying why not (no signature, a key not trusted, a signature that does not match).
pub fn verify(file: &Path, sig_file: &Path, keys: &[PublicKey]) -> Result<PublicKey, PackageError> {
    let mut data = fs::File::open(file).map_err(|e| PackageError::io("cannot read", file, e))?;
    verify_reader(&mut data, file, sig_file, keys)
}

/// As [`verify`], for the bytes of `data` (read from its start), named `file` in messages:
/// the caller reads the same open file afterwards, so what was verified is what it uses.
pub fn verify_reader<R: std::io::Read + std::io::Seek>(
    data: &mut R,
    file: &Path,
    sig_file: &Path,
    keys: &[PublicKey],
) -> Result<PublicKey, PackageError> {
    let text = match crate::layout::read_text(
        sig_file,
        MAX_KEY_BYTES,
        "a signature's limit of 64 KiB",
    ) {
        Ok(text) => text,
        Err(e) if e.kind == crate::layout::ReadErrorKind::Missing => {
            return Err(PackageError::new(
                PackageErrorKind::Unsigned,
                format!(
                    "{}: no signature ({} is missing): sign it with `toolhost pack --sign` or `minisign -S`",
                    Escaped(file),
                    Escaped(sig_file)
                ),
            ));
        }
        Err(e) => {
            return Err(PackageError::new(
                PackageErrorKind::Signature,
                format!(
                    "{}: refused: cannot read its signature {}: {e}; nothing was installed",
                    Escaped(file),
                    Escaped(sig_file)
                ),
            ));
        }
    };
    let bad = |why: String| {
        PackageError::new(
            PackageErrorKind::Signature,
            format!("{}: refused: {why}; nothing was installed", Escaped(file)),
        )
    };
    let signature = minisign::SignatureBox::from_string(&text).map_err(|e| {
        bad(format!(
            "{} is not a minisign signature ({e})",
            Escaped(sig_file)
        ))
    })?;
    let signer = key_id(signature.keynum());
    let Some(key) = keys.iter().find(|k| k.id == signer) else {
        return Err(bad(format!(
            "it is signed by key {signer}, which is not trusted (trust the publisher's key with `toolhost trust add KEY.pub`)"
        )));
    };
    data.rewind()
        .map_err(|e| PackageError::io("cannot read", file, e))?;
    minisign::verify(&key.key, &signature, &mut *data, true, false, false).map_err(|e| {
        bad(format!(
            "its signature by key {signer} does not match its bytes ({e})"
        ))
    })?;
    Ok(key.clone())
}
