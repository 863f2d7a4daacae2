//! `--command-config FILE` of the example workers: librdkafka settings in
//! a Java properties file (as the Kafka tools' `--command-config` reads
//! it), added to the worker's client configuration after its own, so the
//! file wins. For a secured cluster:
//!
//! ```properties
//! security.protocol=SASL_SSL
//! sasl.mechanism=SCRAM-SHA-512
//! sasl.username=worker
//! sasl.password=worker-secret
//! ssl.ca.location=/etc/weir/ca.pem
//! ```
//!
//! The dead-letter and exactly-once producers take the connection and
//! security settings from the consumer's configuration
//! (`weir_parallel_consumer::driver::connection`).

use rdkafka::ClientConfig;

/// The file named by `--command-config FILE` (or `--command-config=FILE`)
/// in `args`; None without the option.
pub fn path_from_args(args: impl IntoIterator<Item = String>) -> Result<Option<String>, String> {
    let mut args = args.into_iter();
    let mut path = None;
    while let Some(a) = args.next() {
        if a == "--command-config" {
            path = Some(args.next().ok_or("--command-config needs a file")?);
        } else if let Some(p) = a.strip_prefix("--command-config=") {
            path = Some(p.to_string());
        } else {
            return Err(format!(
                "unknown argument {a:?} (only --command-config FILE)"
            ));
        }
    }
    Ok(path)
}

/// Adds the settings of `--command-config FILE` (from the process
/// arguments) to `client`.
pub fn apply_from_args(client: &mut ClientConfig) -> Result<(), String> {
    let Some(path) = path_from_args(std::env::args().skip(1))? else {
        return Ok(());
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("--command-config {path}: {e}"))?;
    let pairs = weir_broker::properties::parse_properties_strict(&text)
        .map_err(|e| format!("--command-config {path}: {e}"))?;
    for (k, v) in pairs {
        client.set(k, v);
    }
    Ok(())
}
