//! Client quota entities and their quotas as AlterClientQuotas and
//! DescribeClientQuotas see them, with Kafka's validation
//! (`ClientQuotaControlManager`, `ClientQuotasImage.describe`). Pure, and
//! shared: a single node's store (weir-broker's `quotas`) writes and swaps
//! what [`ClientQuotas::plan_alter`] plans; a cluster's controller writes
//! it to the metadata log as `ClientQuotaRecord`s
//! (`controller::alter_client_quotas`) and every image holds it
//! ([`crate::MetadataImage::client_quotas`]).
//!
//! ```
//! use weir_metadata::client_quotas::{Alteration, ClientQuotas, Op, PRODUCER_BYTE_RATE};
//!
//! let set = Alteration {
//!     entity: vec![("user".into(), Some("alice".into()))],
//!     ops: vec![Op { key: PRODUCER_BYTE_RATE.into(), value: 1024.0, remove: false }],
//! };
//! let plan = ClientQuotas::default().plan_alter(&[set]);
//! assert!(plan.changed && plan.results[0].is_ok());
//! assert_eq!(plan.next.entries.len(), 1);
//! ```

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use weir_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

/// The entity types Kafka knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityType {
    User,
    ClientId,
    Ip,
}

impl EntityType {
    /// The wire name (`user`, `client-id`, `ip`).
    pub fn name(self) -> &'static str {
        match self {
            EntityType::User => "user",
            EntityType::ClientId => "client-id",
            EntityType::Ip => "ip",
        }
    }

    pub fn parse(s: &str) -> Option<EntityType> {
        match s {
            "user" => Some(EntityType::User),
            "client-id" => Some(EntityType::ClientId),
            "ip" => Some(EntityType::Ip),
            _ => None,
        }
    }
}

/// The quota keys. `producer_byte_rate` and `consumer_byte_rate` are
/// bytes per second, `request_percentage` percent of one request thread;
/// `controller_mutation_rate` and `connection_creation_rate` are kept and
/// described but not enforced.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Whether a key takes whole numbers only (Kafka's LONG and INT quota
/// configs) or any number (DOUBLE).
fn integral(key: &str) -> bool {
    matches!(
        key,
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE | CONNECTION_CREATION_RATE
    )
}

/// The keys a user and/or client-id entity takes.
pub const CLIENT_KEYS: [&str; 4] = [
    PRODUCER_BYTE_RATE,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION_RATE,
];
/// The keys an ip entity takes.
pub const IP_KEYS: [&str; 1] = [CONNECTION_CREATION_RATE];

/// A quota entity: one name per entity type, `None` for the type's
/// default (`<default>`, null on the wire). Invariant, once validated: a
/// user and/or a client-id, or an ip alone; no empty name.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity(pub BTreeMap<EntityType, Option<String>>);

impl QuotaEntity {
    pub fn get(&self, t: EntityType) -> Option<&Option<String>> {
        self.0.get(&t)
    }

    /// The quota keys this entity takes: [`IP_KEYS`] for an ip entity,
    /// [`CLIENT_KEYS`] otherwise.
    pub fn allowed_keys(&self) -> &'static [&'static str] {
        if self.get(EntityType::Ip).is_some() {
            &IP_KEYS
        } else {
            &CLIENT_KEYS
        }
    }
}

impl std::fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(t, n)| format!("{}={}", t.name(), n.as_deref().unwrap_or("<default>")))
            .collect();
        write!(f, "ClientQuotaEntity(entries={{{}}})", parts.join(", "))
    }
}

/// A refusal: the Kafka error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            code: ErrorCode::InvalidRequest,
            message: message.into(),
        }
    }
}

/// One entry of an AlterClientQuotas request, as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Alteration {
    /// (entity type, name or null), unchecked.
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<Op>,
}

/// Set `key` to `value`, or remove it.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

/// What an alteration does: the quotas afterwards and one result per
/// request entry, in request order.
#[derive(Debug)]
pub struct AlterPlan {
    pub next: ClientQuotas,
    /// Whether `next` differs from the quotas planned from.
    pub changed: bool,
    pub results: Vec<Result<(), Refusal>>,
}

/// A described entity and its quotas.
pub type Described<'a> = (&'a QuotaEntity, &'a BTreeMap<String, f64>);

/// Kafka's match types of a DescribeClientQuotas filter component.
pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_SPECIFIED: i8 = 2;

