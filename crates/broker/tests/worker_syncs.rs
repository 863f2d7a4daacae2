//! No fsync on an async worker thread: a broker serving acks=all produces
//! to `flush.messages=1` partitions with tiny segments (a roll every few
//! batches) syncs only on blocking threads. The partition logs sit on a
//! storage that wraps the real file system and notes every file and
//! directory sync made where the runtime is entered, i.e. on a worker
//! running async tasks: there tokio refuses `Handle::block_on` ("Cannot
//! start a runtime from within a runtime"), while a `spawn_blocking` thread
//! or a worker inside `block_in_place` (`handler::blocking`, which hands
//! the worker's tasks to another thread first) may block.

use crate::common::*;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weir_storage::backend::{FileStorage, Storage, StorageFile};

/// Whether this thread is an async worker in the middle of a task: the
/// runtime is entered here, so tokio would refuse to block on a future.
fn on_async_worker() -> bool {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.block_on(async {}))).is_err()
}

/// Syncs seen, and the ones made on a worker outside a blocking section.
#[derive(Debug, Default)]
struct Seen {
    syncs: AtomicU64,
    on_workers: Mutex<Vec<String>>,
}

impl Seen {
    fn sync(&self, what: &str) {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if on_async_worker() {
            self.on_workers.lock().unwrap().push(format!(
                "{what}\n{}",
                std::backtrace::Backtrace::force_capture()
            ));
        }
    }
}

#[derive(Debug)]
struct Watched {
    inner: FileStorage,
    seen: Arc<Seen>,
}

#[derive(Debug)]
struct WatchedFile {
    inner: Arc<dyn StorageFile>,
    path: String,
    seen: Arc<Seen>,
}

impl StorageFile for WatchedFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, pos)
    }
    fn write_vectored_all_at(&self, bufs: &[&[u8]], pos: u64) -> io::Result<()> {
        self.inner.write_vectored_all_at(bufs, pos)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.seen.sync(&format!("sync of {}", self.path));
        self.inner.sync()
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd()
    }
    fn append(&self, buf: &[u8]) -> io::Result<u64> {
        self.inner.append(buf)
    }
}

impl Storage for Watched {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(WatchedFile {
            inner: self.inner.open(path, create)?,
            path: path.display().to_string(),
            seen: self.seen.clone(),
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
        self.seen
            .sync(&format!("directory sync of {}", path.display()));
        self.inner.sync_dir(path)
    }
}

#[test]
fn acks_all_produces_with_rolls_sync_only_off_the_workers() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seen = Arc::new(Seen::default());
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(Watched {
        inner: FileStorage,
        seen: seen.clone(),
    });
    rt.block_on(async {
        let mut s = ConfigSources::default();
        s.set("listeners", "127.0.0.1:0");
        s.set("log.dirs", &dir.path().display().to_string());
        let b = weir_broker::server::start_with_storage(s.build().unwrap(), storage)
            .await
            .unwrap();
        let mut c = Client::connect(b.local_addr).await;
        assert_eq!(
            create_topic(
                &mut c,
                "synced",
                4,
                &[("flush.messages", "1"), ("segment.bytes", "2048")]
            )
            .await,
            0
        );
        for i in 0..60 {
            let values: Vec<String> = (0..4)
                .map(|k| format!("record {i}.{k} {}", "x".repeat(100)))
                .collect();
            let refs: Vec<&str> = values.iter().map(String::as_str).collect();
            let (err, _) =
                produce(&mut c, "synced", i % 4, batch(&refs, 1_700_000_000_000), -1).await;
            assert_eq!(err, 0, "produce {i}");
        }
        // The appends rolled segments: the rolls ran inside produces.
        let segments: usize = b
            .broker
            .replicas
            .logs()
            .logs()
            .iter()
            .filter(|l| l.topic_partition().topic == "synced")
            .map(|l| l.segment_base_offsets().len())
            .sum();
        assert!(segments > 8, "only {segments} segments over 4 partitions");
        b.shutdown().await.unwrap();
    });
    assert!(
        seen.syncs.load(Ordering::SeqCst) >= 60,
        "every acks=all produce synced: {} syncs",
        seen.syncs.load(Ordering::SeqCst)
    );
    let on_workers = seen.on_workers.lock().unwrap();
    assert!(
        on_workers.is_empty(),
        "{} syncs on async workers, the first:\n{}",
        on_workers.len(),
        on_workers[0]
    );
}
