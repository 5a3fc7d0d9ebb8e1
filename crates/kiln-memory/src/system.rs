//! How much memory the host lets this process use: `MemTotal` from
//! `/proc/meminfo` and the cgroup memory limit (v2 `memory.max`, v1
//! `memory.limit_in_bytes`).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// cgroup v1 reports "no limit" as a huge page-rounded number; anything at or
/// above this is treated as no limit.
const NO_LIMIT_THRESHOLD: u64 = 1 << 60;

/// What the host reports about memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HostMemory {
    /// `MemTotal` from `/proc/meminfo`, in bytes.
    pub mem_total: u64,
    /// The tightest cgroup memory limit along this process's cgroup path,
    /// if any.
    pub cgroup_limit: Option<u64>,
}

impl HostMemory {
    /// The smaller of `mem_total` and `cgroup_limit`.
    pub fn limit(&self) -> u64 {
        self.cgroup_limit
            .map_or(self.mem_total, |c| c.min(self.mem_total))
    }

    /// [`limit`](Self::limit) minus `margin_bytes` (zero if the margin is larger).
    pub fn usable(&self, margin_bytes: u64) -> u64 {
        self.limit().saturating_sub(margin_bytes)
    }
}

/// Why the host's memory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// A file that must exist could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `/proc/meminfo` has no readable `MemTotal` line.
    #[error("no MemTotal line in {0}")]
    NoMemTotal(PathBuf),
}

pub(crate) fn detect_host_memory() -> Result<HostMemory, DetectError> {
    detect_under(Path::new("/"))
}

/// Detection with every path under `root`, so tests can lay out a fake host.
pub(crate) fn detect_under(root: &Path) -> Result<HostMemory, DetectError> {
    let meminfo = root.join("proc/meminfo");
    let text = std::fs::read_to_string(&meminfo).map_err(|source| DetectError::Read {
        path: meminfo.clone(),
        source,
    })?;
    let mem_total = parse_mem_total(&text).ok_or(DetectError::NoMemTotal(meminfo))?;
    // No /proc/self/cgroup (not Linux-like, or a sandbox): no cgroup limit.
    let cgroup_limit = std::fs::read_to_string(root.join("proc/self/cgroup"))
        .ok()
        .and_then(|cgroups| cgroup_limit_under(root, &cgroups));
    Ok(HostMemory {
        mem_total,
        cgroup_limit,
    })
}

fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The smallest limit over every cgroup hierarchy that has the memory
/// controller. Each hierarchy is walked from the process's own cgroup up to the
/// mount root, because a parent's limit binds too and because inside a
/// container the listed path often does not exist under the container's own
/// mount (whose root then holds the container's limit).
fn cgroup_limit_under(root: &Path, proc_self_cgroup: &str) -> Option<u64> {
    let mut tightest: Option<u64> = None;
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (mount, file) = if id == "0" && controllers.is_empty() {
            // cgroup v2: /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts.
            let unified = root.join("sys/fs/cgroup");
            if unified.join("cgroup.controllers").exists() {
                (unified, "memory.max")
            } else {
                (root.join("sys/fs/cgroup/unified"), "memory.max")
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("sys/fs/cgroup/memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = PathBuf::from(path.trim_start_matches('/'));
        loop {
            if let Some(limit) = read_limit(&mount.join(&dir).join(file)) {
                tightest = Some(tightest.map_or(limit, |t| t.min(limit)));
            }
            if !dir.pop() {
                break;
            }
        }
    }
    tightest
}

fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    // v2 writes "max" for no limit.
    let limit: u64 = text.trim().parse().ok()?;
    (limit < NO_LIMIT_THRESHOLD).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const MEMINFO: &str = "MemTotal:       24683584 kB\nMemFree:        1000 kB\n";

    #[test]
    fn mem_total_in_kib() {
        assert_eq!(parse_mem_total(MEMINFO), Some(24683584 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: x kB\n"), None);
    }

    #[test]
    fn cgroup_v2_takes_the_tightest_ancestor() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "proc/meminfo", MEMINFO);
        write(r, "proc/self/cgroup", "0::/a/b\n");
        write(r, "sys/fs/cgroup/cgroup.controllers", "memory\n");
        write(r, "sys/fs/cgroup/a/memory.max", "8589934592\n");
        write(r, "sys/fs/cgroup/a/b/memory.max", "max\n");
        let host = detect_under(r).unwrap();
        assert_eq!(host.cgroup_limit, Some(8 << 30));
        assert_eq!(host.limit(), 8 << 30);
        assert_eq!(host.usable(1 << 30), 7 << 30);
        assert_eq!(host.usable(9 << 30), 0);
    }

    #[test]
    fn cgroup_v1_memory_controller_and_unlimited_value() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "proc/meminfo", MEMINFO);
        write(
            r,
            "proc/self/cgroup",
            "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n",
        );
        // The container sees its own cgroup at the mount root, not /docker/abc.
        write(
            r,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "4294967296\n",
        );
        write(r, "sys/fs/cgroup/unified/memory.max", "max\n");
        assert_eq!(detect_under(r).unwrap().cgroup_limit, Some(4 << 30));

        write(
            r,
            "sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        let host = detect_under(r).unwrap();
        assert_eq!(host.cgroup_limit, None);
        assert_eq!(host.limit(), 24683584 * 1024);
    }

    #[test]
    fn cgroup_larger_than_mem_total_does_not_raise_the_limit() {
        let host = HostMemory {
            mem_total: 10,
            cgroup_limit: Some(20),
        };
        assert_eq!(host.limit(), 10);
    }

    #[test]
    fn missing_meminfo_is_an_error_naming_the_file() {
        let root = tempfile::tempdir().unwrap();
        let err = detect_under(root.path()).unwrap_err().to_string();
        assert!(err.contains("proc/meminfo"), "{err}");
    }

    #[test]
    fn this_host_is_readable() {
        let host = detect_host_memory().unwrap();
        assert!(host.mem_total > 0);
        assert!(host.limit() <= host.mem_total);
    }
}
