//! The per-partition observations in the Prometheus text format.

use std::fmt::Write;

use crate::engine::PartitionStats;

/// Renders `stats` as Prometheus text exposition (one gauge family per
/// field, labelled by topic and partition).
pub fn render_prometheus(stats: &[PartitionStats]) -> String {
    type Field = fn(&PartitionStats) -> Option<i64>;
    let families: [(&str, &str, Field); 10] = [
        (
            "weir_pc_position",
            "Offset after the last record delivered to the application",
            |s| Some(s.position),
        ),
        (
            "weir_pc_committed_offset",
            "Last commit confirmed by the group coordinator",
            |s| s.committed,
        ),
        (
            "weir_pc_effect_watermark",
            "One past the longest completed prefix of delivered records",
            |s| Some(s.effect_watermark),
        ),
        ("weir_pc_in_flight", "Delivered records not finished", |s| {
            Some(s.in_flight as i64)
        }),
        (
            "weir_pc_waiting",
            "Delivered records waiting for a worker",
            |s| Some(s.waiting as i64),
        ),
        (
            "weir_pc_failed",
            "Records whose handler failed every attempt",
            |s| Some(s.failed as i64),
        ),
        (
            "weir_pc_oldest_unfinished_age_ms",
            "Age of the oldest unfinished delivered record",
            |s| Some(s.oldest_unfinished_age_ms.unwrap_or(0)),
        ),
        ("weir_pc_paused", "Fetching paused (1) or not (0)", |s| {
            Some(i64::from(s.paused))
        }),
        (
            "weir_pc_stopped",
            "Partition stopped by the failure policy",
            |s| Some(i64::from(s.stopped)),
        ),
        (
            "weir_pc_commits_stopped",
            "Commits stopped by an ownership error",
            |s| Some(i64::from(s.commits_stopped)),
        ),
    ];
    let mut out = String::new();
    for (name, help, field) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for s in stats {
            if let Some(v) = field(s) {
                let _ = writeln!(
                    out,
                    "{name}{{topic=\"{}\",partition=\"{}\"}} {v}",
                    escape(&s.topic),
                    s.partition
                );
            }
        }
    }
    out
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> PartitionStats {
        PartitionStats {
            topic: "t".into(),
            partition: 0,
            generation: 1,
            position: 13,
            committed: Some(10),
            effect_watermark: 10,
            in_flight: 1,
            waiting: 0,
            failed: 0,
            tracked: 3,
            paused: true,
            stopped: false,
            commits_stopped: false,
            oldest_unfinished_age_ms: Some(250),
            skipped: 0,
            metadata_error: None,
            stale_results: 0,
        }
    }

    #[test]
    fn renders_each_partition_and_field() {
        let text = render_prometheus(&[stats()]);
        for line in [
            "weir_pc_position{topic=\"t\",partition=\"0\"} 13",
            "weir_pc_committed_offset{topic=\"t\",partition=\"0\"} 10",
            "weir_pc_effect_watermark{topic=\"t\",partition=\"0\"} 10",
            "weir_pc_in_flight{topic=\"t\",partition=\"0\"} 1",
            "weir_pc_oldest_unfinished_age_ms{topic=\"t\",partition=\"0\"} 250",
            "weir_pc_paused{topic=\"t\",partition=\"0\"} 1",
            "# TYPE weir_pc_position gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
    }

    #[test]
    fn unknown_commit_is_omitted_and_labels_are_escaped() {
        let mut s = stats();
        s.committed = None;
        s.topic = "a\"b".into();
        let text = render_prometheus(&[s]);
        assert!(!text.contains("weir_pc_committed_offset{"));
        assert!(text.contains("topic=\"a\\\"b\""));
    }
}
