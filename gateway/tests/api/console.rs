//! The admin console (issue 20) over HTTP, as a browser without script would use it: signing
//! in with an admin key, the session cookie's flags, CSRF refusals, security headers, editing a
//! setting with the API's own error shown next to it, creating and revoking a key set, the
//! session ending when its key is revoked, and a session of project A reaching nothing of B.

use std::time::Duration;

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::*;

/// A browser: no redirects followed, cookies kept by hand (name → value).
pub(crate) struct Browser<'a> {
    app: &'a TestApp,
    http: reqwest::Client,
    cookies: std::collections::BTreeMap<String, String>,
}

impl<'a> Browser<'a> {
    pub(crate) fn new(app: &'a TestApp) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        Self {
            app,
            http,
            cookies: Default::default(),
        }
    }

    fn keep_cookies(&mut self, res: &Response) {
        for v in res.headers().get_all("set-cookie") {
            let text = v.to_str().unwrap_or_default();
            let first = text.split(';').next().unwrap_or_default();
            if let Some((name, value)) = first.split_once('=') {
                if value.is_empty() {
                    self.cookies.remove(name);
                } else {
                    self.cookies.insert(name.to_owned(), value.to_owned());
                }
            }
        }
    }

    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        form: &[(&str, &str)],
    ) -> Response {
        let cookie: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.app.base))
            .header("cookie", cookie.join("; "));
        if method == Method::POST {
            req = req.form(form);
        }
        let res = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
        self.keep_cookies(&res);
        res
    }

    pub(crate) async fn get(&mut self, path: &str) -> (u16, String) {
        let res = self.send(Method::GET, path, &[]).await;
        (res.status().as_u16(), res.text().await.unwrap_or_default())
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Response {
        self.send(Method::POST, path, form).await
    }

    /// Signs in to `project` with `admin_key` through the sign-in form.
    pub(crate) async fn sign_in(&mut self, project: &str, admin_key: &str) -> Response {
        let (status, _) = self.get("/console/sign-in").await;
        assert_eq!(status, 200);
        let csrf = self.cookies["latchkey_console_csrf"].clone();
        self.post(
            "/console/sign-in",
            &[
                ("csrf", &csrf),
                ("project_id", project),
                ("admin_key", admin_key),
            ],
        )
        .await
    }
}

/// The CSRF token of the page's forms.
pub(crate) fn csrf_in(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).map(|i| i + marker.len()).unwrap_or(0);
    html[start..].chars().take_while(|c| *c != '"').collect()
}

