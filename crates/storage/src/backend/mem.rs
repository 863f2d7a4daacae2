//! In-memory storage that tracks, per file, the bytes written and the bytes
//! made durable by `sync`, so tests can simulate a crash.
//!
//! Model (see `docs/storage-format.md`): file contents are volatile until the
//! file is synced. A file's directory entry (its creation, rename or
//! removal) is volatile until its directory is synced (`sync_dir`): a power
//! loss undoes it, as POSIX allows. Directories themselves are treated as
//! durable at once.

use super::{Storage, StorageFile};
use rand::{RngExt, SeedableRng, rngs::StdRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct FileState {
    data: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
pub(crate) struct MemFile {
    state: Mutex<FileState>,
}

impl MemFile {
    fn lock(&self) -> MutexGuard<'_, FileState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StorageFile for MemFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().data.len() as u64)
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        let st = self.lock();
        let start = usize::try_from(pos).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        if end > st.data.len() {
            return Err(eof());
        }
        buf.copy_from_slice(&st.data[start..end]);
        Ok(())
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let mut st = self.lock();
        let start = usize::try_from(pos).map_err(|_| eof())?;
        let end = start + buf.len();
        if st.data.len() < end {
            st.data.resize(end, 0);
        }
        st.data[start..end].copy_from_slice(buf);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| eof())?;
        self.lock().data.resize(len, 0);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        let mut st = self.lock();
        st.durable = st.data.clone();
        Ok(())
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", p.display()),
    )
}

#[derive(Debug, Default)]
struct Tree {
    files: BTreeMap<PathBuf, Arc<MemFile>>,
    dirs: BTreeSet<PathBuf>,
    /// The file entries as of the last `sync_dir` of each one's directory:
    /// what a power loss ([`MemStorage::crash`]) keeps.
    synced_entries: BTreeMap<PathBuf, Arc<MemFile>>,
}

/// What a simulated crash does to bytes that were written but not synced.
#[derive(Debug, Clone, Copy)]
pub enum CrashMode {
    /// Only synced bytes survive.
    LoseUnsynced,
    /// Everything written survives (a process crash, not a power loss).
    KeepWritten,
    /// Per file, an arbitrary prefix of unsynced appends survives, possibly
    /// with its last part zeroed (a torn write); overwritten regions come
    /// back old or new per 512-byte sector.
    Torn { seed: u64 },
}

/// An in-memory file system. Cloning shares the same tree.
#[derive(Debug, Default, Clone)]
pub struct MemStorage {
    tree: Arc<Mutex<Tree>>,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Tree> {
        self.tree.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new storage holding what would be on disk after a crash now.
    ///
    /// A power loss (`LoseUnsynced`, `Torn`) also undoes every file entry
    /// created, renamed or removed since its directory's last `sync_dir`
    /// (a new file is gone, a removed one is back, a rename is reverted),
    /// as POSIX allows; directories themselves stay as they are. A process
    /// crash (`KeepWritten`) keeps the entries, as the kernel does.
    pub fn crash(&self, mode: CrashMode) -> MemStorage {
        let tree = self.lock();
        let mut rng = match mode {
            CrashMode::Torn { seed } => Some(StdRng::seed_from_u64(seed)),
            _ => None,
        };
        let entries = match mode {
            CrashMode::KeepWritten => &tree.files,
            _ => &tree.synced_entries,
        };
        let mut files = BTreeMap::new();
        let mut dirs = tree.dirs.clone();
        for (path, f) in entries {
            let st = f.lock();
            let content = match (mode, rng.as_mut()) {
                (CrashMode::KeepWritten, _) => st.data.clone(),
                (CrashMode::Torn { .. }, Some(rng)) => torn(&st.durable, &st.data, rng),
                _ => st.durable.clone(),
            };
            let nf = MemFile::default();
            {
                let mut ns = nf.lock();
                ns.durable = content.clone();
                ns.data = content;
            }
            files.insert(path.clone(), Arc::new(nf));
            // An entry brought back keeps its directory.
            let mut d = path.clone();
            while d.pop() && !d.as_os_str().is_empty() {
                dirs.insert(d.clone());
            }
        }
        MemStorage {
            tree: Arc::new(Mutex::new(Tree {
                synced_entries: files.clone(),
                files,
                dirs,
            })),
        }
    }

    /// Direct access to a file's current bytes (tests).
    pub fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        let tree = self.lock();
        let f = tree.files.get(path).ok_or_else(|| not_found(path))?;
        Ok(f.lock().data.clone())
    }

