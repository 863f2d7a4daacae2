//! The storage seam: all file I/O of the log goes through [`Storage`] and
//! [`StorageFile`], so tests can swap the real file system for an in-memory
//! one ([`MemStorage`]) that models durable vs written bytes and simulates
//! crashes, or a fault-injecting one ([`FaultyStorage`]).

mod faulty;
mod mem;

pub use faulty::{FaultConfig, FaultyStorage};
pub use mem::{CrashMode, MemStorage};

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// One open file. Positional I/O only; `&self` everywhere so a handle can be
/// shared (readers keep an `Arc` to it after the segment is deleted).
pub trait StorageFile: Send + Sync + Debug {
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Reads exactly `buf.len()` bytes at `pos` (error on a short read).
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()>;
    /// Writes all of `buf` at `pos`, extending the file as needed.
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()>;
    /// Writes the concatenation of `bufs` at `pos` (like `write_all_at`
    /// of the joined bytes; not atomic). Backends with vectored positional
    /// writes do it in one call.
    fn write_vectored_all_at(&self, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
        let mut at = pos;
        for b in bufs {
            self.write_all_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// Truncates or extends (with zeros) to `len`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes everything written so far durable.
    fn sync(&self) -> io::Result<()>;
    /// The OS file descriptor, when there is one (for sendfile).
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Appends `buf` at the current end; returns the position it was written at.
    fn append(&self, buf: &[u8]) -> io::Result<u64> {
        let pos = self.len()?;
        self.write_all_at(buf, pos)?;
        Ok(pos)
    }
}

/// A file system: opening files and the directory operations the log needs.
pub trait Storage: Send + Sync + Debug {
    /// Opens a file for reading and writing; creates it (empty) when `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    fn exists(&self, path: &Path) -> bool;
    /// Atomically renames a file or directory (replacing `to` if it is a file).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Entry names of a directory, with `true` for subdirectories. Sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>>;
    /// Makes renames, creations and removals in `path` durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// The real file system (std files, positional I/O via `FileExt`).
#[derive(Debug, Default, Clone, Copy)]
pub struct FileStorage;

#[derive(Debug)]
struct RealFile(File);

impl StorageFile for RealFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.0, buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, pos)
    }
    fn write_vectored_all_at(&self, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
        pwritev_all(&self.0, bufs, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.0))
    }
}

impl Storage for FileStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(RealFile(f)))
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(path)? {
            let e = e?;
            if let Ok(name) = e.file_name().into_string() {
                out.push((name, e.file_type()?.is_dir()));
            }
        }
        out.sort();
        Ok(out)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
}

/// `pwritev(2)` until every byte of `bufs` is written at `pos` (partial
/// writes and `EINTR` resumed; at most `IOV_MAX` buffers per call).
fn pwritev_all(file: &std::fs::File, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
    const IOV_MAX: usize = 1024;
    let fd = std::os::fd::AsRawFd::as_raw_fd(file);
    let mut bufs: Vec<&[u8]> = bufs.iter().copied().filter(|b| !b.is_empty()).collect();
    let mut first = 0usize;
    let mut at = pos;
    while first < bufs.len() {
        let chunk = &bufs[first..bufs.len().min(first + IOV_MAX)];
        let iov: Vec<libc::iovec> = chunk
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        let offset = libc::off_t::try_from(at)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
        // SAFETY: every iovec points into a live slice borrowed from `bufs`
        // (which outlives the call) with its exact length; pwritev only
        // reads them. `fd` belongs to `file`, open for the whole call.
        #[allow(unsafe_code)]
        let n = unsafe { libc::pwritev(fd, iov.as_ptr(), iov.len() as libc::c_int, offset) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        at += n as u64;
        // skip what was written
        let mut left = n as usize;
        while left > 0 && first < bufs.len() {
            let len = bufs[first].len();
            if left >= len {
                left -= len;
                first += 1;
            } else {
                bufs[first] = &bufs[first][left..];
                left = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectored_writes_equal_the_joined_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = FileStorage.open(&path, true).unwrap();
        f.write_all_at(b"0123456789", 0).unwrap();
        // more buffers than one pwritev call takes, some empty
        let owned: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let bufs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        f.write_vectored_all_at(&bufs, 4).unwrap();
        let mut want = b"0123".to_vec();
        want.extend(owned.concat());
        let got = crate::segment::read_all(&*f).unwrap();
        assert_eq!(got, want);
        // the default (one write per buffer) gives the same bytes
        let m = MemStorage::default();
        m.create_dir_all(dir.path()).unwrap();
        let g = m.open(&path, true).unwrap();
        g.write_all_at(b"0123456789", 0).unwrap();
        g.write_vectored_all_at(&bufs, 4).unwrap();
        assert_eq!(crate::segment::read_all(&*g).unwrap(), want);
    }
}
