//! openraft's own storage conformance suite run against `LogStore` and
//! `StateMachineStore` on a fresh directory per case.

use crate::common;

use common::Recorder;
use openraft::testing::{StoreBuilder, Suite};
use weir_raft::log_store::LogStore;
use weir_raft::state_machine::StateMachineStore;
use weir_raft::{StorageError, TypeConfig};

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore<Recorder>, tempfile::TempDir>
    for Builder
{
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore<Recorder>), StorageError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = LogStore::open(dir.path()).expect("open log");
        let sm = StateMachineStore::open(dir.path(), Recorder::default()).expect("open sm");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).expect("openraft storage suite");
}
