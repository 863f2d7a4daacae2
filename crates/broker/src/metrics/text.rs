//! A writer for the Prometheus text exposition format, version 0.0.4:
//! `# HELP` and `# TYPE` lines per family, then one line per sample,
//! `name{label="value",...} value`.

use std::fmt::Write;

use super::{HistogramSnapshot, LATENCY_BUCKETS_SECONDS};

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prometheus metric types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Accumulates exposition text. Families must be written whole, one after
/// another (the format does not allow a family to be split).
#[derive(Debug, Default)]
pub struct TextWriter {
    out: String,
}

impl TextWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn finish(self) -> String {
        self.out
    }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let _ = writeln!(
            self.out,
            "# HELP {name} {}\n# TYPE {name} {}",
            escape_help(help),
            kind.name()
        );
    }

    /// One sample line.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        self.labels(labels, None);
        self.out.push(' ');
        self.out.push_str(&format_value(value));
        self.out.push('\n');
    }

    /// One sample line with an integer value (exact beyond 2^53).
    pub fn sample_int(&mut self, name: &str, labels: &[(&str, &str)], value: i128) {
        self.out.push_str(name);
        self.labels(labels, None);
        let _ = writeln!(self.out, " {value}");
    }

    /// The `_bucket`, `_sum` and `_count` lines of one histogram.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        for (i, c) in h.cumulative.iter().enumerate() {
            let le = match LATENCY_BUCKETS_SECONDS.get(i) {
                Some(b) => format_value(*b),
                None => "+Inf".to_string(),
            };
            self.out.push_str(&bucket);
            self.labels(labels, Some(&le));
            let _ = writeln!(self.out, " {c}");
        }
        self.sample(&format!("{name}_sum"), labels, h.sum_seconds);
        self.sample_int(&format!("{name}_count"), labels, h.count as i128);
    }

    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let mut first = true;
        for (k, v) in labels.iter().copied().chain(le.map(|le| ("le", le))) {
            if !first {
                self.out.push(',');
            }
            first = false;
            self.out.push_str(k);
            self.out.push_str("=\"");
            escape_label_into(&mut self.out, v);
            self.out.push('"');
        }
        self.out.push('}');
    }
}

/// A float as the format wants it: `+Inf`, `-Inf`, `NaN` or a decimal.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        // Rust's Display for f64 is the shortest exact decimal, never
        // exponent notation, which the format accepts
        format!("{v}")
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape_label_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Help text escapes backslash and line feed.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_escapes() {
        let mut w = TextWriter::new();
        w.family("weir_x", Kind::Gauge, "a \\ b\nc");
        w.sample("weir_x", &[], 1.5);
        w.sample("weir_x", &[("g", "a\"b\\c\nd"), ("t", "t")], f64::INFINITY);
        w.sample_int("weir_x", &[("p", "0")], i64::MAX as i128);
        let text = w.finish();
        assert_eq!(
            text,
            "# HELP weir_x a \\\\ b\\nc\n# TYPE weir_x gauge\nweir_x 1.5\n\
             weir_x{g=\"a\\\"b\\\\c\\nd\",t=\"t\"} +Inf\n\
             weir_x{p=\"0\"} 9223372036854775807\n"
        );
    }

    #[test]
    fn histogram_lines_end_with_inf_sum_and_count() {
        let h = super::super::Histogram::default();
        h.observe(std::time::Duration::from_millis(2));
        let mut w = TextWriter::new();
        w.histogram("weir_h", &[("api", "Fetch")], &h.snapshot());
        let text = w.finish();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), LATENCY_BUCKETS_SECONDS.len() + 3);
        assert_eq!(lines[0], "weir_h_bucket{api=\"Fetch\",le=\"0.00005\"} 0");
        assert_eq!(lines[5], "weir_h_bucket{api=\"Fetch\",le=\"0.0025\"} 1");
        assert_eq!(lines[17], "weir_h_bucket{api=\"Fetch\",le=\"+Inf\"} 1");
        assert_eq!(lines[18], "weir_h_sum{api=\"Fetch\"} 0.002");
        assert_eq!(lines[19], "weir_h_count{api=\"Fetch\"} 1");
    }

    #[test]
    fn values_format_like_prometheus() {
        assert_eq!(format_value(0.00005), "0.00005");
        assert_eq!(format_value(10.0), "10");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
    }
}
