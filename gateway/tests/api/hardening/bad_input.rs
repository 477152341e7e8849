//! The bad-input table: each hostile or malformed request with the answer it must get, and the
//! server healthy afterwards. Raw TCP for what an HTTP client library would refuse to send.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

/// What a raw exchange produced: the status (None when the server closed without answering),
/// the body, and how long until the answer or the close.
struct Raw {
    status: Option<u16>,
    body: String,
    after: Duration,
}

async fn raw(addr: &str, head_and_body: &[u8], stall: Duration) -> Raw {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A server may close before it has read everything; that is an answer too.
    let _ = stream.write_all(head_and_body).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(stall, async {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    got.extend_from_slice(&chunk[..n]);
                    if complete(&got) {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer and no close within {stall:?}");
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok());
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Raw {
        status,
        body,
        after: started.elapsed(),
    }
}

/// Everything the server sends until it closes the connection (at most 10 s), and the status
/// of each response in it.
async fn until_closed(addr: &str, bytes: &[u8]) -> (String, Vec<u16>) {
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = stream.write_all(bytes).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the connection stayed open");
    let text = String::from_utf8_lossy(&got).into_owned();
    let statuses = text
        .match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect();
    (text, statuses)
}

/// Whether a response with a `content-length` has fully arrived.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .and_then(|v| v.trim().parse::<usize>().ok())
        })
        .is_some_and(|len| body.len() >= len)
}

/// The error code of a body, chunked or not.
fn code_of(body: &str) -> String {
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(start), Some(end)) if start < end => &body[start..=end],
        _ => "",
    };
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// One row of the table as observed.
struct Row {
    case: &'static str,
    expected: String,
    got: String,
}

struct Table {
    rows: Vec<Row>,
}

impl Table {
    fn check(&mut self, case: &'static str, expected: &str, got: String) {
        self.rows.push(Row {
            case,
            expected: expected.to_owned(),
            got,
        });
    }

    async fn http(&mut self, case: &'static str, expected: &str, req: reqwest::RequestBuilder) {
        let (status, body, _) = parts(send(req).await).await;
        let code = body["code"].as_str().unwrap_or_default();
        let got = if code.is_empty() {
            status.to_string()
        } else {
            format!("{status} {code}")
        };
        self.check(case, expected, got);
    }

    fn finish(self) {
        let mut failures = Vec::new();
        for row in &self.rows {
            let ok = row.got == row.expected;
            crate::hardening::report(format!(
                "bad input | {:<58} | expected {:<28} | got {:<28} | {}",
                row.case,
                row.expected,
                row.got,
                if ok { "ok" } else { "WRONG" }
            ));
            if !ok {
                failures.push(row.case);
            }
        }
        assert!(failures.is_empty(), "wrong answers: {failures:?}");
    }
}

fn raw_answer(r: &Raw) -> String {
    match r.status {
        None => "closed".into(),
        Some(status) => {
            let code = code_of(&r.body);
            if code.is_empty() {
                status.to_string()
            } else {
                format!("{status} {code}")
            }
        }
    }
}

