//! The file behind a [`ParamsFile`](super::ParamsFile), guarded against
//! being changed while it is in use.
//!
//! A mapped file that is truncated under its mapping makes the next read of
//! a page past the new end a SIGBUS, which kills the process. So the file
//! is never mapped:
//! - every read goes through `pread` on the open file (`read_at`), the
//!   GPU's streamed sections included: a short file is a short read, i.e.
//!   an error, never a fault;
//! - the file's identity and state (device, inode, length, mtime) are
//!   recorded at open and compared with `fstat` of the open descriptor before
//!   and after each read (`check`): a
//!   file changed in place is an error of the proof that reads it
//!   ([`ParamsError::Changed`]), never points of two different files;
//! - a path that now names another file (a new file renamed over it) leaves
//!   the open file intact: it stays usable, and [`GuardedFile::stale`] says
//!   so, so that its owner opens the new one for later work.

use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::ParamsError;

/// What identifies the file and its contents' version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Stamp {
    fn of(m: &Metadata) -> Self {
        Stamp { dev: m.dev(), ino: m.ino(), len: m.len(), mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()) }
    }

    /// How `now` differs from this stamp, in words (`None`: it does not).
    fn change(&self, now: &Stamp) -> Option<String> {
        if now.len != self.len {
            Some(format!("its length went from {} to {} bytes", self.len, now.len))
        } else if now.mtime_ns != self.mtime_ns {
            Some("it was written in place (its modification time changed)".to_string())
        } else {
            None
        }
    }
}

/// An open parameter file and what it was when opened.
pub(crate) struct GuardedFile {
    path: PathBuf,
    file: File,
    stamp: Stamp,
}

impl GuardedFile {
    pub(crate) fn open(path: &Path) -> Result<Self, ParamsError> {
        let io = |source| ParamsError::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io)?;
        let stamp = Stamp::of(&file.metadata().map_err(io)?);
        if usize::try_from(stamp.len).is_err() {
            return Err(ParamsError::Changed { path: path.to_path_buf(), why: format!("{} bytes do not fit in memory addresses", stamp.len) });
        }
        Ok(GuardedFile { path: path.to_path_buf(), file, stamp })
    }

    /// The length the file had when opened (and must still have).
    pub(crate) fn len(&self) -> usize {
        self.stamp.len as usize
    }

    fn changed(&self, why: String) -> ParamsError {
        ParamsError::Changed { path: self.path.clone(), why }
    }

    /// The open file is as it was when opened: same length, same
    /// modification time (one `fstat`).
    pub(crate) fn check(&self) -> Result<(), ParamsError> {
        let now = self.file.metadata().map_err(|e| self.changed(format!("fstat failed: {e}")))?;
        match self.stamp.change(&Stamp::of(&now)) {
            Some(why) => Err(self.changed(why)),
            None => Ok(()),
        }
    }

    /// Why this file should be opened again for new work: it was changed in
    /// place, or its path now names another file. `None` when it is current,
    /// or when its path names no file any more (the open file is intact).
    pub(crate) fn stale(&self) -> Option<String> {
        if let Err(e) = self.check() {
            return Some(e.to_string());
        }
        let at_path = std::fs::metadata(&self.path).ok()?;
        let (d, i) = (at_path.dev(), at_path.ino());
        (d != self.stamp.dev || i != self.stamp.ino).then(|| format!("{} now names another file (replaced)", self.path.display()))
    }

    /// Fills `buf` from `offset` with `pread`: a file cut short is an error,
    /// never a fault. The caller checks the stamp around what it reads.
    pub(crate) fn read_at(&self, offset: usize, buf: &mut [u8]) -> Result<(), ParamsError> {
        self.file.read_exact_at(buf, offset as u64).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                self.changed(format!("it ends before byte {} (it was {} bytes)", offset + buf.len(), self.stamp.len))
            }
            _ => ParamsError::Io { path: self.path.clone(), source: e },
        })
    }

}
