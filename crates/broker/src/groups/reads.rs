//! Requests that read groups of several `__consumer_offsets` partitions:
//! each shard is locked on its own, briefly, one at a time, so a read
//! never waits on an append (no shard lock is held across one) and never
//! holds two shard locks.

use std::slice;

use weir_group::{
    ConsumerGroupDescription, DescribedGroup, ErrorCode, ListedGroup, OffsetFetchGroup,
    OffsetFetchResult,
};

use super::Groups;

impl Groups {
    /// ListGroups over every shard, ordered by group id (as one
    /// coordinator lists them).
    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        let mut listed = Vec::new();
        self.for_each_shard(|coord| listed.extend(coord.list_groups(states, types)));
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }

    /// DescribeGroups, in the order asked.
    pub fn describe_groups(&self, ids: &[String]) -> Vec<DescribedGroup> {
        ids.iter()
            .flat_map(|id| self.lock(id).describe_groups(slice::from_ref(id)))
            .collect()
    }

    /// ConsumerGroupDescribe, in the order asked.
    pub fn describe_consumer_groups(&self, ids: &[String]) -> Vec<ConsumerGroupDescription> {
        ids.iter()
            .flat_map(|id| self.lock(id).describe_consumer_groups(slice::from_ref(id)))
            .collect()
    }

    /// OffsetFetch, in the order asked (`require_stable`: KIP-447's
    /// UNSTABLE_OFFSET_COMMIT for offsets pending in a transaction).
    /// `check`, if given, validates the fetching member of a group under
    /// the same shard lock (KIP-848's member epoch); its error replaces the
    /// group's offsets.
    pub fn fetch_offsets(
        &self,
        asked: &[OffsetFetchGroup],
        require_stable: bool,
        check: impl Fn(&weir_group::GroupCoordinator, &str) -> ErrorCode,
    ) -> Vec<OffsetFetchResult> {
        asked
            .iter()
            .flat_map(|g| {
                let coord = self.lock(&g.group_id);
                let mut results = if require_stable {
                    coord.fetch_stable_offsets(slice::from_ref(g))
                } else {
                    coord.fetch_offsets(slice::from_ref(g))
                };
                for r in results.iter_mut().filter(|r| r.error.is_ok()) {
                    let e = check(&coord, &r.group_id);
                    if !e.is_ok() {
                        r.error = e;
                        r.partitions.clear();
                    }
                }
                results
            })
            .collect()
    }

    /// Consumer-protocol group epoch bumps (rebalances) since start, over
    /// every shard.
    pub fn consumer_epoch_bumps(&self) -> u64 {
        let mut bumps = 0;
        self.for_each_shard(|coord| bumps += coord.consumer_epoch_bumps());
        bumps
    }
}