fn location(res: &Response) -> String {
    res.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn setting(app: &TestApp, name: &str) -> Value {
    let settings = ok(
        send(app.as_("admin", Method::GET, "/api/v1/internal/project")).await,
        200,
    )
    .await;
    settings[name].clone()
}

both_modes!(
    the_console_signs_in_with_an_admin_key_and_edits_settings_and_keys,
    |app: &TestApp| async move {
        let mut browser = Browser::new(app);
        let res = browser.send(Method::GET, "/console/sign-in", &[]).await;
        let csp = res
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(res.headers()["x-frame-options"], "DENY");
        assert!(res.text().await.unwrap_or_default().contains("admin_key"));

        // The sign-in form needs its CSRF token; a wrong key is refused next to the form.
        let p = app.project.clone();
        let res = browser
            .post(
                "/console/sign-in",
                &[("project_id", &p.id), ("admin_key", &p.admin_key)],
            )
            .await;
        assert_eq!(res.status(), 403);
        let res = browser.sign_in(&p.id, "sak_wrong").await;
        assert_eq!(res.status(), 401);
        let page = res.text().await.unwrap_or_default();
        assert!(page.contains("role=\"alert\""), "{page}");
        assert!(!browser.cookies.contains_key("latchkey_console"));

        let res = browser.sign_in(&p.id, &p.admin_key).await;
        assert_eq!(res.status(), 303);
        assert_eq!(location(&res), "/console/project");
        let set: Vec<String> = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .filter(|c| c.starts_with("latchkey_console="))
            .collect();
        assert_eq!(set.len(), 1, "{set:?}");
        for flag in [
            "HttpOnly",
            "SameSite=Strict",
            "Path=/console",
            "Max-Age=1800",
        ] {
            assert!(set[0].contains(flag), "{flag} missing: {}", set[0]);
        }
        assert!(!set[0].contains(&p.admin_key));

        // A setting changes; the API shows it.
        let (status, page) = browser.get("/console/project").await;
        assert_eq!(status, 200);
        assert!(page.contains("password_min_length"), "{page}");
        let csrf = csrf_in(&page);
        let change = [
            ("csrf", csrf.as_str()),
            ("kind.password_min_length", "number"),
            ("s.password_min_length", "12"),
        ];
        let res = browser.post("/console/project", &change).await;
        assert_eq!(res.status(), 303);
        assert_eq!(setting(app, "password_min_length").await, 12);
        // Without the token nothing changes.
        let forged = [
            ("kind.password_min_length", "number"),
            ("s.password_min_length", "14"),
        ];
        assert_eq!(
            browser.post("/console/project", &forged).await.status(),
            403
        );
        assert_eq!(setting(app, "password_min_length").await, 12);
        // The API's own refusal is shown next to the setting it names.
        let bad = [
            ("csrf", csrf.as_str()),
            ("kind.password_min_length", "number"),
            ("s.password_min_length", "3"),
        ];
        let res = browser.post("/console/project", &bad).await;
        assert_eq!(res.status(), 400);
        let page = res.text().await.unwrap_or_default();
        assert!(page.contains("id=\"e-password_min_length\""), "{page}");
        assert_eq!(setting(app, "password_min_length").await, 12);
        // An unticked box switches a setting off, and only the boxes the form showed count.
        let off = [("csrf", csrf.as_str()), ("kind.sign_up_enabled", "bool")];
        assert_eq!(browser.post("/console/project", &off).await.status(), 303);
        assert_eq!(setting(app, "sign_up_enabled").await, false);
        assert_eq!(setting(app, "credential_enabled").await, true);

        // A key set is created (its keys shown once) and revoked after a confirmation page.
        let create = [
            ("csrf", csrf.as_str()),
            ("description", "from the console"),
            ("server", "true"),
        ];
        let res = browser.post("/console/keys", &create).await;
        assert_eq!(res.status(), 201);
        let page = res.text().await.unwrap_or_default();
        assert!(page.contains("ssk_"), "{page}");
        let listed = ok(
            send(app.as_("admin", Method::GET, "/api/v1/internal/api-keys")).await,
            200,
        )
        .await;
        let created = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|k| k["description"] == "from the console")
            .cloned()
            .unwrap_or_else(|| panic!("{listed}"));
        let id = created["id"].as_str().unwrap_or_default();
        let (status, confirm) = browser.get(&format!("/console/keys/{id}/revoke")).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("cannot be undone"), "{confirm}");
        let revoke = format!("/console/keys/{id}/revoke");
        assert_eq!(browser.post(&revoke, &[]).await.status(), 403);
        let res = browser.post(&revoke, &[("csrf", &csrf)]).await;
        assert_eq!(res.status(), 303);
        let listed = ok(
            send(app.as_("admin", Method::GET, "/api/v1/internal/api-keys")).await,
            200,
        )
        .await;
        let after = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|k| k["id"] == id)
            .cloned()
            .unwrap_or_default();
        assert_eq!(after["revoked"], true, "{after}");

        // A test mail goes out with the saved settings; the server's answer is on the page.
        let test_mail = [
            ("csrf", csrf.as_str()),
            ("recipient_email", "ops-console@example.com"),
        ];
        let res = browser.post("/console/project/test-mail", &test_mail).await;
        assert_eq!(res.status(), 200);
        let page = res.text().await.unwrap_or_default();
        assert!(
            page.contains("A test mail went to ops-console@example.com"),
            "{page}"
        );
        assert!(app
            .mail
            .wait_for("ops-console@example.com")
            .await
            .data
            .contains("Test mail"));
        assert_eq!(
            browser
                .post("/console/project/test-mail", &test_mail[1..])
                .await
                .status(),
            403
        );
        let bad = [("csrf", csrf.as_str()), ("recipient_email", "nobody")];
        let res = browser.post("/console/project/test-mail", &bad).await;
        assert_eq!(res.status(), 400);
        let page = res.text().await.unwrap_or_default();
        assert!(
            page.contains("id=\"test-mail-outcome\" role=\"alert\""),
            "{page}"
        );

        // Signing out ends the session.
        let res = browser.post("/console/sign-out", &[("csrf", &csrf)]).await;
        assert_eq!(res.status(), 303);
        let (status, _) = browser.get("/console/project").await;
        assert_eq!(status, 303);
    }
);

