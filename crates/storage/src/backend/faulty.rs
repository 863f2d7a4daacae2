//! Fault injection on top of [`MemStorage`]: I/O errors on chosen writes and
//! syncs, for testing that errors surface instead of corrupting state.

use super::mem::MemStorage;
use super::{Storage, StorageFile};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Which operations fail. Shared by all files of a [`FaultyStorage`].
#[derive(Debug, Default)]
pub struct FaultConfig {
    /// Writes still allowed before every write fails (`u64::MAX` = never fail).
    pub writes_left: AtomicU64,
    /// When set, every `sync` fails.
    pub fail_sync: AtomicBool,
}

/// A [`MemStorage`] whose writes and syncs can be made to fail.
#[derive(Debug, Clone)]
pub struct FaultyStorage {
    inner: MemStorage,
    faults: Arc<FaultConfig>,
}

impl FaultyStorage {
    pub fn new(inner: MemStorage) -> Self {
        let faults = FaultConfig {
            writes_left: AtomicU64::new(u64::MAX),
            fail_sync: AtomicBool::new(false),
        };
        FaultyStorage {
            inner,
            faults: Arc::new(faults),
        }
    }
    /// The storage underneath (to simulate a crash of it).
    pub fn inner(&self) -> &MemStorage {
        &self.inner
    }
    pub fn faults(&self) -> &FaultConfig {
        &self.faults
    }
    /// Let `n` more writes succeed, then fail all.
    pub fn fail_writes_after(&self, n: u64) {
        self.faults.writes_left.store(n, Ordering::SeqCst);
    }
    pub fn set_fail_sync(&self, fail: bool) {
        self.faults.fail_sync.store(fail, Ordering::SeqCst);
    }
    pub fn heal(&self) {
        self.fail_writes_after(u64::MAX);
        self.set_fail_sync(false);
    }
}

fn injected() -> io::Error {
    io::Error::other("injected fault")
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    faults: Arc<FaultConfig>,
}

impl FaultyFile {
    fn take_write(&self) -> io::Result<()> {
        let r =
            self.faults
                .writes_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                    0 => None,
                    u64::MAX => Some(u64::MAX),
                    n => Some(n - 1),
                });
        r.map(|_| ()).map_err(|_| injected())
    }
}

impl StorageFile for FaultyFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.take_write()?;
        self.inner.write_all_at(buf, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.take_write()?;
        self.inner.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.inner.sync()
    }
}

impl Storage for FaultyStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let inner = self.inner.open(path, create)?;
        Ok(Arc::new(FaultyFile {
            inner,
            faults: self.faults.clone(),
        }))
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        self.inner.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
}
