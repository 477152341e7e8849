//! OAuth sign-in through the gateway against the loopback provider (10 §4–6): the whole
//! browser flow with redirects followed by the test, PKCE, linking, merging, records and
//! connected accounts.

use std::collections::HashMap;

use base64::Engine;
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::*;
use crate::oauth_mock::{Identity, MockProvider, CLIENT_ID, CLIENT_SECRET};

const APP_REDIRECT: &str = "http://localhost:3000/oauth/done";

/// A browser that does not follow redirects by itself, so each hop is checked.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn location(res: &Response) -> String {
    res.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no location: {}", res.status()))
        .to_owned()
}

fn query_of(url: &str) -> HashMap<String, String> {
    reqwest::Url::parse(url)
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

struct Flow<'a> {
    app: &'a TestApp,
    verifier: String,
    extra: Vec<(&'static str, String)>,
    json_mode: bool,
    send_cookie: bool,
}

impl<'a> Flow<'a> {
    fn new(app: &'a TestApp) -> Self {
        Self {
            app,
            verifier: latchkey_shared::crypto::random_base32(50),
            extra: Vec::new(),
            json_mode: false,
            send_cookie: true,
        }
    }

    fn with(mut self, key: &'static str, value: &str) -> Self {
        self.extra.push((key, value.to_owned()));
        self
    }

    fn authorize_url(&self, provider: &str) -> String {
        let mut params = vec![
            ("client_id", self.app.project.id.clone()),
            ("client_secret", self.app.project.client_key.clone()),
            ("redirect_uri", APP_REDIRECT.to_owned()),
            ("scope", "legacy".to_owned()),
            ("state", "app-state-1".to_owned()),
            ("grant_type", "authorization_code".to_owned()),
            ("code_challenge", s256(&self.verifier)),
            ("code_challenge_method", "S256".to_owned()),
            ("response_type", "code".to_owned()),
            ("unknown_extra", "tolerated".to_owned()),
        ];
        if self.json_mode {
            params.push(("stack_response_mode", "json".to_owned()));
        }
        for (k, v) in &self.extra {
            params.retain(|(pk, _)| pk != k);
            params.push((k, v.clone()));
        }
        let base = format!("{}/api/v1/auth/oauth/authorize/{provider}", self.app.base);
        reqwest::Url::parse_with_params(&base, &params)
            .map(String::from)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Authorize, the provider, the callback: the URL the app finally receives.
    async fn run(&self, provider: &str) -> String {
        let b = browser();
        let res = b
            .get(self.authorize_url(provider))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let cookie = res
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .map(|c| c.split(';').next().unwrap_or_default().to_owned());
        let to_provider = if self.json_mode {
            let body = ok(res, 200).await;
            assert!(body.get("location").is_some(), "{body}");
            body["location"].as_str().unwrap_or_default().to_owned()
        } else {
            assert_eq!(res.status(), 307, "authorize");
            assert!(cookie
                .as_deref()
                .is_some_and(|c| c.starts_with("service-oauth-inner-")));
            location(&res)
        };
        let res = b
            .get(&to_provider)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(res.status().is_redirection(), "provider: {}", res.status());
        let callback = location(&res);
        let mut req = b.get(&callback);
        if let (Some(c), true) = (&cookie, self.send_cookie) {
            req = req.header("cookie", c);
        }
        let res = req.send().await.unwrap_or_else(|e| panic!("{e}"));
        if res.status() != 303 {
            let (status, body, _) = parts(res).await;
            return format!("error:{status}:{body}");
        }
        location(&res)
    }

    async fn token(&self, code: &str, verifier: &str) -> Response {
        let form = [
            ("grant_type", "authorization_code"),
            ("client_id", self.app.project.id.as_str()),
            ("client_secret", self.app.project.client_key.as_str()),
            ("code", code),
            ("redirect_uri", APP_REDIRECT),
            ("code_verifier", verifier),
        ];
        browser()
            .post(format!("{}/api/v1/auth/oauth/token", self.app.base))
            .form(&form)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The whole flow and the token exchange.
    async fn sign_in(&self, provider: &str) -> Value {
        let landed = self.run(provider).await;
        let q = query_of(&landed);
        assert_eq!(
            q.get("state").map(String::as_str),
            Some("app-state-1"),
            "{landed}"
        );
        let code = q
            .get("code")
            .unwrap_or_else(|| panic!("no code in {landed}"));
        let res = self.token(code, &self.verifier).await;
        let (status, body, _) = parts(res).await;
        json!({ "status": status, "body": body })
    }
}

fn provider_settings(mock: &MockProvider) -> Value {
    json!({
        "allow_localhost": true,
        "oauth_providers": [{
            "id": "mock", "type": "oidc", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "issuer": mock.issuer, "allow_connected_accounts": true,
        }, {
            // A named type whose endpoints the deployment points elsewhere (80 §9).
            "id": "gh", "type": "github", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "authorization_endpoint": format!("{}/authorize", mock.issuer),
            "token_endpoint": format!("{}/token", mock.issuer),
            "userinfo_endpoint": format!("{}/userinfo", mock.issuer),
            "account_id_field": "sub",
        }],
    })
}

fn error_code_in(landed: &str) -> String {
    query_of(landed)
        .get("errorCode")
        .cloned()
        .unwrap_or_else(|| panic!("no errorCode in {landed}"))
}

async fn me(app: &TestApp, token: &Value) -> Value {
    let token = token.as_str().unwrap_or_default();
    let res = app
        .client(Method::GET, "/api/v1/users/me", Some(token))
        .send()
        .await;
    ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await
}

both_modes!(
    oauth_sign_up_then_sign_in_again,
    |app: &TestApp| async move {
        let mock = MockProvider::start().await;
        app.settings(provider_settings(&mock)).await;
        let address = email("oauth");
        mock.sign_in_as(Identity::new("sub-1", &address, true));

        let flow = Flow::new(app);
        let first = flow.sign_in("mock").await;
        assert_eq!(first["status"], 200, "{first}");
        let body = &first["body"];
        assert_eq!(body["is_new_user"], true);
        assert_eq!(body["newUser"], true);
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(body["expires_in"], 600);
        assert_eq!(body["scope"], "legacy");
        let user = me(app, &body["access_token"]).await;
        assert_eq!(user["primary_email"], address.as_str());
        assert_eq!(user["primary_email_verified"], true);
        assert_eq!(user["display_name"], "Person sub-1");
        assert_eq!(
            user["oauth_providers"],
            json!([{ "id": "mock", "account_id": "sub-1", "email": address }])
        );

        // A named provider type with overridden endpoints: another record on another user.
        mock.sign_in_as(Identity::new("gh-1", &email("gh"), true));
        let named = Flow::new(app).sign_in("gh").await;
        assert_eq!(named["body"]["is_new_user"], true, "{named}");
        let gh_user = me(app, &named["body"]["access_token"]).await;
        assert_eq!(gh_user["oauth_providers"][0]["id"], "gh");
        mock.sign_in_as(Identity::new("sub-1", &address, true));

        // The same provider account signs in to the same user.
        let again = Flow::new(app).sign_in("mock").await;
        assert_eq!(again["status"], 200, "{again}");
        assert_eq!(again["body"]["is_new_user"], false);
        assert_eq!(
            me(app, &again["body"]["access_token"]).await["id"],
            user["id"]
        );

        // PKCE: a wrong verifier is refused, the right one then works once.
        let flow = Flow::new(app);
        let landed = flow.run("mock").await;
        let code = query_of(&landed).get("code").cloned().unwrap_or_default();
        assert_error(
            flow.token(&code, "wrong-verifier-wrong-verifier-wrong-verifier")
                .await,
            400,
            "OAUTH_INVALID_REQUEST",
        )
        .await;
        let res = flow.token(&code, &flow.verifier).await;
        let cache = res
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_eq!(cache, "no-store");
        let tokens = ok(res, 200).await;
        assert_error(
            flow.token(&code, &flow.verifier).await,
            400,
            "INVALID_AUTHORIZATION_CODE",
        )
        .await;

        // The refresh-token grant: a new access token, the same refresh token.
        let form = [
            ("grant_type", "refresh_token"),
            (
                "refresh_token",
                tokens["refresh_token"].as_str().unwrap_or_default(),
            ),
        ];
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", app.project.id, app.project.client_key));
        let res = browser()
            .post(format!("{}/api/v1/auth/oauth/token", app.base))
            .header("authorization", format!("Basic {basic}"))
            .form(&form)
            .send()
            .await;
        let refreshed = ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await;
        assert_eq!(refreshed["refresh_token"], tokens["refresh_token"]);
        assert!(refreshed.get("is_new_user").is_none());
        let wrong = [
            ("grant_type", "refresh_token"),
            ("client_id", app.project.id.as_str()),
            ("client_secret", "pck_wrong"),
            ("refresh_token", "x"),
        ];
        let res = browser()
            .post(format!("{}/api/v1/auth/oauth/token", app.base))
            .form(&wrong)
            .send()
            .await;
        assert_error(
            res.unwrap_or_else(|e| panic!("{e}")),
            400,
            "INVALID_OAUTH_CLIENT_ID_OR_SECRET",
        )
        .await;

        // A different redirect_uri at the token endpoint is refused.
        let flow = Flow::new(app);
        let code = query_of(&flow.run("mock").await)
            .get("code")
            .cloned()
            .unwrap_or_default();
        let json_body = json!({ "grant_type": "authorization_code", "client_id": app.project.id, "client_secret": app.project.client_key, "code": code, "redirect_uri": "http://localhost:3000/other", "code_verifier": flow.verifier });
        let res = browser()
            .post(format!("{}/api/v1/auth/oauth/token", app.base))
            .json(&json_body)
            .send()
            .await;
        assert_error(
            res.unwrap_or_else(|e| panic!("{e}")),
            400,
            "REDIRECT_URI_MISMATCH",
        )
        .await;

        // JSON mode needs no cookie; redirect mode refuses a callback without it.
        let mut flow = Flow::new(app);
        flow.json_mode = true;
        assert_eq!(flow.sign_in("mock").await["status"], 200);
        let mut flow = Flow::new(app);
        flow.send_cookie = false;
        let landed = flow.run("mock").await;
        assert!(
            landed.starts_with("error:400:") && landed.contains("INVALID_OAUTH_STATE"),
            "{landed}"
        );

        // The provider refusing comes back to the app as an error.
        mock.deny_next();
        let landed = Flow::new(app).run("mock").await;
        assert_eq!(error_code_in(&landed), "OAUTH_PROVIDER_ACCESS_DENIED");
        assert_eq!(
            query_of(&landed).get("error").map(String::as_str),
            Some("server_error")
        );

        // Authorize errors.
        let b = browser();
        let get = |url: String| {
            let b = b.clone();
            async move { b.get(url).send().await.unwrap_or_else(|e| panic!("{e}")) }
        };
        assert_error(
            get(Flow::new(app).authorize_url("nope")).await,
            400,
            "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED",
        )
        .await;
        assert_error(
            get(Flow::new(app)
                .with("client_secret", "pck_wrong")
                .authorize_url("mock"))
            .await,
            401,
            "INVALID_PUBLISHABLE_CLIENT_KEY",
        )
        .await;
        assert_error(
            get(Flow::new(app)
                .with("client_id", &uuid::Uuid::new_v4().to_string())
                .authorize_url("mock"))
            .await,
            400,
            "INVALID_OAUTH_CLIENT_ID_OR_SECRET",
        )
        .await;
        assert_error(
            get(Flow::new(app)
                .with("client_secret", "__stack_public_client__")
                .authorize_url("mock"))
            .await,
            401,
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        )
        .await;
        assert_error(
            get(Flow::new(app).with("scope", "openid").authorize_url("mock")).await,
            400,
            "INVALID_SCOPE",
        )
        .await;
        assert_error(
            get(Flow::new(app).with("type", "link").authorize_url("mock")).await,
            400,
            "BAD_REQUEST",
        )
        .await;
        assert_error(
            get(Flow::new(app)
                .with("after_callback_redirect_url", "https://evil.example/x")
                .authorize_url("mock"))
            .await,
            400,
            "REDIRECT_URL_NOT_WHITELISTED",
        )
        .await;
        assert_error(
            get(Flow::new(app)
                .with("token", "not-a-jwt")
                .authorize_url("mock"))
            .await,
            401,
            "UNPARSABLE_ACCESS_TOKEN",
        )
        .await;

        // A callback with a state nobody issued.
        let res = get(format!(
            "{}/api/v1/auth/oauth/callback/mock?state=forged&code=x",
            app.base
        ))
        .await;
        assert_error(res, 400, "INVALID_OAUTH_STATE").await;

        // The client secret stays write-only.
        let res = app
            .as_("admin", Method::GET, "/api/v1/internal/project")
            .send()
            .await;
        let settings = ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await;
        assert!(!settings.to_string().contains(CLIENT_SECRET));
        assert_eq!(settings["oauth_providers"][0]["client_secret_set"], true);
    }
);

both_modes!(
    oauth_merge_link_and_second_factor,
    |app: &TestApp| async move {
        let mock = MockProvider::start().await;
        app.settings(provider_settings(&mock)).await;
        let server_user = |address: &str, verified: bool| json!({ "primary_email": address, "primary_email_verified": verified, "primary_email_auth_enabled": true, "password": "a fine password 1" });
        let create = |body: Value| async move {
            let res = app
                .as_("server", Method::POST, "/api/v1/users")
                .json(&body)
                .send()
                .await;
            ok(res.unwrap_or_else(|e| panic!("{e}")), 201).await
        };

        // Both addresses verified: the provider account joins the existing user (link_method).
        let verified = email("verified");
        let existing = create(server_user(&verified, true)).await;
        mock.sign_in_as(Identity::new("merge-1", &verified, true));
        let merged = Flow::new(app).sign_in("mock").await;
        assert_eq!(merged["body"]["is_new_user"], false, "{merged}");
        assert_eq!(
            me(app, &merged["body"]["access_token"]).await["id"],
            existing["id"]
        );

        // The existing address unverified: refused, and it would work once verified.
        let unverified = email("unverified");
        create(server_user(&unverified, false)).await;
        mock.sign_in_as(Identity::new("merge-2", &unverified, true));
        let landed = Flow::new(app).run("mock").await;
        assert_eq!(
            error_code_in(&landed),
            "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"
        );
        let details: Value = serde_json::from_str(
            query_of(&landed)
                .get("details")
                .map_or("{}", String::as_str),
        )
        .unwrap_or_default();
        assert_eq!(details["would_work_if_email_was_verified"], true);

        // raise_error refuses even verified matches; allow_duplicates makes a second user.
        let other = email("other");
        create(server_user(&other, true)).await;
        mock.sign_in_as(Identity::new("merge-3", &other, true));
        app.settings(json!({ "oauth_account_merge_strategy": "raise_error" }))
            .await;
        assert_eq!(
            error_code_in(&Flow::new(app).run("mock").await),
            "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"
        );
        app.settings(json!({ "oauth_account_merge_strategy": "allow_duplicates" }))
            .await;
        let duplicate = Flow::new(app).sign_in("mock").await;
        assert_eq!(duplicate["body"]["is_new_user"], true, "{duplicate}");
        let dup_id = me(app, &duplicate["body"]["access_token"]).await["id"].clone();
        let path = format!("/api/v1/users/{}", dup_id.as_str().unwrap_or_default());
        let res = app.as_("server", Method::GET, &path).send().await;
        let dup_user = ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await;
        assert_eq!(dup_user["primary_email"], other.as_str());
        assert_eq!(dup_user["primary_email_auth_enabled"], false);

        // Linking: the signed-in user attaches a provider account; nobody else can take it.
        let linker = app.sign_up(&email("linker"), "a fine password 1").await;
        mock.sign_in_as(Identity::new("link-1", &email("elsewhere"), true));
        let landed = Flow::new(app)
            .with("type", "link")
            .with("token", &linker.access)
            .run("mock")
            .await;
        assert!(query_of(&landed).contains_key("code"), "{landed}");
        let res = app
            .client(Method::GET, "/api/v1/users/me", Some(&linker.access))
            .send()
            .await;
        let linked = ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await;
        assert_eq!(linked["oauth_providers"][0]["account_id"], "link-1");
        // A link started by someone else cannot be finished in another browser, in either mode.
        let forged = |json_mode: bool| {
            let mut flow = Flow::new(app)
                .with("type", "link")
                .with("token", &linker.access);
            flow.json_mode = json_mode;
            flow.send_cookie = false;
            flow
        };
        for json_mode in [false, true] {
            let landed = forged(json_mode).run("mock").await;
            assert!(landed.contains("INVALID_OAUTH_STATE"), "{landed}");
        }
        let mut json_link = Flow::new(app)
            .with("type", "link")
            .with("token", &linker.access);
        json_link.json_mode = true;
        assert!(query_of(&json_link.run("mock").await).contains_key("code"));
        let other_user = app.sign_up(&email("thief"), "a fine password 1").await;
        let landed = Flow::new(app)
            .with("type", "link")
            .with("token", &other_user.access)
            .run("mock")
            .await;
        assert_eq!(
            error_code_in(&landed),
            "OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER"
        );

        // A TOTP user gets an attempt code at the token endpoint, not tokens.
        let path = format!(
            "/api/v1/users/{}",
            existing["id"].as_str().unwrap_or_default()
        );
        let secret = base64::engine::general_purpose::STANDARD.encode([7u8; 20]);
        let res = app
            .as_("server", Method::PATCH, &path)
            .json(&json!({ "totp_secret_base64": secret }))
            .send()
            .await;
        ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await;
        mock.sign_in_as(Identity::new("merge-1", &verified, true));
        let mfa = Flow::new(app).sign_in("mock").await;
        assert_eq!(mfa["status"], 400, "{mfa}");
        assert_eq!(mfa["body"]["code"], "MULTI_FACTOR_AUTHENTICATION_REQUIRED");
        assert_eq!(
            mfa["body"]["details"]["attempt_code"]
                .as_str()
                .map(str::len),
            Some(45)
        );

        // No sign-up: a new provider account is refused.
        app.settings(json!({ "sign_up_enabled": false })).await;
        mock.sign_in_as(Identity::new("newcomer", &email("newcomer"), true));
        assert_eq!(
            error_code_in(&Flow::new(app).run("mock").await),
            "SIGN_UP_NOT_ENABLED"
        );
    }
);

both_modes!(
    oauth_records_and_connected_accounts,
    |app: &TestApp| async move {
        let mock = MockProvider::start().await;
        app.settings(provider_settings(&mock)).await;
        mock.sign_in_as(Identity::new("acct-1", &email("records"), true));
        mock.set_expires_in(3600);
        let signed = Flow::new(app).sign_in("mock").await;
        let token = signed["body"]["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let user_id = me(app, &signed["body"]["access_token"]).await["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let client = |method: Method, path: &str| app.client(method, path, Some(&token));
        let send = |req: reqwest::RequestBuilder| async move {
            req.send().await.unwrap_or_else(|e| panic!("{e}"))
        };

        // Clients see their records without the provider account id; servers see it.
        let mine = ok(
            send(client(Method::GET, "/api/v1/oauth-providers?user_id=me")).await,
            200,
        )
        .await;
        let record = mine["items"][0].clone();
        assert_eq!(record["provider_config_id"], "mock");
        assert_eq!(record["type"], "oidc");
        assert!(record.get("account_id").is_none(), "{record}");
        let record_id = record["id"].as_str().unwrap_or_default().to_owned();
        let path = format!("/api/v1/oauth-providers/{user_id}/{record_id}");
        let as_server = ok(send(app.as_("server", Method::GET, &path)).await, 200).await;
        assert_eq!(as_server["account_id"], "acct-1");
        for secret_field in ["access_token", "refresh_token"] {
            assert!(as_server.get(secret_field).is_none(), "{as_server}");
        }

        // Connected accounts hand out the stored provider token, refreshed when it runs out.
        let connected = ok(
            send(client(Method::GET, "/api/v1/connected-accounts/me")).await,
            200,
        )
        .await;
        assert_eq!(
            connected["items"],
            json!([{ "user_id": user_id, "provider": "mock", "provider_account_id": "acct-1" }])
        );
        let token_path = "/api/v1/connected-accounts/me/mock/access-token";
        let first = ok(
            send(client(Method::POST, token_path).json(&json!({}))).await,
            201,
        )
        .await;
        assert!(first["access_token"]
            .as_str()
            .is_some_and(|t| !t.is_empty()));
        let res = send(client(Method::POST, token_path).json(&json!({ "scope": "repo" }))).await;
        assert_error(res, 400, "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE").await;
        mock.set_expires_in(30);
        mock.sign_in_as(Identity::new("acct-1", &email("records"), true));
        Flow::new(app).sign_in("mock").await;
        let refreshes = mock.refreshes();
        let fresh = ok(
            send(client(Method::POST, token_path).json(&json!({}))).await,
            201,
        )
        .await;
        assert_eq!(mock.refreshes(), refreshes + 1);
        assert_ne!(fresh["access_token"], first["access_token"]);
        let res = send(
            client(
                Method::POST,
                "/api/v1/connected-accounts/me/nope/access-token",
            )
            .json(&json!({})),
        )
        .await;
        assert_error(res, 400, "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED").await;

        // Server-made records follow the sign-in rules.
        let other = app.sign_up(&email("other"), "a fine password 1").await;
        let record_for = |user: &str, account: &str, sign_in: bool| json!({ "user_id": user, "provider_config_id": "mock", "account_id": account, "allow_sign_in": sign_in, "allow_connected_accounts": false });
        let res = send(
            app.as_("server", Method::POST, "/api/v1/oauth-providers")
                .json(&record_for(&other.user_id, "acct-1", true)),
        )
        .await;
        assert_error(
            res,
            400,
            "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN",
        )
        .await;
        ok(
            send(
                app.as_("server", Method::POST, "/api/v1/oauth-providers")
                    .json(&record_for(&other.user_id, "acct-1", false)),
            )
            .await,
            201,
        )
        .await;
        let res = send(
            app.as_("server", Method::POST, "/api/v1/oauth-providers")
                .json(&record_for(&user_id, "acct-2", true)),
        )
        .await;
        assert_error(res, 400, "BAD_REQUEST").await;
        let res = send(
            app.client(Method::POST, "/api/v1/oauth-providers", Some(&token))
                .json(&record_for(&user_id, "acct-3", false)),
        )
        .await;
        assert!(
            res.status() == 401 || res.status() == 403,
            "clients cannot create records: {}",
            res.status()
        );

        // Clients change only the two flags of their own records.
        let res = send(client(Method::PATCH, &path).json(&json!({ "account_id": "x" }))).await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let patched = ok(
            send(client(Method::PATCH, &path).json(&json!({ "allow_connected_accounts": false })))
                .await,
            200,
        )
        .await;
        assert_eq!(patched["allow_connected_accounts"], false);
        let res = send(client(Method::POST, token_path).json(&json!({}))).await;
        assert_error(res, 400, "OAUTH_CONNECTION_NOT_CONNECTED_TO_USER").await;
        let others = format!("/api/v1/oauth-providers/{}/{record_id}", other.user_id);
        assert_error(
            send(client(Method::GET, &others)).await,
            403,
            "CLIENT_ACCESS_OWN_USER_ONLY",
        )
        .await;
        let res = send(app.as_("server", Method::GET, &others)).await;
        assert_error(res, 404, "OAUTH_PROVIDER_RECORD_NOT_FOUND").await;
        assert_eq!(
            ok(send(client(Method::DELETE, &path)).await, 200).await,
            json!({ "success": true })
        );
        assert_error(
            send(client(Method::GET, &path)).await,
            404,
            "OAUTH_PROVIDER_RECORD_NOT_FOUND",
        )
        .await;

        // Users created by servers may bring provider accounts.
        let body = json!({ "oauth_providers": [{ "id": "mock", "account_id": "manual-1", "email": null }] });
        let created = ok(
            send(app.as_("server", Method::POST, "/api/v1/users").json(&body)).await,
            201,
        )
        .await;
        assert_eq!(
            created["oauth_providers"],
            json!([{ "id": "mock", "account_id": "manual-1", "email": null }])
        );
        let body = json!({ "oauth_providers": [{ "id": "unknown", "account_id": "m" }] });
        assert_error(
            send(app.as_("server", Method::POST, "/api/v1/users").json(&body)).await,
            400,
            "BAD_REQUEST",
        )
        .await;
    }
);

both_modes!(
    an_anonymous_user_signing_up_by_oauth_keeps_its_id,
    |app: &TestApp| async move {
        let mock = MockProvider::start().await;
        app.settings(provider_settings(&mock)).await;
        let anon = ok(
            send(app.client(Method::POST, "/api/v1/auth/anonymous/sign-up", None)).await,
            200,
        )
        .await;
        let anon_id = anon["user_id"].as_str().unwrap_or_default().to_owned();
        let address = email("anon-oauth");
        mock.sign_in_as(Identity::new("anon-sub", &address, true));
        let token = anon["access_token"].as_str().unwrap_or_default();
        // An upgrade attaches the provider account at the callback, so, like a link, it needs
        // the browser that started it even in JSON mode: a victim sent to the provider by
        // someone else's anonymous flow attaches nothing.
        let mut forged = Flow::new(app).with("token", token);
        forged.json_mode = true;
        forged.send_cookie = false;
        let landed = forged.run("mock").await;
        assert!(landed.contains("INVALID_OAUTH_STATE"), "{landed}");
        let done = Flow::new(app).with("token", token).sign_in("mock").await;
        assert_eq!(done["status"], 200, "{done}");
        assert_eq!(done["body"]["is_new_user"], true, "{done}");
        assert_ne!(done["body"]["refresh_token"], anon["refresh_token"]);
        let user = me(app, &done["body"]["access_token"]).await;
        assert_eq!(user["id"], anon_id.as_str());
        assert_eq!(user["is_anonymous"], false);
        assert_eq!(user["primary_email"], address.as_str());
        assert_eq!(user["oauth_providers"][0]["id"], "mock");
    }
);