both_modes!(
    a_console_session_ends_with_its_key_and_reaches_no_other_project,
    |app: &TestApp| async move {
        // A second admin key for this project, to sign the console in with and then revoke.
        let created = ok(
            send(
                app.as_("admin", Method::POST, "/api/v1/internal/api-keys")
                    .json(&json!({
                        "description": "console key", "has_publishable_client_key": false,
                        "has_secret_server_key": false, "has_super_secret_admin_key": true,
                    })),
            )
            .await,
            201,
        )
        .await;
        let key = created["super_secret_admin_key"]
            .as_str()
            .unwrap_or_default();
        let b = app.other_project().await;
        let mut browser = Browser::new(app);
        assert_eq!(browser.sign_in(&app.project.id, key).await.status(), 303);
        let (status, page) = browser.get("/console/keys").await;
        assert_eq!(status, 200);
        let csrf = csrf_in(&page);

        // Project B: not reachable by switching, and nothing of it on A's pages.
        let res = browser
            .post("/console/switch", &[("csrf", &csrf), ("project_id", &b.id)])
            .await;
        assert_eq!(res.status(), 403);
        let b_keys = ok(
            send(
                app.request(Method::GET, "/api/v1/internal/api-keys")
                    .header("x-service-access-type", "admin")
                    .header("x-service-project-id", &b.id)
                    .header("x-service-super-secret-admin-key", &b.admin_key),
            )
            .await,
            200,
        )
        .await;
        let (_, page) = browser.get("/console/keys").await;
        for k in b_keys["items"].as_array().into_iter().flatten() {
            let id = k["id"].as_str().unwrap_or_default();
            assert!(!page.contains(id), "B's key set {id} on A's page");
        }
        // Signing in to B too needs B's key; then switching works, and each page shows its own.
        assert_eq!(browser.sign_in(&b.id, &b.admin_key).await.status(), 303);
        let (_, page) = browser.get("/console/project").await;
        assert!(
            page.contains(&format!("value=\"{}\" selected", b.id)),
            "{page}"
        );

        // Revoking the key the console signed in to A with ends that part of the session.
        let id = created["id"].as_str().unwrap_or_default();
        ok(
            send(
                app.as_(
                    "admin",
                    Method::PATCH,
                    &format!("/api/v1/internal/api-keys/{id}"),
                )
                .json(&json!({ "revoked": true })),
            )
            .await,
            200,
        )
        .await;
        let started = std::time::Instant::now();
        loop {
            let (_, page) = browser.get("/console/sign-in").await;
            if !page.contains(&format!("value=\"{}\"", app.project.id)) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "A is still in the console session 10 s after its key was revoked"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // Console requests count in the project's server_general bucket.
        let limited =
            json!({ "rate_limits": { "server_general": { "limit": 3, "window_seconds": 60 } } });
        ok(
            send(
                app.request(Method::PATCH, "/api/v1/internal/project")
                    .header("x-service-access-type", "admin")
                    .header("x-service-project-id", &b.id)
                    .header("x-service-super-secret-admin-key", &b.admin_key)
                    .json(&limited),
            )
            .await,
            200,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(2200)).await;
        in_one_minute(Duration::from_secs(10)).await;
        let mut statuses = Vec::new();
        for _ in 0..5 {
            statuses.push(browser.get("/console/keys").await.0);
        }
        assert!(statuses.contains(&429), "{statuses:?}");
    }
);

both_modes!(
    the_console_finds_a_user_and_ends_its_sessions_edits_its_metadata_and_deletes_it,
    |app: &TestApp| async move {
        let address = email("console-user");
        let user = app.sign_up(&address, "console user password").await;
        app.sign_up(&email("someone-else"), "console user password")
            .await;
        let mut browser = Browser::new(app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);

        // Search answers from the users list of the API: this user only.
        let (status, page) = browser
            .get(&format!("/console/users?query={}", &address[..20]))
            .await;
        assert_eq!(status, 200);
        assert!(page.contains(&user.user_id), "{page}");
        assert_eq!(page.matches("<tr>").count(), 2, "{page}");
        let (status, page) = browser
            .get(&format!("/console/users/{}", user.user_id))
            .await;
        assert_eq!(status, 200);
        assert!(page.contains(&address), "{page}");
        let csrf = csrf_in(&page);

        // The user's session is revoked: its refresh token stops working.
        let sessions = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/auth/sessions?user_id={}", user.user_id),
            ))
            .await,
            200,
        )
        .await;
        let sid = sessions["items"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(page.contains(&sid), "{page}");
        let revoke = format!("/console/users/{}/sessions/{sid}/revoke", user.user_id);
        assert_eq!(browser.post(&revoke, &[]).await.status(), 403);
        let res = browser.post(&revoke, &[("csrf", &csrf)]).await;
        assert_eq!(res.status(), 200);
        let refreshed = send(
            app.client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
                .header("x-service-refresh-token", &user.refresh),
        )
        .await;
        assert_eq!(refreshed.status(), 401);

        // Metadata: a document that is not JSON is refused next to it; a valid one is saved.
        let metadata = format!("/console/users/{}/metadata", user.user_id);
        let res = browser
            .post(
                &metadata,
                &[
                    ("csrf", &csrf),
                    ("client_metadata", "{not json"),
                    ("client_read_only_metadata", "{}"),
                    ("server_metadata", "{}"),
                ],
            )
            .await;
        assert_eq!(res.status(), 400);
        let page = res.text().await.unwrap_or_default();
        assert!(page.contains("id=\"e-client_metadata\""), "{page}");
        let res = browser
            .post(
                &metadata,
                &[
                    ("csrf", &csrf),
                    ("client_metadata", "{\"plan\": \"pro\"}"),
                    ("client_read_only_metadata", "{}"),
                    ("server_metadata", "{\"note\": 1}"),
                ],
            )
            .await;
        assert_eq!(res.status(), 200);
        let read = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/users/{}", user.user_id),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(read["client_metadata"], json!({ "plan": "pro" }));
        assert_eq!(read["server_metadata"], json!({ "note": 1 }));

        // Deletion is confirmed on a page of its own, and needs the token.
        let delete = format!("/console/users/{}/delete", user.user_id);
        let (status, confirm) = browser.get(&delete).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("cannot be undone"), "{confirm}");
        assert_eq!(browser.post(&delete, &[]).await.status(), 403);
        let res = browser.post(&delete, &[("csrf", &csrf)]).await;
        assert_eq!(res.status(), 303);
        let gone = send(app.as_(
            "server",
            Method::GET,
            &format!("/api/v1/users/{}", user.user_id),
        ))
        .await;
        assert_eq!(gone.status(), 404);
    }
);

