//! A cluster member's security metadata: ACLs live in the metadata log.
//!
//! - [`SecuritySync`] hands the image's ACL set to the broker's
//!   [`AclStore`] whenever it changed (by pointer: an image whose batch
//!   touched no ACL shares its predecessor's map), once this broker's
//!   metadata has caught up: until the controller has said so, the store
//!   allows only super users, so a restarted broker never decides on an
//!   image that may still lack a DENY.
//! - [`follow_security`] runs the sync after every applied batch.
//! - [`ForwardingSecurity`] is the broker's [`SecurityAdmin`]: CreateAcls
//!   and DeleteAcls go to the active controller (the client's permission
//!   was checked by the handler), and the answer waits until this node's
//!   image shows the change and the store has it, so a client that creates
//!   a DENY and then produces through the same broker is refused.
//!
//! See "ACLs, SCRAM credentials and quotas in a cluster" in
//! docs/security.md.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use weir_acl::AclBinding;
use weir_broker::acls::AclStore;
use weir_broker::security_admin::{SecurityAdmin, SecurityFuture};
use weir_cluster::client::{ControllerClient, ControllerClientConfig};
use weir_cluster::{BrokerState, ImageReader};
use weir_metadata::MetadataImage;
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_response::AclCreationResult;
use weir_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use weir_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};

type AclMap = Arc<BTreeMap<Uuid, AclBinding>>;

/// Brings the broker's security stores in line with the metadata image.
pub struct SecuritySync {
    acls: Arc<AclStore>,
    /// Set once this broker's metadata caught up; never cleared.
    ready: AtomicBool,
    /// The ACL map last handed to the store.
    last_acls: Mutex<Option<AclMap>>,
}

impl SecuritySync {
    pub fn new(acls: Arc<AclStore>) -> SecuritySync {
        SecuritySync {
            acls,
            ready: AtomicBool::new(false),
            last_acls: Mutex::new(None),
        }
    }

    /// Hands `image`'s ACLs to the store if they changed since the last
    /// call; nothing before [`SecuritySync::set_ready`].
    pub fn apply(&self, image: &MetadataImage) {
        if !self.ready.load(Ordering::Acquire) {
            return;
        }
        let mut last = self.last_acls.lock().unwrap_or_else(|p| p.into_inner());
        let acls = image.acls();
        if last.as_ref().is_some_and(|l| Arc::ptr_eq(l, acls)) {
            return;
        }
        let set: BTreeSet<AclBinding> = acls.values().cloned().collect();
        tracing::debug!(acls = set.len(), "ACLs from the metadata image");
        self.acls.replace(set);
        *last = Some(Arc::clone(acls));
    }

    /// This broker's image has caught up with the metadata log: from now
    /// on it is the authority.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }
}

/// Keeps the security stores in line with the image until `stop`
/// changes. With a `registration` (the broker lifecycle's state), the
/// image becomes the authority once the controller found this broker
/// caught up; without one, at once.
pub async fn follow_security(
    sync: Arc<SecuritySync>,
    images: ImageReader,
    mut registration: Option<watch::Receiver<BrokerState>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut updates = images.watch();
    if registration.is_none() {
        sync.set_ready();
    }
    loop {
        if let Some(r) = &registration
            && r.borrow().caught_up
        {
            sync.set_ready();
            registration = None;
        }
        updates.borrow_and_update();
        sync.apply(&images.current().image);
        tokio::select! {
            r = updates.changed() => {
                if r.is_err() {
                    return;
                }
            }
            r = async { registration.as_mut().expect("guarded").changed().await }, if registration.is_some() => {
                if r.is_err() {
                    // The lifecycle ended without catching up: the image
                    // never becomes the authority.
                    registration = None;
                    if !sync.ready.load(Ordering::Acquire) {
                        tracing::warn!("the broker lifecycle ended before its metadata caught up; ACLs stay unloaded");
                    }
                }
            }
            _ = stop.changed() => return,
        }
    }
}

