//! Change events delivered as signed webhooks (60, 80 §7): every event type, signatures checked
//! with the Standard Webhooks library and by recomputing the HMAC, retries, replay, rotation,
//! filters, URL safety, and delivery across broker restarts and a killed webhooks service.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::helpers::*;
use crate::receiver::{Receiver, Request};

const PASSWORD: &str = "a fine password 1";

impl TestApp {
    fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.as_("admin", method, path)
    }

    fn server(&self, method: Method, path: &str) -> RequestBuilder {
        self.as_("server", method, path)
    }

    /// Registers `url`; returns the endpoint (with its secret).
    async fn endpoint(&self, body: Value) -> Value {
        ok(
            send(
                self.admin(Method::POST, "/api/v1/webhook-endpoints")
                    .json(&body),
            )
            .await,
            201,
        )
        .await
    }
}

/// Checks a delivery's signature with the Standard Webhooks library and by hand, and that the
/// svix-* headers repeat the webhook-* ones.
fn verify(request: &Request, secret: &str) {
    let wh = standardwebhooks::Webhook::new(secret).unwrap_or_else(|e| panic!("{e:?}"));
    wh.verify(&request.body, &request.headers)
        .unwrap_or_else(|e| panic!("signature refused: {e:?}"));
    for name in ["id", "timestamp", "signature"] {
        assert_eq!(
            request.header(&format!("webhook-{name}")),
            request.header(&format!("svix-{name}"))
        );
    }
    let id = request.header("webhook-id");
    let timestamp = request.header("webhook-timestamp");
    assert!(
        latchkey_webhooks::signing::verify(
            secret,
            &id,
            timestamp.parse().unwrap_or_default(),
            &request.body,
            &request.header("webhook-signature"),
        ),
        "Latchkey's own verifier refuses what the library accepts"
    );
    let age = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
        - timestamp.parse::<i64>().unwrap_or_default();
    assert!(
        (0..300).contains(&age),
        "timestamp {timestamp} is not current"
    );
}

fn by_type(requests: &[Request]) -> HashMap<String, Value> {
    requests
        .iter()
        .map(|r| {
            let body = r.json();
            (
                body["type"].as_str().unwrap_or_default().to_owned(),
                body["data"].clone(),
            )
        })
        .collect()
}

