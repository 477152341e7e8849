//! Change events (DESIGN §3): the envelope, the bus abstraction with a RabbitMQ and an
//! in-process adapter, the transactional outbox and its relay, and the consumer helper.

pub mod amqp;
pub mod consume;
pub mod in_process;
pub mod outbox;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Name of the topic exchange every service publishes to; routing key = event type.
pub const EXCHANGE: &str = "latchkey.events";

/// Internal event (not a webhook type): sessions ended, so gateways refuse their access tokens
/// (80 §6). Data: `{user_id, session_ids}`.
pub const SESSIONS_REVOKED: &str = "internal.sessions.revoked";

/// The change events customers may receive by webhook (60 §2).
pub const PUBLIC_TYPES: [&str; 16] = [
    "user.created",
    "user.updated",
    "user.deleted",
    "team.created",
    "team.updated",
    "team.deleted",
    "team_membership.created",
    "team_membership.deleted",
    "team_permission.created",
    "team_permission.deleted",
    "project_permission.created",
    "project_permission.deleted",
    "user_api_key.created",
    "user_api_key.revoked",
    "team_api_key.created",
    "team_api_key.revoked",
];

/// One change event, as it travels on the bus (JSON) and reaches webhook consumers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// UUIDv7, stable across retries and redeliveries.
    pub id: Uuid,
    #[serde(rename = "type")]
    pub event_type: String,
    pub project_id: Uuid,
    pub created_at_millis: i64,
    pub data: Value,
}

impl Event {
    pub fn new(event_type: &str, project_id: Uuid, created_at_millis: i64, data: Value) -> Self {
        Self {
            id: Uuid::now_v7(),
            event_type: event_type.to_owned(),
            project_id,
            created_at_millis,
            data,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("broker unavailable: {0}")]
    Unavailable(String),
    #[error("broker refused the message")]
    Nacked,
    #[error("event could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

/// Publishes events; returns only once the broker has taken responsibility for the event.
#[async_trait::async_trait]
pub trait Publisher: Send + Sync {
    async fn publish(&self, event: &Event) -> Result<(), BusError>;
}

/// How a consumer settles a delivery.
#[async_trait::async_trait]
pub trait Settle: Send + Sync {
    /// Handled (and committed): the broker may forget it.
    async fn ack(&self);
    /// Cannot be handled, now or later: to the dead-letter queue.
    async fn dead_letter(&self);
    /// Failed for now: deliver again later.
    async fn retry(&self);
}

/// An event handed to a consumer, with the means to settle it.
pub struct Delivery {
    pub event: Event,
    pub redelivered: bool,
    pub settle: Box<dyn Settle>,
}

/// A bus that delivers the events matching `bindings` (routing-key patterns such as `user.*`
/// or `#`) to a named, durable queue.
#[async_trait::async_trait]
pub trait Subscriber: Send + Sync {
    async fn subscribe(
        &self,
        queue: &str,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError>;

    /// A queue of this subscriber's own that lives as long as it does: every instance (each
    /// gateway, say) receives every matching event. Nothing is kept while nobody listens.
    async fn subscribe_transient(
        &self,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError>;
}

/// The event bus of a deployment: both directions, one adapter.
pub trait Bus: Publisher + Subscriber {}
impl<T: Publisher + Subscriber> Bus for T {}

pub type SharedBus = Arc<dyn Bus>;

/// Whether a routing key matches an AMQP topic pattern (`*` one word, `#` zero or more).
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(p: &[&str], k: &[&str]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(&"#"), _) => go(&p[1..], k) || (!k.is_empty() && go(p, &k[1..])),
            (Some(&"*"), Some(_)) => go(&p[1..], &k[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &k[1..]),
            _ => false,
        }
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let k: Vec<&str> = key.split('.').collect();
    go(&p, &k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_patterns_follow_amqp_rules() {
        assert!(topic_matches("#", "user.created"));
        assert!(topic_matches("user.*", "user.created"));
        assert!(!topic_matches("user.*", "team.created"));
        assert!(!topic_matches("*", "user.created"));
        assert!(topic_matches("user.#", "user"));
        assert!(topic_matches("user.created", "user.created"));
    }

    #[test]
    fn envelope_uses_the_spec_field_names() {
        let e = Event::new(
            "user.created",
            Uuid::nil(),
            5,
            serde_json::json!({"id": "u"}),
        );
        let v = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(v["type"], "user.created");
        assert_eq!(v["created_at_millis"], 5);
        assert_eq!(e.id.get_version_num(), 7);
    }
}