struct Inner {
    client: ControllerClient,
    images: ImageReader,
    sync: Arc<SecuritySync>,
    wait: Duration,
}

/// The broker's [`SecurityAdmin`] on a cluster member (see the module doc).
pub struct ForwardingSecurity {
    inner: Arc<Inner>,
}

impl ForwardingSecurity {
    pub fn new(
        voters: BTreeMap<u64, String>,
        images: ImageReader,
        sync: Arc<SecuritySync>,
        deadline: Duration,
    ) -> ForwardingSecurity {
        let client = ControllerClient::new(
            voters,
            ControllerClientConfig {
                client_id: "weir-forwarding-security".into(),
                deadline,
                ..ControllerClientConfig::default()
            },
        );
        ForwardingSecurity {
            inner: Arc::new(Inner {
                client,
                images,
                sync,
                wait: deadline,
            }),
        }
    }
}

impl Inner {
    /// Waits until `done` holds of this node's image (bounded by
    /// `self.wait`: a later change may undo ours), then brings the stores
    /// in line with it.
    async fn caught_up(&self, done: impl Fn(&MetadataImage) -> bool) {
        let mut updates = self.images.watch();
        let end = tokio::time::Instant::now() + self.wait;
        loop {
            updates.borrow_and_update();
            let applied = self.images.current();
            if done(&applied.image) {
                self.sync.apply(&applied.image);
                return;
            }
            match tokio::time::timeout_at(end, updates.changed()).await {
                Ok(Ok(())) => {}
                Err(_) | Ok(Err(_)) => return,
            }
        }
    }
}

impl SecurityAdmin for ForwardingSecurity {
    fn create_acls(&self, req: CreateAclsRequest) -> SecurityFuture<CreateAclsResponse> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match inner.client.send(&req).await {
                Ok(resp) => {
                    let created: Vec<AclBinding> = req
                        .creations
                        .iter()
                        .zip(&resp.results)
                        .filter(|(_, r)| r.error_code == ErrorCode::None.code())
                        .filter_map(|(c, _)| {
                            AclBinding::from_codes(
                                c.resource_type,
                                &c.resource_name,
                                c.resource_pattern_type,
                                &c.principal,
                                &c.host,
                                c.operation,
                                c.permission_type,
                            )
                            .ok()
                        })
                        .collect();
                    inner
                        .caught_up(|image| {
                            let held: BTreeSet<&AclBinding> = image.acls().values().collect();
                            created.iter().all(|a| held.contains(a))
                        })
                        .await;
                    resp
                }
                Err(e) => CreateAclsResponse {
                    results: req
                        .creations
                        .iter()
                        .map(|_| AclCreationResult {
                            error_code: ErrorCode::RequestTimedOut.code(),
                            error_message: Some(e.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
    }

    fn delete_acls(&self, req: DeleteAclsRequest) -> SecurityFuture<DeleteAclsResponse> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match inner.client.send(&req).await {
                Ok(resp) => {
                    let deleted: Vec<AclBinding> = resp
                        .filter_results
                        .iter()
                        .flat_map(|f| &f.matching_acls)
                        .filter_map(|m| {
                            AclBinding::from_codes(
                                m.resource_type,
                                &m.resource_name,
                                m.pattern_type,
                                &m.principal,
                                &m.host,
                                m.operation,
                                m.permission_type,
                            )
                            .ok()
                        })
                        .collect();
                    inner
                        .caught_up(|image| {
                            let held: BTreeSet<&AclBinding> = image.acls().values().collect();
                            deleted.iter().all(|a| !held.contains(a))
                        })
                        .await;
                    resp
                }
                Err(e) => DeleteAclsResponse {
                    filter_results: req
                        .filters
                        .iter()
                        .map(|_| DeleteAclsFilterResult {
                            error_code: ErrorCode::RequestTimedOut.code(),
                            error_message: Some(e.to_string()),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
    }
}
