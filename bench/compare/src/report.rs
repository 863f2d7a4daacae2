//! Result rows, the printed table and the JSON report.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::limits::{Cores, Limits};

const MIB: f64 = 1024.0 * 1024.0;

/// How a row's ratio is judged against its target.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub enum Goal {
    /// ratio (result / limit) must be at least the target.
    AtLeast,
    /// ratio (result / limit) must be at most the target.
    AtMost,
    /// No target: the value is reported, lower is better (P6, latencies).
    Report,
    /// No target: the value is reported, higher is better (P9's rates).
    ReportHigher,
}

/// One workload result. `limit` and `ratio` are absent when the target is
/// absolute (P3); `met` is absent when the workload failed.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub result: Option<f64>,
    pub unit: String,
    pub limit: Option<f64>,
    pub limit_name: String,
    pub ratio: Option<f64>,
    pub goal: Goal,
    pub target: f64,
    pub met: Option<bool>,
    pub broker_cpu_seconds: Option<f64>,
    pub broker_peak_rss_kib: Option<u64>,
    /// CPU seconds of this process (the client) during the workload.
    pub client_cpu_seconds: Option<f64>,
    pub error: Option<String>,
    pub details: serde_json::Value,
}

impl Row {
    /// A throughput in bytes/s, reported in MiB/s, against a limit in bytes/s.
    #[allow(clippy::too_many_arguments)]
    pub fn throughput(
        workload: &str,
        bytes_per_s: f64,
        limit_bytes_per_s: f64,
        limit_name: &str,
        target_ratio: f64,
        cpu: Option<f64>,
        rss: Option<u64>,
        details: serde_json::Value,
    ) -> Row {
        let ratio = bytes_per_s / limit_bytes_per_s;
        Row {
            workload: workload.to_string(),
            result: Some(bytes_per_s / MIB),
            unit: "MiB/s".into(),
            limit: Some(limit_bytes_per_s / MIB),
            limit_name: limit_name.into(),
            ratio: Some(ratio),
            goal: Goal::AtLeast,
            target: target_ratio,
            met: Some(ratio >= target_ratio),
            broker_cpu_seconds: cpu,
            broker_peak_rss_kib: rss,
            client_cpu_seconds: None,
            error: None,
            details,
        }
    }

    /// A record rate against an absolute target.
    pub fn records_rate(
        workload: &str,
        records_per_s: f64,
        target: f64,
        cpu: Option<f64>,
        rss: Option<u64>,
        details: serde_json::Value,
    ) -> Row {
        Row {
            workload: workload.to_string(),
            result: Some(records_per_s),
            unit: "rec/s".into(),
            limit: None,
            limit_name: "absolute target".into(),
            ratio: None,
            goal: Goal::AtLeast,
            target,
            met: Some(records_per_s >= target),
            broker_cpu_seconds: cpu,
            broker_peak_rss_kib: rss,
            client_cpu_seconds: None,
            error: None,
            details,
        }
    }

    /// A latency in µs against a limit in µs; the ratio must stay at most
    /// `max_ratio`.
    pub fn latency(
        workload: &str,
        us: f64,
        limit_us: f64,
        max_ratio: f64,
        cpu: Option<f64>,
        rss: Option<u64>,
        details: serde_json::Value,
    ) -> Row {
        let ratio = us / limit_us;
        Row {
            workload: workload.to_string(),
            result: Some(us),
            unit: "us".into(),
            limit: Some(limit_us),
            limit_name: "loopback RTT p99 + 4 KiB fdatasync p99".into(),
            ratio: Some(ratio),
            goal: Goal::AtMost,
            target: max_ratio,
            met: Some(ratio <= max_ratio),
            broker_cpu_seconds: cpu,
            broker_peak_rss_kib: rss,
            client_cpu_seconds: None,
            error: None,
            details,
        }
    }

    /// A value against an absolute target in its own unit (no limit).
    #[allow(clippy::too_many_arguments)]
    pub fn absolute(
        workload: &str,
        value: f64,
        unit: &str,
        goal: Goal,
        target: f64,
        cpu: Option<f64>,
        rss: Option<u64>,
        details: serde_json::Value,
    ) -> Row {
        let met = match goal {
            Goal::AtLeast => Some(value >= target),
            Goal::AtMost => Some(value <= target),
            Goal::Report | Goal::ReportHigher => None,
        };
        Row {
            workload: workload.to_string(),
            result: Some(value),
            unit: unit.into(),
            limit: None,
            limit_name: "absolute target".into(),
            ratio: None,
            goal,
            target,
            met,
            broker_cpu_seconds: cpu,
            broker_peak_rss_kib: rss,
            client_cpu_seconds: None,
            error: None,
            details,
        }
    }

