//! [`ImageStateMachine`]: the metadata image as weir-raft's state machine,
//! and [`ImageReader`], the handle every other component reads it through.
//!
//! Each committed entry is one record batch ([`crate::batch`]). `apply`
//! decodes it and applies it to the image as a whole; the new image is
//! published by swapping one `Arc` under a lock held only for the swap (a
//! reader clones the `Arc` and never waits on decoding or applying), and
//! the [`MetadataDelta`] goes to every subscriber.
//!
//! A batch that does not decode or does not apply is skipped: the image
//! stays as it was and the index is remembered as rejected, so the
//! proposer can tell. Every node holds the same image at that index, so
//! every node skips the same batch; stopping instead would stop every
//! node of the quorum at once.
//!
//! The snapshot is the applied index and the image written as a batch of
//! the records that rebuild it ([`image_records`]), so restoring is
//! applying that batch to the empty image.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use bytes::{Buf, Bytes};
use tokio::sync::{broadcast, watch};
use weir_metadata::{MetadataDelta, MetadataImage};
use weir_protocol::messages::metadata::{
    ConfigRecord, FeatureLevelRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    TopicRecord, UnregisterBrokerRecord, register_broker_record::BrokerEndpoint,
};
use weir_protocol::metadata_record::MetadataRecord;
use weir_raft::MetadataStateMachine;

use crate::batch::{decode_batch, encode_batch};

/// Deltas a subscriber may fall behind by before it sees `Lagged` (and
/// must re-read the whole image).
pub const DELTA_CHANNEL_CAPACITY: usize = 1024;
/// Rejected batch indexes remembered for proposers.
const REJECTED_KEPT: usize = 256;
/// Applied batches kept for brokers that fetch the metadata log (see
/// [`ImageReader::batches_after`]); one further behind gets a snapshot.
pub const DEFAULT_RETAINED_BATCHES: usize = 4096;
/// Bytes of applied batches kept at most, whatever their count.
pub const RETAINED_BYTES: usize = 16 * 1024 * 1024;

/// The image as of one index of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppliedImage {
    /// The log index of the last batch applied (0: none yet). This is the
    /// metadata offset brokers report in heartbeats.
    pub index: u64,
    pub image: MetadataImage,
}

/// One applied batch, as subscribers receive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUpdate {
    pub index: u64,
    /// The image after the batch.
    pub image: MetadataImage,
    /// What the batch changed.
    pub delta: MetadataDelta,
}

struct Shared {
    current: RwLock<Arc<AppliedImage>>,
    deltas: broadcast::Sender<Arc<ImageUpdate>>,
    /// The index of the published image: changes on every publish, also
    /// for a restored snapshot or a skipped batch, which send no delta.
    published: watch::Sender<u64>,
    rejected: Mutex<VecDeque<(u64, String)>>,
    retained: Mutex<Retained>,
    /// The last snapshot served to a fetching broker, by index.
    served_snapshot: Mutex<Option<(u64, Bytes)>>,
}

/// The most recent applied batches, for brokers fetching the log.
/// Invariant: `batches` are every batch applied after `floor`, in index
/// order (indexes may skip: raft's own entries are not batches).
struct Retained {
    floor: u64,
    batches: VecDeque<(u64, Bytes)>,
    bytes: usize,
    max_batches: usize,
}

impl Retained {
    fn push(&mut self, index: u64, payload: Bytes) {
        self.bytes += payload.len();
        self.batches.push_back((index, payload));
        while self.batches.len() > self.max_batches || self.bytes > RETAINED_BYTES {
            let Some((i, b)) = self.batches.pop_front() else {
                break;
            };
            self.bytes -= b.len();
            self.floor = i;
        }
    }

    fn reset(&mut self, floor: u64) {
        self.floor = floor;
        self.batches.clear();
        self.bytes = 0;
    }
}

/// What [`ImageReader::batches_after`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetainedBatches {
    /// Every batch applied after the asked index (possibly none), up to
    /// the byte bound, as `(index, payload)`.
    Batches(Vec<(u64, Bytes)>),
    /// The asked index is older than what is kept: fetch a snapshot.
    Behind,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn publish(&self, applied: AppliedImage) {
        let index = applied.index;
        let applied = Arc::new(applied);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = applied;
        self.published.send_replace(index);
    }

    fn load(&self) -> Arc<AppliedImage> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Reads the published image and subscribes to deltas; cloning shares them.
#[derive(Clone)]
pub struct ImageReader {
    shared: Arc<Shared>,
}

impl ImageReader {
    /// The latest applied image.
    pub fn current(&self) -> Arc<AppliedImage> {
        self.shared.load()
    }

