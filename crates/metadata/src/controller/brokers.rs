//! Broker lifecycle: registration, heartbeats, session expiry, controlled
//! shutdown.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::metadata::{
    BrokerRegistrationChangeRecord, RegisterBrokerRecord, register_broker_record::BrokerEndpoint,
};
use weir_protocol::metadata_record::MetadataRecord;

use super::election::{elect_on_unfence, fence, leader_and_isr_updates};
use super::*;
use crate::image::MetadataImage;

impl Controller {
    /// BrokerRegistration. The same incarnation registering again gets its
    /// epoch back with no records; a new incarnation gets a new epoch (above
    /// every earlier one) and starts fenced, with leadership moved away from
    /// its old incarnation. A new incarnation while the old one's session is
    /// alive is DUPLICATE_BROKER_REGISTRATION.
    pub fn register_broker(
        &mut self,
        image: &MetadataImage,
        req: &Registration,
        now_ms: u64,
    ) -> Result<(i64, Vec<MetadataRecord>), Rejection> {
        if req.broker_id < 0 {
            return reject(ErrorCode::InvalidRequest, "negative broker id");
        }
        let mut records = Vec::new();
        if let Some(b) = image.broker(req.broker_id) {
            if b.incarnation_id == req.incarnation_id {
                self.sessions.insert(
                    req.broker_id,
                    Session {
                        last_heartbeat_ms: now_ms,
                    },
                );
                return Ok((b.epoch, records));
            }
            if self.session_alive(req.broker_id, now_ms) && !b.fenced {
                return reject(
                    ErrorCode::DuplicateBrokerRegistration,
                    format!(
                        "broker {} is registered with another incarnation and its session is alive",
                        req.broker_id
                    ),
                );
            }
            // The old incarnation leads nothing from here on.
            records.extend(leader_and_isr_updates(image, req.broker_id));
        }
        let epoch = image.highest_broker_epoch() + 1;
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: req.broker_id,
            incarnation_id: req.incarnation_id,
            broker_epoch: epoch,
            end_points: req
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
            rack: req.rack.clone(),
            fenced: true,
            ..Default::default()
        }));
        self.sessions.insert(
            req.broker_id,
            Session {
                last_heartbeat_ms: now_ms,
            },
        );
        Ok((epoch, records))
    }

    /// BrokerHeartbeat: renews the session; unfences a fenced broker whose
    /// metadata has caught up with `committed_offset` (the log's committed
    /// offset) and that does not want to stay fenced; starts a controlled
    /// shutdown on `want_shutdown`.
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        hb: &Heartbeat,
        committed_offset: i64,
        now_ms: u64,
    ) -> Result<HeartbeatReply, Rejection> {
        let Some(b) = image.broker(hb.broker_id) else {
            return reject(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {} is not registered", hb.broker_id),
            );
        };
        if b.epoch != hb.broker_epoch {
            return reject(
                ErrorCode::StaleBrokerEpoch,
                format!(
                    "broker {} has epoch {}, not {}",
                    hb.broker_id, b.epoch, hb.broker_epoch
                ),
            );
        }
        self.sessions.insert(
            hb.broker_id,
            Session {
                last_heartbeat_ms: now_ms,
            },
        );
        if hb.want_shutdown {
            // Kafka's controlled shutdown: while the broker leads anything,
            // its leaderships move (and it leaves the ISRs) and it is told
            // to wait; once it leads nothing, it is fenced and told to stop
            // (SHUTDOWN_NOW), so a new incarnation may register at once
            // instead of being refused until this session expires.
            if b.fenced {
                return Ok(HeartbeatReply {
                    records: Vec::new(),
                    is_fenced: true,
                    should_shut_down: true,
                });
            }
            if leads_any(image, hb.broker_id) {
                let records = self.controlled_shutdown(image, hb.broker_id, hb.broker_epoch)?;
                return Ok(HeartbeatReply {
                    records,
                    is_fenced: false,
                    should_shut_down: false,
                });
            }
            return Ok(HeartbeatReply {
                records: fence(image, hb.broker_id, b.epoch),
                is_fenced: true,
                should_shut_down: true,
            });
        }
        let mut records = Vec::new();
        let mut is_fenced = b.fenced;
        if b.fenced && !hb.want_fence && hb.current_metadata_offset >= committed_offset {
            records.push(MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord {
                    broker_id: hb.broker_id,
                    broker_epoch: b.epoch,
                    fenced: -1,
                    ..Default::default()
                },
            ));
            records.extend(elect_on_unfence(image, hb.broker_id));
            is_fenced = false;
        } else if !b.fenced && hb.want_fence {
            records = fence(image, hb.broker_id, b.epoch);
            is_fenced = true;
        }
        Ok(HeartbeatReply {
            records,
            is_fenced,
            should_shut_down: false,
        })
    }

    /// A heartbeat of broker `broker_id` at `broker_epoch` reached this
    /// controller at `at_ms` but could not be decided then (the quorum was
    /// not confirmed): it still renews the broker's session, as Kafka's
    /// controller counts a heartbeat on arrival, so a quorum that comes back
    /// does not fence every broker whose heartbeats it could not commit.
    /// Heartbeats of another epoch, or of a broker without a session here
    /// (a new term starts them afresh), change nothing.
    pub fn heard_from(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
        at_ms: u64,
    ) {
        if image
            .broker(broker_id)
            .is_none_or(|b| b.epoch != broker_epoch)
        {
            return;
        }
        if let Some(s) = self.sessions.get_mut(&broker_id) {
            s.last_heartbeat_ms = s.last_heartbeat_ms.max(at_ms);
        }
    }

    /// Fences every unfenced broker whose session expired at `now_ms`, moving
    /// its leadership away and removing it from ISRs. A broker this
    /// controller has not heard from yet starts its session now.
    pub fn expire_sessions(&mut self, image: &MetadataImage, now_ms: u64) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        let mut current = image.clone();
        for b in image.brokers() {
            self.sessions.entry(b.id).or_insert(Session {
                last_heartbeat_ms: now_ms,
            });
        }
        let expired: Vec<(i32, i64)> = image
            .brokers()
            .filter(|b| !b.fenced && !self.session_alive(b.id, now_ms))
            .map(|b| (b.id, b.epoch))
            .collect();
        for (id, epoch) in expired {
            let step = fence(&current, id, epoch);
            // Each fence is decided on the image the earlier ones produce.
            if let Ok((next, _)) = current.apply(&step) {
                current = next;
                records.extend(step);
            }
        }
        records
    }

    /// Controlled shutdown: marks the broker as shutting down, removes it
    /// from every ISR it can leave and elects new leaders for what it led.
    pub fn controlled_shutdown(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<MetadataRecord>, Rejection> {
        let Some(b) = image.broker(broker_id) else {
            return reject(
                ErrorCode::BrokerIdNotRegistered,
                format!("broker {broker_id} is not registered"),
            );
        };
        if b.epoch != broker_epoch {
            return reject(
                ErrorCode::StaleBrokerEpoch,
                format!("broker {broker_id} has epoch {}", b.epoch),
            );
        }
        let mut records = Vec::new();
        if !b.in_controlled_shutdown {
            records.push(MetadataRecord::BrokerRegistrationChange(
                BrokerRegistrationChangeRecord {
                    broker_id,
                    broker_epoch,
                    in_controlled_shutdown: 1,
                    ..Default::default()
                },
            ));
        }
        records.extend(leader_and_isr_updates(image, broker_id));
        Ok(records)
    }
}

/// Whether broker `id` leads any partition in `image`.
fn leads_any(image: &MetadataImage, id: i32) -> bool {
    image
        .topics()
        .any(|t| t.partitions.values().any(|p| p.leader == id))
}
