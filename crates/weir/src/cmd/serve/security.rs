//! A cluster member's security metadata: ACLs, SCRAM credentials and
//! client quotas live in the metadata log.
//!
//! - [`SecuritySync`] hands the image's ACL set to the broker's
//!   [`AclStore`], its SCRAM credentials to the [`ScramStore`] and its
//!   client quotas to the [`QuotaStore`] whenever they changed (by
//!   pointer: an image whose batch touched none shares its predecessor's
//!   map). ACLs and credentials wait until this broker's metadata has
//!   caught up: until the controller has said so, the ACL store allows
//!   only super users and no credential set at run time logs in, so a
//!   restarted broker never decides on an image that may still lack a
//!   DENY or still hold a deleted password. Quotas are enforced from the
//!   first image on (an older quota is closer than none).
//! - [`follow_security`] runs the sync after every applied batch.
//! - [`ForwardingSecurity`] is the broker's [`SecurityAdmin`]: CreateAcls,
//!   DeleteAcls, AlterUserScramCredentials and AlterClientQuotas go to the
//!   active controller (the client's permission was checked by the
//!   handler), and the answer waits until this node's image shows the
//!   change and the stores have it, so a client that creates a DENY and
//!   then produces through the same broker is refused, and one that sets a
//!   password logs in with it at once.
//!
//! See "ACLs in a cluster" and "SCRAM credentials and quotas in a
//! cluster" in docs/security.md.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use weir_acl::AclBinding;
use weir_broker::acls::AclStore;
use weir_broker::quotas::QuotaStore;
use weir_broker::scram_credentials::ScramStore;
use weir_broker::security_admin::{SecurityAdmin, SecurityFuture};
use weir_cluster::client::{ControllerClient, ControllerClientConfig};
use weir_cluster::{BrokerState, ImageReader};
use weir_metadata::MetadataImage;
use weir_metadata::client_quotas::{self, ClientQuotas};
use weir_metadata::scram::{self, ScramCredential, ScramHash, ScramUsers};
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_response::AclCreationResult;
use weir_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use weir_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
    DeleteAclsResponse,
};

type AclMap = Arc<BTreeMap<Uuid, AclBinding>>;

/// Brings the broker's security stores in line with the metadata image.
pub struct SecuritySync {
    acls: Arc<AclStore>,
    scram: Arc<ScramStore>,
    quotas: Arc<QuotaStore>,
    /// Set once this broker's metadata caught up; never cleared.
    ready: AtomicBool,
    /// What was last handed to the stores.
    last: Mutex<Handed>,
}

/// The image's maps last handed to the stores, compared by pointer.
#[derive(Default)]
struct Handed {
    acls: Option<AclMap>,
    scram: Option<Arc<ScramUsers>>,
    quotas: Option<Arc<ClientQuotas>>,
}

/// Whether `now` is not the map last handed over.
fn changed<T>(last: &Option<Arc<T>>, now: &Arc<T>) -> bool {
    !last.as_ref().is_some_and(|l| Arc::ptr_eq(l, now))
}

impl SecuritySync {
    pub fn new(acls: Arc<AclStore>, scram: Arc<ScramStore>, quotas: Arc<QuotaStore>) -> Self {
        SecuritySync {
            acls,
            scram,
            quotas,
            ready: AtomicBool::new(false),
            last: Mutex::new(Handed::default()),
        }
    }

    /// Hands `image`'s ACLs, credentials and quotas to the stores where
    /// they changed since the last call; ACLs and credentials not before
    /// [`SecuritySync::set_ready`] (see the module doc).
    pub fn apply(&self, image: &MetadataImage) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let quotas = image.client_quotas();
        if changed(&last.quotas, quotas) {
            tracing::debug!(
                entities = quotas.entries.len(),
                "client quotas from the metadata image"
            );
            self.quotas.replace(ClientQuotas::clone(quotas));
            last.quotas = Some(Arc::clone(quotas));
        }
        if !self.ready.load(Ordering::Acquire) {
            return;
        }
        let acls = image.acls();
        if changed(&last.acls, acls) {
            let set: BTreeSet<AclBinding> = acls.values().cloned().collect();
            tracing::debug!(acls = set.len(), "ACLs from the metadata image");
            self.acls.replace(set);
            last.acls = Some(Arc::clone(acls));
        }
        let users = image.scram();
        if changed(&last.scram, users) {
            tracing::debug!(
                credentials = users.len(),
                "SCRAM credentials from the metadata image"
            );
            self.scram.replace(ScramUsers::clone(users));
            last.scram = Some(Arc::clone(users));
        }
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
                        tracing::warn!("the broker lifecycle ended before its metadata caught up; ACLs and SCRAM credentials stay unloaded");
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

