//! A keep-alive connection is never dropped under a client's feet (issue 18 §1): every answer
//! the gateway gives before reading a request's body either leaves the connection usable for
//! the next request or says `Connection: close`. Checked at the socket level with the body in
//! the head's segment and in a late one, and through a proxy that forwards bytes in small
//! pieces as they arrive.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{both_modes, TestApp};

fn host_of(base: &str) -> String {
    base.trim_start_matches("http://").to_owned()
}

/// Reads one HTTP/1.1 response (head and a `Content-Length` body); its head, lower-cased.
async fn response(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    let read = async {
        while !buf.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            buf.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&buf).to_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.ok()?;
        Some(head)
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

/// Sends `head` and `body` on one connection (the body `late` or in the same segment), then,
/// unless the answer closed the connection, a `GET /api/v1/` on it. The first answer's head,
/// and the second's status line if one was asked for.
async fn two_requests(base: &str, head: &str, body: &[u8], late: bool) -> (String, Option<String>) {
    let mut stream = TcpStream::connect(host_of(base))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    stream.set_nodelay(true).unwrap_or_else(|e| panic!("{e}"));
    if late {
        stream
            .write_all(head.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = stream.write_all(body).await;
    } else {
        let mut all = head.as_bytes().to_vec();
        all.extend_from_slice(body);
        let _ = stream.write_all(&all).await;
    }
    let first = response(&mut stream)
        .await
        .unwrap_or_else(|| panic!("no answer to {head}"));
    if first.contains("connection: close") {
        return (first, None);
    }
    let next = "GET /api/v1/ HTTP/1.1\r\nhost: test\r\n\r\n";
    if stream.write_all(next.as_bytes()).await.is_err() {
        return (first, Some("write failed".into()));
    }
    let second = response(&mut stream)
        .await
        .map(|h| h.lines().next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| "no answer".into());
    (first, Some(second))
}

both_modes!(
    answers_before_the_body_keep_the_connection_usable,
    |app: &TestApp| async move {
        let project = &app.project.id;
        let body = vec![b'x'; 210];
        let cases: Vec<(u16, String)> = vec![
        (404, "POST /api/v1/no-such-route HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 210\r\n\r\n".into()),
        (405, "DELETE /api/v1/projects/current HTTP/1.1\r\nhost: test\r\ncontent-length: 210\r\n\r\n".into()),
        (401, format!("POST /api/v1/auth/password/sign-in HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\nx-service-access-type: client\r\nx-service-project-id: {project}\r\nx-service-publishable-client-key: pck_wrong\r\ncontent-length: 210\r\n\r\n")),
        (401, "POST /api/v1/auth/password/sign-in HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\nx-service-access-type: bogus\r\nx-service-project-id: x\r\ncontent-length: 210\r\n\r\n".into()),
        (404, "POST /api/v1/no-such-route HTTP/1.1\r\nhost: test\r\ntransfer-encoding: chunked\r\n\r\n".into()),
    ];
        for (status, head) in &cases {
            let chunked = head.contains("chunked");
            let payload: Vec<u8> = if chunked {
                b"d2\r\n"
                    .iter()
                    .chain(&body)
                    .chain(b"\r\n0\r\n\r\n")
                    .copied()
                    .collect()
            } else {
                body.clone()
            };
            for late in [false, true] {
                let (first, second) = two_requests(&app.base, head, &payload, late).await;
                assert!(
                    first.starts_with(&format!("http/1.1 {status}")),
                    "{head:?} (late {late}): {first}"
                );
                // These bodies are small: read and discarded, the connection goes on.
                assert_eq!(
                    second.as_deref(),
                    Some("http/1.1 200 ok"),
                    "{head} (late {late}): first {first}"
                );
            }
        }

        // A body over the limit is not read: the answer says the connection closes.
        let too_large = 64 * 1024 + 1;
        let head = format!(
        "POST /api/v1/no-such-route HTTP/1.1\r\nhost: test\r\ncontent-length: {too_large}\r\n\r\n"
    );
        for late in [false, true] {
            let (first, second) =
                two_requests(&app.base, &head, &vec![b'x'; too_large], late).await;
            assert!(
                second.is_none() || second.as_deref() == Some("http/1.1 200 ok"),
                "413-sized body (late {late}): {first} / {second:?}"
            );
        }
    }
);

/// Forwards bytes in pieces of at most 16, a few milliseconds apart, as a proxy that passes
/// data on as it arrives might; returns its address.
async fn slicing_proxy(target: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    return;
                };
                let _ = outbound.set_nodelay(true);
                let (mut ci, mut co) = inbound.into_split();
                let (mut si, mut so) = outbound.into_split();
                let up = async move {
                    let mut piece = [0u8; 16];
                    while let Ok(n) = ci.read(&mut piece).await {
                        if n == 0 || so.write_all(&piece[..n]).await.is_err() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    let _ = so.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut si, &mut co).await;
                    let _ = co.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    addr
}

both_modes!(
    a_reusing_client_through_a_slicing_proxy_is_never_cut_off,
    |app: &TestApp| async move {
        let proxy = slicing_proxy(host_of(&app.base)).await;
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        for i in 0..20 {
            let res = client
                .post(format!("http://{proxy}/api/v1/no-such-route"))
                .body(format!("{{\"n\": {i}, \"pad\": \"{}\"}}", "y".repeat(180)))
                .send()
                .await
                .unwrap_or_else(|e| panic!("request {i} to a missing route: {e}"));
            assert_eq!(res.status(), 404);
            let _ = res.bytes().await;
            let res = client
                .get(format!("http://{proxy}/api/v1/"))
                .send()
                .await
                .unwrap_or_else(|e| panic!("request {i} after it: {e}"));
            assert_eq!(res.status(), 200);
            let _ = res.bytes().await;
        }
    }
);

/// Sends `GET /api/v1/` on `stream` and reads the answer's head.
async fn get_root(stream: &mut TcpStream) -> Option<String> {
    stream
        .write_all(b"GET /api/v1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    response(stream).await
}

both_modes!(
    an_idle_connection_outlives_the_head_timeout,
    |app: &TestApp| async move {
        let mut stream = TcpStream::connect(host_of(&app.base))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let first = get_root(&mut stream).await.unwrap_or_default();
        assert!(first.starts_with("http/1.1 200"), "{first}");
        // Longer than a head may take (10 s), shorter than the idle limit (75 s).
        tokio::time::sleep(Duration::from_secs(12)).await;
        let second = get_root(&mut stream).await.unwrap_or_default();
        assert!(
            second.starts_with("http/1.1 200"),
            "the connection was dropped while idle: {second:?}"
        );
        // A head begun on it and left unfinished is still cut off.
        stream
            .write_all(b"GET /api/v1/ HTTP/1.1\r\nHo")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut buf = [0u8; 256];
        let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "a stalled head kept the connection open: {read:?}"
        );
    }
);
