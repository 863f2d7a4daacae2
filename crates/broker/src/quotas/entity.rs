//! Client quota entities and their quotas as AlterClientQuotas and
//! DescribeClientQuotas see them, with Kafka's validation: the model a
//! single node and a cluster's controller share, in
//! [`weir_metadata::client_quotas`]. The store ([`super::QuotaStore`])
//! writes and swaps what is planned there.

pub use weir_metadata::client_quotas::*;
