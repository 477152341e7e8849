//! The embedded bus: events pass between the services of one process over tokio channels.
//! Queues are named and shared like RabbitMQ's, so several subscribers to one queue split its
//! events, and a queue keeps its events until someone subscribes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::{topic_matches, BusError, Delivery, Event, Publisher, Settle, Subscriber};

const QUEUE_DEPTH: usize = 10_000;

#[derive(Default)]
pub struct InProcessBus {
    queues: Mutex<HashMap<String, Queue>>,
}

struct Queue {
    bindings: Vec<String>,
    tx: mpsc::Sender<Event>,
    // Shared by the queue's subscribers, which take turns, like consumers of one AMQP queue.
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Event>>>,
}

impl Queue {
    fn new() -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        Self {
            bindings: Vec::new(),
            tx,
            rx: Arc::new(tokio::sync::Mutex::new(rx)),
        }
    }
}

impl InProcessBus {
    pub fn new() -> Self {
        Self::default()
    }
}

struct Noop;

#[async_trait::async_trait]
impl Settle for Noop {
    async fn ack(&self) {}
    async fn dead_letter(&self) {
        tracing::warn!("in-process bus: event dead-lettered");
    }
    async fn retry(&self) {}
}

#[async_trait::async_trait]
impl Publisher for InProcessBus {
    async fn publish(&self, event: &Event) -> Result<(), BusError> {
        let targets: Vec<_> = {
            let queues = self.queues.lock().map_err(|_| BusError::Nacked)?;
            queues
                .values()
                .filter(|q| {
                    q.bindings
                        .iter()
                        .any(|b| topic_matches(b, &event.event_type))
                })
                .map(|q| q.tx.clone())
                .collect()
        };
        for tx in targets {
            tx.send(event.clone())
                .await
                .map_err(|_| BusError::Unavailable("queue closed".into()))?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Subscriber for InProcessBus {
    async fn subscribe(
        &self,
        queue: &str,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError> {
        let shared_rx = {
            let mut queues = self.queues.lock().map_err(|_| BusError::Nacked)?;
            let q = queues.entry(queue.to_owned()).or_insert_with(Queue::new);
            for b in bindings {
                if !q.bindings.iter().any(|x| x == b) {
                    q.bindings.push((*b).to_owned());
                }
            }
            q.rx.clone()
        };
        let (out, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let next = shared_rx.lock().await.recv().await;
                let Some(event) = next else { break };
                let delivery = Delivery {
                    event,
                    redelivered: false,
                    settle: Box::new(Noop),
                };
                if out.send(delivery).await.is_err() {
                    break;
                }
            }
        });
        Ok(rx)
    }

    async fn subscribe_transient(
        &self,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError> {
        let name = format!("transient.{}", uuid::Uuid::new_v4());
        self.subscribe(&name, bindings).await
    }
}
