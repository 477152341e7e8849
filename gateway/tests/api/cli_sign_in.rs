//! CLI sign-in (issue 19 §4; Stack Auth's `/auth/cli`): a CLI starts a login, its user
//! completes it with their session, and the CLI's poll receives a session of its own, once.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const PASSWORD: &str = "a cli password 1";

impl TestApp {
    async fn cli(&self, path: &str, body: Option<Value>) -> reqwest::Response {
        let req = self.client(Method::POST, &format!("/api/v1/auth/cli{path}"), None);
        send(match body {
            Some(b) => req.json(&b),
            None => req,
        })
        .await
    }

    /// Starts a login; (polling code, login code).
    async fn start_cli(&self, body: Option<Value>) -> (String, String) {
        let started = ok(self.cli("", body).await, 200).await;
        let code = |k: &str| started[k].as_str().unwrap_or_default().to_owned();
        (code("polling_code"), code("login_code"))
    }

    async fn poll(&self, polling_code: &str) -> (u16, Value) {
        let (status, body, _) = parts(
            self.cli("/poll", Some(json!({ "polling_code": polling_code })))
                .await,
        )
        .await;
        (status, body)
    }
}

both_modes!(
    a_cli_signs_in_with_a_session_of_its_own,
    |app: &TestApp| async move {
        let user = app.sign_up(&email("cli"), PASSWORD).await;

        // Started without a body: two different 45-character codes, two hours to live.
        let before = latchkey_shared::clock::iso8601_millis(now_millis() + 2 * 3_600_000);
        let started = ok(app.cli("", None).await, 200).await;
        let after = latchkey_shared::clock::iso8601_millis(now_millis() + 2 * 3_600_000 + 1000);
        let (polling, login) = (
            started["polling_code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            started["login_code"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        assert!(
            polling.len() == 45 && login.len() == 45 && polling != login,
            "{started}"
        );
        let expires = started["expires_at"].as_str().unwrap_or_default();
        assert!(
            before.as_str() <= expires && expires <= after.as_str(),
            "{before} <= {expires} <= {after}"
        );

        assert_eq!(
            app.poll(&polling).await,
            (200, json!({ "status": "waiting" }))
        );
        let (status, body) = app.poll(&"x".repeat(45)).await;
        assert_eq!(
            (status, body["code"].clone()),
            (400, json!("INVALID_POLLING_CODE"))
        );
        // The login code is not a polling code: it never fetches the session.
        assert_eq!(app.poll(&login).await.0, 400);

        let res = app
            .cli(
                "/complete",
                Some(json!({ "login_code": login, "mode": "check" })),
            )
            .await;
        assert_eq!(ok(res, 200).await, json!({ "cli_session_state": "none" }));
        let res = app
            .cli("/complete", Some(json!({ "login_code": login })))
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let wrong = json!({ "login_code": login, "refresh_token": "y".repeat(45) });
        let res = app.cli("/complete", Some(wrong)).await;
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
        assert_eq!(
            app.poll(&polling).await,
            (200, json!({ "status": "waiting" }))
        );

        // The user completes it with their session; the code then completes nothing more.
        let complete = json!({ "login_code": login, "refresh_token": user.refresh });
        let res = app.cli("/complete", Some(complete.clone())).await;
        assert_eq!(ok(res, 200).await, json!({ "success": true }));
        let res = app.cli("/complete", Some(complete)).await;
        assert_error(res, 400, "INVALID_LOGIN_CODE").await;
        let res = app
            .cli(
                "/complete",
                Some(json!({ "login_code": login, "mode": "check" })),
            )
            .await;
        assert_error(res, 400, "INVALID_LOGIN_CODE").await;

        // The next poll answers 201 with a refresh token of a new session of that user; later
        // polls say it was used.
        let (status, body) = app.poll(&polling).await;
        assert_eq!(
            (status, &body["status"]),
            (201, &json!("success")),
            "{body}"
        );
        let cli_refresh = body["refresh_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            cli_refresh.len() == 45 && cli_refresh != user.refresh,
            "{body}"
        );
        assert_eq!(app.poll(&polling).await, (200, json!({ "status": "used" })));
        let res = app
            .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
            .header("x-stack-refresh-token", &cli_refresh)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let access = ok(res, 200).await["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(&access))).await,
            200,
        )
        .await;
        assert_eq!(me["id"], json!(user.user_id));
        let sessions = ok(
            send(app.client(
                Method::GET,
                &format!("/api/v1/auth/sessions?user_id={}", user.user_id),
                Some(&access),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(
            sessions["items"].as_array().map(Vec::len),
            Some(2),
            "{sessions}"
        );

        // Concurrent polls of a completed login: exactly one receives the session.
        let (polling, login) = app.start_cli(Some(json!({}))).await;
        let complete = json!({ "login_code": login, "refresh_token": user.refresh });
        ok(app.cli("/complete", Some(complete)).await, 200).await;
        let polls = futures::future::join_all((0..6).map(|_| app.poll(&polling))).await;
        let statuses: Vec<u16> = polls.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            statuses.iter().filter(|s| **s == 201).count(),
            1,
            "{polls:?}"
        );
        assert!(polls
            .iter()
            .all(|(s, b)| *s == 201 || *b == json!({ "status": "used" })));
    }
);

both_modes!(
    cli_logins_expire_stay_in_their_project_and_refuse_bad_input,
    |app: &TestApp| async move {
        let user_email = email("cli-exp");
        let user = app.sign_up(&user_email, PASSWORD).await;

        for bad in [
            json!({ "expires_in_millis": 0 }),
            json!({ "expires_in_millis": 86_400_001 }),
            json!({ "expires_in_millis": "soon" }),
            json!({ "unknown": 1 }),
        ] {
            assert_error(app.cli("", Some(bad)).await, 400, "SCHEMA_ERROR").await;
        }
        let res = app
            .cli(
                "/complete",
                Some(json!({ "login_code": "a", "mode": "claim" })),
            )
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        assert_error(app.cli("/poll", Some(json!({}))).await, 400, "SCHEMA_ERROR").await;

        for fine in [
            json!({ "expires_in_millis": 86_400_000 }),
            json!({ "expires_in_millis": 7_200_000.0 }),
        ] {
            ok(app.cli("", Some(fine)).await, 200).await;
        }

        // An expired login: polls say so, and it can no longer be completed.
        let (polling, login) = app
            .start_cli(Some(json!({ "expires_in_millis": 1000 })))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
        assert_eq!(
            app.poll(&polling).await,
            (200, json!({ "status": "expired" }))
        );
        let complete = json!({ "login_code": login, "refresh_token": user.refresh });
        let res = app.cli("/complete", Some(complete)).await;
        assert_error(res, 400, "INVALID_LOGIN_CODE").await;
        let check = json!({ "login_code": login, "mode": "check" });
        let res = app.cli("/complete", Some(check)).await;
        assert_error(res, 400, "INVALID_LOGIN_CODE").await;
        assert_eq!(
            app.poll(&polling).await,
            (200, json!({ "status": "expired" }))
        );

        // A login completed by an impersonation session gives the CLI an impersonation
        // session, hidden from the user, that ends when the impersonation does.
        let made = ok(
            send(app.as_("server", Method::POST, "/api/v1/auth/sessions").json(&json!({
                "user_id": user.user_id, "expires_in_millis": 3000, "is_impersonation": true,
            })))
            .await,
            200,
        )
        .await;
        let (polling, login) = app.start_cli(None).await;
        let complete = json!({ "login_code": login, "refresh_token": made["refresh_token"] });
        ok(app.cli("/complete", Some(complete)).await, 200).await;
        let (status, body) = app.poll(&polling).await;
        assert_eq!(status, 201, "{body}");
        let cli_refresh = body["refresh_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let path = format!("/api/v1/auth/sessions?user_id={}", user.user_id);
        let listed = ok(send(app.as_("admin", Method::GET, &path)).await, 200).await;
        let impersonating = listed["items"].as_array().map(|items| {
            items
                .iter()
                .filter(|s| s["is_impersonation"] == json!(true))
                .count()
        });
        assert_eq!(impersonating, Some(2), "{listed}");
        let listed = ok(
            send(app.client(Method::GET, &path, Some(&user.access))).await,
            200,
        )
        .await;
        assert_eq!(
            listed["items"].as_array().map(Vec::len),
            Some(1),
            "{listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
        let res = send(
            app.client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
                .header("x-stack-refresh-token", &cli_refresh),
        )
        .await;
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;

        // Another project knows neither code, and its sessions complete nothing here; a
        // server may start and poll too.
        let (polling, login) = app.start_cli(None).await;
        let other = app.other_project().await;
        let in_other = |path: &str| {
            app.request(Method::POST, &format!("/api/v1/auth/cli{path}"))
                .header("x-service-access-type", "client")
                .header("x-service-project-id", &other.id)
                .header("x-service-publishable-client-key", &other.client_key)
        };
        let res = send(in_other("/poll").json(&json!({ "polling_code": polling }))).await;
        assert_error(res, 400, "INVALID_POLLING_CODE").await;
        let complete = json!({ "login_code": login, "refresh_token": user.refresh });
        let res = send(in_other("/complete").json(&complete)).await;
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
        assert_eq!(
            app.poll(&polling).await,
            (200, json!({ "status": "waiting" }))
        );
        let res = send(
            app.as_("server", Method::POST, "/api/v1/auth/cli/poll")
                .json(&json!({ "polling_code": polling })),
        )
        .await;
        assert_eq!(ok(res, 200).await, json!({ "status": "waiting" }));

        // A completed login is withdrawn when the session that completed it ends; a signed-out
        // session completes nothing.
        let other_session = app.signed_in(&user_email, PASSWORD).await;
        let by_other = json!({ "login_code": login, "refresh_token": other_session.refresh });
        ok(app.cli("/complete", Some(by_other)).await, 200).await;
        let res = send(
            app.client(
                Method::DELETE,
                "/api/v1/auth/sessions/current",
                Some(&other_session.access),
            )
            .header("x-stack-refresh-token", &other_session.refresh),
        )
        .await;
        assert!(res.status().is_success(), "{:?}", res.text().await);
        let (status, body) = app.poll(&polling).await;
        assert_eq!(
            (status, &body["code"]),
            (400, &json!("INVALID_POLLING_CODE")),
            "{body}"
        );
        let (_, login) = app.start_cli(None).await;
        let complete = json!({ "login_code": login, "refresh_token": user.refresh });
        let res = send(
            app.client(
                Method::DELETE,
                "/api/v1/auth/sessions/current",
                Some(&user.access),
            )
            .header("x-stack-refresh-token", &user.refresh),
        )
        .await;
        assert!(res.status().is_success(), "{:?}", res.text().await);
        let res = app.cli("/complete", Some(complete)).await;
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
    }
);