/// One component of a DescribeClientQuotas filter, as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub entity_type: String,
    pub match_type: i8,
    pub name: Option<String>,
}

/// Every quota set. Invariant: every entity passed [`validate_entity`],
/// every value [`validate_value`]; no entity has an empty key map.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientQuotas {
    pub entries: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
}

/// Equality is reflexive: every value passed [`validate_value`], so none
/// is NaN.
impl Eq for ClientQuotas {}

impl ClientQuotas {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Plans an AlterClientQuotas request with Kafka's checks: a key named
    /// twice in an entry, an entity named in an earlier entry, an empty
    /// entity, an unknown or repeated entity type, an empty name, a
    /// combination other than user and/or client-id or ip alone, an ip
    /// that is not an address, a key the entity does not take, a
    /// fractional byte rate and a value that is not above 0 all refuse
    /// their entry whole with INVALID_REQUEST. Removing a key that is not
    /// set is no error.
    pub fn plan_alter(&self, alterations: &[Alteration]) -> AlterPlan {
        let mut next = self.clone();
        let mut seen: Vec<QuotaEntity> = Vec::new();
        let mut results = Vec::with_capacity(alterations.len());
        for a in alterations {
            let r = validate_entity(&a.entity).and_then(|entity| {
                let mut keys: Vec<&str> = Vec::new();
                for op in &a.ops {
                    if keys.contains(&op.key.as_str()) {
                        return Err(Refusal::invalid(format!(
                            "Duplicate quota key {} not updating quota for this entity {entity}",
                            op.key
                        )));
                    }
                    keys.push(&op.key);
                }
                if seen.contains(&entity) {
                    return Err(Refusal::invalid(format!(
                        "Ignoring duplicate entity {entity}"
                    )));
                }
                seen.push(entity.clone());
                for op in a.ops.iter().filter(|op| !op.remove) {
                    validate_value(entity.allowed_keys(), &op.key, op.value)?;
                }
                Ok(entity)
            });
            let entity = match r {
                Ok(e) => e,
                Err(refusal) => {
                    results.push(Err(refusal));
                    continue;
                }
            };
            let values = next.entries.entry(entity.clone()).or_default();
            for op in &a.ops {
                if op.remove {
                    values.remove(&op.key);
                } else {
                    values.insert(op.key.clone(), op.value);
                }
            }
            if values.is_empty() {
                next.entries.remove(&entity);
            }
            results.push(Ok(()));
        }
        let changed = next != *self;
        AlterPlan {
            next,
            changed,
            results,
        }
    }

    /// Answers a DescribeClientQuotas filter (Kafka's
    /// `ClientQuotasImage.describe`): each component matches its entity
    /// type by exact name, by the default, or by any given name; `strict`
    /// keeps only entities with no other entity type. A malformed filter is
    /// refused whole.
    pub fn describe(
        &self,
        components: &[Component],
        strict: bool,
    ) -> Result<Vec<Described<'_>>, Refusal> {
        let mut exact: BTreeMap<EntityType, Option<&str>> = BTreeMap::new();
        let mut specified: Vec<EntityType> = Vec::new();
        for c in components {
            if c.entity_type.is_empty() {
                return Err(Refusal::invalid("Invalid empty entity type."));
            }
            let t = EntityType::parse(&c.entity_type).ok_or_else(|| Refusal {
                code: ErrorCode::UnsupportedVersion,
                message: format!("Unsupported entity type {}", c.entity_type),
            })?;
            if exact.contains_key(&t) || specified.contains(&t) {
                return Err(Refusal::invalid(format!(
                    "Entity type {} cannot appear more than once in the filter.",
                    c.entity_type
                )));
            }
            match (c.match_type, &c.name) {
                (MATCH_EXACT, Some(n)) => {
                    exact.insert(t, Some(n));
                }
                (MATCH_EXACT, None) => {
                    return Err(Refusal::invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ));
                }
                (MATCH_DEFAULT, None) => {
                    exact.insert(t, None);
                }
                (MATCH_DEFAULT, Some(_)) => {
                    return Err(Refusal::invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    ));
                }
                (MATCH_SPECIFIED, None) => specified.push(t),
                (MATCH_SPECIFIED, Some(_)) => {
                    return Err(Refusal::invalid(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                    ));
                }
                (m, _) => {
                    return Err(Refusal {
                        code: ErrorCode::UnsupportedVersion,
                        message: format!("Unknown match type {m}"),
                    });
                }
            }
        }
        let named = |t: EntityType| exact.contains_key(&t) || specified.contains(&t);
        if named(EntityType::Ip) && (named(EntityType::User) || named(EntityType::ClientId)) {
            return Err(Refusal::invalid(
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component.",
            ));
        }
        Ok(self
            .entries
            .iter()
            .filter(|(entity, _)| {
                if strict && entity.0.len() != exact.len() + specified.len() {
                    return false;
                }
                exact
                    .iter()
                    .all(|(t, n)| entity.get(*t).is_some_and(|have| have.as_deref() == *n))
                    && specified
                        .iter()
                        .all(|t| entity.get(*t).is_some_and(Option::is_some))
            })
            .collect())
    }
}

