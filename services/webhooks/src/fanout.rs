//! Turns each change event into a message and one delivery per interested endpoint.

use std::sync::Arc;

use latchkey_shared::clock::SharedClock;
use latchkey_shared::events::consume::Handler;
use latchkey_shared::events::Event;
use serde_json::json;
use tokio::sync::Notify;

use crate::store::{Message, Store};

pub struct Fanout {
    pub store: Store,
    pub clock: SharedClock,
    pub wake: Arc<Notify>,
}

/// The message id is derived from the event id, so a redelivered event is the same message.
pub fn message_id(event: &Event) -> String {
    format!("msg_{}", event.id.simple())
}

#[async_trait::async_trait]
impl Handler for Fanout {
    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        let endpoints: Vec<_> = self
            .store
            .endpoints(event.project_id)
            .await?
            .into_iter()
            .filter(|e| e.wants(&event.event_type))
            .map(|e| e.id)
            .collect();
        if endpoints.is_empty() {
            return Ok(());
        }
        let message = Message {
            project_id: event.project_id,
            id: message_id(event),
            event_type: event.event_type.clone(),
            body: json!({ "type": event.event_type, "data": event.data }).to_string(),
            created_at_millis: event.created_at_millis,
        };
        self.store
            .enqueue(&message, &endpoints, self.clock.now_millis())
            .await?;
        self.wake.notify_one();
        Ok(())
    }
}
