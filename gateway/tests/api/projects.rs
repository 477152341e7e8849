//! `/projects/current`, JWKS, and the admin project and key-set routes.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_error, both_modes, parts, TestApp};

both_modes!(current_project_and_jwks, |app: &TestApp| async move {
    let p = &app.project;
    let (status, body, _) = parts(
        app.as_("client", Method::GET, "/api/v1/projects/current")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], p.id.as_str());
    assert_eq!(body["display_name"], "Test project");
    assert_eq!(body["config"]["sign_up_enabled"], true);
    assert_eq!(body["config"]["passkey_enabled"], false);
    assert_eq!(body["config"]["enabled_oauth_providers"], json!([]));
    assert_eq!(body["config"]["allow_localhost"], false);

    let jwks = format!("/api/v1/projects/{}/.well-known/jwks.json", p.id);
    let res = app
        .get(&jwks)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.headers()["cache-control"], "public, max-age=3600");
    let (status, body, _) = parts(res).await;
    assert_eq!(status, 200);
    let keys = body["keys"].as_array().cloned().unwrap_or_default();
    assert_eq!(keys.len(), 1);
    assert_eq!(
        (&keys[0]["kty"], &keys[0]["alg"], &keys[0]["crv"]),
        (&json!("EC"), &json!("ES256"), &json!("P-256"))
    );
    assert_eq!(keys[0]["kid"].as_str().map(str::len), Some(12));
    let (_, body, _) = parts(
        app.get(&format!("{jwks}?include_restricted=true"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(body["keys"].as_array().map(Vec::len), Some(2));
    // Anonymous users' key too (issue 19), and restricted ones with it.
    let (_, body, _) = parts(
        app.get(&format!("{jwks}?include_anonymous=true"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(body["keys"].as_array().map(Vec::len), Some(3));
    let res = app
        .get(&format!("{jwks}?include_restricted=yes"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    for unknown in ["5b9a3c1e-0000-4000-8000-000000000000", "not-a-uuid"] {
        let res = app
            .get(&format!("/api/v1/projects/{unknown}/.well-known/jwks.json"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let body = assert_error(res, 404, "PROJECT_NOT_FOUND").await;
        assert_eq!(body["details"]["project_id"], unknown);
    }
});

both_modes!(admin_settings, |app: &TestApp| async move {
    let (status, body, _) = parts(
        app.as_("admin", Method::GET, "/api/v1/internal/project")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["password_min_length"], 8);
    assert_eq!(body["refresh_token_rotation"], false);
    assert_eq!(
        body["rate_limits"]["email_sending"],
        json!({"limit": 60, "window_seconds": 3600})
    );
    let patch = json!({
        "display_name": "Renamed",
        "magic_link_enabled": true,
        "allow_localhost": true,
        "domains": [{"domain": "https://app.example.com"}],
        "password_min_length": 12,
        "rate_limits": {"client_general": null},
        "oauth_providers": [{"id": "corp", "type": "oidc", "client_id": "cid", "client_secret": "very-secret", "issuer": "https://id.example.com"}],
        "email": {"smtp_url": "smtps://mailer:hunter2@smtp.example.com:465", "from": "auth@example.com"}
    });
    let res = app
        .as_("admin", Method::PATCH, "/api/v1/internal/project")
        .json(&patch)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, body, _) = parts(res).await;
    assert_eq!(status, 200, "{body}");
    let text = body.to_string();
    assert!(
        !text.contains("very-secret") && !text.contains("hunter2"),
        "secret leaked: {text}"
    );
    assert_eq!(body["oauth_providers"][0]["client_secret_set"], true);
    assert_eq!(body["email"]["smtp_password_set"], true);
    assert_eq!(body["rate_limits"]["client_general"], json!(null));
    assert_eq!(body["display_name"], "Renamed");
    // The view can be sent back as it is: its markers are read and the secrets kept.
    let mut email = body["email"].clone();
    email["from"] = json!("noreply@example.com");
    let resend = json!({"oauth_providers": body["oauth_providers"], "email": email});
    let res = app
        .as_("admin", Method::PATCH, "/api/v1/internal/project")
        .json(&resend)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, resent, _) = parts(res).await;
    assert_eq!(status, 200, "{resent}");
    assert_eq!(resent["oauth_providers"][0]["client_secret_set"], true);
    assert_eq!(resent["email"]["smtp_password_set"], true);
    assert_eq!(resent["email"]["from"], "noreply@example.com");
    // Takes effect at once for the public view.
    let (_, current, _) = parts(
        app.as_("client", Method::GET, "/api/v1/projects/current")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(current["display_name"], "Renamed");
    assert_eq!(current["config"]["magic_link_enabled"], true);
    assert_eq!(
        current["config"]["enabled_oauth_providers"],
        json!([{"id": "corp"}])
    );
    assert_eq!(
        current["config"]["domains"],
        json!([{"domain": "https://app.example.com", "handler_path": "/handler"}])
    );
    // Invalid values are refused and change nothing.
    for bad in [
        json!({"password_min_length": 7}),
        json!({"sign_up_enabled": "yes"}),
        json!({"rate_limits": {"nope": null}}),
        json!({"domains": [{"domain": "not a url"}]}),
    ] {
        let res = app
            .as_("admin", Method::PATCH, "/api/v1/internal/project")
            .json(&bad)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;
    }
    let (_, after, _) = parts(
        app.as_("admin", Method::GET, "/api/v1/internal/project")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(after["password_min_length"], 12);
});

both_modes!(key_sets_and_revocation, |app: &TestApp| async move {
    let (status, list, _) = parts(
        app.as_("admin", Method::GET, "/api/v1/internal/api-keys")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(status, 200);
    let first = &list["items"][0];
    assert_eq!(first["revoked"], false);
    let last_four = &app.project.server_key[app.project.server_key.len() - 4..];
    assert_eq!(first["secret_server_key"]["last_four"], last_four);
    assert!(!list.to_string().contains(&app.project.server_key));

    let create = json!({"description": "ci", "has_publishable_client_key": false, "has_secret_server_key": true, "has_super_secret_admin_key": false});
    let res = app
        .as_("admin", Method::POST, "/api/v1/internal/api-keys")
        .json(&create)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, created, _) = parts(res).await;
    assert_eq!(status, 201, "{created}");
    let key = created["secret_server_key"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(key.starts_with("ssk_") && key.len() == 49);
    assert_eq!(created["publishable_client_key"], json!(null));
    let id = created["id"].as_str().unwrap_or_default().to_owned();

    let with_new_key = || {
        app.get("/api/v1/projects/current")
            .header("x-service-access-type", "server")
            .header("x-service-project-id", &app.project.id)
            .header("x-service-secret-server-key", &key)
    };
    assert_eq!(
        with_new_key()
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok(),
        Some(200)
    );

    // Revoke; the key must stop working within 5 s.
    let res = app
        .as_(
            "admin",
            Method::PATCH,
            &format!("/api/v1/internal/api-keys/{id}"),
        )
        .json(&json!({"revoked": true, "description": "gone"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, updated, _) = parts(res).await;
    assert_eq!(
        (status, &updated["revoked"], &updated["description"]),
        (200, &json!(true), &json!("gone"))
    );
    let revoked_at = Instant::now();
    loop {
        let res = with_new_key()
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if res.status() == 401 {
            assert_error(res, 401, "INVALID_SECRET_SERVER_KEY").await;
            break;
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(5),
            "revoked key still accepted after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The original keys keep working.
    assert_eq!(
        app.as_("server", Method::GET, "/api/v1/")
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok(),
        Some(200)
    );

    let res = app
        .as_(
            "admin",
            Method::PATCH,
            "/api/v1/internal/api-keys/2b1f0c1e-0000-4000-8000-000000000000",
        )
        .json(&json!({"revoked": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "API_KEY_NOT_FOUND").await;
    let res = app
        .as_(
            "admin",
            Method::PATCH,
            &format!("/api/v1/internal/api-keys/{id}"),
        )
        .json(&json!({"revoked": false}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = app.as_("admin", Method::POST, "/api/v1/internal/api-keys").json(&json!({"description": "none", "has_publishable_client_key": false, "has_secret_server_key": false, "has_super_secret_admin_key": false})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    // Expired keys fail too.
    let past = json!({"description": "old", "expires_at_millis": 1, "has_publishable_client_key": true, "has_secret_server_key": false, "has_super_secret_admin_key": false});
    let res = app
        .as_("admin", Method::POST, "/api/v1/internal/api-keys")
        .json(&past)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
});

both_modes!(
    test_mail_reports_the_mail_servers_answer,
    |app: &TestApp| async move {
        let send = |body: serde_json::Value| {
            app.as_("admin", Method::POST, "/api/v1/internal/send-test-email")
                .json(&body)
                .send()
        };
        let res = send(json!({"recipient_email": "ops@example.com"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (status, body, _) = parts(res).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body, json!({"success": true, "error_message": null}));
        let mail = app.mail.wait_for("ops@example.com").await;
        assert!(mail.data.contains("Test mail from"), "{}", mail.data);
        // A project's own mail server that is not there: the answer says why, the log agrees.
        app.settings(
            json!({"email": {"smtp_url": "smtp://127.0.0.1:9", "from": "auth@example.com"}}),
        )
        .await;
        let res = send(json!({"recipient_email": "ops@example.com"}))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (status, body, _) = parts(res).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["success"], false);
        assert!(
            body["error_message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        let (_, log, _) = parts(
            app.as_("admin", Method::GET, "/api/v1/internal/emails")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .await;
        let statuses: Vec<_> = log["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter(|m| m["template"] == "test")
                    .map(|m| m["status"].clone())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(statuses, vec![json!("failed"), json!("sent")], "{log}");
        // Bad input is refused; Stack Auth's unsaved `email_config` is not taken.
        for bad in [
            json!({"recipient_email": "not an address"}),
            json!({}),
            json!({"recipient_email": "ops@example.com", "email_config": {}}),
        ] {
            let res = send(bad).await.unwrap_or_else(|e| panic!("{e}"));
            assert_error(res, 400, "SCHEMA_ERROR").await;
        }
        for access in ["client", "server"] {
            let res = app
                .as_(access, Method::POST, "/api/v1/internal/send-test-email")
                .json(&json!({"recipient_email": "ops@example.com"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
        }
    }
);
