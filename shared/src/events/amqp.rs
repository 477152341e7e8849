//! RabbitMQ adapter (lapin): durable topic exchange, persistent messages, publisher confirms,
//! durable queues with a dead-letter queue each, manual acks. Connections are re-established on
//! demand, so a broker restart only delays events.

use std::time::Duration;

use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    BasicRejectOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use tokio::sync::{mpsc, Mutex};
use tokio_stream::StreamExt;

use super::{BusError, Delivery, Event, Publisher, Settle, Subscriber, EXCHANGE};

/// Dead-letter exchange; each queue `q` has its dead letters in `q.dead`.
const DEAD_LETTER_EXCHANGE: &str = "latchkey.events.dead";
const PREFETCH: u16 = 64;

pub struct AmqpBus {
    url: String,
    /// Publishing channel in confirm mode, opened lazily and dropped on any error.
    publish: Mutex<Option<(Connection, Channel)>>,
}

impl AmqpBus {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            publish: Mutex::new(None),
        }
    }

    /// Opens the publishing connection now, so a wrong URL fails at start-up rather than at
    /// first publish.
    pub async fn check(&self) -> Result<(), BusError> {
        self.publishing_channel().await.map(drop)
    }

    /// The publishing channel, opened (again) when it is not connected. Declarations use it
    /// too: short-lived connections opened and closed only to declare made lapin log spurious
    /// channel errors at every start.
    async fn publishing_channel(&self) -> Result<Channel, BusError> {
        let mut slot = self.publish.lock().await;
        connected(&mut slot, &self.url).await.cloned()
    }
}

/// The channel in `slot`, opened first when there is none or it is no longer connected.
async fn connected<'a>(
    slot: &'a mut Option<(Connection, Channel)>,
    url: &str,
) -> Result<&'a Channel, BusError> {
    if slot
        .as_ref()
        .is_none_or(|(c, ch)| !c.status().connected() || !ch.status().connected())
    {
        *slot = Some(open(url).await?);
    }
    slot.as_ref()
        .map(|(_, channel)| channel)
        .ok_or_else(|| BusError::Unavailable("no channel".into()))
}

fn unavailable(e: impl std::fmt::Display) -> BusError {
    BusError::Unavailable(e.to_string())
}

