//! Admin management of a project's webhook endpoints (80 §7).

use std::sync::Arc;

use latchkey_shared::clock::SharedClock;
use latchkey_shared::events::PUBLIC_TYPES;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::signing;
use crate::store::{Endpoint, Message, Store};
use crate::url_policy::UrlPolicy;

/// The previous secret keeps signing this long after a rotation.
const ROTATION_OVERLAP_MILLIS: i64 = 24 * 60 * 60 * 1000;
const TEST_TYPE: &str = "service.test";
const MAX_PAGE: i64 = 100;

pub struct Endpoints {
    pub store: Store,
    pub policy: UrlPolicy,
    pub clock: SharedClock,
    pub wake: Arc<Notify>,
}

/// The admin shape (secret omitted).
pub fn view(e: &Endpoint) -> Value {
    json!({
        "id": e.id,
        "url": e.url,
        "description": e.description,
        "event_types": e.types(),
        "enabled": e.enabled,
        "created_at_millis": e.created_at_millis,
    })
}

fn object(body: &Value, allowed: &[&str]) -> Result<Map<String, Value>> {
    let map = body
        .as_object()
        .ok_or_else(|| Error::Invalid("the body must be a JSON object".into()))?;
    if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Error::Invalid(format!("unknown property: {k}")));
    }
    Ok(map.clone())
}

fn event_types(v: &Value) -> Result<Option<String>> {
    if v.is_null() {
        return Ok(None);
    }
    let list: Vec<String> = serde_json::from_value(v.clone())
        .map_err(|_| Error::Invalid("event_types must be a list of event types".into()))?;
    if let Some(bad) = list.iter().find(|t| !PUBLIC_TYPES.contains(&t.as_str())) {
        return Err(Error::Invalid(format!("unknown event type: {bad}")));
    }
    Ok(Some(
        serde_json::to_string(&list).unwrap_or_else(|_| "[]".into()),
    ))
}

fn string(v: &Value, key: &str) -> Result<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::Invalid(format!("{key} must be a string")))
}

impl Endpoints {
    async fn allowed_url(&self, url: &str) -> Result<String> {
        if url.len() > 2048 {
            return Err(Error::Invalid("url must be at most 2048 characters".into()));
        }
        self.policy
            .check(url)
            .await
            .map_err(|reason| Error::UrlNotAllowed {
                url: url.to_owned(),
                reason,
            })?;
        Ok(url.to_owned())
    }

    async fn get(&self, project: Uuid, id: Uuid) -> Result<Endpoint> {
        self.store
            .endpoint(project, id)
            .await?
            .ok_or(Error::EndpointNotFound(id))
    }

    pub async fn list(&self, project: Uuid) -> Result<Vec<Value>> {
        Ok(self
            .store
            .endpoints(project)
            .await?
            .iter()
            .map(view)
            .collect())
    }

    /// Creates an endpoint; the answer is the only time its secret is shown.
    pub async fn create(&self, project: Uuid, body: &Value) -> Result<Value> {
        let map = object(body, &["url", "event_types", "description"])?;
        let url = map
            .get("url")
            .ok_or_else(|| Error::Invalid("url is required".into()))
            .and_then(|v| string(v, "url"))?;
        let endpoint = Endpoint {
            project_id: project,
            id: Uuid::now_v7(),
            url: self.allowed_url(&url).await?,
            description: map
                .get("description")
                .map(|v| string(v, "description"))
                .transpose()?
                .unwrap_or_default(),
            event_types: map
                .get("event_types")
                .map(event_types)
                .transpose()?
                .flatten(),
            enabled: true,
            secret: signing::new_secret(),
            previous_secret: None,
            previous_secret_expires_at_millis: None,
            created_at_millis: self.clock.now_millis(),
        };
        self.store.insert_endpoint(&endpoint).await?;
        let mut shown = view(&endpoint);
        shown["secret"] = json!(endpoint.secret);
        Ok(shown)
    }