    /// The same row without a target: its value and ratio are reported,
    /// not judged.
    pub fn report_only(self) -> Row {
        let goal = match self.goal {
            Goal::AtMost | Goal::Report => Goal::Report,
            Goal::AtLeast | Goal::ReportHigher => Goal::ReportHigher,
        };
        Row {
            goal,
            target: 0.0,
            met: None,
            ..self
        }
    }

    pub fn failed(workload: &str, error: String) -> Row {
        Row {
            workload: workload.to_string(),
            result: None,
            unit: String::new(),
            limit: None,
            limit_name: String::new(),
            ratio: None,
            goal: Goal::AtLeast,
            target: 0.0,
            met: None,
            broker_cpu_seconds: None,
            broker_peak_rss_kib: None,
            client_cpu_seconds: None,
            error: Some(error),
            details: serde_json::Value::Null,
        }
    }
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct Report {
    pub unix_time: u64,
    /// `/proc/loadavg` before the limits were measured.
    pub load_average_at_start: String,
    pub machine: Machine,
    pub scale: String,
    pub bootstrap: String,
    pub broker_pid: Option<u32>,
    pub cores: Option<Cores>,
    pub limits: Limits,
    pub rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
pub struct Machine {
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub mem_total_kib: u64,
    /// `/proc/loadavg` when the report was made: other load on the machine
    /// skews every number, limits included.
    pub load_average: String,
}

impl Machine {
    fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_total_kib = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        Machine {
            kernel,
            cpu_model,
            // Counted from cpuinfo: this process is pinned to one core.
            cpus: cpuinfo
                .lines()
                .filter(|l| l.starts_with("processor"))
                .count(),
            mem_total_kib,
            load_average: load_average(),
        }
    }
}

/// The first three fields of `/proc/loadavg`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn unix_time() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Report {
    pub fn new(
        load_average_at_start: String,
        scale: &str,
        bootstrap: &str,
        broker_pid: Option<u32>,
        cores: Option<Cores>,
        limits: Limits,
        rows: Vec<Row>,
    ) -> Report {
        Report {
            unix_time: unix_time(),
            load_average_at_start,
            machine: Machine::detect(),
            scale: scale.into(),
            bootstrap: bootstrap.into(),
            broker_pid,
            cores,
            limits,
            rows,
        }
    }

    /// The result table (Markdown, so it pastes into docs unchanged).
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "machine: {} x {}, kernel {}, load average {} at start, {} at end; scale {}; broker {} (pid {}); cores {}\n\n",
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.kernel,
            self.load_average_at_start,
            self.machine.load_average,
            self.scale,
            self.bootstrap,
            self.broker_pid.map_or("?".into(), |p| p.to_string()),
            self.cores.map_or("not pinned".into(), |c| format!(
                "broker {} / client {}",
                c.broker, c.client
            )),
        ));
        s.push_str("| workload | result | limit | ratio | target | met? | broker CPU s | broker peak RSS | client CPU s |\n");
        s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for r in &self.rows {
            s.push_str(&row_line(r));
            s.push('\n');
        }
        s.push('\n');
        s.push_str(&limits_text(&self.limits));
        for r in self.rows.iter().filter(|r| r.error.is_some()) {
            s.push_str(&format!(
                "\n{} error: {}",
                r.workload,
                r.error.as_deref().unwrap_or("")
            ));
        }
        s
    }
}

fn row_line(r: &Row) -> String {
    let num = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let result = r
        .result
        .map_or("FAILED".into(), |v| format!("{} {}", num(v), r.unit));
    let limit = r.limit.map_or("-".into(), |v| {
        format!("{} {} ({})", num(v), r.unit, r.limit_name)
    });
    let ratio = r.ratio.map_or("-".into(), |v| format!("{v:.2}"));
    let op = if r.goal == Goal::AtLeast {
        "≥"
    } else {
        "≤"
    };
    let target = if r.error.is_some() {
        "-".into()
    } else if r.goal == Goal::Report {
        "report (lower is better)".into()
    } else if r.goal == Goal::ReportHigher {
        "report (higher is better)".into()
    } else if r.limit.is_some() {
        format!("ratio {op} {:.2}", r.target)
    } else {
        format!("{op} {} {}", num(r.target), r.unit)
    };
    let met = match r.met {
        Some(true) => "yes",
        Some(false) => "NO",
        None if r.error.is_none() => "-",
        None => "error",
    };
    let cpu = r
        .broker_cpu_seconds
        .map_or("-".into(), |v| format!("{v:.2}"));
    let rss = r
        .broker_peak_rss_kib
        .map_or("-".into(), |v| format!("{:.1} MiB", v as f64 / 1024.0));
    let client = r
        .client_cpu_seconds
        .map_or("-".into(), |v| format!("{v:.2}"));
    format!(
        "| {} | {result} | {limit} | {ratio} | {target} | {met} | {cpu} | {rss} | {client} |",
        r.workload
    )
}

