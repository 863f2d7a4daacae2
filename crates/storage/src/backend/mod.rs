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
