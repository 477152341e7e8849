//! A real SMTP listener for the tests: speaks enough of RFC 5321 for lettre, keeps every
//! message it receives, and lets a test wait for the next one sent to an address.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct Received {
    pub to: Vec<String>,
    pub data: String,
}

#[derive(Clone, Default)]
pub struct SmtpSink {
    pub url: String,
    messages: Arc<Mutex<Vec<Received>>>,
}

impl SmtpSink {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let sink = Self {
            url: format!("smtp://{addr}"),
            messages: Arc::default(),
        };
        let messages = sink.messages.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let messages = messages.clone();
                tokio::spawn(async move {
                    let _ = session(stream, messages).await;
                });
            }
        });
        sink
    }

    /// The next message to `to` (waits up to 10 s).
    pub async fn wait_for(&self, to: &str) -> Received {
        for _ in 0..200 {
            if let Ok(mut messages) = self.messages.lock() {
                if let Some(i) = messages
                    .iter()
                    .position(|m| m.to.iter().any(|t| t.contains(to)))
                {
                    return messages.remove(i);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no mail to {to} arrived");
    }

    pub fn count_to(&self, to: &str) -> usize {
        self.messages
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|m| m.to.iter().any(|t| t.contains(to)))
                    .count()
            })
            .unwrap_or(0)
    }
}

async fn session(
    stream: tokio::net::TcpStream,
    messages: Arc<Mutex<Vec<Received>>>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    write.write_all(b"220 latchkey-test ESMTP\r\n").await?;
    let mut to = Vec::new();
    while let Some(line) = lines.next_line().await? {
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") {
            b"250-latchkey-test\r\n250 8BITMIME\r\n"
        } else if upper.starts_with("HELO")
            || upper.starts_with("MAIL FROM")
            || upper.starts_with("RSET")
            || upper.starts_with("NOOP")
        {
            b"250 OK\r\n"
        } else if upper.starts_with("RCPT TO") {
            to.push(
                line[8..]
                    .trim()
                    .trim_matches(|c| c == '<' || c == '>' || c == ':')
                    .to_owned(),
            );
            b"250 OK\r\n"
        } else if upper.starts_with("DATA") {
            write.write_all(b"354 go ahead\r\n").await?;
            let mut data = String::new();
            while let Some(l) = lines.next_line().await? {
                if l == "." {
                    break;
                }
                data.push_str(&l);
                data.push('\n');
            }
            if let Ok(mut m) = messages.lock() {
                m.push(Received {
                    to: std::mem::take(&mut to),
                    data,
                });
            }
            b"250 queued\r\n"
        } else if upper.starts_with("QUIT") {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            b"502 not implemented\r\n"
        };
        write.write_all(reply).await?;
    }
    Ok(())
}

/// The 45-character code in a received message's link (quoted-printable soft breaks undone).
pub fn code_in(message: &Received) -> String {
    let text = message.data.replace("=\n", "").replace("=3D", "=");
    let start = text
        .find("code=")
        .unwrap_or_else(|| panic!("no code in {text}"))
        + 5;
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect()
}