both_modes!(
    the_console_shows_a_team_and_adds_and_removes_members,
    |app: &TestApp| async move {
        let owner = app
            .sign_up(&email("team-owner"), "console team password")
            .await;
        let joiner_address = email("team-joiner");
        let joiner = app.sign_up(&joiner_address, "console team password").await;
        let team = ok(
            send(
                app.as_("server", Method::POST, "/api/v1/teams")
                    .json(&json!({
                        "display_name": "Console team", "creator_user_id": owner.user_id,
                    })),
            )
            .await,
            201,
        )
        .await;
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        let mut browser = Browser::new(app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);
        let (status, page) = browser.get("/console/teams").await;
        assert_eq!(status, 200);
        assert!(page.contains("Console team"), "{page}");
        let (status, page) = browser.get(&format!("/console/teams/{team_id}")).await;
        assert_eq!(status, 200);
        // The creator is a member with the creator's default permission.
        assert!(page.contains(&owner.user_id), "{page}");
        assert!(page.contains("team_admin"), "{page}");
        let csrf = csrf_in(&page);

        let add = format!("/console/teams/{team_id}/members");
        assert_eq!(
            browser
                .post(&add, &[("user_id", &joiner.user_id)])
                .await
                .status(),
            403
        );
        let res = browser
            .post(&add, &[("csrf", &csrf), ("user_id", "not-an-id")])
            .await;
        assert_eq!(res.status(), 400);
        assert!(res
            .text()
            .await
            .unwrap_or_default()
            .contains("id=\"add-error\""));
        let res = browser
            .post(&add, &[("csrf", &csrf), ("user_id", &joiner.user_id)])
            .await;
        assert_eq!(res.status(), 200);
        assert!(res
            .text()
            .await
            .unwrap_or_default()
            .contains(&joiner_address));
        // Adding twice: the API's refusal, next to the form.
        let res = browser
            .post(&add, &[("csrf", &csrf), ("user_id", &joiner.user_id)])
            .await;
        assert_eq!(res.status(), 400);
        let members = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/team-member-profiles?team_id={team_id}"),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(members["items"].as_array().map(Vec::len), Some(2));

        let remove = format!("/console/teams/{team_id}/members/{}/remove", joiner.user_id);
        let (status, confirm) = browser.get(&remove).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("Remove this member?"), "{confirm}");
        assert_eq!(browser.post(&remove, &[]).await.status(), 403);
        assert_eq!(
            browser.post(&remove, &[("csrf", &csrf)]).await.status(),
            200
        );
        let members = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/team-member-profiles?team_id={team_id}"),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(members["items"].as_array().map(Vec::len), Some(1));
    }
);

