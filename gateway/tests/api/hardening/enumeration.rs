//! Account enumeration: password sign-in, password-reset and sign-in-code answers are the same
//! for known and unknown addresses, in content and in time (medians within 2 ms).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::hardening::scale;
use crate::helpers::*;

const PASSWORD: &str = "enumeration test password 42";

/// What an answer says, with the parts that differ between any two answers (request ids,
/// dates, the random nonce) reduced to their shape.
async fn answer(res: reqwest::Response) -> (u16, Vec<String>, Value) {
    let status = res.status().as_u16();
    let mut headers: Vec<String> = res
        .headers()
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "date" | "x-service-request-id" | "content-length"
            )
        })
        .map(|(name, value)| {
            let value = value.to_str().unwrap_or_default();
            if name.as_str().starts_with("ratelimit") {
                name.to_string()
            } else {
                format!("{name}: {value}")
            }
        })
        .collect();
    headers.sort();
    let mut body: Value = res.json().await.unwrap_or(Value::Null);
    if let Some(nonce) = body.get("nonce").and_then(Value::as_str) {
        body["nonce"] = json!(format!("<{} characters>", nonce.len()));
    }
    (status, headers, body)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

struct Flow {
    name: &'static str,
    path: &'static str,
    body: fn(&str) -> Value,
}

const FLOWS: [Flow; 3] = [
    Flow {
        name: "password sign-in",
        path: "/api/v1/auth/password/sign-in",
        body: |address| json!({ "email": address, "password": "not the password" }),
    },
    Flow {
        name: "password reset",
        path: "/api/v1/auth/password/send-reset-code",
        body: |address| json!({ "email": address, "callback_url": "http://localhost/reset" }),
    },
    Flow {
        name: "sign-in code",
        path: "/api/v1/auth/otp/send-sign-in-code",
        body: |address| json!({ "email": address, "callback_url": "http://localhost/otp" }),
    },
];

/// Pairs per batch; a batch is added (up to `MAX_BATCHES`) while the medians differ by 2 ms or
/// more, so noise on a busy two-core machine does not fail the check while a real difference,
/// which more samples only confirm, still does.
const BATCH: usize = 150;
const MAX_BATCHES: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hardening tier: deploy/hardening.sh"]
async fn known_and_unknown_addresses_answer_alike() {
    let app = TestApp::spawn_distributed_with(&[]).await;
    let batch = BATCH * scale();
    app.settings(json!({ "magic_link_enabled": true, "allow_localhost": true }))
        .await;
    // One known and one unknown address per request, so per-address limits and the per-address
    // mail budget treat both sides alike; a fresh client address per request for the same
    // reason.
    let mut known = Vec::new();
    for i in 0..batch {
        let address = email(&format!("known{i}"));
        // Made with the server key: a hundred and more sign-ups from one address would meet
        // the client limits.
        ok(
            send(
                app.as_("server", Method::POST, "/api/v1/users")
                    .json(&json!({
                        "primary_email": address,
                        "primary_email_auth_enabled": true,
                        "password": PASSWORD,
                    })),
            )
            .await,
            201,
        )
        .await;
        known.push(address);
    }
    let mut ip = 0u32;
    let mut next_ip = || {
        ip += 1;
        format!(
            "10.{}.{}.{}",
            77 + ip / 62_500,
            (ip / 250) % 250,
            ip % 250 + 1
        )
    };
    for flow in &FLOWS {
        let mut times = [Vec::new(), Vec::new()];
        let mut answers: [Option<(u16, Vec<String>, Value)>; 2] = [None, None];
        let mut gap = Duration::MAX;
        for round in 0..MAX_BATCHES {
            for (i, known_address) in known.iter().enumerate() {
                let unknown_address = email(&format!("unknown{round}-{i}"));
                // Alternate which side goes first.
                let order = if i.is_multiple_of(2) { [0, 1] } else { [1, 0] };
                for side in order {
                    let address = if side == 0 {
                        known_address
                    } else {
                        &unknown_address
                    };
                    let request = app
                        .client(Method::POST, flow.path, None)
                        .header("x-forwarded-for", next_ip())
                        .json(&(flow.body)(address));
                    // Lets the background work of the previous request (a mail going out)
                    // finish, so each answer is timed on its own, as an attacker spacing
                    // requests would.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    let started = Instant::now();
                    let res = send(request).await;
                    let got = answer(res).await;
                    times[side].push(started.elapsed());
                    match &answers[side] {
                        None => answers[side] = Some(got),
                        Some(first) => assert_eq!(first, &got, "{}: answers changed", flow.name),
                    }
                }
            }
            assert_eq!(
                answers[0], answers[1],
                "{}: known and unknown addresses answer differently",
                flow.name
            );
            let (k, u) = (median(times[0].clone()), median(times[1].clone()));
            gap = k.abs_diff(u);
            crate::hardening::report(format!(
                "enumeration: {} ({} pairs): status {}, median known {:.2} ms, unknown {:.2} ms, gap {:.2} ms",
                flow.name,
                times[0].len(),
                answers[0].as_ref().map(|a| a.0).unwrap_or_default(),
                k.as_secs_f64() * 1e3,
                u.as_secs_f64() * 1e3,
                gap.as_secs_f64() * 1e3
            ));
            if gap < Duration::from_millis(2) {
                break;
            }
        }
        assert!(
            gap < Duration::from_millis(2),
            "{}: medians differ by {gap:?} after {} pairs",
            flow.name,
            times[0].len()
        );
    }
    app.finish().await;
}
