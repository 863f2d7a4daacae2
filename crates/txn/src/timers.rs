//! Timers: transactions past their timeout are aborted, idle
//! transactional ids expire (after Kafka's `TransactionStateManager`).

use crate::coordinator::{PartitionStatus, TxnCoordinator, transition_failed};
use crate::state::TxnState;
use crate::types::Write;
use crate::writes::Purpose;

impl TxnCoordinator {
    /// Runs the timers due at `now_ms`: aborting transactions past their
    /// timeout (every `abort_timed_out_interval_ms`) and expiring idle
    /// transactional ids (every `remove_expired_interval_ms`). The first
    /// call schedules them.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Write> {
        let mut out = Vec::new();
        match self.next_abort_check_ms {
            Some(t) if t <= now_ms => {
                out.extend(self.abort_timed_out(now_ms));
                self.next_abort_check_ms = Some(now_ms + self.config.abort_timed_out_interval_ms);
            }
            Some(_) => {}
            None => {
                self.next_abort_check_ms = Some(now_ms + self.config.abort_timed_out_interval_ms)
            }
        }
        match self.next_expiration_check_ms {
            Some(t) if t <= now_ms => {
                out.extend(self.expire_transactional_ids(now_ms));
                self.next_expiration_check_ms =
                    Some(now_ms + self.config.remove_expired_interval_ms);
            }
            Some(_) => {}
            None => {
                self.next_expiration_check_ms =
                    Some(now_ms + self.config.remove_expired_interval_ms)
            }
        }
        out
    }

    /// When [`TxnCoordinator::tick`] has something to do next; None before
    /// the first tick.
    pub fn next_deadline(&self) -> Option<i64> {
        match (self.next_abort_check_ms, self.next_expiration_check_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Aborts every Ongoing transaction that started more than its timeout
    /// ago (Kafka's `abortTimedOutTransactions`): its producer is fenced
    /// (epoch bump) and the transaction aborted in one write.
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Vec<Write> {
        let mut due = Vec::new();
        for (i, p) in self.partitions.iter().enumerate() {
            if p.status != PartitionStatus::Active {
                continue;
            }
            for (id, m) in &p.txns {
                if m.pending.is_none()
                    && m.state == TxnState::Ongoing
                    && m.start_ms.saturating_add(i64::from(m.timeout_ms)) < now_ms
                    // never bump past i16::MAX (unreachable by clients)
                    && m.producer_epoch < i16::MAX
                {
                    due.push((i, id.clone()));
                }
            }
        }
        due.into_iter()
            .filter_map(|(i, id)| self.fence_and_abort(i, &id, false, now_ms).ok())
            .collect()
    }

    /// Expires transactional ids with no open transaction that were not
    /// updated for `transactional_id_expiration_ms`: each gets a tombstone
    /// and is forgotten once it is durable.
    pub fn expire_transactional_ids(&mut self, now_ms: i64) -> Vec<Write> {
        let horizon = now_ms.saturating_sub(self.config.transactional_id_expiration_ms);
        let mut due = Vec::new();
        for (i, p) in self.partitions.iter().enumerate() {
            if p.status != PartitionStatus::Active {
                continue;
            }
            for (id, m) in &p.txns {
                if m.pending.is_none()
                    && m.state.is_expiration_allowed()
                    && m.last_update_ms <= horizon
                {
                    due.push((i, id.clone()));
                }
            }
        }
        let mut out = Vec::new();
        for (i, id) in due {
            let Some(m) = self.partitions[i].txns.get_mut(&id) else {
                continue;
            };
            match m.prepare_dead() {
                Ok(t) => out.push(self.new_write(i, &id, t, Purpose::Expire)),
                Err(e) => {
                    transition_failed(&e);
                }
            }
        }
        out
    }
}