    /// Replaces a file's bytes, written and durable (tests: corruption).
    pub fn write_all(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut tree = self.lock();
        let f = tree.files.entry(path.to_path_buf()).or_default().clone();
        tree.synced_entries.insert(path.to_path_buf(), f.clone());
        let mut st = f.lock();
        st.data = bytes.to_vec();
        st.durable = bytes.to_vec();
        Ok(())
    }
}

/// Moves every entry under directory `from` to the same place under `to`.
fn move_under(entries: &mut BTreeMap<PathBuf, Arc<MemFile>>, from: &Path, to: &Path) {
    let moved: Vec<PathBuf> = entries
        .keys()
        .filter(|p| p.starts_with(from))
        .cloned()
        .collect();
    for p in moved {
        if let Some(f) = entries.remove(&p) {
            let rest = p.strip_prefix(from).unwrap_or(Path::new(""));
            entries.insert(to.join(rest), f);
        }
    }
}

fn torn(durable: &[u8], data: &[u8], rng: &mut StdRng) -> Vec<u8> {
    if data.len() >= durable.len() && data[..durable.len()] == *durable {
        // Pure append since the last sync: keep a prefix of the new bytes.
        let extra = data.len() - durable.len();
        let keep = if extra == 0 {
            0
        } else {
            rng.random_range(0..=extra)
        };
        let mut out = data[..durable.len() + keep].to_vec();
        if keep > 0 && rng.random_bool(0.3) {
            // The length made it to disk but the last block did not.
            let zero_from = durable.len() + rng.random_range(0..keep);
            out[zero_from..].iter_mut().for_each(|b| *b = 0);
        }
        out
    } else {
        let len = if rng.random_bool(0.5) {
            durable.len()
        } else {
            data.len()
        };
        let mut out = vec![0u8; len];
        for (i, chunk) in out.chunks_mut(512).enumerate() {
            let src = if rng.random_bool(0.5) { durable } else { data };
            let start = i * 512;
            for (j, b) in chunk.iter_mut().enumerate() {
                *b = src.get(start + j).copied().unwrap_or(0);
            }
        }
        out
    }
}