/// A connection and a channel with the exchange declared and confirms on.
async fn open(url: &str) -> Result<(Connection, Channel), BusError> {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .map_err(unavailable)?;
    let channel = conn.create_channel().await.map_err(unavailable)?;
    channel
        .exchange_declare(
            EXCHANGE,
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(unavailable)?;
    Ok((conn, channel))
}

#[async_trait::async_trait]
impl Publisher for AmqpBus {
    async fn publish(&self, event: &Event) -> Result<(), BusError> {
        let body = serde_json::to_vec(event)?;
        let mut slot = self.publish.lock().await;
        let channel = connected(&mut slot, &self.url).await?.clone();
        let properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(ShortString::from(event.id.to_string()))
            .with_content_type(ShortString::from("application/json"));
        let outcome = async {
            channel
                .basic_publish(
                    EXCHANGE,
                    &event.event_type,
                    BasicPublishOptions::default(),
                    &body,
                    properties,
                )
                .await?
                .await
        }
        .await;
        match outcome {
            Ok(confirmation) if confirmation.is_ack() => Ok(()),
            Ok(_) => Err(BusError::Nacked),
            Err(e) => {
                *slot = None;
                Err(unavailable(e))
            }
        }
    }
}

struct AmqpSettle(lapin::acker::Acker);

#[async_trait::async_trait]
impl Settle for AmqpSettle {
    async fn ack(&self) {
        if let Err(e) = self.0.ack(BasicAckOptions::default()).await {
            // The broker will redeliver; consumers dedupe by event id.
            tracing::warn!(error = %e, "ack failed");
        }
    }
    async fn dead_letter(&self) {
        let _ = self.0.reject(BasicRejectOptions { requeue: false }).await;
    }
    async fn retry(&self) {
        let _ = self.0.reject(BasicRejectOptions { requeue: true }).await;
    }
}

async fn declare_queue(channel: &Channel, queue: &str, bindings: &[String]) -> lapin::Result<()> {
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .exchange_declare(
            DEAD_LETTER_EXCHANGE,
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let dead = format!("{queue}.dead");
    channel
        .queue_declare(&dead, durable, FieldTable::default())
        .await?;
    channel
        .queue_bind(
            &dead,
            DEAD_LETTER_EXCHANGE,
            queue,
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(DEAD_LETTER_EXCHANGE.into()),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(queue.into()),
    );
    channel.queue_declare(queue, durable, args).await?;
    for binding in bindings {
        channel
            .queue_bind(
                queue,
                EXCHANGE,
                binding,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    Ok(())
}

/// Consumes until the receiver is dropped; returns when the connection breaks.
async fn consume_once(
    url: &str,
    queue: Option<&str>,
    bindings: &[String],
    out: &mpsc::Sender<Delivery>,
) -> Result<(), BusError> {
    let (_conn, channel) = open(url).await?;
    let queue = match queue {
        Some(name) => {
            declare_queue(&channel, name, bindings)
                .await
                .map_err(unavailable)?;
            name.to_owned()
        }
        None => declare_transient(&channel, bindings)
            .await
            .map_err(unavailable)?,
    };
    let queue = queue.as_str();
    channel
        .basic_qos(PREFETCH, BasicQosOptions::default())
        .await
        .map_err(unavailable)?;
    let mut consumer = channel
        .basic_consume(
            queue,
            "",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(unavailable)?;
    tracing::info!(queue, "consuming");
    loop {
        let next = tokio::select! {
            next = consumer.next() => next,
            // The subscriber stopped (shutdown): cancel so the broker sends nothing more, and
            // close the channel so whatever was delivered but not acknowledged goes back to the
            // queue at once rather than when the process exits.
            () = out.closed() => {
                let _ = channel
                    .basic_cancel(consumer.tag().as_str(), BasicCancelOptions::default())
                    .await;
                let _ = channel.close(200, "consumer stopped").await;
                tracing::info!(queue, "consumer cancelled");
                return Ok(());
            }
        };
        let Some(next) = next else { break };
        let delivery = next.map_err(unavailable)?;
        match serde_json::from_slice::<Event>(&delivery.data) {
            Ok(event) => {
                let d = Delivery {
                    event,
                    redelivered: delivery.redelivered,
                    settle: Box::new(AmqpSettle(delivery.acker)),
                };
                if out.send(d).await.is_err() {
                    return Ok(());
                }
            }
            Err(e) => {
                tracing::error!(queue, error = %e, "undecodable event sent to the dead-letter queue");
                let _ = delivery
                    .acker
                    .reject(BasicRejectOptions { requeue: false })
                    .await;
            }
        }
    }
    Err(BusError::Unavailable("consumer stream ended".into()))
}

#[async_trait::async_trait]
impl Subscriber for AmqpBus {
    async fn subscribe(
        &self,
        queue: &str,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError> {
        // Declare once up front so a bad URL or permission fails the caller, not a background task.
        let channel = self.publishing_channel().await?;
        let bindings: Vec<String> = bindings.iter().map(|b| (*b).to_owned()).collect();
        declare_queue(&channel, queue, &bindings)
            .await
            .map_err(unavailable)?;

        Ok(self.consume(Some(queue.to_owned()), bindings))
    }

    async fn subscribe_transient(
        &self,
        bindings: &[&str],
    ) -> Result<mpsc::Receiver<Delivery>, BusError> {
        self.publishing_channel().await?;
        let bindings = bindings.iter().map(|b| (*b).to_owned()).collect();
        Ok(self.consume(None, bindings))
    }
}

impl AmqpBus {
    /// Consumes in the background, reconnecting after broker failures, until `rx` is dropped.
    fn consume(&self, queue: Option<String>, bindings: Vec<String>) -> mpsc::Receiver<Delivery> {
        let (tx, rx) = mpsc::channel(PREFETCH.into());
        let url = self.url.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(200);
            while !tx.is_closed() {
                match consume_once(&url, queue.as_deref(), &bindings, &tx).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(queue = ?queue, error = %e, "consumer lost the broker; reconnecting");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
        rx
    }
}

/// A server-named, exclusive queue that disappears with its connection.
async fn declare_transient(channel: &Channel, bindings: &[String]) -> lapin::Result<String> {
    let queue = channel
        .queue_declare(
            "",
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let name = queue.name().as_str().to_owned();
    for binding in bindings {
        channel
            .queue_bind(
                &name,
                EXCHANGE,
                binding,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    Ok(name)
}
