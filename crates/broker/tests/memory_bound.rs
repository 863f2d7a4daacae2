//! Hostile size prefixes and declared lengths must not make the broker
//! allocate what they announce. A counting global allocator records the peak
//! of live heap bytes in this test process (broker and client together).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_broker::config::ConfigSources;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

#[allow(unsafe_code)]
// SAFETY: delegates every call to the system allocator unchanged; only
// counts the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

async fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), s.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_sizes_do_not_drive_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.path().display().to_string());
    s.set("connections.max.idle.ms", "300");
    let b = weir_broker::start(s.build().unwrap()).await.unwrap();
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);

    let mut conns = Vec::new();
    // 20 frames declaring just under socket.request.max.bytes (100 MiB),
    // each followed by a request header and nothing else
    for _ in 0..20 {
        let mut c = TcpStream::connect(b.local_addr).await.unwrap();
        let mut bytes = (100 * 1024 * 1024 - 1i32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff]);
        c.write_all(&bytes).await.unwrap();
        conns.push(c);
    }
    // a Metadata v0 request declaring 2^31-1 topics in 14 bytes
    let mut c = TcpStream::connect(b.local_addr).await.unwrap();
    let mut frame = vec![0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut bytes = (frame.len() as i32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&frame);
    c.write_all(&bytes).await.unwrap();
    conns.push(c);
    // every connection is closed by the broker (idle mid-frame, or an
    // invalid request), so every prefix has been read and acted on
    for c in conns.iter_mut() {
        assert!(closed(c).await);
    }
    let grew = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
    assert!(
        grew < 32 << 20,
        "peak heap grew by {grew} bytes for frames declaring 2 GiB in total"
    );
    b.shutdown().await.unwrap();
}