/// Checks an entity as Kafka does and makes it a [`QuotaEntity`].
pub fn validate_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, Refusal> {
    if entity.is_empty() {
        return Err(Refusal::invalid("Invalid empty client quota entity"));
    }
    let mut out = BTreeMap::new();
    for (type_name, name) in entity {
        let t = EntityType::parse(type_name).ok_or_else(|| {
            Refusal::invalid(format!("Unhandled client quota entity type: {type_name}"))
        })?;
        if out.contains_key(&t) {
            return Err(Refusal::invalid(format!(
                "Invalid empty client quota entity, duplicate entity entry {type_name}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(Refusal::invalid(format!("Empty {type_name} not supported")));
        }
        out.insert(t, name.clone());
    }
    let has = |t| out.contains_key(&t);
    if has(EntityType::Ip) {
        if has(EntityType::User) || has(EntityType::ClientId) {
            return Err(Refusal::invalid("Invalid empty client quota entity"));
        }
        if let Some(Some(ip)) = out.get(&EntityType::Ip)
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            return Err(Refusal::invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            )));
        }
    }
    Ok(QuotaEntity(out))
}

/// Checks one value: a key the entity takes, a whole number for byte and
/// connection rates, above 0.
pub fn validate_value(allowed: &[&str], key: &str, value: f64) -> Result<(), Refusal> {
    if !allowed.contains(&key) {
        return Err(Refusal::invalid(format!("Invalid configuration key {key}")));
    }
    if integral(key) && (value.fract().abs() > 1e-6 || !value.is_finite()) {
        return Err(Refusal::invalid(format!(
            "Configuration {key} must be a Long value"
        )));
    }
    if value.is_nan() || value <= 0.0 || !value.is_finite() {
        return Err(Refusal::invalid(format!(
            "Quota {key} must be greater than 0 (got {value})"
        )));
    }
    Ok(())
}

/// The entries of an AlterClientQuotas request, as sent (one reading for
/// a broker's handler and the controller's listener).
pub fn request_alterations(req: &AlterClientQuotasRequest) -> Vec<Alteration> {
    req.entries
        .iter()
        .map(|e| Alteration {
            entity: e
                .entity
                .iter()
                .map(|d| (d.entity_type.clone(), d.entity_name.clone()))
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| Op {
                    key: o.key.clone(),
                    value: o.value,
                    remove: o.remove,
                })
                .collect(),
        })
        .collect()
}

