//! Who changes a cluster member's ACLs: the seam between the broker's
//! security handlers and the metadata log.
//!
//! A single node changes its own files (`weir-acls.json`, see
//! [`crate::acls`]) and installs nothing here. A cluster member's ACLs live
//! in the metadata log: the process running it installs a
//! [`SecurityAdmin`] ([`crate::Broker::set_security_admin`]) that sends
//! CreateAcls and DeleteAcls to the active controller and answers once
//! this broker's image, and so its [`crate::acls::AclStore`], holds the
//! change. Handlers check the client's permissions before they ask; the
//! admin trusts that.
//!
//! Requests and answers are the wire types, as with
//! [`crate::cluster::TopicAdmin`]; the futures own what they need, so a
//! handler can answer with [`crate::handler::Reply::Later`].

use std::future::Future;
use std::pin::Pin;

use weir_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};

/// An answer still being worked on.
pub type SecurityFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Changes the security metadata of a cluster (see the module doc).
pub trait SecurityAdmin: Send + Sync {
    /// CreateAcls, one result per creation in order.
    fn create_acls(&self, req: CreateAclsRequest) -> SecurityFuture<CreateAclsResponse>;
    /// DeleteAcls, one result per filter in order.
    fn delete_acls(&self, req: DeleteAclsRequest) -> SecurityFuture<DeleteAclsResponse>;
}
