//! Every validation step of 00 §3.1, through the gateway.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_error, both_modes, parts, TestApp};

both_modes!(validation_order, |app: &TestApp| async move {
    let p = &app.project;
    let root = "/api/v1/";
    // 1. A key without an access type.
    let res = app
        .get(root)
        .header("x-service-secret-server-key", &p.server_key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "PROJECT_KEY_WITHOUT_ACCESS_TYPE").await;
    // 2. No access type on an endpoint that needs one; a project id alone is unauthenticated.
    let res = app
        .get("/api/v1/projects/current")
        .header("x-service-project-id", &p.id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "ACCESS_TYPE_REQUIRED").await;
    // 3. Unknown access type, with both spellings in details.
    let res = app
        .get(root)
        .header("x-service-access-type", "root")
        .header("x-service-project-id", &p.id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 401, "INVALID_ACCESS_TYPE").await;
    assert_eq!(
        body["details"],
        json!({"access_type": "root", "accessType": "root"})
    );
    // 4. No project id.
    let res = app
        .get(root)
        .header("x-service-access-type", "server")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 401, "ACCESS_TYPE_WITHOUT_PROJECT_ID").await;
    assert_eq!(body["details"]["request_type"], "server");
    // 5. Token problems.
    let with_token = |token: &str| {
        app.as_("server", Method::GET, root)
            .header("x-service-access-token", token.to_owned())
    };
    let res = with_token("not-a-jwt")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "UNPARSABLE_ACCESS_TOKEN").await;
    let expired = app
        .mint_token(&p.id, "normal", json!({"exp": 1_000_000}))
        .await;
    let res = with_token(&expired)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 401, "ACCESS_TOKEN_EXPIRED").await;
    assert_eq!(body["details"]["expired_at_millis"], 1_000_000_000i64);
    let other = app.other_project().await;
    let foreign = app.mint_token(&other.id, "normal", json!({})).await;
    let res = with_token(&foreign)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 401, "INVALID_PROJECT_FOR_ACCESS_TOKEN").await;
    assert_eq!(body["details"]["actual_project_id"], other.id.as_str());
    let restricted = app.mint_token(&p.id, "restricted", json!({})).await;
    let res = with_token(&restricted)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "RESTRICTED_USER_NOT_ALLOWED").await;
    let res = with_token(&restricted)
        .header("x-stack-allow-restricted-user", "true")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    // 6. Unknown or malformed project.
    for project in [
        "8f5a1a34-3c43-4c55-9c7e-000000000000",
        "not-a-uuid",
        "internal",
    ] {
        let res = app
            .get(root)
            .header("x-service-access-type", "client")
            .header("x-service-project-id", project)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let body = assert_error(res, 401, "CURRENT_PROJECT_NOT_FOUND").await;
        assert_eq!(body["details"]["project_id"], project);
    }
    // 7. Keys: missing and wrong, per access type; another type's key does not count.
    let cases = [
        (
            "client",
            None,
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        ),
        (
            "client",
            Some(("x-service-publishable-client-key", "pck_wrong")),
            "INVALID_PUBLISHABLE_CLIENT_KEY",
        ),
        (
            "client",
            Some(("x-service-secret-server-key", p.server_key.as_str())),
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        ),
        ("server", None, "SERVER_AUTHENTICATION_REQUIRED"),
        (
            "server",
            Some(("x-service-secret-server-key", p.client_key.as_str())),
            "INVALID_SECRET_SERVER_KEY",
        ),
        ("admin", None, "ADMIN_AUTHENTICATION_REQUIRED"),
        (
            "admin",
            Some(("x-service-super-secret-admin-key", p.server_key.as_str())),
            "INVALID_SUPER_SECRET_ADMIN_KEY",
        ),
        (
            "server",
            Some(("x-service-secret-server-key", other.server_key.as_str())),
            "INVALID_SECRET_SERVER_KEY",
        ),
    ];
    for (access, key, code) in cases {
        let mut req = app
            .get(root)
            .header("x-service-access-type", access)
            .header("x-service-project-id", &p.id);
        if let Some((h, v)) = key {
            req = req.header(h, v);
        }
        let res = req.send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, code).await;
    }
    // 9. Access type not allowed by the endpoint.
    let res = app
        .as_("server", Method::GET, "/api/v1/internal/project")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
    assert_eq!(
        body["details"],
        json!({"actual_access_type": "server", "allowed_access_types": ["admin"]})
    );
    // 11. Query validation.
    let res = app
        .as_("client", Method::GET, "/api/v1/?x=1")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
});

both_modes!(
    valid_credentials_reach_the_root,
    |app: &TestApp| async move {
        let p = &app.project;
        for access in ["client", "server", "admin"] {
            let res = app
                .as_(access, Method::GET, "/api/v1/")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (status, body, _) = parts(res).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(
                body["authentication"],
                json!({"access_type": access, "project_id": p.id, "user_id": null})
            );
        }
        // Unauthenticated root.
        let (status, body, _) = parts(
            app.get("/api/v1/")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .await;
        assert_eq!(
            (status, &body["authentication"]),
            (200, &serde_json::Value::Null)
        );
        // A valid token names the user; the aliases work like the main prefix.
        let token = app
            .mint_token(
                &p.id,
                "normal",
                json!({"sub": "0b8f6f5e-6d3b-4c1e-9f7a-2b2f4e0c9d11"}),
            )
            .await;
        for prefix in ["x-stack-", "x-hexclave-"] {
            let res = app
                .get("/api/v1/")
                .header(format!("{prefix}access-type"), "client")
                .header(format!("{prefix}project-id"), &p.id)
                .header(format!("{prefix}publishable-client-key"), &p.client_key)
                .header(format!("{prefix}access-token"), &token)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (status, body, _) = parts(res).await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(
                body["authentication"]["user_id"],
                "0b8f6f5e-6d3b-4c1e-9f7a-2b2f4e0c9d11"
            );
        }
    }
);

both_modes!(forged_tokens_are_refused, |app: &TestApp| async move {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let p = &app.project;
    let good = app.mint_token(&p.id, "normal", json!({})).await;
    let parts_: Vec<&str> = good.split('.').collect();
    let payload = String::from_utf8(b64.decode(parts_[1]).unwrap_or_default()).unwrap_or_default();
    let tampered_payload = b64.encode(payload.replace("authenticated", "admin"));
    let none_header = b64.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let hs_header = b64.encode(r#"{"alg":"HS256","typ":"JWT","kid":"x"}"#);
    let forged = [
        format!("{}.{}.{}", parts_[0], tampered_payload, parts_[2]),
        format!("{none_header}.{}.", parts_[1]),
        format!("{hs_header}.{}.{}", parts_[1], parts_[2]),
        app.mint_token(&p.id, "normal", json!({"aud": "someone-else"}))
            .await,
        app.mint_token(
            &p.id,
            "normal",
            json!({"iss": "https://evil.example/api/v1/projects/x"}),
        )
        .await,
        // Tampered and expired: the signature is checked first (80 §11.11).
        format!(
            "{}.{}.{}",
            parts_[0],
            b64.encode(payload.replace("\"exp\":", "\"exp\":1,\"x\":")),
            parts_[2]
        ),
    ];
    for token in forged {
        let res = app
            .as_("client", Method::GET, "/api/v1/")
            .header("x-service-access-token", token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "UNPARSABLE_ACCESS_TOKEN").await;
    }
});