    /// Every update applied from now on. A receiver that lags more than
    /// [`DELTA_CHANNEL_CAPACITY`] updates gets `Lagged` and should resync
    /// from [`current`](Self::current).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ImageUpdate>> {
        self.shared.deltas.subscribe()
    }

    /// The index of the published image, changing whenever a new image is
    /// published: after every applied batch, a skipped one, or a restored
    /// snapshot (which sends no delta). For readers that only need "the
    /// image changed, look at [`current`](Self::current)".
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.shared.published.subscribe()
    }

    /// The batches applied after `index` (raft index), at most `max_bytes`
    /// of them but at least one, or [`RetainedBatches::Behind`] when some
    /// of them are no longer kept.
    pub fn batches_after(&self, index: u64, max_bytes: usize) -> RetainedBatches {
        let retained = lock(&self.shared.retained);
        if index < retained.floor {
            return RetainedBatches::Behind;
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        for (i, b) in retained.batches.iter().filter(|(i, _)| *i > index) {
            if !out.is_empty() && bytes + b.len() > max_bytes {
                break;
            }
            bytes += b.len();
            out.push((*i, b.clone()));
        }
        RetainedBatches::Batches(out)
    }

    /// A snapshot of the current image ([`snapshot_bytes`]) and its index;
    /// the last one is kept, so a broker reading it in chunks gets the same
    /// bytes while the image does not change.
    pub fn snapshot(&self) -> (u64, Bytes) {
        let current = self.current();
        let mut served = lock(&self.shared.served_snapshot);
        if let Some((index, bytes)) = served.as_ref()
            && *index == current.index
        {
            return (*index, bytes.clone());
        }
        let bytes = Bytes::from(snapshot_bytes(&current));
        *served = Some((current.index, bytes.clone()));
        (current.index, bytes)
    }

    /// The snapshot kept by [`snapshot`](Self::snapshot) if it is the one
    /// at `index`.
    pub fn served_snapshot(&self, index: u64) -> Option<Bytes> {
        lock(&self.shared.served_snapshot)
            .as_ref()
            .filter(|(i, _)| *i == index)
            .map(|(_, b)| b.clone())
    }

    /// Why the batch at `index` was skipped, if it was (recent ones only).
    pub fn rejection(&self, index: u64) -> Option<String> {
        lock(&self.shared.rejected)
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, why)| why.clone())
    }
}

/// The metadata image as a [`MetadataStateMachine`]. Invariant: the
/// published image is `image` at `index`.
pub struct ImageStateMachine {
    applied: AppliedImage,
    shared: Arc<Shared>,
}

impl ImageStateMachine {
    /// An empty image and the reader that follows it.
    pub fn new() -> (Self, ImageReader) {
        Self::with_retained(DEFAULT_RETAINED_BATCHES)
    }

    /// Like [`new`](Self::new), keeping the last `max_batches` applied
    /// batches for fetching brokers.
    pub fn with_retained(max_batches: usize) -> (Self, ImageReader) {
        let (deltas, _) = broadcast::channel(DELTA_CHANNEL_CAPACITY);
        let shared = Arc::new(Shared {
            current: RwLock::new(Arc::new(AppliedImage::default())),
            deltas,
            published: watch::Sender::new(0),
            rejected: Mutex::new(VecDeque::new()),
            retained: Mutex::new(Retained {
                floor: 0,
                batches: VecDeque::new(),
                bytes: 0,
                max_batches: max_batches.max(1),
            }),
            served_snapshot: Mutex::new(None),
        });
        let reader = ImageReader {
            shared: Arc::clone(&shared),
        };
        let sm = ImageStateMachine {
            applied: AppliedImage::default(),
            shared,
        };
        (sm, reader)
    }

    fn reject(&self, index: u64, why: String) {
        tracing::error!(index, %why, "metadata batch skipped");
        let mut rejected = lock(&self.shared.rejected);
        if rejected.len() == REJECTED_KEPT {
            rejected.pop_front();
        }
        rejected.push_back((index, why));
    }
}

impl MetadataStateMachine for ImageStateMachine {
    fn apply(&mut self, index: u64, payload: &[u8]) -> Result<(), String> {
        debug_assert!(index > self.applied.index, "batches applied out of order");
        let payload = Bytes::copy_from_slice(payload);
        // Kept before it is published, so a broker woken by the new index
        // finds the batch.
        lock(&self.shared.retained).push(index, payload.clone());
        let outcome = decode_batch(payload)
            .map_err(|e| e.to_string())
            .and_then(|records| {
                self.applied
                    .image
                    .apply(&records)
                    .map_err(|e| e.to_string())
            });
        let (image, delta) = match outcome {
            Ok(next) => next,
            Err(why) => {
                self.reject(index, why);
                self.applied.index = index;
                self.shared.publish(self.applied.clone());
                return Ok(());
            }
        };
        self.applied = AppliedImage { index, image };
        self.shared.publish(self.applied.clone());
        // No subscriber is not an error.
        let _ = self.shared.deltas.send(Arc::new(ImageUpdate {
            index,
            image: self.applied.image.clone(),
            delta,
        }));
        Ok(())
    }