    fn alter_user_scram_credentials(
        &self,
        req: AlterUserScramCredentialsRequest,
    ) -> SecurityFuture<AlterUserScramCredentialsResponse> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match inner.client.send(&req).await {
                Ok(resp) => {
                    let done = scram_done(&req, &resp);
                    inner.caught_up(|image| done(image.scram())).await;
                    resp
                }
                Err(e) => AlterUserScramCredentialsResponse {
                    results: scram::refuse_all(&req, ErrorCode::RequestTimedOut, &e.to_string()),
                    ..Default::default()
                },
            }
        })
    }

    fn alter_client_quotas(
        &self,
        req: AlterClientQuotasRequest,
    ) -> SecurityFuture<AlterClientQuotasResponse> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            match inner.client.send(&req).await {
                Ok(resp) => {
                    if !req.validate_only {
                        let done = quotas_done(&req, &resp);
                        inner.caught_up(|image| done(image.client_quotas())).await;
                    }
                    resp
                }
                Err(e) => {
                    let results =
                        client_quotas::refuse_all(&req, ErrorCode::RequestTimedOut, &e.to_string());
                    client_quotas::alter_response(req, results)
                }
            }
        })
    }
}

/// When credentials hold what an AlterUserScramCredentials answered as
/// done: each deletion gone, each upsertion's credential (its keys derived
/// as the controller derived them) in place.
fn scram_done(
    req: &AlterUserScramCredentialsRequest,
    resp: &AlterUserScramCredentialsResponse,
) -> impl Fn(&ScramUsers) -> bool + use<> {
    let ok = |user: &str| {
        resp.results
            .iter()
            .any(|r| r.user == user && r.error_code == ErrorCode::None.code())
    };
    let (deletions, upsertions) = scram::request_changes(req);
    let gone: Vec<(ScramHash, String)> = deletions
        .into_iter()
        .filter(|d| ok(&d.user))
        .filter_map(|d| Some((ScramHash::from_wire_type(d.mechanism)?, d.user)))
        .collect();
    let set: Vec<(ScramHash, String, ScramCredential)> = upsertions
        .into_iter()
        .filter(|u| ok(&u.user))
        .filter_map(|u| {
            let hash = ScramHash::from_wire_type(u.mechanism)?;
            let iterations = u32::try_from(u.iterations).ok()?;
            let c = ScramCredential::from_salted_password(
                hash,
                &u.salted_password,
                &u.salt,
                iterations,
            );
            Some((hash, u.user, c))
        })
        .collect();
    move |users: &ScramUsers| {
        gone.iter().all(|(h, u)| users.get(*h, u).is_none())
            && set.iter().all(|(h, u, c)| users.get(*h, u) == Some(c))
    }
}

/// When quotas hold what an AlterClientQuotas answered as done: each
/// accepted entry's keys set to their values or removed.
fn quotas_done(
    req: &AlterClientQuotasRequest,
    resp: &AlterClientQuotasResponse,
) -> impl Fn(&ClientQuotas) -> bool + use<> {
    let wanted: Vec<(client_quotas::QuotaEntity, String, Option<f64>)> =
        client_quotas::request_alterations(req)
            .into_iter()
            .zip(&resp.entries)
            .filter(|(_, r)| r.error_code == ErrorCode::None.code())
            .filter_map(|(a, _)| {
                let entity = client_quotas::validate_entity(&a.entity).ok()?;
                Some(
                    a.ops
                        .into_iter()
                        .map(|op| (entity.clone(), op.key, (!op.remove).then_some(op.value)))
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .collect();
    move |quotas: &ClientQuotas| {
        wanted.iter().all(|(entity, key, value)| {
            quotas.entries.get(entity).and_then(|v| v.get(key)) == value.as_ref()
        })
    }
}