both_modes!(
    every_event_type_arrives_signed,
    |app: &TestApp| async move {
        let receiver = Receiver::start().await;
        let endpoint = app
            .endpoint(json!({ "url": receiver.url, "description": "all events" }))
            .await;
        let secret = endpoint["secret"].as_str().unwrap_or_default().to_owned();
        assert!(secret.starts_with("whsec_"));
        let listed = ok(
            send(app.admin(Method::GET, "/api/v1/webhook-endpoints")).await,
            200,
        )
        .await;
        assert!(listed["items"][0].get("secret").is_none(), "{listed}");
        assert_eq!(listed["items"][0]["event_types"], Value::Null);

        // Users: created, updated; then teams, memberships and both kinds of permissions.
        let member = app.sign_up(&email("member"), PASSWORD).await;
        let res = app
            .client(Method::PATCH, "/api/v1/users/me", Some(&member.access))
            .json(&json!({ "display_name": "Ada" }));
        ok(send(res).await, 200).await;
        let team = ok(
            send(
                app.server(Method::POST, "/api/v1/teams")
                    .json(&json!({ "display_name": "Ops" })),
            )
            .await,
            201,
        )
        .await;
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        ok(
            send(
                app.server(Method::PATCH, &format!("/api/v1/teams/{team_id}"))
                    .json(&json!({ "display_name": "Ops 2" })),
            )
            .await,
            200,
        )
        .await;
        let membership = format!("/api/v1/team-memberships/{team_id}/{}", member.user_id);
        ok(
            send(app.server(Method::POST, &membership).json(&json!({}))).await,
            201,
        )
        .await;
        ok(
            send(
                app.admin(Method::POST, "/api/v1/team-permission-definitions")
                    .json(&json!({ "id": "editor" })),
            )
            .await,
            201,
        )
        .await;
        ok(
            send(
                app.admin(Method::POST, "/api/v1/project-permission-definitions")
                    .json(&json!({ "id": "viewer" })),
            )
            .await,
            201,
        )
        .await;
        let team_grant = format!(
            "/api/v1/team-permissions/{team_id}/{}/editor",
            member.user_id
        );
        ok(
            send(app.server(Method::POST, &team_grant).json(&json!({}))).await,
            201,
        )
        .await;
        ok(send(app.server(Method::DELETE, &team_grant)).await, 200).await;
        let project_grant = format!("/api/v1/project-permissions/{}/viewer", member.user_id);
        ok(
            send(app.server(Method::POST, &project_grant).json(&json!({}))).await,
            201,
        )
        .await;
        ok(send(app.server(Method::DELETE, &project_grant)).await, 200).await;
        // API keys of the user and of the team: created, then revoked.
        app.settings(json!({ "allow_user_api_keys": true, "allow_team_api_keys": true }))
            .await;
        for (family, owner) in [("user", &member.user_id), ("team", &team_id)] {
            let key = ok(
                send(app.server(Method::POST, &format!("/api/v1/{family}-api-keys")).json(
                    &json!({ format!("{family}_id"): owner, "description": "ci", "expires_at_millis": null }),
                ))
                .await,
                200,
            )
            .await;
            let path = format!(
                "/api/v1/{family}-api-keys/{}?{family}_id={owner}",
                key["id"].as_str().unwrap_or_default()
            );
            ok(
                send(
                    app.server(Method::PATCH, &path)
                        .json(&json!({ "revoked": true })),
                )
                .await,
                200,
            )
            .await;
        }
        ok(send(app.server(Method::DELETE, &membership)).await, 200).await;
        ok(
            send(app.server(Method::DELETE, &format!("/api/v1/teams/{team_id}"))).await,
            200,
        )
        .await;
        ok(
            send(app.server(Method::DELETE, &format!("/api/v1/users/{}", member.user_id))).await,
            200,
        )
        .await;

        let all: HashSet<&str> = latchkey_shared::events::PUBLIC_TYPES.into_iter().collect();
        let got = receiver
            .wait_until(Duration::from_secs(20), |r| {
                let types: HashSet<String> = r
                    .iter()
                    .map(|x| x.json()["type"].as_str().unwrap_or_default().to_owned())
                    .collect();
                all.iter().all(|t| types.contains(*t))
            })
            .await;
        for request in &got {
            verify(request, &secret);
            assert_eq!(request.header("content-type"), "application/json");
            let body = request.json();
            assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        }
        let data = by_type(&got);
        assert_eq!(data["user.created"]["id"], member.user_id.as_str());
        assert!(
            data["user.created"].get("server_metadata").is_some(),
            "server shape"
        );
        assert_eq!(data["user.updated"]["display_name"], "Ada");
        assert_eq!(data["user.deleted"]["id"], member.user_id.as_str());
        assert!(data["user.deleted"]["teams"].is_array());
        assert_eq!(data["team.created"]["id"], team_id.as_str());
        assert!(
            data["team.created"].get("server_metadata").is_some(),
            "server shape"
        );
        assert_eq!(data["team.updated"]["display_name"], "Ops 2");
        assert_eq!(data["team.deleted"], json!({ "id": team_id }));
        let pair = json!({ "team_id": team_id, "user_id": member.user_id });
        assert_eq!(data["team_membership.created"], pair);
        assert_eq!(data["team_membership.deleted"], pair);
        assert_eq!(
            data["team_permission.deleted"],
            json!({ "id": "editor", "team_id": team_id, "user_id": member.user_id })
        );
        assert_eq!(
            data["team_permission.created"]["user_id"],
            member.user_id.as_str()
        );
        assert_eq!(
            data["project_permission.created"],
            json!({ "id": "viewer", "user_id": member.user_id })
        );
        assert_eq!(
            data["project_permission.deleted"],
            json!({ "id": "viewer", "user_id": member.user_id })
        );
        // Key events carry the key as reads show it: never the secret.
        for (family, owner) in [("user", &member.user_id), ("team", &team_id)] {
            let created = &data[format!("{family}_api_key.created").as_str()];
            assert_eq!(
                created[format!("{family}_id").as_str()],
                owner.as_str(),
                "{created}"
            );
            assert_eq!(
                created["value"].as_object().map(|v| v.len()),
                Some(1),
                "{created}"
            );
            let revoked = &data[format!("{family}_api_key.revoked").as_str()];
            assert!(revoked["manually_revoked_at_millis"].is_i64(), "{revoked}");
        }
    }
);

