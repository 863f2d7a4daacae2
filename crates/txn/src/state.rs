//! The states of a transactional id, as Kafka's `TransactionState` names,
//! numbers and orders them.
//!
//! ```text
//!            AddPartitions / AddOffsets
//!   Empty ─────────────────────────────► Ongoing ◄──┐ AddPartitions
//!     ▲ ▲                                 │  │  └───┘
//!     │ │ InitProducerId      EndTxn(commit) │  │ EndTxn(abort), timeout,
//!     │ │                                 ▼  ▼ InitProducerId (fence)
//!     │ │                     PrepareCommit  PrepareAbort ◄── PrepareEpochFence
//!     │ │              markers written │       │ markers written
//!     │ └────────────── CompleteCommit ◄┘       └► CompleteAbort
//!     └──────────────────────────────────────────────┘
//!   Empty, CompleteCommit, CompleteAbort ──expiration──► Dead (tombstone)
//! ```
//!
//! `PrepareEpochFence` is only ever a pending state: the epoch bump of a
//! fence is written together with the abort (`PrepareAbort`). `Dead` is
//! only ever a pending state too: its record is a tombstone, and once that
//! is durable the transactional id is forgotten.

/// The state of one transactional id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction: after InitProducerId, or before the first one.
    Empty,
    /// A transaction is open; partitions are being added.
    Ongoing,
    /// EndTxn(commit) is durable; COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fence is durable; ABORT markers are
    /// being written.
    PrepareAbort,
    /// Every COMMIT marker is written.
    CompleteCommit,
    /// Every ABORT marker is written.
    CompleteAbort,
    /// Expired; its tombstone is being written.
    Dead,
    /// The epoch is being bumped to fence an older producer.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte of a `__transaction_state` value.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions report (and
    /// ListTransactions filters on).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states a transition to `self` may start from (Kafka's
    /// `validPreviousStates`).
    pub fn valid_previous_states(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transition from `from` to `self` is allowed.
    pub fn may_follow(self, from: TxnState) -> bool {
        self.valid_previous_states().contains(&from)
    }

    /// Whether a transactional id in this state may expire
    /// (`transactional.id.expiration.ms`): no transaction is open.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// Whether a transaction is open: partitions may hold its records
    /// without a marker yet.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort
        )
    }
}

impl std::fmt::Display for TxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::from_id(-1), None);
        assert_eq!(TxnState::from_name("ongoing"), None);
    }
}
