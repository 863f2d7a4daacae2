//! Who changes a cluster member's ACLs, SCRAM credentials and client
//! quotas: the seam between the broker's security handlers and the
//! metadata log.
//!
//! A single node changes its own files (`weir-acls.json`,
//! `weir-scram-credentials.json`, `weir-client-quotas.json`, see
//! [`crate::acls`], [`crate::scram_credentials`], [`crate::quotas`]) and
//! installs nothing here. A cluster member's live in the metadata log: the
//! process running it installs a [`SecurityAdmin`]
//! ([`crate::Broker::set_security_admin`]) that sends CreateAcls,
//! DeleteAcls, AlterUserScramCredentials and AlterClientQuotas to the
//! active controller and answers once this broker's image, and so its
//! stores, hold the change. Handlers check the client's permissions before
//! they ask; the admin trusts that.
//!
//! Requests and answers are the wire types, as with
//! [`crate::cluster::TopicAdmin`]; the futures own what they need, so a
//! handler can answer with [`crate::handler::Reply::Later`].

use std::future::Future;
use std::pin::Pin;

use weir_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
    DeleteAclsResponse,
};

/// An answer still being worked on.
pub type SecurityFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Changes the security metadata of a cluster (see the module doc).
pub trait SecurityAdmin: Send + Sync {
    /// CreateAcls, one result per creation in order.
    fn create_acls(&self, req: CreateAclsRequest) -> SecurityFuture<CreateAclsResponse>;
    /// DeleteAcls, one result per filter in order.
    fn delete_acls(&self, req: DeleteAclsRequest) -> SecurityFuture<DeleteAclsResponse>;
    /// AlterUserScramCredentials, one result per user named.
    fn alter_user_scram_credentials(
        &self,
        req: AlterUserScramCredentialsRequest,
    ) -> SecurityFuture<AlterUserScramCredentialsResponse>;
    /// AlterClientQuotas, one result per entry in order; with
    /// `validate_only` nothing changes.
    fn alter_client_quotas(
        &self,
        req: AlterClientQuotasRequest,
    ) -> SecurityFuture<AlterClientQuotasResponse>;
}