/// The AlterClientQuotas answer: each entry of `req` with its result (one
/// per entry, in order).
pub fn alter_response(
    req: AlterClientQuotasRequest,
    results: Vec<Result<(), Refusal>>,
) -> AlterClientQuotasResponse {
    let entries = req
        .entries
        .into_iter()
        .zip(results)
        .map(|(e, r)| {
            let (code, message) = match r {
                Ok(()) => (ErrorCode::None, None),
                Err(r) => (r.code, Some(r.message)),
            };
            EntryData {
                error_code: code.code(),
                error_message: message,
                entity: e
                    .entity
                    .into_iter()
                    .map(|d| EntityData {
                        entity_type: d.entity_type,
                        entity_name: d.entity_name,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        })
        .collect();
    AlterClientQuotasResponse {
        entries,
        ..Default::default()
    }
}

/// `code` with `message` for every entry of `req`.
pub fn refuse_all(
    req: &AlterClientQuotasRequest,
    code: ErrorCode,
    message: &str,
) -> Vec<Result<(), Refusal>> {
    req.entries
        .iter()
        .map(|_| {
            Err(Refusal {
                code,
                message: message.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        parts
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(String::from)))
            .collect()
    }

    fn set(key: &str, value: f64) -> Op {
        Op {
            key: key.to_string(),
            value,
            remove: false,
        }
    }

    fn alter(entity: &[(&str, Option<&str>)], ops: Vec<Op>) -> Alteration {
        Alteration {
            entity: ent(entity),
            ops,
        }
    }

    fn refusal(r: &Result<(), Refusal>) -> String {
        match r {
            Ok(()) => "ok".to_string(),
            Err(r) => format!("{:?}: {}", r.code, r.message),
        }
    }

    #[test]
    fn alter_validates_like_kafka() {
        let q = ClientQuotas::default();
        let cases: Vec<(Alteration, &str)> = vec![
            (
                alter(
                    &[("user", Some("alice"))],
                    vec![set(PRODUCER_BYTE_RATE, 1024.0)],
                ),
                "ok",
            ),
            (
                alter(&[("group", Some("g"))], vec![set(PRODUCER_BYTE_RATE, 1.0)]),
                "Unhandled client quota entity type: group",
            ),
            (
                alter(&[], vec![set(PRODUCER_BYTE_RATE, 1.0)]),
                "Invalid empty client quota entity",
            ),
            (
                alter(
                    &[("ip", Some("10.0.0.1")), ("user", Some("a"))],
                    vec![set(CONNECTION_CREATION_RATE, 1.0)],
                ),
                "Invalid empty client quota entity",
            ),
            (
                alter(
                    &[("ip", Some("not-an-ip"))],
                    vec![set(CONNECTION_CREATION_RATE, 1.0)],
                ),
                "not-an-ip is not a valid IP or resolvable host.",
            ),
            (
                alter(
                    &[("ip", Some("10.0.0.1"))],
                    vec![set(PRODUCER_BYTE_RATE, 1.0)],
                ),
                "Invalid configuration key producer_byte_rate",
            ),
            (
                alter(&[("client-id", Some("c"))], vec![set("bogus", 1.0)]),
                "Invalid configuration key bogus",
            ),
            (
                alter(
                    &[("client-id", Some("c2"))],
                    vec![set(PRODUCER_BYTE_RATE, 1.5)],
                ),
                "Configuration producer_byte_rate must be a Long value",
            ),
            (
                alter(
                    &[("client-id", Some("c3"))],
                    vec![set(REQUEST_PERCENTAGE, 0.0)],
                ),
                "Quota request_percentage must be greater than 0",
            ),
            (
                alter(
                    &[("client-id", Some("c4"))],
                    vec![set(CONSUMER_BYTE_RATE, -5.0)],
                ),
                "Quota consumer_byte_rate must be greater than 0",
            ),
            (
                alter(
                    &[("client-id", Some(""))],
                    vec![set(CONSUMER_BYTE_RATE, 5.0)],
                ),
                "Empty client-id not supported",
            ),
            (
                alter(
                    &[("client-id", Some("c")), ("client-id", Some("d"))],
                    vec![set(CONSUMER_BYTE_RATE, 5.0)],
                ),
                "duplicate entity entry client-id",
            ),
            (
                alter(
                    &[("client-id", Some("d"))],
                    vec![set(CONSUMER_BYTE_RATE, 5.0), set(CONSUMER_BYTE_RATE, 6.0)],
                ),
                "Duplicate quota key consumer_byte_rate",
            ),
            (
                alter(
                    &[("user", Some("alice"))],
                    vec![set(CONSUMER_BYTE_RATE, 5.0)],
                ),
                "Ignoring duplicate entity",
            ),
            (
                alter(&[("ip", None)], vec![set(CONNECTION_CREATION_RATE, 10.0)]),
                "ok",
            ),
        ];
        let (alterations, expected): (Vec<_>, Vec<_>) = cases.into_iter().unzip();
        let plan = q.plan_alter(&alterations);
        for ((r, want), a) in plan.results.iter().zip(&expected).zip(&alterations) {
            let got = refusal(r);
            assert!(got.contains(want), "{a:?}: got {got}, want {want}");
            if *want != "ok" {
                assert!(got.starts_with("InvalidRequest"), "{got}");
            }
        }
        assert!(plan.changed);
        assert_eq!(plan.next.entries.len(), 2);
    }

    #[test]
    fn remove_deletes_a_key_and_an_empty_entity() {
        let q = ClientQuotas::default()
            .plan_alter(&[alter(
                &[("user", None), ("client-id", Some("c"))],
                vec![set(PRODUCER_BYTE_RATE, 10.0), set(REQUEST_PERCENTAGE, 50.0)],
            )])
            .next;
        let remove = |key: &str| Op {
            key: key.to_string(),
            value: 0.0,
            remove: true,
        };
        let e = [("client-id", Some("c")), ("user", None)];
        let p = q.plan_alter(&[alter(&e, vec![remove(PRODUCER_BYTE_RATE)])]);
        assert!(p.changed);
        let values: Vec<_> = p.next.entries.values().collect();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].keys().collect::<Vec<_>>(), [REQUEST_PERCENTAGE]);
        let p = p
            .next
            .plan_alter(&[alter(&e, vec![remove(REQUEST_PERCENTAGE)])]);
        assert!(p.next.is_empty());
        // removing what is not there changes nothing
        let p = p
            .next
            .plan_alter(&[alter(&e, vec![remove(REQUEST_PERCENTAGE)])]);
        assert!(!p.changed);
        assert!(p.results[0].is_ok());
    }

    fn comp(t: &str, m: i8, n: Option<&str>) -> Component {
        Component {
            entity_type: t.to_string(),
            match_type: m,
            name: n.map(String::from),
        }
    }

    #[test]
    fn describe_matches_exact_default_and_specified() {
        let q = ClientQuotas::default()
            .plan_alter(&[
                alter(
                    &[("user", Some("alice"))],
                    vec![set(PRODUCER_BYTE_RATE, 1.0)],
                ),
                alter(&[("user", None)], vec![set(PRODUCER_BYTE_RATE, 2.0)]),
                alter(
                    &[("user", Some("alice")), ("client-id", Some("app"))],
                    vec![set(PRODUCER_BYTE_RATE, 3.0)],
                ),
                alter(&[("client-id", None)], vec![set(PRODUCER_BYTE_RATE, 4.0)]),
                alter(
                    &[("ip", Some("10.0.0.1"))],
                    vec![set(CONNECTION_CREATION_RATE, 5.0)],
                ),
            ])
            .next;
        let values = |components: &[Component], strict: bool| -> Vec<f64> {
            let mut v: Vec<f64> = q
                .describe(components, strict)
                .unwrap()
                .into_iter()
                .flat_map(|(_, m)| m.values().copied())
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        assert_eq!(values(&[], false), [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(
            values(&[comp("user", MATCH_EXACT, Some("alice"))], false),
            [1.0, 3.0]
        );
        assert_eq!(
            values(&[comp("user", MATCH_EXACT, Some("alice"))], true),
            [1.0]
        );
        assert_eq!(values(&[comp("user", MATCH_DEFAULT, None)], false), [2.0]);
        assert_eq!(
            values(&[comp("user", MATCH_SPECIFIED, None)], false),
            [1.0, 3.0]
        );
        assert_eq!(
            values(&[comp("client-id", MATCH_SPECIFIED, None)], true),
            Vec::<f64>::new()
        );
        assert_eq!(
            values(&[comp("client-id", MATCH_DEFAULT, None)], true),
            [4.0]
        );
        assert_eq!(values(&[comp("ip", MATCH_SPECIFIED, None)], true), [5.0]);
        let err = |components: &[Component]| q.describe(components, false).unwrap_err();
        assert_eq!(
            err(&[comp("group", 0, Some("g"))]).code,
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            err(&[comp("user", 7, None)]).code,
            ErrorCode::UnsupportedVersion
        );
        for bad in [
            vec![comp("user", MATCH_EXACT, None)],
            vec![comp("user", MATCH_DEFAULT, Some("a"))],
            vec![comp("user", MATCH_SPECIFIED, Some("a"))],
            vec![
                comp("user", MATCH_DEFAULT, None),
                comp("user", MATCH_SPECIFIED, None),
            ],
            vec![
                comp("ip", MATCH_DEFAULT, None),
                comp("user", MATCH_SPECIFIED, None),
            ],
            vec![comp("", MATCH_DEFAULT, None)],
        ] {
            assert_eq!(err(&bad).code, ErrorCode::InvalidRequest, "{bad:?}");
        }
    }
}