    fn snapshot(&self) -> Vec<u8> {
        snapshot_bytes(&self.applied)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let mut buf = Bytes::copy_from_slice(snapshot);
        if buf.remaining() < 8 {
            return Err("snapshot shorter than its index".to_string());
        }
        let index = buf.get_u64();
        let records = decode_batch(buf).map_err(|e| e.to_string())?;
        let (image, _) = MetadataImage::empty()
            .apply(&records)
            .map_err(|e| e.to_string())?;
        self.applied = AppliedImage { index, image };
        lock(&self.shared.retained).reset(index);
        self.shared.publish(self.applied.clone());
        Ok(())
    }
}

/// The snapshot of an applied image: its index (u64 BE), then the image as
/// one batch of the records that rebuild it ([`image_records`]).
pub fn snapshot_bytes(applied: &AppliedImage) -> Vec<u8> {
    let mut out = applied.index.to_be_bytes().to_vec();
    match encode_batch(&image_records(&applied.image)) {
        Ok(batch) => out.extend_from_slice(&batch),
        // The records came from a valid image; every one encodes.
        Err(e) => tracing::error!(%e, "metadata image does not encode"),
    }
    out
}

/// The records that rebuild `image` when applied to the empty image: the
/// brokers by epoch (their registrations must increase), topics with their
/// partitions, configs, features, ACLs, SCRAM credentials, client quotas
/// and the next producer id.
///
/// The highest broker epoch survives even when its broker was
/// unregistered: a placeholder broker (id -1) is registered with that
/// epoch and unregistered again, so a later registration still gets a
/// higher one.
pub fn image_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    let mut brokers: Vec<_> = image.brokers().collect();
    brokers.sort_by_key(|b| b.epoch);
    for b in &brokers {
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: b.id,
            incarnation_id: b.incarnation_id,
            broker_epoch: b.epoch,
            end_points: b
                .endpoints
                .iter()
                .map(|e| BrokerEndpoint {
                    name: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                    ..Default::default()
                })
                .collect(),
            rack: b.rack.clone(),
            fenced: b.fenced,
            in_controlled_shutdown: b.in_controlled_shutdown,
            ..Default::default()
        }));
    }
    let highest = image.highest_broker_epoch();
    if brokers.last().is_none_or(|b| b.epoch < highest) && highest > 0 {
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: -1,
            broker_epoch: highest,
            fenced: true,
            ..Default::default()
        }));
        records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: -1,
            broker_epoch: highest,
            ..Default::default()
        }));
    }
    for t in image.topics() {
        records.push(MetadataRecord::Topic(TopicRecord {
            name: t.name.clone(),
            topic_id: t.id,
            ..Default::default()
        }));
        for (&partition_id, p) in &t.partitions {
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id,
                topic_id: t.id,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                eligible_leader_replicas: (!p.eligible_leader_replicas.is_empty())
                    .then(|| p.eligible_leader_replicas.clone()),
                adding_replicas: p.adding_replicas.clone(),
                removing_replicas: p.removing_replicas.clone(),
                ..Default::default()
            }));
        }
    }
    for ((resource_type, resource_name), configs) in image.all_configs() {
        for (name, value) in configs {
            records.push(MetadataRecord::Config(ConfigRecord {
                resource_type: *resource_type,
                resource_name: resource_name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
                ..Default::default()
            }));
        }
    }
    for (name, feature_level) in image.features() {
        records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.to_string(),
            feature_level,
            ..Default::default()
        }));
    }
    for (id, acl) in image.acls().iter() {
        records.push(weir_metadata::controller::acl_record(*id, acl));
    }
    for (user, hash, credential) in image.scram().iter() {
        records.push(weir_metadata::controller::scram_record(
            user, hash, credential,
        ));
    }
    for (entity, values) in &image.client_quotas().entries {
        for (key, value) in values {
            records.push(weir_metadata::controller::client_quota_record(
                entity,
                key,
                Some(*value),
            ));
        }
    }
    if image.next_producer_id() > 0 {
        records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: -1,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id(),
            ..Default::default()
        }));
    }
    records
}
