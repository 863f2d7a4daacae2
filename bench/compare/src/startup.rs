//! P7: how fast weir is ready, on an empty data dir and after `kill -9`
//! with a large unflushed log.
//!
//! "Ready" is the first successful ApiVersions answer on a new connection,
//! timed from just before the process is spawned. weir opens (and, after an
//! unclean stop, recovers) every log before it accepts connections, so a
//! broker that answers has finished recovery.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::broker::WeirProcess;

/// How long a started broker may take to answer ApiVersions.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Spawns weir on `data_dir` and waits until it answers ApiVersions.
/// Returns the process and the time from spawn to that answer.
pub fn start_until_ready(
    weir: &Path,
    core: usize,
    data_dir: &Path,
) -> Result<(WeirProcess, Duration)> {
    let t0 = Instant::now();
    let p = WeirProcess::start(weir, core, data_dir, &[]).context("start weir")?;
    let deadline = t0 + READY_TIMEOUT;
    loop {
        match api_versions(&p.bootstrap) {
            Ok(()) => return Ok((p, t0.elapsed())),
            Err(e) if Instant::now() > deadline => {
                return Err(e).context(format!("weir not ready within {READY_TIMEOUT:?}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// One ApiVersions v0 round trip on a new connection; Ok when the broker
/// answers with error code 0.
pub fn api_versions(bootstrap: &str) -> Result<()> {
    let mut s = TcpStream::connect(bootstrap).with_context(|| format!("connect {bootstrap}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_nodelay(true)?;
    s.write_all(&api_versions_request(7))?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = i32::from_be_bytes(len);
    if !(6..=1 << 20).contains(&n) {
        bail!("ApiVersions response of {n} bytes");
    }
    let mut body = vec![0u8; n as usize];
    s.read_exact(&mut body)?;
    let (correlation, error) = parse_api_versions_head(&body).context("short response")?;
    if correlation != 7 || error != 0 {
        bail!("ApiVersions answered correlation {correlation}, error {error}");
    }
    Ok(())
}

/// ApiVersions v0: size, api key 18, version 0, correlation id, client id.
fn api_versions_request(correlation: i32) -> Vec<u8> {
    let client = b"weir-compare";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&correlation.to_be_bytes());
    body.extend_from_slice(&(client.len() as i16).to_be_bytes());
    body.extend_from_slice(client);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// (correlation id, error code) at the start of an ApiVersions v0 response.
fn parse_api_versions_head(body: &[u8]) -> Option<(i32, i16)> {
    let correlation = i32::from_be_bytes(body.get(..4)?.try_into().ok()?);
    let error = i16::from_be_bytes(body.get(4..6)?.try_into().ok()?);
    Some((correlation, error))
}

/// Bytes recovery has to scan on an unclean start: every `.log` of the
/// partition from the segment holding its recovery point (from
/// `recovery-point-offset-checkpoint`; 0 when absent) onwards.
pub fn unflushed_bytes(data_dir: &Path, topic: &str, partition: i32) -> Result<u64> {
    let rp = std::fs::read_to_string(data_dir.join("recovery-point-offset-checkpoint"))
        .ok()
        .and_then(|text| checkpoint_offset(&text, topic, partition))
        .unwrap_or(0);
    let dir = data_dir.join(format!("{topic}-{partition}"));
    let mut segments = Vec::new();
    for e in std::fs::read_dir(&dir).with_context(|| format!("list {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(base) = name
            .strip_suffix(".log")
            .and_then(|b| b.parse::<i64>().ok())
        {
            segments.push((base, e.metadata()?.len()));
        }
    }
    segments.sort();
    let holder = segments
        .iter()
        .map(|(b, _)| *b)
        .rfind(|b| *b <= rp)
        .unwrap_or(i64::MIN);
    Ok(segments
        .iter()
        .filter(|(b, _)| *b >= holder)
        .map(|(_, len)| len)
        .sum())
}

/// Kafka's checkpoint text: version, count, then `topic partition offset`.
fn checkpoint_offset(text: &str, topic: &str, partition: i32) -> Option<i64> {
    text.lines().skip(2).find_map(|l| {
        let mut f = l.split_whitespace();
        let (t, p, o) = (f.next()?, f.next()?, f.next()?);
        (t == topic && p.parse::<i32>().ok()? == partition)
            .then(|| o.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_request_is_framed() {
        let f = api_versions_request(7);
        let size = i32::from_be_bytes(f[..4].try_into().unwrap()) as usize;
        assert_eq!(size, f.len() - 4);
        assert_eq!(&f[4..6], &18i16.to_be_bytes());
        assert_eq!(&f[8..12], &7i32.to_be_bytes());
    }

    #[test]
    fn response_head_is_checked_for_length() {
        assert_eq!(
            parse_api_versions_head(&[0, 0, 0, 7, 0, 0, 9]),
            Some((7, 0))
        );
        assert_eq!(parse_api_versions_head(&[0, 0, 0, 7, 0]), None);
    }

    #[test]
    fn checkpoint_lines_are_found_by_topic_and_partition() {
        let text = "0\n3\nother 0 5\nwc-1-p7 0 12345\nwc-1-p7 1 9\n";
        assert_eq!(checkpoint_offset(text, "wc-1-p7", 0), Some(12345));
        assert_eq!(checkpoint_offset(text, "wc-1-p7", 1), Some(9));
        assert_eq!(checkpoint_offset(text, "wc-1-p7", 2), None);
        assert_eq!(checkpoint_offset("0\n1\nbroken\n", "broken", 0), None);
    }

    #[test]
    fn unflushed_bytes_start_at_the_recovery_point_segment() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t-0");
        std::fs::create_dir_all(&p).unwrap();
        for (base, len) in [(0i64, 100usize), (50, 200), (90, 300)] {
            std::fs::write(p.join(format!("{base:020}.log")), vec![0u8; len]).unwrap();
        }
        // No checkpoint: everything.
        assert_eq!(unflushed_bytes(d.path(), "t", 0).unwrap(), 600);
        std::fs::write(
            d.path().join("recovery-point-offset-checkpoint"),
            "0\n1\nt 0 60\n",
        )
        .unwrap();
        assert_eq!(unflushed_bytes(d.path(), "t", 0).unwrap(), 500);
    }
}
