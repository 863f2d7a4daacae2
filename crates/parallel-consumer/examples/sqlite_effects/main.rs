//! An example service: consumes balance changes (`ACCOUNT:DELTA` payloads)
//! in parallel, one at a time per account (key ordering), and applies each
//! one exactly once to a SQLite database: the change and its event id are
//! written in one transaction with a unique constraint on the id, so a
//! record delivered again after a crash or a rebalance has no second effect.
//!
//! ```text
//! WEIR_BOOTSTRAP=127.0.0.1:9092 WEIR_TOPIC=payments WEIR_GROUP=balances \
//!     WEIR_DB=balances.db cargo run -p weir-parallel-consumer --example sqlite_effects
//! ```
//!
//! Stops on Ctrl-C: in-flight work finishes (bounded), the completed prefix
//! is committed.

// Also compiled into the tests, which use more of it.
#[allow(dead_code)]
mod effects;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use effects::{Applied, Change, EffectError, EffectStore};
use tokio::sync::broadcast::error::RecvError;
use weir_parallel_consumer::driver::{HandlerContext, HandlerError, ParallelConsumer};
use weir_parallel_consumer::record::Record;
use weir_parallel_consumer::scheduler::Ordering;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A payload that does not parse can never succeed (terminal: the failure
/// policy decides at once); a SQLite error may pass (retriable).
async fn handle(
    store: Arc<Mutex<EffectStore>>,
    record: Record,
    cx: HandlerContext,
) -> Result<(), HandlerError> {
    let change = Change::parse(record.payload.as_deref().unwrap_or_default())
        .map_err(HandlerError::terminal)?;
    let event_id = record.event_id();
    // SQLite blocks: keep it off the async workers.
    let applied = tokio::task::spawn_blocking(move || {
        let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
        store.apply(&event_id, &change).map(|a| (a, event_id))
    })
    .await
    .map_err(|e| EffectError::BadPayload(format!("worker failed: {e}")))??;
    if applied.0 == Applied::Duplicate {
        println!("{}: already applied, skipped", applied.1);
    }
    if cx.attempt() > 1 {
        println!("{}: applied on attempt {}", applied.1, cx.attempt());
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bootstrap = env("WEIR_BOOTSTRAP", "127.0.0.1:9092");
    let topic = env("WEIR_TOPIC", "payments");
    let group = env("WEIR_GROUP", "balances");
    let db = env("WEIR_DB", "balances.db");

    let store = Arc::new(Mutex::new(EffectStore::open(&db)?));
    let handler_store = store.clone();
    let consumer = ParallelConsumer::builder()
        .bootstrap_servers(&bootstrap)
        .group_id(&group)
        .set("auto.offset.reset", "earliest")
        .topic(&topic)
        .ordering(Ordering::Key)
        .start(move |record, cx| handle(handler_store.clone(), record, cx))?;
    println!("consuming {topic} from {bootstrap} as group {group} into {db}; Ctrl-C stops");

    let mut events = consumer.events();
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            event = events.recv() => match event {
                Ok(event) => eprintln!("consumer: {event:?}"),
                Err(RecvError::Lagged(n)) => eprintln!("consumer: {n} events missed"),
                Err(RecvError::Closed) => break,
            },
            _ = tick.tick() => {
                for p in consumer.stats() {
                    println!(
                        "{}-{} position={} committed={:?} watermark={} in_flight={} oldest_ms={:?}",
                        p.topic, p.partition, p.position, p.committed,
                        p.effect_watermark, p.in_flight, p.oldest_unfinished_age_ms
                    );
                }
            }
        }
    }
    let report = consumer.shutdown().await?;
    println!("stopped: {report:?}");
    let events = store
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .processed_events()?;
    println!("{events} events applied in total");
    Ok(())
}
