//! Fault injection on top of [`MemStorage`]: I/O errors on chosen writes,
//! syncs and file creations, and a full disk, for testing that errors surface
//! instead of corrupting state.

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
    /// File creations still allowed before every creation of a new file
    /// fails with `ENOSPC` (`u64::MAX` = never fail).
    pub creates_left: AtomicU64,
    /// A full disk: every write past a file's end and every `set_len` that
    /// grows a file fails with `ENOSPC`; reads, overwrites, shrinking,
    /// renames and removals still work.
    pub disk_full: AtomicBool,
    /// When set, a write that fails (either way above) first writes the
    /// first half of its bytes, as a short write on a full disk does.
    pub partial_writes: AtomicBool,
    /// When set, every rename, removal and directory creation fails.
    pub fail_dir_ops: AtomicBool,
    /// When set, the first injected fault halts the storage: from then on
    /// every change (write, `set_len`, creation, rename, removal) fails, so
    /// the storage underneath keeps exactly what was there at the fault, as
    /// if the process had died there.
    pub halt_on_fault: AtomicBool,
    /// Set by the first injected fault when `halt_on_fault` is.
    pub halted: AtomicBool,
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
            creates_left: AtomicU64::new(u64::MAX),
            disk_full: AtomicBool::new(false),
            partial_writes: AtomicBool::new(false),
            fail_dir_ops: AtomicBool::new(false),
            halt_on_fault: AtomicBool::new(false),
            halted: AtomicBool::new(false),
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
    /// Let `n` more files be created, then fail every creation of a new
    /// file with `ENOSPC` (opening existing files still works).
    pub fn fail_creates_after(&self, n: u64) {
        self.faults.creates_left.store(n, Ordering::SeqCst);
    }
    /// Models a full disk (see [`FaultConfig::disk_full`]).
    pub fn set_disk_full(&self, full: bool) {
        self.faults.disk_full.store(full, Ordering::SeqCst);
    }
    /// Failed writes write half their bytes first (see
    /// [`FaultConfig::partial_writes`]).
    pub fn set_partial_writes(&self, partial: bool) {
        self.faults.partial_writes.store(partial, Ordering::SeqCst);
    }
    /// Fails every rename, removal and directory creation.
    pub fn set_fail_dir_ops(&self, fail: bool) {
        self.faults.fail_dir_ops.store(fail, Ordering::SeqCst);
    }
    /// See [`FaultConfig::halt_on_fault`].
    pub fn set_halt_on_fault(&self, halt: bool) {
        self.faults.halt_on_fault.store(halt, Ordering::SeqCst);
    }
    /// Whether a fault halted the storage.
    pub fn is_halted(&self) -> bool {
        self.faults.halted.load(Ordering::SeqCst)
    }
    pub fn heal(&self) {
        self.faults.halted.store(false, Ordering::SeqCst);
        self.set_halt_on_fault(false);
        self.set_fail_dir_ops(false);
        self.fail_writes_after(u64::MAX);
        self.set_fail_sync(false);
        self.fail_creates_after(u64::MAX);
        self.set_disk_full(false);
    }
}

fn injected() -> io::Error {
    io::Error::other("injected fault")
}

impl FaultConfig {
    /// Counts an injected fault (halting when asked to) and returns `e`.
    fn fault(&self, e: io::Error) -> io::Error {
        if self.halt_on_fault.load(Ordering::SeqCst) {
            self.halted.store(true, Ordering::SeqCst);
        }
        e
    }
    /// Fails a change when the storage is halted.
    fn check_halted(&self) -> io::Result<()> {
        if self.halted.load(Ordering::SeqCst) {
            return Err(io::Error::other("storage halted by an earlier fault"));
        }
        Ok(())
    }
    /// Rename, removal, directory creation.
    fn dir_op(&self) -> io::Result<()> {
        self.check_halted()?;
        if self.fail_dir_ops.load(Ordering::SeqCst) {
            return Err(self.fault(injected()));
        }
        Ok(())
    }
}

/// `ENOSPC`, as the kernel reports a full disk.
fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

/// Takes one unit of `counter` (`u64::MAX` = unlimited); false when none is left.
fn take(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
            0 => None,
            u64::MAX => Some(u64::MAX),
            n => Some(n - 1),
        })
        .is_ok()
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn StorageFile>,
    faults: Arc<FaultConfig>,
}

impl FaultyFile {
    fn take_write(&self) -> io::Result<()> {
        self.faults.check_halted()?;
        if take(&self.faults.writes_left) {
            Ok(())
        } else {
            Err(self.faults.fault(injected()))
        }
    }
    /// With a full disk, a file may not grow past `end`.
    fn check_space(&self, end: u64) -> io::Result<()> {
        self.faults.check_halted()?;
        if self.faults.disk_full.load(Ordering::SeqCst) && end > self.inner.len()? {
            return Err(self.faults.fault(no_space()));
        }
        Ok(())
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
        let allowed = self
            .check_space(pos + buf.len() as u64)
            .and_then(|()| self.take_write());
        if let Err(e) = allowed {
            if self.faults.partial_writes.load(Ordering::SeqCst) && buf.len() > 1 {
                self.inner.write_all_at(&buf[..buf.len() / 2], pos)?;
            }
            return Err(e);
        }
        self.inner.write_all_at(buf, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check_space(len)?;
        self.take_write()?;
        self.inner.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            return Err(self.faults.fault(injected()));
        }
        self.inner.sync()
    }
}

impl Storage for FaultyStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        if create && !self.inner.exists(path) {
            self.faults.check_halted()?;
            if !take(&self.faults.creates_left) {
                return Err(self.faults.fault(no_space()));
            }
        }
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
        self.faults.dir_op()?;
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.faults.dir_op()?;
        self.inner.remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        if !self.inner.exists(path) {
            self.faults.dir_op()?;
        }
        self.inner.create_dir_all(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.faults.dir_op()?;
        self.inner.remove_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        self.inner.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
}