    pub async fn update(&self, project: Uuid, id: Uuid, body: &Value) -> Result<Value> {
        let map = object(body, &["url", "event_types", "enabled", "description"])?;
        let mut endpoint = self.get(project, id).await?;
        if let Some(v) = map.get("url") {
            endpoint.url = self.allowed_url(&string(v, "url")?).await?;
        }
        if let Some(v) = map.get("event_types") {
            endpoint.event_types = event_types(v)?;
        }
        if let Some(v) = map.get("enabled") {
            endpoint.enabled = v
                .as_bool()
                .ok_or_else(|| Error::Invalid("enabled must be a boolean".into()))?;
        }
        if let Some(v) = map.get("description") {
            endpoint.description = string(v, "description")?;
        }
        self.store.update_endpoint(&endpoint).await?;
        Ok(view(&endpoint))
    }

    pub async fn delete(&self, project: Uuid, id: Uuid) -> Result<()> {
        if self.store.delete_endpoint(project, id).await? {
            Ok(())
        } else {
            Err(Error::EndpointNotFound(id))
        }
    }

    /// A new secret; the old one signs too for 24 hours, so receivers can switch over.
    pub async fn rotate(&self, project: Uuid, id: Uuid) -> Result<Value> {
        let mut endpoint = self.get(project, id).await?;
        let new = signing::new_secret();
        endpoint.previous_secret = Some(std::mem::replace(&mut endpoint.secret, new));
        endpoint.previous_secret_expires_at_millis =
            Some(self.clock.now_millis() + ROTATION_OVERLAP_MILLIS);
        self.store.update_endpoint(&endpoint).await?;
        Ok(json!({ "secret": endpoint.secret }))
    }

    /// Sends a `service.test` message to this endpoint only.
    pub async fn send_test(&self, project: Uuid, id: Uuid) -> Result<Value> {
        let endpoint = self.get(project, id).await?;
        let now = self.clock.now_millis();
        let message = Message {
            project_id: project,
            id: format!("msg_{}", Uuid::now_v7().simple()),
            event_type: TEST_TYPE.into(),
            body: json!({
                "type": TEST_TYPE,
                "data": { "message": "A test event from Latchkey.", "endpoint_url": endpoint.url },
            })
            .to_string(),
            created_at_millis: now,
        };
        self.store.enqueue(&message, &[endpoint.id], now).await?;
        self.wake.notify_one();
        Ok(json!({ "message_id": message.id }))
    }

    /// Deliveries to an endpoint, newest first, a page from the endpoint's index; the cursor is
    /// the message id of the next page's first delivery.
    pub async fn deliveries(
        &self,
        project: Uuid,
        id: Uuid,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>)> {
        self.get(project, id).await?;
        let limit = limit.unwrap_or(MAX_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::Invalid("limit must be between 1 and 100".into()));
        }
        // The cursor is the first delivery of its page.
        let start = match cursor {
            Some(c) => {
                let at = self.store.delivery_created_at(project, id, c).await?;
                Some((
                    at.ok_or_else(|| Error::Invalid("unknown cursor".into()))?,
                    c,
                ))
            }
            None => None,
        };
        let page = self.store.deliveries(project, id, start, limit + 1).await?;
        let next = page.get(limit as usize).map(|(d, _)| d.message_id.clone());
        let mut items = Vec::new();
        for (d, event_type) in page.iter().take(limit as usize) {
            let attempts = self.store.attempts(project, id, &d.message_id).await?;
            items.push(json!({
                "message_id": d.message_id,
                "event_type": event_type,
                "status": d.status,
                "attempts": attempts.iter().map(|a| json!({
                    "at_millis": a.at_millis,
                    "response_status": a.response_status,
                    "error": a.error,
                    "duration_ms": a.duration_ms,
                })).collect::<Vec<_>>(),
                "next_attempt_at_millis": d.next_attempt_at_millis,
            }));
        }
        Ok((items, next))
    }

    /// Delivers a message again, with the same `webhook-id`.
    pub async fn replay(&self, project: Uuid, id: Uuid, message_id: &str) -> Result<()> {
        self.get(project, id).await?;
        if !self
            .store
            .replay(project, id, message_id, self.clock.now_millis())
            .await?
        {
            return Err(Error::DeliveryNotFound(message_id.to_owned()));
        }
        self.wake.notify_one();
        Ok(())
    }
}
