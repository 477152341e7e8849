//! Password flows and sessions (10 §1, 20 §3, 80 §5–6) through the gateway.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_error, both_modes, email, parts, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

both_modes!(sign_up_and_sign_in, |app: &TestApp| async move {
    let address = email("ada");
    let session = app.sign_up(&address.to_uppercase(), PASSWORD).await;

    // The access token verifies with a standard JWT library against the published JWKS.
    let jwks: serde_json::Value = app
        .get(&format!(
            "/api/v1/projects/{}/.well-known/jwks.json",
            app.project.id
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .json()
        .await
        .unwrap_or_default();
    let header = jsonwebtoken::decode_header(&session.access).unwrap_or_else(|e| panic!("{e}"));
    let jwk = jwks["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|k| k["kid"] == header.kid.clone().unwrap_or_default().as_str());
    let jwk: jsonwebtoken::jwk::Jwk =
        serde_json::from_value(jwk.cloned().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap_or_else(|e| panic!("{e}"));
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[&app.project.id]);
    validation.set_issuer(&[format!("{}/api/v1/projects/{}", app.base, app.project.id)]);
    let claims = jsonwebtoken::decode::<serde_json::Value>(&session.access, &key, &validation)
        .unwrap_or_else(|e| panic!("{e}"))
        .claims;
    assert_eq!(claims["sub"], session.user_id.as_str());
    assert_eq!(claims["email"], address.as_str());
    assert_eq!(
        (
            &claims["role"],
            &claims["branch_id"],
            &claims["is_restricted"]
        ),
        (&json!("authenticated"), &json!("main"), &json!(false))
    );
    assert_eq!(
        claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0),
        600
    );

    // The client sees its own user in the client shape.
    let res = app
        .client(Method::GET, "/api/v1/users/me", Some(&session.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, me, _) = parts(res).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        (
            &me["primary_email"],
            &me["has_password"],
            &me["primary_email_verified"]
        ),
        (&json!(address), &json!(true), &json!(false))
    );
    assert!(me.get("server_metadata").is_none() && me.get("primary_email_auth_enabled").is_none());

    // Sign-in by any case of the address; a new session each time.
    let again = app.signed_in(&address.to_uppercase(), PASSWORD).await;
    assert_eq!(again.user_id, session.user_id);
    assert_ne!(again.refresh, session.refresh);

    // Unknown e-mail and wrong password answer exactly alike.
    let (s1, b1) = app.sign_in(&address, "wrong-password-123").await;
    let (s2, b2) = app.sign_in(&email("nobody"), PASSWORD).await;
    assert_eq!((s1, &b1["code"]), (400, &json!("EMAIL_PASSWORD_MISMATCH")));
    assert_eq!((s1, &b1), (s2, &b2));

    // Taken address.
    let res = app
        .client(Method::POST, "/api/v1/auth/password/sign-up", None)
        .json(&json!({"email": address, "password": PASSWORD}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 409, "USER_EMAIL_ALREADY_EXISTS").await;
    assert_eq!(body["details"]["email"], address.as_str());
});

both_modes!(sign_up_rules_in_order, |app: &TestApp| async move {
    let sign_up = |body: serde_json::Value| {
        app.client(Method::POST, "/api/v1/auth/password/sign-up", None)
            .json(&body)
            .send()
    };
    for bad in ["a@localhost", "a@gmail", "a..b@example.com"] {
        let res = sign_up(json!({"email": bad, "password": PASSWORD}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;
    }
    let res = sign_up(json!({"email": email("x"), "password": "p".repeat(71)}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = sign_up(json!({"email": email("x"), "password": "short"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 400, "PASSWORD_TOO_SHORT").await;
    assert_eq!(body["details"]["min_length"], 8);
    let res = sign_up(json!({"email": email("x"), "password": "Password123"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_TOO_COMMON").await;
    let res = sign_up(json!({"email": email("x"), "password": PASSWORD, "verification_callback_url": "https://evil.example/cb"})).await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;

    app.settings(json!({"password_min_length": 30})).await;
    let res = sign_up(json!({"email": email("x"), "password": PASSWORD}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 400, "PASSWORD_TOO_SHORT").await;
    assert_eq!(body["details"]["min_length"], 30);

    app.settings(json!({"sign_up_enabled": false, "password_min_length": 8}))
        .await;
    let res = sign_up(json!({"email": email("x"), "password": PASSWORD}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SIGN_UP_NOT_ENABLED").await;
    // Order: an untrusted URL is reported before disabled sign-up, after disabled passwords.
    let res = sign_up(json!({"email": email("x"), "password": PASSWORD, "verification_callback_url": "https://evil.example/cb"})).await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
    app.settings(json!({"credential_enabled": false})).await;
    let res = sign_up(json!({"email": email("x"), "password": PASSWORD, "verification_callback_url": "https://evil.example/cb"})).await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_AUTHENTICATION_NOT_ENABLED").await;
    let (status, body) = app.sign_in(&email("x"), PASSWORD).await;
    assert_eq!(
        (status, &body["code"]),
        (400, &json!("PASSWORD_AUTHENTICATION_NOT_ENABLED"))
    );
});

both_modes!(
    sign_up_sends_the_verification_mail,
    |app: &TestApp| async move {
        app.settings(json!({"allow_localhost": true})).await;
        let address = email("verify");
        let res = app.client(Method::POST, "/api/v1/auth/password/sign-up", None)
        .json(&json!({"email": address, "password": PASSWORD, "verification_callback_url": "http://localhost:3000/verify?x=1"}))
        .send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        let mail = app.mail.wait_for(&address).await;
        let code = crate::smtp::code_in(&mail);
        assert_eq!(code.len(), 45);
        assert!(mail.data.contains("localhost:3000/verify"));
    }
);

both_modes!(
    sessions_refresh_list_and_revoke,
    |app: &TestApp| async move {
        let address = email("sess");
        let first = app.sign_up(&address, PASSWORD).await;
        let second = app.signed_in(&address, PASSWORD).await;

        // Refresh: a new access token, the same refresh token (no rotation by default).
        let res = app
            .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
            .header("x-stack-refresh-token", &first.refresh)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (status, body, _) = parts(res).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["access_token"].is_string() && body.get("refresh_token").is_none());
        let res = app
            .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;

        // List: both sessions, the caller's marked current; a client may not list another user.
        let res = app
            .client(
                Method::GET,
                "/api/v1/auth/sessions?user_id=me",
                Some(&first.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (status, list, _) = parts(res).await;
        assert_eq!(status, 200, "{list}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 2);
        let current: Vec<_> = items
            .iter()
            .filter(|s| s["is_current_session"] == true)
            .collect();
        assert_eq!(current.len(), 1);
        let first_id = current[0]["id"].as_str().unwrap_or_default().to_owned();
        let second_id = items
            .iter()
            .find(|s| s["is_current_session"] == false)
            .and_then(|s| s["id"].as_str())
            .unwrap_or_default()
            .to_owned();
        let res = app
            .client(Method::GET, "/api/v1/auth/sessions", Some(&first.access))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let other = app.sign_up(&email("other"), PASSWORD).await;
        let res = app
            .client(
                Method::GET,
                &format!("/api/v1/auth/sessions?user_id={}", other.user_id),
                Some(&first.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;

        // Deleting: not the current one, not another user's; the other one yes, and its access
        // token stops working within a second.
        let res = app
            .client(
                Method::DELETE,
                &format!("/api/v1/auth/sessions/{first_id}?user_id=me"),
                Some(&first.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "CANNOT_DELETE_CURRENT_SESSION").await;
        let res = app
            .client(
                Method::DELETE,
                &format!("/api/v1/auth/sessions/{second_id}?user_id=me"),
                Some(&other.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "SESSION_NOT_FOUND").await;
        let res = app
            .client(
                Method::DELETE,
                &format!("/api/v1/auth/sessions/{second_id}?user_id=me"),
                Some(&first.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        let body = app
            .me_becomes(&second.access, 401, Duration::from_secs(1))
            .await;
        assert_eq!(body["code"], "ACCESS_TOKEN_EXPIRED");
        let res = app
            .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
            .header("x-service-refresh-token", &second.refresh)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;

        // Sign-out ends the current session; a second sign-out by refresh token finds nothing.
        let res = app
            .client(
                Method::DELETE,
                "/api/v1/auth/sessions/current",
                Some(&first.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        app.me_becomes(&first.access, 401, Duration::from_secs(1))
            .await;
        let res = app
            .client(
                Method::DELETE,
                "/api/v1/auth/sessions/current",
                Some(&first.access),
            )
            .header("x-service-refresh-token", &first.refresh)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
        let res = app
            .client(Method::DELETE, "/api/v1/auth/sessions/current", None)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "USER_AUTHENTICATION_REQUIRED").await;
    }
);

both_modes!(server_sessions, |app: &TestApp| async move {
    let user = app.sign_up(&email("imp"), PASSWORD).await;
    let res = app
        .as_("server", Method::POST, "/api/v1/auth/sessions")
        .json(&json!({"user_id": user.user_id, "is_impersonation": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, body, _) = parts(res).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap_or_default().to_owned();
    app.me_becomes(&token, 200, Duration::from_secs(1)).await;
    // Impersonation sessions are listed for admins only.
    let count = |access: &'static str| {
        let path = format!("/api/v1/auth/sessions?user_id={}", user.user_id);
        async move {
            let res = app
                .as_(access, Method::GET, &path)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            parts(res).await.1["items"].as_array().map_or(0, Vec::len)
        }
    };
    assert_eq!((count("server").await, count("admin").await), (1, 2));
    let res = app
        .as_("server", Method::POST, "/api/v1/auth/sessions")
        .json(&json!({"user_id": "4a1b2c3d-0000-4000-8000-000000000000"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "USER_ID_DOES_NOT_EXIST").await;
    let res = app
        .as_("server", Method::POST, "/api/v1/auth/sessions")
        .json(&json!({"user_id": user.user_id, "expires_in_millis": 31_708_800_001i64}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = app
        .client(Method::POST, "/api/v1/auth/sessions", Some(&user.access))
        .json(&json!({"user_id": "me"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
});

both_modes!(refresh_rotation_detects_reuse, |app: &TestApp| async move {
    app.settings(json!({"refresh_token_rotation": true})).await;
    let user = app.sign_up(&email("rot"), PASSWORD).await;
    let refresh = |token: String| async move {
        let res = app
            .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
            .header("x-service-refresh-token", token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        parts(res).await
    };
    let (status, body, _) = refresh(user.refresh.clone()).await;
    assert_eq!(status, 200, "{body}");
    let rotated = body["refresh_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!rotated.is_empty() && rotated != user.refresh);
    // Within the grace period the old token still works (another tab).
    assert_eq!(refresh(user.refresh.clone()).await.0, 200);
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    // Presented after the grace period: the whole session is revoked.
    let (status, body, _) = refresh(user.refresh.clone()).await;
    assert_eq!(
        (status, &body["code"]),
        (401, &json!("REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"))
    );
    assert_eq!(refresh(rotated).await.0, 401);
    app.me_becomes(&user.access, 401, Duration::from_secs(1))
        .await;
});

both_modes!(
    concurrent_refreshes_each_record_their_use,
    |app: &TestApp| async move {
        let user = app.sign_up(&email("many"), PASSWORD).await;
        let mut tokens = vec![user.refresh.clone()];
        for _ in 0..5 {
            let res = app
                .as_("server", Method::POST, "/api/v1/auth/sessions")
                .json(&json!({"user_id": user.user_id}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (status, body, _) = parts(res).await;
            assert_eq!(status, 200, "{body}");
            tokens.push(
                body["refresh_token"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        let path = &format!("/api/v1/auth/sessions?user_id={}", user.user_id);
        let last_used = || async move {
            let res = app
                .as_("server", Method::GET, path)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (status, body, _) = parts(res).await;
            assert_eq!(status, 200, "{body}");
            let mut times: Vec<(String, i64)> = body["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    (
                        s["id"].to_string(),
                        s["last_used_at"].as_i64().unwrap_or_default(),
                    )
                })
                .collect();
            times.sort();
            times
        };
        // Refreshes that arrive together are written together; each must still be recorded,
        // and with rotation each new token must work.
        let refresh_all = |tokens: Vec<String>| async move {
            let refreshes = tokens.into_iter().map(|token| async move {
                let res = app
                    .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
                    .header("x-stack-refresh-token", token)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let (status, body, _) = parts(res).await;
                assert_eq!(status, 200, "{body}");
                body["refresh_token"].as_str().map(str::to_owned)
            });
            futures::future::join_all(refreshes).await
        };
        for rotation in [false, true] {
            app.settings(json!({"refresh_token_rotation": rotation}))
                .await;
            let before = last_used().await;
            assert_eq!(before.len(), 6, "{before:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
            let rotated = refresh_all(tokens.clone()).await;
            let after = last_used().await;
            for ((id, was), (_, is)) in before.iter().zip(&after) {
                assert!(is > was, "session {id}: last used {was} then {is}");
            }
            if rotation {
                let rotated: Vec<String> = rotated.into_iter().flatten().collect();
                assert_eq!(rotated.len(), 6, "every refresh rotated");
                assert!(refresh_all(rotated).await.iter().all(Option::is_some));
            }
        }
    }
);

both_modes!(password_update_and_set, |app: &TestApp| async move {
    let address = email("upd");
    let keep = app.sign_up(&address, PASSWORD).await;
    let lose = app.signed_in(&address, PASSWORD).await;
    let update = |body: serde_json::Value, token: Option<&str>| {
        app.client(Method::POST, "/api/v1/auth/password/update", token)
            .header("x-service-refresh-token", &keep.refresh)
            .json(&body)
            .send()
    };
    let res = update(
        json!({"old_password": PASSWORD, "new_password": "new-password-99x"}),
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "USER_AUTHENTICATION_REQUIRED").await;
    let res = update(
        json!({"old_password": "not-the-password", "new_password": "new-password-99x"}),
        Some(&keep.access),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_CONFIRMATION_MISMATCH").await;
    let res = update(
        json!({"old_password": PASSWORD, "new_password": "short"}),
        Some(&keep.access),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_TOO_SHORT").await;
    let res = update(
        json!({"old_password": PASSWORD, "new_password": "new-password-99x"}),
        Some(&keep.access),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    // The session named by the refresh-token header survives; the other one ends.
    app.me_becomes(&lose.access, 401, Duration::from_secs(1))
        .await;
    app.me_becomes(&keep.access, 200, Duration::from_secs(1))
        .await;
    assert_eq!(app.sign_in(&address, PASSWORD).await.0, 400);
    app.signed_in(&address, "new-password-99x").await;

    let res = app
        .client(
            Method::POST,
            "/api/v1/auth/password/set",
            Some(&keep.access),
        )
        .json(&json!({"password": "another-password-1"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_ALREADY_SET").await;

    // A user made by the server without a password can set one, and nothing is revoked.
    let address = email("nopass");
    let res = app
        .as_("server", Method::POST, "/api/v1/users")
        .json(&json!({"primary_email": address, "primary_email_auth_enabled": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, user, _) = parts(res).await;
    assert_eq!(status, 201, "{user}");
    let res = app
        .as_("server", Method::POST, "/api/v1/auth/sessions")
        .json(&json!({"user_id": user["id"]}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let token = parts(res).await.1["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let res = app
        .client(Method::POST, "/api/v1/auth/password/update", Some(&token))
        .json(&json!({"old_password": "whatever-it-is", "new_password": "new-password-99x"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "USER_DOES_NOT_HAVE_PASSWORD").await;
    let res = app
        .client(Method::POST, "/api/v1/auth/password/set", Some(&token))
        .json(&json!({"password": "fresh-password-77"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    app.me_becomes(&token, 200, Duration::from_secs(1)).await;
    app.signed_in(&address, "fresh-password-77").await;
});

both_modes!(password_reset_over_smtp, |app: &TestApp| async move {
    app.settings(json!({"domains": [{"domain": "https://app.example.com"}]}))
        .await;
    let address = email("reset");
    let old = app.sign_up(&address, PASSWORD).await;
    let send = |to: &str, url: &str| {
        app.client(Method::POST, "/api/v1/auth/password/send-reset-code", None)
            .json(&json!({"email": to, "callback_url": url}))
            .send()
    };
    let res = send(&address, "https://evil.example/reset")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
    // Known and unknown addresses get the same answer; only the known one gets mail.
    let known = parts(
        send(&address, "https://app.example.com/reset?code=stale")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    let unknown_address = email("ghost");
    let unknown = parts(
        send(&unknown_address, "https://app.example.com/reset")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!((known.0, &known.1), (unknown.0, &unknown.1));
    assert_eq!(
        known.1,
        json!({"success": "maybe, only if user with e-mail exists"})
    );
    let mail = app.mail.wait_for(&address).await;
    assert_eq!(app.mail.count_to(&unknown_address), 0);
    let code = crate::smtp::code_in(&mail);
    assert!(
        !mail.data.contains("stale"),
        "the old code parameter is replaced"
    );

    let post = |path: &'static str, body: serde_json::Value| {
        app.client(Method::POST, path, None).json(&body).send()
    };
    // Check-code does not consume.
    for _ in 0..2 {
        let res = post(
            "/api/v1/auth/password/reset/check-code",
            json!({"code": code}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parts(res).await.1, json!({"is_code_valid": true}));
    }
    let res = post(
        "/api/v1/auth/password/reset/check-code",
        json!({"code": "x"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let wrong = latchkey_shared::crypto::random_base32(45);
    let res = post(
        "/api/v1/auth/password/reset",
        json!({"code": wrong, "password": "brand-new-pass-1"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "VERIFICATION_CODE_NOT_FOUND").await;
    // A too-short password does not burn the code.
    let res = post(
        "/api/v1/auth/password/reset",
        json!({"code": code, "password": "short"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "PASSWORD_TOO_SHORT").await;
    let res = post(
        "/api/v1/auth/password/reset",
        json!({"code": code.to_uppercase(), "password": "brand-new-pass-1"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let res = post(
        "/api/v1/auth/password/reset",
        json!({"code": code, "password": "brand-new-pass-2"}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;
    // New password works, the old one does not, and the old session is gone.
    assert_eq!(app.sign_in(&address, PASSWORD).await.0, 400);
    app.signed_in(&address, "brand-new-pass-1").await;
    app.me_becomes(&old.access, 401, Duration::from_secs(1))
        .await;
    let res = app
        .client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
        .header("x-service-refresh-token", &old.refresh)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
});

both_modes!(
    reset_codes_count_attempts_per_nonce,
    |app: &TestApp| async move {
        app.settings(json!({"allow_localhost": true})).await;
        let address = email("brute");
        app.sign_up(&address, PASSWORD).await;
        let res = app
            .client(Method::POST, "/api/v1/auth/password/send-reset-code", None)
            .json(&json!({"email": address, "callback_url": "http://localhost/reset"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        let code = crate::smtp::code_in(&app.mail.wait_for(&address).await);
        let check = |code: String| async move {
            let res = app
                .client(Method::POST, "/api/v1/auth/password/reset/check-code", None)
                .json(&json!({"code": code}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            parts(res).await.1["code"].clone()
        };
        // Twenty wrong guesses that share the code's nonce (its last 39 characters)...
        for i in 0..20 {
            let guess = format!("{:0>6}{}", i, &code[6..]);
            assert_eq!(check(guess).await, json!("VERIFICATION_CODE_NOT_FOUND"));
        }
        // ...and the right code is refused too.
        assert_eq!(
            check(code.clone()).await,
            json!("VERIFICATION_CODE_MAX_ATTEMPTS_REACHED")
        );
    }
);

both_modes!(
    password_switches_and_expired_codes,
    |app: &TestApp| async move {
        app.settings(json!({"allow_localhost": true, "password_reset_code_lifetime_seconds": 1}))
            .await;
        let address = email("switch");
        let user = app.sign_up(&address, PASSWORD).await;
        let res = app
            .client(Method::POST, "/api/v1/auth/password/send-reset-code", None)
            .json(&json!({"email": address, "callback_url": "http://localhost/reset"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        let code = crate::smtp::code_in(&app.mail.wait_for(&address).await);
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let res = app
            .client(Method::POST, "/api/v1/auth/password/reset", None)
            .json(&json!({"code": code, "password": "brand-new-pass-1"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "VERIFICATION_CODE_EXPIRED").await;

        // With passwords switched off, every password endpoint says so.
        app.settings(json!({"credential_enabled": false})).await;
        let token = Some(user.access.as_str());
        for (path, body, token) in [
            (
                "/api/v1/auth/password/update",
                json!({"old_password": PASSWORD, "new_password": "another-pass-1"}),
                token,
            ),
            (
                "/api/v1/auth/password/set",
                json!({"password": "another-pass-1"}),
                token,
            ),
            (
                "/api/v1/auth/password/send-reset-code",
                json!({"email": address, "callback_url": "http://localhost/reset"}),
                None,
            ),
        ] {
            let res = app
                .client(Method::POST, path, token)
                .json(&body)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_error(res, 400, "PASSWORD_AUTHENTICATION_NOT_ENABLED").await;
        }
    }
);