both_modes!(
    the_console_shows_webhook_deliveries_replays_and_rotates_and_lists_mail,
    |app: &TestApp| async move {
        let mut browser = Browser::new(app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);
        let (_, page) = browser.get("/console/webhooks").await;
        let csrf = csrf_in(&page);
        let add = [
            ("csrf", csrf.as_str()),
            ("url", "http://127.0.0.1:9/console-hook"),
            ("description", "from the console"),
        ];
        let res = browser.post("/console/webhooks", &add).await;
        assert_eq!(res.status(), 201);
        assert!(res.text().await.unwrap_or_default().contains("whsec_"));
        let listed = ok(
            send(app.as_("admin", Method::GET, "/api/v1/webhook-endpoints")).await,
            200,
        )
        .await;
        let id = listed["items"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let base = format!("/console/webhooks/{id}");

        assert_eq!(
            browser.post(&format!("{base}/test"), &[]).await.status(),
            403
        );
        let res = browser
            .post(&format!("{base}/test"), &[("csrf", &csrf)])
            .await;
        assert_eq!(res.status(), 200);
        // The delivery log shows the message with its first (failed: nothing listens) attempt.
        let started = std::time::Instant::now();
        let message_id = loop {
            let (_, page) = browser.get(&base).await;
            if page.contains("service.test") && page.contains("<li>") {
                let marker = "/deliveries/";
                let at = page.find(marker).map(|i| i + marker.len()).unwrap_or(0);
                break page[at..]
                    .chars()
                    .take_while(|c| *c != '/')
                    .collect::<String>();
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no attempt shown: {page}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let replay = format!("{base}/deliveries/{message_id}/replay");
        assert_eq!(browser.post(&replay, &[]).await.status(), 403);
        let res = browser.post(&replay, &[("csrf", &csrf)]).await;
        assert_eq!(res.status(), 200);
        assert!(res
            .text()
            .await
            .unwrap_or_default()
            .contains("delivered again"));

        let (status, confirm) = browser.get(&format!("{base}/rotate")).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("24 hours"), "{confirm}");
        let res = browser
            .post(&format!("{base}/rotate"), &[("csrf", &csrf)])
            .await;
        assert_eq!(res.status(), 200);
        assert!(res.text().await.unwrap_or_default().contains("whsec_"));

        // Mail the project sent is listed.
        app.settings(json!({ "allow_localhost": true })).await;
        let address = email("console-mail");
        app.sign_up(&address, "console mail password").await;
        ok(
            send(
                app.client(Method::POST, "/api/v1/auth/password/send-reset-code", None)
                    .json(&json!({ "email": address, "callback_url": "http://localhost/reset" })),
            )
            .await,
            200,
        )
        .await;
        let started = std::time::Instant::now();
        loop {
            let (status, page) = browser.get("/console/mail").await;
            assert_eq!(status, 200);
            if page.contains(&address) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no mail listed: {page}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
);

both_modes!(
    the_console_defines_and_deletes_permissions,
    |app: &TestApp| async move {
        let mut browser = Browser::new(app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);
        let (status, page) = browser.get("/console/permissions").await;
        assert_eq!(status, 200);
        // The system's own team permissions are listed, with what team_admin contains.
        assert!(page.contains("$read_members"), "{page}");
        assert!(page.contains("team_admin"), "{page}");
        let csrf = csrf_in(&page);
        let define = [
            ("csrf", csrf.as_str()),
            ("id", "console_edit"),
            ("description", "edits from the console"),
            ("contains", "$read_members, $update_team"),
        ];
        assert_eq!(
            browser
                .post("/console/permissions/team", &define[1..])
                .await
                .status(),
            403
        );
        assert_eq!(
            browser
                .post("/console/permissions/team", &define)
                .await
                .status(),
            201
        );
        let listed = ok(
            send(app.as_("admin", Method::GET, "/api/v1/team-permission-definitions")).await,
            200,
        )
        .await;
        let made = listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["id"] == "console_edit")
            .cloned()
            .unwrap_or_else(|| panic!("{listed}"));
        assert_eq!(
            made["contained_permission_ids"],
            json!(["$read_members", "$update_team"])
        );
        // The API's refusal is shown beside the form of its scope.
        let bad = [
            ("csrf", csrf.as_str()),
            ("id", "Not Valid"),
            ("contains", ""),
        ];
        let res = browser.post("/console/permissions/project", &bad).await;
        assert_eq!(res.status(), 400);
        assert!(res
            .text()
            .await
            .unwrap_or_default()
            .contains("id=\"e-project\""));

        let delete = "/console/permissions/team/console_edit/delete";
        let (status, confirm) = browser.get(delete).await;
        assert_eq!(status, 200);
        assert!(confirm.contains("cannot be undone"), "{confirm}");
        assert_eq!(browser.post(delete, &[("csrf", &csrf)]).await.status(), 200);
        let listed = ok(
            send(app.as_("admin", Method::GET, "/api/v1/team-permission-definitions")).await,
            200,
        )
        .await;
        assert!(!listed.to_string().contains("console_edit"), "{listed}");
    }
);

both_modes!(
    the_console_edits_oauth_providers_with_write_only_secrets,
    |app: &TestApp| async move {
        let mut browser = Browser::new(app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);
        let (status, page) = browser.get("/console/project/oauth").await;
        assert_eq!(status, 200);
        let csrf = csrf_in(&page);
        let providers = || async {
            let settings = ok(
                send(app.as_("admin", Method::GET, "/api/v1/internal/project")).await,
                200,
            )
            .await;
            settings["oauth_providers"].clone()
        };
        let add = [
            ("csrf", csrf.as_str()),
            ("id", "corp"),
            ("type", "oidc"),
            ("client_id", "cid"),
            ("client_secret", "first-secret-value"),
            ("issuer", "https://id.example.com"),
            ("allow_sign_in", "true"),
        ];
        assert_eq!(
            browser
                .post("/console/project/oauth", &add[1..])
                .await
                .status(),
            403
        );
        let res = browser.post("/console/project/oauth", &add).await;
        assert_eq!(res.status(), 303);
        let listed = providers().await;
        assert_eq!(listed[0]["client_id"], "cid", "{listed}");
        assert_eq!(listed[0]["client_secret_set"], true);
        assert_eq!(listed[0]["allow_connected_accounts"], false);
        // Listed on the project page; the secret is on no page.
        let (_, page) = browser.get("/console/project").await;
        assert!(page.contains("/console/project/oauth/corp"), "{page}");
        assert!(!page.contains("first-secret-value"));
        let (status, form) = browser.get("/console/project/oauth/corp").await;
        assert_eq!(status, 200);
        assert!(form.contains("one is stored"), "{form}");
        assert!(!form.contains("first-secret-value"));
        // Saved without typing a secret: the stored one stays.
        let edit = [
            ("csrf", csrf.as_str()),
            ("type", "oidc"),
            ("client_id", "cid2"),
            ("issuer", "https://id.example.com"),
            ("allow_sign_in", "true"),
            ("allow_connected_accounts", "true"),
        ];
        let res = browser.post("/console/project/oauth/corp", &edit).await;
        assert_eq!(res.status(), 303);
        let listed = providers().await;
        assert_eq!(listed[0]["client_id"], "cid2", "{listed}");
        assert_eq!(listed[0]["client_secret_set"], true);
        assert_eq!(listed[0]["allow_connected_accounts"], true);
        // The API's refusal is shown beside the form, and nothing changes.
        let bad = [
            ("csrf", csrf.as_str()),
            ("type", "oauth2"),
            ("client_id", "cid3"),
        ];
        let res = browser.post("/console/project/oauth/corp", &bad).await;
        assert_eq!(res.status(), 400);
        let page = res.text().await.unwrap_or_default();
        assert!(page.contains("id=\"provider-error\""), "{page}");
        assert_eq!(providers().await[0]["client_id"], "cid2");
        let res = browser.post("/console/project/oauth", &add).await;
        assert_eq!(res.status(), 400);
        assert!(res
            .text()
            .await
            .unwrap_or_default()
            .contains("exists already"));
        assert_eq!(browser.get("/console/project/oauth/nope").await.0, 404);
        // Removing asks first.
        let (status, confirm) = browser.get("/console/project/oauth/corp/remove").await;
        assert_eq!(status, 200);
        assert!(
            confirm.contains("Remove the OAuth provider corp"),
            "{confirm}"
        );
        let remove = "/console/project/oauth/corp/remove";
        assert_eq!(browser.post(remove, &[]).await.status(), 403);
        assert_eq!(browser.post(remove, &[("csrf", &csrf)]).await.status(), 303);
        assert_eq!(providers().await, json!([]));
    }
);

/// A console session's idle clock is stored again at most once a minute, not on every request
/// (in production that is one Redis write per request saved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_console_session_is_not_stored_again_on_every_request() {
    let app = TestApp::spawn(Mode::Distributed).await;
    {
        let mut browser = Browser::new(&app);
        let p = app.project.clone();
        assert_eq!(browser.sign_in(&p.id, &p.admin_key).await.status(), 303);
        let prefix = app
            .redis_prefix()
            .unwrap_or_else(|| panic!("no Redis prefix"));
        let client = redis::Client::open(redis_url()).unwrap_or_else(|e| panic!("{e}"));
        let mut redis = client
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}console:*"))
            .query_async(&mut redis)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(keys.len(), 1, "{keys:?}");
        let ttl = || {
            let (key, mut redis) = (keys[0].clone(), redis.clone());
            async move {
                let ms: i64 = redis::cmd("PTTL")
                    .arg(key)
                    .query_async(&mut redis)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                ms
            }
        };
        let first = ttl().await;
        assert!(first > 1_790_000, "{first}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for _ in 0..3 {
            assert_eq!(browser.get("/console/project").await.0, 200);
        }
        let later = ttl().await;
        assert!(
            later <= first - 1000,
            "a request stored the session again: {first} ms → {later} ms"
        );
    }
    app.finish().await;
}