pub fn limits_text(l: &Limits) -> String {
    format!(
        "limits: page-cache append {:.0} MiB/s ({} MiB dd); loopback TCP {:.0} MiB/s; \
         sendfile to loopback {:.0} MiB/s ({} MiB file); loopback RTT p50 {:.1} us p99 {:.1} us; \
         4 KiB write+fdatasync p50 {:.1} us p99 {:.1} us\n",
        l.page_cache_append_bytes_per_s / MIB,
        l.dd_bytes >> 20,
        l.tcp_loopback_bytes_per_s / MIB,
        l.sendfile_loopback_bytes_per_s / MIB,
        l.sendfile_bytes >> 20,
        l.loopback_rtt.p50_us,
        l.loopback_rtt.p99_us,
        l.fdatasync_4k.p50_us,
        l.fdatasync_4k.p99_us,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_row_judges_the_ratio() {
        let r = Row::throughput(
            "P1",
            60.0 * MIB,
            100.0 * MIB,
            "dd",
            0.6,
            None,
            None,
            serde_json::Value::Null,
        );
        assert_eq!(r.met, Some(true));
        let r = Row::throughput(
            "P1",
            59.0 * MIB,
            100.0 * MIB,
            "dd",
            0.6,
            None,
            None,
            serde_json::Value::Null,
        );
        assert_eq!(r.met, Some(false));
        assert!(row_line(&r).contains("| NO |"));
    }

    #[test]
    fn latency_row_is_judged_from_above() {
        let r = Row::latency("P4", 300.0, 100.0, 2.0, None, None, serde_json::Value::Null);
        assert_eq!(r.met, Some(false));
        let r = Row::latency(
            "P4",
            150.0,
            100.0,
            2.0,
            Some(1.5),
            Some(2048),
            serde_json::Value::Null,
        );
        assert_eq!(r.met, Some(true));
        assert!(row_line(&r).contains("2.0 MiB"));
        assert_eq!(row_line(&r).matches('|').count(), 10);
    }

    #[test]
    fn absolute_rows_judge_their_goal() {
        let v = serde_json::Value::Null;
        let r = Row::absolute(
            "P5",
            900.0,
            "us",
            Goal::AtMost,
            1000.0,
            None,
            None,
            v.clone(),
        );
        assert_eq!(r.met, Some(true));
        assert!(row_line(&r).contains("≤ 1000 us"));
        let r = Row::absolute(
            "P7",
            800.0,
            "MB/s",
            Goal::AtLeast,
            1000.0,
            None,
            None,
            v.clone(),
        );
        assert_eq!(r.met, Some(false));
        let r = Row::absolute("P6", 1.3, "CPU s/GB", Goal::Report, 0.0, None, None, v);
        assert_eq!(r.met, None);
        let line = row_line(&r);
        assert!(line.contains("| - |") && !line.contains("error"), "{line}");
    }

    #[test]
    fn report_only_rows_keep_their_ratio_without_a_verdict() {
        let r = Row::throughput(
            "P9",
            90.0 * MIB,
            100.0 * MIB,
            "P9 idempotent",
            0.0,
            None,
            None,
            serde_json::Value::Null,
        )
        .report_only();
        assert_eq!((r.goal, r.met), (Goal::ReportHigher, None));
        assert_eq!(r.ratio, Some(0.9));
        let line = row_line(&r);
        assert!(
            line.contains("| 0.90 | report (higher is better) | - |"),
            "{line}"
        );
        let r = Row::latency("P4", 300.0, 100.0, 2.0, None, None, serde_json::Value::Null)
            .report_only();
        assert_eq!((r.goal, r.met), (Goal::Report, None));
        assert!(row_line(&r).contains("report (lower is better)"));
    }

    #[test]
    fn failed_row_has_no_verdict() {
        let r = Row::failed("P2", "stalled".into());
        assert_eq!(r.met, None);
        assert!(row_line(&r).contains("FAILED"));
    }
}