impl Storage for MemStorage {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut tree = self.lock();
        if let Some(f) = tree.files.get(path) {
            return Ok(f.clone());
        }
        if !create {
            return Err(not_found(path));
        }
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
            && !tree.dirs.contains(parent)
        {
            return Err(not_found(parent));
        }
        let f = Arc::new(MemFile::default());
        tree.files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
    fn exists(&self, path: &Path) -> bool {
        let tree = self.lock();
        tree.files.contains_key(path) || tree.dirs.contains(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut tree = self.lock();
        if let Some(f) = tree.files.remove(from) {
            tree.files.insert(to.to_path_buf(), f);
            return Ok(());
        }
        if !tree.dirs.contains(from) {
            return Err(not_found(from));
        }
        let moved_dirs: Vec<PathBuf> = tree
            .dirs
            .iter()
            .filter(|d| d.starts_with(from))
            .cloned()
            .collect();
        for d in moved_dirs {
            tree.dirs.remove(&d);
            let rest = d.strip_prefix(from).unwrap_or(Path::new(""));
            tree.dirs.insert(to.join(rest));
        }
        // A directory's rename is durable at once: its synced entries move
        // with it.
        move_under(&mut tree.files, from, to);
        move_under(&mut tree.synced_entries, from, to);
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.lock();
        tree.files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.lock();
        let mut p = path.to_path_buf();
        loop {
            tree.dirs.insert(p.clone());
            if !p.pop() || p.as_os_str().is_empty() {
                break;
            }
        }
        Ok(())
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.lock();
        if !tree.dirs.contains(path) {
            return Err(not_found(path));
        }
        tree.dirs.retain(|d| !d.starts_with(path));
        tree.files.retain(|p, _| !p.starts_with(path));
        tree.synced_entries.retain(|p, _| !p.starts_with(path));
        Ok(())
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        let tree = self.lock();
        if !tree.dirs.contains(path) {
            return Err(not_found(path));
        }
        let mut out = Vec::new();
        for d in &tree.dirs {
            if d.parent() == Some(path)
                && let Some(n) = d.file_name().and_then(|n| n.to_str())
            {
                out.push((n.to_string(), true));
            }
        }
        for p in tree.files.keys() {
            if p.parent() == Some(path)
                && let Some(n) = p.file_name().and_then(|n| n.to_str())
            {
                out.push((n.to_string(), false));
            }
        }
        out.sort();
        Ok(out)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.lock();
        let tree = &mut *tree;
        tree.synced_entries.retain(|p, _| p.parent() != Some(path));
        for (p, f) in &tree.files {
            if p.parent() == Some(path) {
                tree.synced_entries.insert(p.clone(), f.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_power_loss_undoes_unsynced_directory_entries() {
        let s = MemStorage::new();
        let d = Path::new("/d");
        s.create_dir_all(d).unwrap();
        let a = s.open(Path::new("/d/a"), true).unwrap();
        a.write_all_at(b"kept", 0).unwrap();
        a.sync().unwrap();
        // Created and synced, but its entry is not: gone.
        let c = s.crash(CrashMode::LoseUnsynced);
        assert!(!c.exists(Path::new("/d/a")));
        assert!(c.exists(d));
        let b = s.open(Path::new("/d/b"), true).unwrap();
        b.sync().unwrap();
        s.sync_dir(d).unwrap();
        // A removal and a rename not synced yet are undone.
        s.remove_file(Path::new("/d/a")).unwrap();
        s.rename(Path::new("/d/b"), Path::new("/d/c")).unwrap();
        let c = s.crash(CrashMode::LoseUnsynced);
        assert_eq!(c.read_all(Path::new("/d/a")).unwrap(), b"kept");
        assert!(c.exists(Path::new("/d/b")) && !c.exists(Path::new("/d/c")));
        // A process crash keeps directory operations as they are.
        let p = s.crash(CrashMode::KeepWritten);
        assert!(!p.exists(Path::new("/d/a")) && p.exists(Path::new("/d/c")));
    }

    #[test]
    fn crash_keeps_only_synced_bytes() {
        let s = MemStorage::new();
        s.create_dir_all(Path::new("/d")).unwrap();
        let f = s.open(Path::new("/d/a"), true).unwrap();
        s.sync_dir(Path::new("/d")).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        f.sync().unwrap();
        f.write_all_at(b" world", 5).unwrap();
        let c = s.crash(CrashMode::LoseUnsynced);
        assert_eq!(c.read_all(Path::new("/d/a")).unwrap(), b"hello");
        let k = s.crash(CrashMode::KeepWritten);
        assert_eq!(k.read_all(Path::new("/d/a")).unwrap(), b"hello world");
        for seed in 0..20 {
            let t = s.crash(CrashMode::Torn { seed });
            let got = t.read_all(Path::new("/d/a")).unwrap();
            assert!(got.starts_with(b"hello") && got.len() <= 11);
        }
        assert_eq!(
            s.list_dir(Path::new("/d")).unwrap(),
            vec![("a".to_string(), false)]
        );
    }
}
