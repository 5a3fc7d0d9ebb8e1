//! The few calls into the C library the daemon needs, fenced here with
//! their safety arguments: group lookup (for `socket_group`). (Why the
//! CUDA driver does not load is kiln-gpu's `probe`.)

use std::ffi::CString;

use anyhow::{bail, Result};

/// The id of group `name` from the system's group database (`getgrnam_r`,
/// so groups from LDAP or sssd are found too); `None` when there is no
/// such group.
pub fn group_id(name: &str) -> Result<Option<u32>> {
    let Ok(c_name) = CString::new(name) else { bail!("group name {name:?} contains a NUL byte") };
    let mut buf = vec![0u8; 16 << 10];
    loop {
        // SAFETY: `grp` is plain old data that getgrnam_r fills in; its
        // pointers point into `buf`, which outlives every use (only gr_gid,
        // a number, is read). `c_name` is NUL-terminated. `found` is either
        // null or `&mut grp`.
        let (rc, found, gid) = unsafe {
            let mut grp: libc::group = std::mem::zeroed();
            let mut found: *mut libc::group = std::ptr::null_mut();
            let rc = libc::getgrnam_r(c_name.as_ptr(), &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut found);
            (rc, found, grp.gr_gid)
        };
        match rc {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(gid)),
            libc::ERANGE if buf.len() < (1 << 24) => buf.resize(buf.len() * 4, 0),
            err => bail!("looking up group {name:?}: {}", std::io::Error::from_raw_os_error(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_name() {
        assert_eq!(group_id("root").unwrap(), Some(0));
        assert_eq!(group_id("no-such-group-kiln").unwrap(), None);
        assert!(group_id("a\0b").is_err());
    }
}
