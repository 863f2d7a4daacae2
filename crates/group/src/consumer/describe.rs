//! ConsumerGroupDescribe.

use super::types::{ConsumerGroupDescription, ConsumerMemberDescription};
use crate::coordinator::GroupCoordinator;
use crate::error::ErrorCode;

impl GroupCoordinator {
    /// ConsumerGroupDescribe: groups, members, epochs, current and target
    /// assignments. A group that does not exist, or is a classic group, is
    /// GROUP_ID_NOT_FOUND (as Kafka).
    pub fn describe_consumer_groups(&self, group_ids: &[String]) -> Vec<ConsumerGroupDescription> {
        group_ids
            .iter()
            .map(|id| self.describe_consumer_group(id))
            .collect()
    }

    fn describe_consumer_group(&self, id: &str) -> ConsumerGroupDescription {
        let mut d = ConsumerGroupDescription {
            group_id: id.to_string(),
            error: ErrorCode::None,
            error_message: None,
            state: "Dead",
            group_epoch: 0,
            assignment_epoch: 0,
            assignor_name: String::new(),
            members: Vec::new(),
        };
        if let Err(e) = self.check_owner(id) {
            d.error = e;
            return d;
        }
        let (cg, message) = match self.groups.get(id) {
            None => (None, format!("Group {id} not found.")),
            Some(g) => (
                g.consumer.as_deref(),
                format!("Group {id} is not a consumer group."),
            ),
        };
        let Some(cg) = cg else {
            d.error = ErrorCode::GroupIdNotFound;
            d.error_message = Some(message);
            return d;
        };
        d.state = cg.state_name();
        d.group_epoch = cg.epoch;
        d.assignment_epoch = cg.assignment_epoch;
        d.assignor_name = cg.assignor(&self.config).name().to_string();
        d.members = cg
            .members
            .values()
            .map(|m| ConsumerMemberDescription {
                member_id: m.id.clone(),
                instance_id: m.meta.instance_id.clone(),
                rack_id: m.meta.rack_id.clone(),
                member_epoch: m.current.member_epoch,
                state: m.current.state,
                client_id: m.meta.client_id.clone(),
                client_host: m.meta.client_host.clone(),
                subscribed_topic_names: m.meta.subscribed_topic_names.clone(),
                subscribed_topic_regex: m.meta.subscribed_topic_regex.clone(),
                assignment: m.current.assigned.clone(),
                target_assignment: cg.target.get(&m.id).cloned().unwrap_or_default(),
            })
            .collect();
        d
    }
}
