//! A shutdown signal many tasks can wait on.

use tokio::sync::watch;

/// Cloneable; every clone's `wait` resolves once the signal fires.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Fires when `trigger` resolves.
    pub fn on(trigger: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            trigger.await;
            let _ = tx.send(true);
        });
        Self(rx)
    }

    pub async fn wait(mut self) {
        let _ = self.0.wait_for(|fired| *fired).await;
    }
}
