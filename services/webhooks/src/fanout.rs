//! Turns each change event into a message and one delivery per interested endpoint.

use std::sync::Arc;

use latchkey_shared::clock::SharedClock;
use latchkey_shared::events::consume::Handler;
use latchkey_shared::events::Event;
use serde_json::json;
use tokio::sync::Notify;

use crate::store::{Message, Store};

/// How far the clocks of the replica that made a change and of the one that made an endpoint
/// may differ without the endpoint missing the change.
const CLOCK_ALLOWANCE_MILLIS: i64 = 1_000;

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
            // An endpoint hears of changes made after it was created, not of a backlog that was
            // still on its way when it was added; a redelivered event still picks the same set.
            // The two times come from different replicas' clocks, hence the allowance.
            .filter(|e| e.created_at_millis <= event.created_at_millis + CLOCK_ALLOWANCE_MILLIS)
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

#[cfg(test)]
mod tests {
    use latchkey_shared::db::Database;
    use latchkey_shared::sealed::SecretsKey;
    use uuid::Uuid;

    use super::*;
    use crate::store::Endpoint;

    #[tokio::test]
    async fn endpoints_receive_only_events_from_after_their_creation() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("sqlite://{}", dir.path().join("w.db").display());
        let db = Database::connect_and_migrate(&url, crate::MIGRATIONS)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let store = Store::new(db, SecretsKey::generate());
        let project = Uuid::now_v7();
        let endpoint = Endpoint {
            project_id: project,
            id: Uuid::now_v7(),
            url: "http://127.0.0.1:9/hook".into(),
            description: String::new(),
            event_types: None,
            enabled: true,
            secret: "whsec_test".into(),
            previous_secret: None,
            previous_secret_expires_at_millis: None,
            created_at_millis: 1_000,
        };
        store
            .insert_endpoint(&endpoint)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let fanout = Fanout {
            store: store.clone(),
            clock: latchkey_shared::clock::system(),
            wake: Arc::new(Notify::new()),
        };
        let before = Event::new("user.created", project, -1, json!({ "id": "a" }));
        let after = Event::new("user.created", project, 0, json!({ "id": "b" }));
        for event in [&before, &after] {
            fanout.handle(event).await.unwrap_or_else(|e| panic!("{e}"));
        }
        let delivered: Vec<_> = store
            .deliveries(project, endpoint.id, None, 10)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|(d, _)| d.message_id)
            .collect();
        assert_eq!(delivered, vec![message_id(&after)]);
    }
}