both_modes!(ignored every_bad_input_gets_its_answer, |app: &TestApp| async move {
    let addr = app.base.trim_start_matches("http://").to_owned();
    let p = app.project.clone();
    let keys = format!(
        "x-service-access-type: server\r\nx-service-project-id: {}\r\nx-service-secret-server-key: {}\r\n",
        p.id, p.server_key
    );
    // Slow clients first, in the background: they take the server's timeouts to resolve.
    let slow_head = {
        let addr = addr.clone();
        tokio::spawn(async move {
            raw(&addr, b"GET /api/v1/ HTTP/1.1\r\nhost: x\r\nx-slow: ", Duration::from_secs(40)).await
        })
    };
    let slow_body = {
        let addr = addr.clone();
        let head = format!(
            "POST /api/v1/users HTTP/1.1\r\nhost: x\r\n{keys}content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"display_"
        );
        tokio::spawn(async move { raw(&addr, head.as_bytes(), Duration::from_secs(60)).await })
    };
    let mut slow_crowd = Vec::new();
    for _ in 0..50 {
        slow_crowd.push(
            TcpStream::connect(&addr)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    for s in &mut slow_crowd {
        let _ = s.write_all(b"GET /api/v1/ HTTP/1.1\r\n").await;
    }

    let mut t = Table { rows: Vec::new() };
    let server = |method: Method, path: &str| app.as_("server", method, path);

    let started = Instant::now();
    let res = send(app.get("/health/live")).await;
    t.check(
        "a normal request while 52 slow clients hold connections",
        "200 in under 2 s",
        format!(
            "{} in {}",
            res.status().as_u16(),
            if started.elapsed() < Duration::from_secs(2) { "under 2 s" } else { "over 2 s" }
        ),
    );

    let big = json!({ "display_name": "x".repeat(100 * 1024) });
    t.http("oversized JSON body (100 KiB, limit 64 KiB)", "413 BAD_REQUEST", server(Method::POST, "/api/v1/users").json(&big)).await;
    let chunk = "x".repeat(8192);
    let mut chunked = format!(
        "POST /api/v1/users HTTP/1.1\r\nhost: x\r\n{keys}content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    for _ in 0..13 {
        chunked.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    chunked.push_str("0\r\n\r\n");
    let r = raw(&addr, chunked.as_bytes(), Duration::from_secs(10)).await;
    t.check("oversized chunked body without a length", "413 BAD_REQUEST", raw_answer(&r));

    let nested = format!("{}{}", "[".repeat(30_000), "]".repeat(30_000));
    t.http("30,000 nested arrays", "400 BODY_PARSING_ERROR", server(Method::POST, "/api/v1/users").header("content-type", "application/json").body(nested)).await;
    let mut deep = json!("leaf");
    for _ in 0..200 {
        deep = json!({ "a": deep });
    }
    let deep_text = json!({ "client_metadata": "PLACEHOLDER" })
        .to_string()
        .replace("\"PLACEHOLDER\"", &deep.to_string());
    t.http("200 nested objects in metadata", "400 BODY_PARSING_ERROR", server(Method::POST, "/api/v1/users").header("content-type", "application/json").body(deep_text)).await;

    t.http("invalid UTF-8 in the body", "400 BODY_PARSING_ERROR", server(Method::POST, "/api/v1/users").header("content-type", "application/json").body(b"{\"display_name\":\"\xff\xfe\"}".to_vec())).await;
    let mut bad_id = b"GET /api/v1/users HTTP/1.1\r\nhost: x\r\nx-service-access-type: server\r\nx-service-project-id: \xff\xfe\r\n".to_vec();
    bad_id.extend(format!("x-service-secret-server-key: {}\r\n\r\n", p.server_key).into_bytes());
    let r = raw(&addr, &bad_id, Duration::from_secs(10)).await;
    // An unreadable header counts as absent.
    t.check("invalid UTF-8 in the project id header", "401 ACCESS_TYPE_WITHOUT_PROJECT_ID", raw_answer(&r));
    let mut bad_header = format!("GET /api/v1/users HTTP/1.1\r\nhost: x\r\n{keys}").into_bytes();
    bad_header.extend_from_slice(b"x-service-access-token: \xc3\x28\xa0\xa1\r\n\r\n");
    let r = raw(&addr, &bad_header, Duration::from_secs(10)).await;
    t.check("invalid UTF-8 in the access token", "401 UNPARSABLE_ACCESS_TOKEN", raw_answer(&r));

    t.http("NUL in a string", "400 SCHEMA_ERROR", server(Method::POST, "/api/v1/users").json(&json!({ "display_name": "a\u{0}b" }))).await;
    t.http("NUL in an object key", "400 SCHEMA_ERROR", server(Method::POST, "/api/v1/users").json(&json!({ "client_metadata": { "a\u{0}": 1 } }))).await;
    t.http("NUL in an email", "400 SCHEMA_ERROR", app.client(Method::POST, "/api/v1/auth/password/sign-up", None).json(&json!({ "email": "nul\u{0}@example.com", "password": "long enough password" }))).await;
    t.http("NUL in a query parameter", "400 SCHEMA_ERROR", server(Method::GET, "/api/v1/users?query=a%00b")).await;

    let injection = "Robert'); DROP TABLE users;--";
    let created = ok(send(server(Method::POST, "/api/v1/users").json(&json!({ "display_name": injection }))).await, 201).await;
    let id = created["id"].as_str().unwrap_or_default().to_owned();
    let read = ok(send(server(Method::GET, &format!("/api/v1/users/{id}"))).await, 200).await;
    t.check("SQL injection in a string is stored as typed", "201, read back equal", format!("201, read back {}", if read["display_name"] == injection { "equal" } else { "different" }));
    let found = ok(send(server(Method::GET, "/api/v1/users?query=%27%20OR%20%271%27%3D%271")).await, 200).await;
    t.check("SQL injection in a search", "200 with 0 users", format!("200 with {} users", found["items"].as_array().map_or(0, Vec::len)));
    t.http("SQL injection in a path id", "404 USER_NOT_FOUND", server(Method::GET, "/api/v1/users/1'%20OR%20'1'='1")).await;
    t.http("SQL injection in a cursor", "400 SCHEMA_ERROR", server(Method::GET, "/api/v1/users?cursor=%27%3B%20DELETE%20FROM%20users%3B--")).await;
    let sneaky = format!("x'--{}", email("sql"));
    app.sign_up(&sneaky, "long enough password").await;
    let (status, _) = app.sign_in(&sneaky, "long enough password").await;
    t.check("SQL injection in an email signs up and in literally", "200", status.to_string());
    let (status, _) = app.sign_in("' OR '1'='1@example.com", "long enough password").await;
    t.check("SQL injection as the sign-in email", "400", status.to_string());

    let tag = latchkey_shared::crypto::random_base32(6);
    let unicode = format!("Ünïcødé.{tag}@Exämple.org");
    let first = app.sign_up(&unicode, "long enough password").await;
    let again = app.signed_in(&unicode.to_lowercase(), "long enough password").await;
    t.check("unicode email, signed in lower-cased", "the same user", if again.user_id == first.user_id { "the same user".into() } else { "another user".into() });
    let mixed = format!("Mixed.Case.{tag}@Example.COM");
    let first = app.sign_up(&mixed, "long enough password").await;
    let again = app.signed_in(&mixed.to_uppercase(), "long enough password").await;
    t.check("mixed-case email, signed in upper-cased", "the same user", if again.user_id == first.user_id { "the same user".into() } else { "another user".into() });
    t.http("mixed-case email signed up again lower-cased", "409 USER_EMAIL_ALREADY_EXISTS", app.client(Method::POST, "/api/v1/auth/password/sign-up", None).json(&json!({ "email": mixed.to_lowercase(), "password": "long enough password" }))).await;

    let smuggle = format!(
        "POST /api/v1/users HTTP/1.1\r\nhost: x\r\n{keys}content-type: application/json\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /api/v1/users HTTP/1.1\r\nhost: x\r\n\r\n"
    );
    // hyper frames such a request by Transfer-Encoding (RFC 9112 §6.3: here an empty chunked
    // body, which the API refuses) and closes the connection after answering, so nothing
    // smuggled behind it is read as a request.
    let (answers, statuses) = until_closed(&addr, smuggle.as_bytes()).await;
    t.check("Content-Length and Transfer-Encoding together", "400 SCHEMA_ERROR, connection closed", format!("{} {}, connection closed", statuses.first().copied().unwrap_or_default(), code_of(&answers)));
    t.check("  ... and the smuggled second request is not answered", "1 response", format!("{} response", statuses.len()));
    let two_lengths = format!(
        "POST /api/v1/users HTTP/1.1\r\nhost: x\r\n{keys}content-type: application/json\r\ncontent-length: 2\r\ncontent-length: 30\r\n\r\n{{}}"
    );
    let r = raw(&addr, two_lengths.as_bytes(), Duration::from_secs(10)).await;
    t.check("two different Content-Lengths", "400", raw_answer(&r));

    let huge = format!("GET /api/v1/ HTTP/1.1\r\nhost: x\r\nx-huge: {}\r\n\r\n", "h".repeat(70 * 1024));
    let r = raw(&addr, huge.as_bytes(), Duration::from_secs(10)).await;
    t.check("a 70 KiB header", "431", raw_answer(&r));
    let many: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
    let r = raw(&addr, format!("GET /api/v1/ HTTP/1.1\r\nhost: x\r\n{many}\r\n").as_bytes(), Duration::from_secs(10)).await;
    t.check("150 headers", "431", raw_answer(&r));
    let long_path = format!("/api/v1/users/{}", "a".repeat(60 * 1024));
    let r = raw(&addr, format!("GET {long_path} HTTP/1.1\r\nhost: x\r\n{keys}\r\n").as_bytes(), Duration::from_secs(10)).await;
    t.check("a 60 KiB path", "404 USER_NOT_FOUND", raw_answer(&r));

    let head = slow_head.await.unwrap_or_else(|e| panic!("{e}"));
    t.check(
        "slow client: head never finished",
        "408 or closed within 9-15 s",
        format!(
            "{} within {}",
            match head.status {
                Some(408) | None => "408 or closed".to_owned(),
                Some(s) => s.to_string(),
            },
            if (9..=15).contains(&head.after.as_secs()) { "9-15 s".to_owned() } else { format!("{:?}", head.after) }
        ),
    );
    let body = slow_body.await.unwrap_or_else(|e| panic!("{e}"));
    t.check(
        "slow client: body never finished",
        "408 BAD_REQUEST within 29-40 s",
        format!(
            "{} within {}",
            raw_answer(&body),
            if (29..=40).contains(&body.after.as_secs()) { "29-40 s".to_owned() } else { format!("{:?}", body.after) }
        ),
    );
    drop(slow_crowd);

    // Healthy afterwards: health, a keyed read and a write all work.
    let live = send(app.get("/health/ready")).await.status().as_u16();
    let listed = send(server(Method::GET, "/api/v1/users?limit=1")).await.status().as_u16();
    let written = send(server(Method::POST, "/api/v1/teams").json(&json!({ "display_name": "after" }))).await.status().as_u16();
    t.check("healthy afterwards: ready, a read, a write", "200 200 201", format!("{live} {listed} {written}"));
    t.finish();
});