both_modes!(
    retries_replay_rotation_filters_and_url_rules,
    |app: &TestApp| async move {
        let receiver = Receiver::start().await;
        let endpoint = app
            .endpoint(json!({ "url": receiver.url, "event_types": ["team.created"] }))
            .await;
        let id = endpoint["id"].as_str().unwrap_or_default().to_owned();
        let secret = endpoint["secret"].as_str().unwrap_or_default().to_owned();
        let path = |tail: &str| format!("/api/v1/webhook-endpoints/{id}{tail}");

        // Three failures, then success on the fourth attempt, at the compressed schedule.
        receiver.fail_next(3);
        let sent = ok(send(app.admin(Method::POST, &path("/test"))).await, 200).await;
        let message_id = sent["message_id"].as_str().unwrap_or_default().to_owned();
        let got = receiver
            .wait_until(Duration::from_secs(20), |r| !r.is_empty())
            .await;
        verify(&got[0], &secret);
        assert_eq!(got[0].json()["type"], "service.test");
        assert_eq!(got[0].json()["data"]["endpoint_url"], receiver.url.as_str());
        let all = receiver.requests();
        assert_eq!(all.len(), 4, "three failures and one success");
        assert!(all.iter().all(|r| r.header("webhook-id") == message_id));
        for pair in all.windows(2) {
            assert!(
                pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(190),
                "retries wait the schedule"
            );
        }
        // The worker records the attempt just after the receiver answered it.
        let mut deliveries = Value::Null;
        for _ in 0..100 {
            deliveries = ok(
                send(app.admin(Method::GET, &path("/deliveries"))).await,
                200,
            )
            .await;
            if deliveries["items"][0]["status"] == "succeeded" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let delivery = &deliveries["items"][0];
        assert_eq!(delivery["message_id"], message_id.as_str());
        assert_eq!(delivery["status"], "succeeded");
        let statuses: Vec<Value> = delivery["attempts"]
            .as_array()
            .map(|a| a.iter().map(|x| x["response_status"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            statuses,
            vec![json!(500), json!(500), json!(500), json!(200)]
        );

        // Replay: the same webhook-id again.
        ok(
            send(app.admin(
                Method::POST,
                &path(&format!("/deliveries/{message_id}/replay")),
            ))
            .await,
            200,
        )
        .await;
        let got = receiver
            .wait_until(Duration::from_secs(20), |r| r.len() >= 2)
            .await;
        assert_eq!(got[1].header("webhook-id"), message_id);
        assert_error(
            send(app.admin(Method::POST, &path("/deliveries/msg_unknown/replay"))).await,
            404,
            "NOT_FOUND",
        )
        .await;

        // The filter: user events do not reach this endpoint; team.created does.
        app.sign_up(&email("filtered"), PASSWORD).await;
        ok(
            send(
                app.server(Method::POST, "/api/v1/teams")
                    .json(&json!({ "display_name": "Filtered" })),
            )
            .await,
            201,
        )
        .await;
        let got = receiver
            .wait_until(Duration::from_secs(20), |r| {
                r.iter().any(|x| x.json()["type"] == "team.created")
            })
            .await;
        assert!(got.iter().all(|x| x.json()["type"] != "user.created"));

        // Rotation: both secrets sign for a while.
        let rotated = ok(
            send(app.admin(Method::POST, &path("/rotate-secret"))).await,
            200,
        )
        .await;
        let new_secret = rotated["secret"].as_str().unwrap_or_default().to_owned();
        assert_ne!(new_secret, secret);
        let before = receiver.accepted().len();
        ok(send(app.admin(Method::POST, &path("/test"))).await, 200).await;
        let got = receiver
            .wait_until(Duration::from_secs(20), |r| r.len() > before)
            .await;
        let last = &got[got.len() - 1];
        assert_eq!(last.header("webhook-signature").split(' ').count(), 2);
        verify(last, &secret);
        verify(last, &new_secret);

        // Every attempt failing: the message ends failed after eight attempts.
        receiver.fail_next(100);
        let sent = ok(send(app.admin(Method::POST, &path("/test"))).await, 200).await;
        let failed_id = sent["message_id"].as_str().unwrap_or_default().to_owned();
        let started = std::time::Instant::now();
        loop {
            let page = ok(
                send(app.admin(Method::GET, &path("/deliveries?limit=1"))).await,
                200,
            )
            .await;
            let d = &page["items"][0];
            assert_eq!(d["message_id"], failed_id.as_str());
            if d["status"] == "failed" {
                assert_eq!(d["attempts"].as_array().map(Vec::len), Some(8));
                assert_eq!(d["next_attempt_at_millis"], Value::Null);
                assert!(page["pagination"]["next_cursor"].is_string());
                break;
            }
            assert_eq!(d["status"], "pending");
            assert!(started.elapsed() < Duration::from_secs(20), "still {d}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        receiver.fail_next(0);

        // Walking the deliveries two at a time by cursor gives the whole list once, in order
        // (read again if a late delivery came in between).
        let ids = |page: &Value| -> Vec<Value> {
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d["message_id"].clone())
                .collect()
        };
        let mut walks = Vec::new();
        for _ in 0..3 {
            let whole = ok(
                send(app.admin(Method::GET, &path("/deliveries?limit=100"))).await,
                200,
            )
            .await;
            let whole = ids(&whole);
            let (mut walked, mut query) = (Vec::new(), "/deliveries?limit=2".to_owned());
            loop {
                let page = ok(send(app.admin(Method::GET, &path(&query))).await, 200).await;
                walked.extend(ids(&page));
                match page["pagination"]["next_cursor"].as_str() {
                    Some(c) => query = format!("/deliveries?limit=2&cursor={c}"),
                    None => break,
                }
            }
            let same = walked == whole;
            walks.push((whole, walked));
            if same {
                break;
            }
        }
        let (whole, walked) = walks.last().cloned().unwrap_or_default();
        assert!(whole.len() >= 3, "{whole:?}");
        assert_eq!(walked, whole, "{walks:?}");
        let res = send(app.admin(Method::GET, &path("/deliveries?cursor=msg_unknown"))).await;
        assert_eq!(res.status(), 400);

        // Disabled endpoints get nothing; updates are checked like creation.
        let disabled = ok(
            send(
                app.admin(Method::PATCH, &path(""))
                    .json(&json!({ "enabled": false, "event_types": null })),
            )
            .await,
            200,
        )
        .await;
        assert_eq!(disabled["enabled"], false);
        let before = receiver.requests().len();
        ok(
            send(
                app.server(Method::POST, "/api/v1/teams")
                    .json(&json!({ "display_name": "Quiet" })),
            )
            .await,
            201,
        )
        .await;
        let res = send(
            app.admin(Method::PATCH, &path(""))
                .json(&json!({ "url": "https://10.1.2.3/hook" })),
        )
        .await;
        assert_error(res, 400, "WEBHOOK_URL_NOT_ALLOWED").await;

        // URL rules, by resolution only: private, link-local, CGNAT, multicast and bad schemes.
        for (url, reason) in [
            ("https://10.0.0.1/hook", "private"),
            ("https://192.168.1.10/hook", "private"),
            ("https://169.254.169.254/latest", "link-local"),
            ("https://100.64.0.1/hook", "CGNAT"),
            ("https://224.0.0.1/hook", "multicast"),
            ("https://[fd00::1]/hook", "private"),
            ("ftp://example.com/hook", "scheme"),
        ] {
            let res = send(
                app.admin(Method::POST, "/api/v1/webhook-endpoints")
                    .json(&json!({ "url": url })),
            )
            .await;
            let err = assert_error(res, 400, "WEBHOOK_URL_NOT_ALLOWED").await;
            assert_eq!(err["details"]["url"], url);
            assert!(
                err["details"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(reason)),
                "{err}"
            );
        }
        let res = send(
            app.admin(Method::POST, "/api/v1/webhook-endpoints")
                .json(&json!({ "url": receiver.url, "event_types": ["user.exploded"] })),
        )
        .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let unknown = "/api/v1/webhook-endpoints/0a0b0c0d-0000-4000-8000-000000000000";
        assert_error(
            send(app.admin(Method::PATCH, unknown).json(&json!({}))).await,
            404,
            "WEBHOOK_ENDPOINT_NOT_FOUND",
        )
        .await;
        assert_error(
            send(app.server(Method::GET, "/api/v1/webhook-endpoints")).await,
            401,
            "INSUFFICIENT_ACCESS_TYPE",
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            receiver.requests().len(),
            before,
            "a disabled endpoint got a delivery"
        );
        ok(send(app.admin(Method::DELETE, &path(""))).await, 200).await;
        assert_error(
            send(app.admin(Method::POST, &path("/test"))).await,
            404,
            "WEBHOOK_ENDPOINT_NOT_FOUND",
        )
        .await;
    }
);

/// 2,000 user and team changes while RabbitMQ is stopped and started three times and the
/// webhooks service is killed once: every event arrives, and repeats carry the same webhook-id.
/// It stops the shared broker, so it runs alone (`--ignored`, see deploy/test.sh).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts RabbitMQ; run alone with --ignored"]
async fn every_event_survives_broker_restarts_and_a_killed_webhooks_service() {
    const CHANGES: usize = 2000;
    let mut app = TestApp::spawn(Mode::Distributed).await;
    let receiver = Receiver::start().await;
    app.endpoint(json!({ "url": receiver.url, "event_types": ["user.created", "team.created"] }))
        .await;
    let mut expected = HashSet::new();
    for i in 0..CHANGES {
        let (path, body) = if i % 2 == 0 {
            (
                "/api/v1/users",
                json!({ "display_name": format!("user {i}") }),
            )
        } else {
            (
                "/api/v1/teams",
                json!({ "display_name": format!("team {i}") }),
            )
        };
        let created = ok(send(app.server(Method::POST, path).json(&body)).await, 201).await;
        expected.insert(created["id"].as_str().unwrap_or_default().to_owned());
        match i {
            300 | 900 | 1500 => {
                latchkey_shared::testing::rabbitmqctl("stop_app");
                tokio::time::sleep(Duration::from_millis(500)).await;
                latchkey_shared::testing::rabbitmqctl("start_app");
            }
            1200 => assert!(app.kill_and_restart("webhooks")),
            _ => {}
        }
    }
    let got = receiver
        .wait_until(Duration::from_secs(240), |r| {
            let ids: HashSet<String> = r
                .iter()
                .map(|x| {
                    x.json()["data"]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect();
            expected.iter().all(|e| ids.contains(e))
        })
        .await;
    let mut by_id: HashMap<String, String> = HashMap::new();
    for r in &got {
        let object = r.json()["data"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let previous = by_id.insert(r.header("webhook-id"), object.clone());
        assert!(
            previous.is_none_or(|p| p == object),
            "one webhook-id, two events"
        );
    }
    let per_object: HashMap<&String, usize> = by_id.values().fold(HashMap::new(), |mut m, o| {
        *m.entry(o).or_default() += 1;
        m
    });
    assert!(
        per_object.values().all(|n| *n == 1),
        "an event was delivered under two webhook-ids"
    );
    app.finish().await;
}
