//! Where the gRPC server listens: the listen address forms, the default
//! socket path, and who may open the socket (its mode and group).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Where the gRPC server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A UNIX socket at this path (see [`SocketAccess`]; a stale socket is replaced).
    Unix(PathBuf),
    /// A TCP address, `HOST:PORT` (port 0 picks a free port).
    Tcp(String),
}

impl Listen {
    /// Parses `unix:PATH`, `unix://PATH` (Curio writes `unix:///run/curio/cuzk.sock`),
    /// `tcp:HOST:PORT`, `tcp://HOST:PORT` or a bare `HOST:PORT` (cuzk's TCP form,
    /// `0.0.0.0:9820`).
    pub fn parse(s: &str) -> Result<Listen> {
        if let Some(rest) = s.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                bail!("listen address {s:?} has no socket path (expected unix:/path/to/kiln.sock)");
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("tcp:") {
            let addr = rest.strip_prefix("//").unwrap_or(rest);
            if !is_host_port(addr) {
                bail!("listen address {s:?} is not tcp:HOST:PORT (e.g. tcp:127.0.0.1:9820)");
            }
            return Ok(Listen::Tcp(addr.to_string()));
        }
        if !s.contains('/') && is_host_port(s) {
            return Ok(Listen::Tcp(s.to_string()));
        }
        bail!(
            "listen address {s:?} is neither unix:PATH, tcp:HOST:PORT nor HOST:PORT \
             (e.g. unix:/run/kiln/kiln.sock, tcp:127.0.0.1:9820, 127.0.0.1:9820)"
        )
    }
}

/// `HOST:PORT` with a non-empty host and a numeric port (`[::1]:9820` too).
fn is_host_port(s: &str) -> bool {
    s.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// Who may open the UNIX socket: its permission bits and group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits (e.g. `0o660`).
    pub mode: u32,
    /// The group the socket is given, by name as configured and its id;
    /// `None` leaves the daemon's own group.
    pub group: Option<(String, u32)>,
}

impl Default for SocketAccess {
    fn default() -> Self {
        SocketAccess { mode: 0o600, group: None }
    }
}

impl SocketAccess {
    /// From the `socket_mode` (octal, `"0660"`, `"660"` or `"0o660"`) and
    /// `socket_group` (a group name or numeric id; empty = none) settings.
    pub fn parse(mode: &str, group: &str) -> Result<SocketAccess> {
        let digits = mode.trim();
        let digits = digits.strip_prefix("0o").unwrap_or(digits);
        let mode = u32::from_str_radix(digits, 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .with_context(|| format!("socket_mode {mode:?} is not an octal mode of at most 0777 (e.g. \"0660\")"))?;
        if mode & 0o600 != 0o600 {
            bail!("socket_mode {mode:#o} does not give the daemon's own user read and write (0600 at least)");
        }
        let group = match group.trim() {
            "" => None,
            name => Some((name.to_string(), group_id(name)?)),
        };
        Ok(SocketAccess { mode, group })
    }

    /// The `socket_mode` setting as written back (`"0660"`).
    pub fn mode_text(&self) -> String {
        format!("{:04o}", self.mode)
    }
}

/// A group's id, from its name (through the system's group database, so
/// LDAP or sssd groups work too) or as a number.
fn group_id(name: &str) -> Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    crate::sys::group_id(name)?.with_context(|| format!("socket_group {name:?}: no such group on this host"))
}

/// The default socket: `$XDG_RUNTIME_DIR/kiln/kiln.sock` when that variable
/// is set (a user session), else `/run/kiln/kiln.sock` (a system service),
/// else the first writable of the user's runtime dir, cache dir
/// (`~/.cache/kiln/kiln.sock`) and the temp dir.
pub fn default_socket_path() -> PathBuf {
    let fallback = std::env::temp_dir().join(format!("kiln-{}", whoami()));
    socket_dir_candidates().into_iter().find(|d| writable_dir(d)).unwrap_or(fallback).join("kiln.sock")
}

/// Where a daemon on defaults may have put its socket, in the order
/// [`default_socket_path`] tries them (for clients: nothing is created).
pub fn default_socket_candidates() -> Vec<PathBuf> {
    let mut all = socket_dir_candidates();
    all.push(std::env::temp_dir().join(format!("kiln-{}", whoami())));
    all.into_iter().map(|d| d.join("kiln.sock")).collect()
}

fn socket_dir_candidates() -> Vec<PathBuf> {
    let mut dirs_to_try: Vec<PathBuf> = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        dirs_to_try.push(PathBuf::from(x).join("kiln"));
    }
    dirs_to_try.push(PathBuf::from("/run/kiln"));
    dirs_to_try.extend(dirs::runtime_dir().map(|d| d.join("kiln")));
    dirs_to_try.extend(dirs::cache_dir().map(|d| d.join("kiln")));
    dirs_to_try
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "user".into())
}

/// True if `dir` exists or can be created, and a file can be made in it.
fn writable_dir(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let probe = dir.join(format!(".kiln-probe-{}", std::process::id()));
    let ok = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_forms() {
        assert_eq!(Listen::parse("unix:///run/curio/cuzk.sock").unwrap(), Listen::Unix("/run/curio/cuzk.sock".into()));
        assert_eq!(Listen::parse("unix:rel.sock").unwrap(), Listen::Unix("rel.sock".into()));
        assert_eq!(Listen::parse("tcp:localhost:0").unwrap(), Listen::Tcp("localhost:0".into()));
        assert_eq!(Listen::parse("tcp://[::1]:9820").unwrap(), Listen::Tcp("[::1]:9820".into()));
        // cuzk's bare form.
        assert_eq!(Listen::parse("0.0.0.0:9820").unwrap(), Listen::Tcp("0.0.0.0:9820".into()));
        assert_eq!(Listen::parse("[::1]:9820").unwrap(), Listen::Tcp("[::1]:9820".into()));
        for bad in ["127.0.0.1", "tcp:nohost", "tcp::80", "unix:", "http://x:80", "/run/kiln.sock", ":80", "host:port"] {
            assert!(Listen::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn socket_access() {
        assert_eq!(SocketAccess::parse("0600", "").unwrap(), SocketAccess::default());
        let a = SocketAccess::parse("660", "root").unwrap();
        assert_eq!((a.mode, a.group.clone()), (0o660, Some(("root".to_string(), 0))));
        assert_eq!(a.mode_text(), "0660");
        assert_eq!(SocketAccess::parse("0o640", "4242").unwrap().group, Some(("4242".to_string(), 4242)));
        for (mode, group, words) in [
            ("0888", "", "not an octal mode"),
            ("01777", "", "not an octal mode"),
            ("0066", "", "0600 at least"),
            ("0660", "no-such-group-kiln", "no such group"),
        ] {
            let e = format!("{:#}", SocketAccess::parse(mode, group).unwrap_err());
            assert!(e.contains(words), "{mode} {group}: {e}");
        }
    }

    #[test]
    fn client_candidates_follow_the_daemon_default() {
        let candidates = default_socket_candidates();
        assert!(candidates.iter().any(|c| c == Path::new("/run/kiln/kiln.sock")), "{candidates:?}");
        assert!(candidates.iter().all(|c| c.ends_with("kiln.sock")));
    }
}
