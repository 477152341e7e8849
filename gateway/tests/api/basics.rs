//! Envelope, routing, CORS, override status, request ids, body rules, health and metrics.

use reqwest::Method;

use crate::helpers::{assert_error, both_modes, parts, TestApp};

both_modes!(routing_envelope_and_headers, |app: &TestApp| async move {
    // Unknown path: 404 whatever the headers; known path, wrong method: 405.
    let res = app
        .as_("server", Method::GET, "/api/v1/nope")
        .header("x-service-access-type", "bogus")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "NOT_FOUND").await;
    let res = app
        .request(Method::DELETE, "/api/v1/projects/current")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 405, "METHOD_NOT_ALLOWED").await;

    // CORS preflight to any API path, and CORS + no-store + request id on every response.
    let res = app
        .request(Method::OPTIONS, "/api/v1/anything")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["access-control-allow-origin"], "*");
    let allowed = res.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    for h in [
        "x-service-access-type",
        "x-stack-access-token",
        "x-hexclave-project-id",
        "content-type",
    ] {
        assert!(allowed.contains(h), "{h} not allowed");
    }
    // What a browser SDK asks for beyond the access headers is allowed too (00 §2).
    let res = app
        .request(Method::OPTIONS, "/api/v1/auth/password/sign-up")
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type, ngrok-skip-browser-warning,baggage, sentry-trace, x-stack-project-id",
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let allowed: Vec<String> = res.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap_or_default()
        .split(',')
        .map(|h| h.trim().to_owned())
        .collect();
    for h in [
        "ngrok-skip-browser-warning",
        "baggage",
        "sentry-trace",
        "x-stack-project-id",
    ] {
        assert!(
            allowed.iter().any(|a| a == h),
            "{h} not allowed: {allowed:?}"
        );
    }
    assert!(res.headers()["vary"]
        .to_str()
        .unwrap_or_default()
        .contains("access-control-request-headers"));
    let res = app
        .get("/api/v1/")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.headers()["cache-control"], "no-store, max-age=0");
    // The preflight's list is not repeated on actual answers, where browsers ignore it.
    assert_eq!(res.headers()["access-control-allow-origin"], "*");
    assert_eq!(res.headers()["access-control-allow-headers"], "*");
    assert!(res.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap_or_default()
        .contains("x-stack-known-error"));
    let id = res.headers()["x-service-request-id"]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    assert!(id.len() >= 16);

    // Override error status: 4xx becomes 200 with the actual status under all prefixes.
    let res = app
        .get("/api/v1/projects/current")
        .header("x-stack-override-error-status", "true")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    for prefix in ["x-service-", "x-stack-", "x-hexclave-"] {
        assert_eq!(
            res.headers()[format!("{prefix}actual-status").as_str()],
            "401"
        );
    }
    let (_, body, known) = parts(res).await;
    assert_eq!(
        (body["code"].as_str(), known.as_deref()),
        (Some("ACCESS_TYPE_REQUIRED"), Some("ACCESS_TYPE_REQUIRED"))
    );

    // Malformed header bytes are an error, never a 500.
    let res = app
        .get("/api/v1/")
        .header(
            "x-service-access-type",
            reqwest::header::HeaderValue::from_bytes(b"\xffserver")
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .header("x-service-project-id", &app.project.id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "INVALID_ACCESS_TYPE").await;
});

both_modes!(bodies_are_parsed_strictly, |app: &TestApp| async move {
    let patch = |body: Vec<u8>, content_type: &'static str| {
        app.as_("admin", Method::PATCH, "/api/v1/internal/project")
            .header("content-type", content_type)
            .body(body)
    };
    let res = patch(b"{\"sign_up_enabled\": ".to_vec(), "application/json")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 400, "BODY_PARSING_ERROR").await;
    assert!(body["details"]["message"].is_string());
    let res = patch(b"<xml/>".to_vec(), "application/xml")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BODY_PARSING_ERROR").await;
    let res = patch(Vec::new(), "application/json")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = patch(b"[1,2]".to_vec(), "application/json")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = patch(b"{\"unknown_setting\": true}".to_vec(), "application/json")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = patch(
        b"{\"display_name\": \"a\\u0000b\", \"x\": 1}".to_vec(),
        "text/plain",
    )
    .send()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let res = patch(nested.into_bytes(), "application/json")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BODY_PARSING_ERROR").await;
    // On its own connection: the server answers before reading the body and closes it.
    let big = format!("{{\"display_name\": \"{}\"}}", "a".repeat(200 * 1024));
    let res = reqwest::Client::new()
        .patch(format!("{}/api/v1/internal/project", app.base))
        .header("x-service-access-type", "admin")
        .header("x-service-project-id", &app.project.id)
        .header("x-service-super-secret-admin-key", &app.project.admin_key)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 413, "BAD_REQUEST").await;
    // Unknown fields on typed bodies.
    let res = app.as_("admin", Method::POST, "/api/v1/internal/api-keys").json(&serde_json::json!({"description": "x", "has_publishable_client_key": true, "has_secret_server_key": false, "has_super_secret_admin_key": false, "extra": 1})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    // The server is healthy after all of it.
    assert_eq!(
        app.get("/health/live")
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok(),
        Some(200)
    );
});

both_modes!(health_metrics_and_openapi, |app: &TestApp| async move {
    let (status, body, _) = parts(
        app.get("/health/ready")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["services"]["webhooks"], "serving");
    // The ready probe above is counted: the counter moves by one per request.
    let ready_count = |text: &str| -> u64 {
        let series =
            "latchkey_http_requests_total{route=\"/health/ready\",method=\"GET\",status=\"200\"} ";
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let metrics = || async {
        let res = app
            .get("/metrics")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        res.text().await.unwrap_or_default()
    };
    let before = ready_count(&metrics().await);
    assert!(before >= 1);
    let _ = app.get("/health/ready").send().await;
    assert_eq!(ready_count(&metrics().await), before + 1);
    let (status, doc, _) = parts(
        app.get("/api/v1/openapi.json")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(status, 200);
    assert!(doc["openapi"]
        .as_str()
        .unwrap_or_default()
        .starts_with("3.1"));
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    for path in [
        "/api/v1/",
        "/api/v1/openapi.json",
        "/api/v1/projects/current",
        "/api/v1/projects/{project_id}/.well-known/jwks.json",
        "/api/v1/internal/project",
        "/api/v1/internal/api-keys",
        "/api/v1/internal/api-keys/{api_key_id}",
    ] {
        assert!(paths.contains_key(path), "{path} missing from OpenAPI");
    }
    // Every documented path is a real route (no 404 NOT_FOUND).
    for path in paths.keys() {
        let concrete = path
            .replace("{project_id}", &app.project.id)
            .replace("{api_key_id}", &app.project.id);
        let res = app
            .as_("admin", Method::OPTIONS, &concrete)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
        let res = app
            .as_("admin", Method::GET, &concrete)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, body, _) = parts(res).await;
        assert_ne!(body["code"], "NOT_FOUND", "{path}");
    }
});
