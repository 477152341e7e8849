//! Cross-project isolation, generated from the route list the gateway serves: every operation
//! of the OpenAPI document is called with project A's keys and tokens but aimed at project B's
//! ids, codes and tokens. Each must be refused (401, 403, 404, or the spec's 400 "does not
//! exist" for an id inside a body), no answer may carry B's data, and B must be unchanged.

use std::collections::BTreeMap;

use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::helpers::*;

const PASSWORD: &str = "project b password 9";

/// Everything of project B the calls aim at.
struct Target {
    project: Project,
    user: Session,
    email: String,
    team: String,
    channel: String,
    session: String,
    team_permission: String,
    project_permission: String,
    invitation: String,
    endpoint: String,
    message: String,
    api_key: String,
    /// B's user's API key and B's team's, by id.
    user_key: String,
    team_key: String,
    /// B's user's passkey (by id), and answers B's authenticator gave to B's pending
    /// registration and sign-in challenges (their codes are in `codes`).
    passkey: String,
    passkey_registration: Value,
    passkey_assertion: Value,
    codes: BTreeMap<&'static str, String>,
    /// Strings only B's data holds; none may appear in an answer to A.
    markers: Vec<String>,
}

fn keyed(app: &TestApp, p: &Project, access: &str, method: Method, path: &str) -> RequestBuilder {
    let key = match access {
        "client" => ("x-service-publishable-client-key", &p.client_key),
        "server" => ("x-service-secret-server-key", &p.server_key),
        _ => ("x-service-super-secret-admin-key", &p.admin_key),
    };
    app.request(method, path)
        .header("x-service-access-type", access)
        .header("x-service-project-id", &p.id)
        .header(key.0, key.1)
}

fn id_of(body: &Value) -> String {
    body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {body}"))
        .to_owned()
}

async fn project_b(app: &TestApp) -> Target {
    let b = app.create_project("B").await;
    let tag = latchkey_shared::crypto::random_base32(10);
    let call = |access: &str, method: Method, path: &str| keyed(app, &b, access, method, path);
    ok(
        send(
            call("admin", Method::PATCH, "/api/v1/internal/project").json(&json!({
                "magic_link_enabled": true, "allow_localhost": true,
                "allow_user_api_keys": true, "allow_team_api_keys": true, "passkey_enabled": true,
            })),
        )
        .await,
        200,
    )
    .await;
    let address = email(&format!("b-{tag}"));
    let signed = ok(
        send(
            call("client", Method::POST, "/api/v1/auth/password/sign-up")
                .json(&json!({ "email": address, "password": PASSWORD })),
        )
        .await,
        200,
    )
    .await;
    let user = Session {
        access: signed["access_token"].as_str().unwrap_or_default().into(),
        refresh: signed["refresh_token"].as_str().unwrap_or_default().into(),
        user_id: signed["user_id"].as_str().unwrap_or_default().into(),
    };
    let uid = user.user_id.clone();
    let marker_name = format!("B-only-name-{tag}");
    ok(
        send(
            call("server", Method::PATCH, &format!("/api/v1/users/{uid}"))
                .json(&json!({ "display_name": marker_name, "server_metadata": { "b": tag } })),
        )
        .await,
        200,
    )
    .await;
    let team_name = format!("B-only-team-{tag}");
    let team = id_of(
        &ok(
            send(call("server", Method::POST, "/api/v1/teams").json(&json!({
                "display_name": team_name, "creator_user_id": uid,
            })))
            .await,
            201,
        )
        .await,
    );
    let channels = ok(
        send(call(
            "server",
            Method::GET,
            &format!("/api/v1/contact-channels?user_id={uid}"),
        ))
        .await,
        200,
    )
    .await;
    let channel = id_of(&channels["items"][0]);
    let sessions = ok(
        send(call(
            "server",
            Method::GET,
            &format!("/api/v1/auth/sessions?user_id={uid}"),
        ))
        .await,
        200,
    )
    .await;
    let session = id_of(&sessions["items"][0]);
    let team_permission = format!("b_team_{tag}");
    ok(
        send(
            call("admin", Method::POST, "/api/v1/team-permission-definitions")
                .json(&json!({ "id": team_permission })),
        )
        .await,
        201,
    )
    .await;
    let project_permission = format!("b_project_{tag}");
    ok(
        send(
            call(
                "admin",
                Method::POST,
                "/api/v1/project-permission-definitions",
            )
            .json(&json!({ "id": project_permission })),
        )
        .await,
        201,
    )
    .await;
    ok(
        send(
            call(
                "server",
                Method::POST,
                &format!("/api/v1/project-permissions/{uid}/{project_permission}"),
            )
            .json(&json!({})),
        )
        .await,
        201,
    )
    .await;

    let mut codes = BTreeMap::new();
    let guest = email(&format!("b-guest-{tag}"));
    ok(
        send(
            call("server", Method::POST, "/api/v1/team-invitations/send-code").json(&json!({
                "team_id": team, "email": guest, "callback_url": "http://localhost/join",
            })),
        )
        .await,
        200,
    )
    .await;
    codes.insert(
        "invitation",
        crate::smtp::code_in(&app.mail.wait_for(&guest).await),
    );
    let invitations = ok(
        send(call(
            "server",
            Method::GET,
            &format!("/api/v1/team-invitations?team_id={team}"),
        ))
        .await,
        200,
    )
    .await;
    let invitation = id_of(&invitations["items"][0]);
    ok(
        send(
            call(
                "server",
                Method::POST,
                &format!("/api/v1/contact-channels/{uid}/{channel}/send-verification-code"),
            )
            .json(&json!({ "callback_url": "http://localhost/verify" })),
        )
        .await,
        200,
    )
    .await;
    codes.insert(
        "verification",
        crate::smtp::code_in(&app.mail.wait_for(&address).await),
    );
    let to_me = json!({ "email": address, "callback_url": "http://localhost/cb" });
    ok(
        send(call("client", Method::POST, "/api/v1/auth/otp/send-sign-in-code").json(&to_me)).await,
        200,
    )
    .await;
    codes.insert(
        "sign-in",
        crate::smtp::code_in(&app.mail.wait_for(&address).await),
    );
    ok(
        send(
            call(
                "client",
                Method::POST,
                "/api/v1/auth/password/send-reset-code",
            )
            .json(&to_me),
        )
        .await,
        200,
    )
    .await;
    codes.insert(
        "reset",
        crate::smtp::code_in(&app.mail.wait_for(&address).await),
    );
    let mfa_address = email(&format!("b-mfa-{tag}"));
    ok(
        send(call("server", Method::POST, "/api/v1/users").json(&json!({
            "primary_email": mfa_address, "primary_email_auth_enabled": true,
            "password": PASSWORD, "totp_secret_base64": "MTIzNDU2Nzg5MDEyMzQ1Njc4OTA=",
        })))
        .await,
        201,
    )
    .await;
    let attempt = ok(
        send(
            call("client", Method::POST, "/api/v1/auth/password/sign-in")
                .json(&json!({ "email": mfa_address, "password": PASSWORD })),
        )
        .await,
        400,
    )
    .await;
    codes.insert(
        "mfa attempt",
        attempt["details"]["attempt_code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    );
    let mut owned_keys = Vec::new();
    for (family, owner) in [("user", &user.user_id), ("team", &team)] {
        let key = ok(
            send(
                call("server", Method::POST, &format!("/api/v1/{family}-api-keys")).json(&json!({
                    format!("{family}_id"): owner, "description": format!("B-only-{family}-key-{tag}"),
                    "expires_at_millis": null,
                })),
            )
            .await,
            200,
        )
        .await;
        let secret = key["value"].as_str().unwrap_or_default().to_owned();
        codes.insert(
            if family == "user" {
                "user api key"
            } else {
                "team api key"
            },
            secret,
        );
        owned_keys.push(id_of(&key));
    }
    let (user_key, team_key) = (owned_keys[0].clone(), owned_keys[1].clone());
    let cli = ok(
        send(call("client", Method::POST, "/api/v1/auth/cli")).await,
        200,
    )
    .await;
    for (kind, field) in [("cli polling", "polling_code"), ("cli login", "login_code")] {
        codes.insert(kind, cli[field].as_str().unwrap_or_default().to_owned());
    }
    let (passkey, passkey_registration, passkey_assertion) =
        passkey_of_b(app, &b, &user, &mut codes).await;
    let endpoint = id_of(
        &ok(
            send(
                call("admin", Method::POST, "/api/v1/webhook-endpoints")
                    .json(&json!({ "url": "http://127.0.0.1:9/b", "description": format!("B-only-hook-{tag}") })),
            )
            .await,
            201,
        )
        .await,
    );
    let tested = ok(
        send(call(
            "admin",
            Method::POST,
            &format!("/api/v1/webhook-endpoints/{endpoint}/test"),
        ))
        .await,
        200,
    )
    .await;
    let message = tested["message_id"]
        .as_str()
        .or_else(|| tested["id"].as_str())
        .unwrap_or("msg_unknown")
        .to_owned();
    let api_key = id_of(
        &ok(
            send(
                call("admin", Method::POST, "/api/v1/internal/api-keys").json(&json!({
                    "description": format!("B-only-key-{tag}"),
                    "has_publishable_client_key": true,
                    "has_secret_server_key": true,
                    "has_super_secret_admin_key": false,
                })),
            )
            .await,
            201,
        )
        .await,
    );
    let markers = vec![
        marker_name,
        team_name,
        address.clone(),
        guest,
        mfa_address,
        format!("B-only-hook-{tag}"),
        format!("B-only-key-{tag}"),
        format!("B-only-user-key-{tag}"),
        format!("B-only-team-key-{tag}"),
        b.server_key.clone(),
        b.admin_key.clone(),
        user.refresh.clone(),
    ];
    Target {
        project: b,
        user,
        email: address,
        team,
        channel,
        session,
        team_permission,
        project_permission,
        invitation,
        endpoint,
        message,
        api_key,
        user_key,
        team_key,
        passkey,
        passkey_registration,
        passkey_assertion,
        codes,
        markers,
    }
}

/// B's user registers a passkey; then B starts a second registration and a sign-in, whose codes
/// and authenticator answers A will present.
async fn passkey_of_b(
    app: &TestApp,
    b: &Project,
    user: &Session,
    codes: &mut BTreeMap<&'static str, String>,
) -> (String, Value, Value) {
    const ORIGIN: &str = "http://localhost:5173";
    let mut device = crate::authenticator::Authenticator::default();
    let call = |route: &str, body: Value| {
        keyed(
            app,
            b,
            "client",
            Method::POST,
            &format!("/api/v1/auth/passkey/{route}"),
        )
        .header("x-service-access-token", &user.access)
        .json(&body)
    };
    let start = |route: &'static str| async move {
        let started = ok(send(call(route, json!({}))).await, 200).await;
        let mut options = started["options_json"].clone();
        if options["rp"].is_object() {
            options["rp"]["id"] = json!("localhost");
        } else {
            options["rpId"] = json!("localhost");
        }
        (
            options,
            started["code"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let (options, code) = start("initiate-passkey-registration").await;
    let credential = device.register(&options, ORIGIN);
    ok(
        send(call(
            "register",
            json!({ "credential": credential, "code": code }),
        ))
        .await,
        200,
    )
    .await;
    let (options, code) = start("initiate-passkey-registration").await;
    let registration = device.register(&options, ORIGIN);
    codes.insert("passkey registration", code);
    let (options, code) = start("initiate-passkey-authentication").await;
    let assertion = device.sign(0, &options, ORIGIN);
    codes.insert("passkey authentication", code);
    let listed = ok(
        send(keyed(
            app,
            b,
            "server",
            Method::GET,
            &format!("/api/v1/users/{}/passkeys", user.user_id),
        ))
        .await,
        200,
    )
    .await;
    (id_of(&listed["items"][0]), registration, assertion)
}

/// B as B's own keys see it; compared before and after A's calls.
async fn snapshot(app: &TestApp, b: &Target) -> Vec<Value> {
    let uid = &b.user.user_id;
    let reads = [
        ("server", "/api/v1/users?limit=100".to_owned()),
        ("server", format!("/api/v1/users/{uid}")),
        ("server", format!("/api/v1/teams/{}", b.team)),
        ("server", format!("/api/v1/teams?user_id={uid}")),
        (
            "server",
            format!("/api/v1/team-member-profiles?team_id={}", b.team),
        ),
        ("server", format!("/api/v1/contact-channels?user_id={uid}")),
        ("server", format!("/api/v1/auth/sessions?user_id={uid}")),
        ("server", format!("/api/v1/users/{uid}/passkeys")),
        (
            "server",
            format!("/api/v1/project-permissions?user_id={uid}"),
        ),
        (
            "server",
            format!("/api/v1/team-permissions?team_id={}&user_id={uid}", b.team),
        ),
        (
            "server",
            format!("/api/v1/team-invitations?team_id={}", b.team),
        ),
        ("admin", "/api/v1/team-permission-definitions".to_owned()),
        ("admin", "/api/v1/project-permission-definitions".to_owned()),
        ("admin", "/api/v1/webhook-endpoints".to_owned()),
        ("admin", "/api/v1/internal/api-keys".to_owned()),
        ("server", format!("/api/v1/user-api-keys?user_id={uid}")),
        (
            "server",
            format!("/api/v1/team-api-keys?team_id={}", b.team),
        ),
        ("admin", "/api/v1/internal/project".to_owned()),
    ];
    let mut out = Vec::new();
    for (access, path) in reads {
        let mut body = ok(
            send(keyed(app, &b.project, access, Method::GET, &path)).await,
            200,
        )
        .await;
        // Reading sessions touches nothing, but a session's last use is B's own refresh.
        strip(&mut body, &["last_used_at_millis", "last_active_at_millis"]);
        out.push(json!({ "path": path, "body": body }));
    }
    out
}

fn strip(v: &mut Value, names: &[&str]) {
    match v {
        Value::Object(map) => {
            for n in names {
                map.remove(*n);
            }
            map.values_mut().for_each(|x| strip(x, names));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| strip(x, names)),
        _ => {}
    }
}

/// B's value for a path or query parameter, by name (and, for `id`, by the path it is in).
fn value_for(b: &Target, path: &str, name: &str) -> Option<String> {
    let permission = if path.contains("team-permission") {
        &b.team_permission
    } else {
        &b.project_permission
    };
    Some(match name {
        "user_id" => b.user.user_id.clone(),
        "team_id" => b.team.clone(),
        "contact_channel_id" => b.channel.clone(),
        "permission_id" => permission.clone(),
        "api_key_id" if path.starts_with("/api/v1/user-api-keys") => b.user_key.clone(),
        "api_key_id" if path.starts_with("/api/v1/team-api-keys") => b.team_key.clone(),
        "api_key_id" => b.api_key.clone(),
        "message_id" => b.message.clone(),
        "project_id" => b.project.id.clone(),
        // A provider record's id, or a provider's name in connected accounts.
        "provider_id" if path.starts_with("/api/v1/oauth-providers") => {
            uuid::Uuid::new_v4().to_string()
        }
        "provider_id" => "github".into(),
        "id" if path.starts_with("/api/v1/auth/sessions") => b.session.clone(),
        "id" if path.starts_with("/api/v1/team-invitations") => b.invitation.clone(),
        "id" if path.starts_with("/api/v1/webhook-endpoints") => b.endpoint.clone(),
        "passkey_id" => b.passkey.clone(),
        _ => return None,
    })
}

/// A body aimed at B for operations whose target is in the body (None: no such body).
fn body_for(a: &Project, b: &Target, method: &str, path: &str) -> Option<Value> {
    let code = |kind: &str| b.codes[kind].clone();
    let uid = &b.user.user_id;
    Some(match (method, path) {
        ("POST", "/api/v1/auth/mfa/sign-in") => {
            json!({ "type": "totp", "totp": "123456", "code": code("mfa attempt") })
        }
        ("POST", "/api/v1/auth/otp/sign-in") | ("POST", "/api/v1/auth/otp/sign-in/check-code") => {
            json!({ "code": code("sign-in") })
        }
        ("POST", "/api/v1/user-api-keys") => {
            json!({ "user_id": uid, "description": "A into B", "expires_at_millis": null })
        }
        ("POST", "/api/v1/team-api-keys") => {
            json!({ "team_id": b.team, "description": "A into B", "expires_at_millis": null })
        }
        ("POST", "/api/v1/user-api-keys/check") => json!({ "api_key": code("user api key") }),
        ("POST", "/api/v1/team-api-keys/check") => json!({ "api_key": code("team api key") }),
        ("POST", "/api/v1/auth/cli/poll") => json!({ "polling_code": code("cli polling") }),
        ("POST", "/api/v1/auth/passkey/register") => {
            json!({ "credential": b.passkey_registration, "code": code("passkey registration") })
        }
        ("POST", "/api/v1/auth/passkey/sign-in") => json!({
            "authentication_response": b.passkey_assertion,
            "code": code("passkey authentication"),
        }),
        ("POST", "/api/v1/auth/cli/complete") => {
            json!({ "login_code": code("cli login"), "refresh_token": b.user.refresh })
        }
        ("POST", "/api/v1/auth/password/reset") => {
            json!({ "code": code("reset"), "password": "a new password for b" })
        }
        ("POST", "/api/v1/auth/password/reset/check-code") => json!({ "code": code("reset") }),
        ("POST", "/api/v1/auth/password/sign-in") => {
            json!({ "email": b.email, "password": PASSWORD })
        }
        ("POST", "/api/v1/auth/sessions") => json!({ "user_id": uid }),
        ("POST", "/api/v1/contact-channels") => {
            json!({ "user_id": uid, "type": "email", "value": email("a-into-b"), "used_for_auth": false })
        }
        ("POST", "/api/v1/contact-channels/verify")
        | ("POST", "/api/v1/contact-channels/verify/check-code") => {
            json!({ "code": code("verification") })
        }
        ("POST", "/api/v1/oauth-providers") => {
            json!({ "user_id": uid, "provider_config_id": "github", "account_id": "x", "email": email("op"), "allow_sign_in": false, "allow_connected_accounts": false })
        }
        ("POST", "/api/v1/team-invitations/accept")
        | ("POST", "/api/v1/team-invitations/accept/details")
        | ("POST", "/api/v1/team-invitations/accept/check-code") => {
            json!({ "code": code("invitation") })
        }
        ("POST", "/api/v1/team-invitations/send-code") => {
            json!({ "team_id": b.team, "email": email("a-into-b"), "callback_url": "http://localhost/join" })
        }
        ("POST", "/api/v1/teams") => json!({ "display_name": "A into B", "creator_user_id": uid }),
        ("POST", "/api/v1/auth/oauth/token") => json!({
            "grant_type": "refresh_token", "refresh_token": b.user.refresh,
            "client_id": a.id, "client_secret": a.client_key,
        }),
        (
            "POST",
            "/api/v1/contact-channels/{user_id}/{contact_channel_id}/send-verification-code",
        ) => {
            json!({ "callback_url": "http://localhost/verify" })
        }
        ("POST", "/api/v1/connected-accounts/{user_id}/{provider_id}/access-token") => {
            json!({ "scope": "" })
        }
        ("PATCH", _) | ("POST", _) => json!({}),
        _ => return None,
    })
}

/// How an answer refused, or None if it did not: 401, 403 and 404; a 400 (the spec's "does not
/// exist" for an id in a body, or a parameter rule of the access type, before any look-up);
/// or, for a list filtered by B's ids, an empty page. A 409 would mean A met B's data, and any
/// other success means A reached it: both fail.
fn refusal(status: u16, body: &Value) -> Option<&'static str> {
    match status {
        401 | 403 | 404 => Some("401/403/404"),
        400 => Some("400"),
        200 if body["items"].as_array().is_some_and(Vec::is_empty) => Some("empty list"),
        _ => None,
    }
}

both_modes!(ignored project_a_never_reaches_project_b, |app: &TestApp| async move {
    let b = project_b(app).await;
    app.settings(json!({
        "allow_localhost": true, "magic_link_enabled": true,
        "allow_user_api_keys": true, "allow_team_api_keys": true, "passkey_enabled": true,
    }))
    .await;
    let before = snapshot(app, &b).await;
    let a_user = app.sign_up(&email("a-user"), "project a password 1").await;
    let doc = ok(send(app.get("/api/v1/openapi.json")).await, 200).await;
    let ops: Vec<(String, String, Value)> = doc["paths"]
        .as_object()
        .unwrap_or_else(|| panic!("no paths"))
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .into_iter()
                .flatten()
                .filter(|(m, _)| matches!(m.as_str(), "get" | "post" | "patch" | "put" | "delete"))
                .map(|(m, op)| (m.to_uppercase(), path.clone(), op.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(ops.len() > 80, "{} operations", ops.len());
    let (mut aimed, mut leak_checked, mut calls) = (0, 0, 0);
    let mut ip = 0u32;
    let mut failures = Vec::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for (method, template, op) in &ops {
        // A project's signing keys are public by design (any relying party fetches them).
        if template.contains(".well-known/jwks.json") {
            continue;
        }
        let mut path = template.clone();
        // Each id filter alone: some lists take exactly one of them.
        let mut queries: Vec<String> = Vec::new();
        let mut aims = false;
        for param in op["parameters"].as_array().into_iter().flatten() {
            let name = param["name"].as_str().unwrap_or_default();
            let Some(value) = value_for(&b, template, name) else { continue };
            match param["in"].as_str() {
                Some("path") => {
                    path = path.replace(&format!("{{{name}}}"), &value);
                    aims |= name != "provider_id";
                }
                Some("query") => {
                    queries.push(format!("?{name}={value}"));
                    aims = true;
                }
                _ => {}
            }
        }
        let body = body_for(&app.project, &b, method, template);
        aims |= body.as_ref().is_some_and(|v| v.as_object().is_some_and(|o| !o.is_empty()));
        let refresh_route = template == "/api/v1/auth/sessions/current/refresh";
        aims |= refresh_route;
        if !aims && method != "GET" {
            continue;
        }
        if queries.is_empty() {
            queries.push(String::new());
        }
        let method_v = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
        let base_path = path.clone();
        for (query, access) in queries
            .iter()
            .flat_map(|q| ["client", "server", "admin"].map(|a| (q.clone(), a)))
        {
            let path = format!("{base_path}{query}");
            let tokens: Vec<Option<&str>> = match access {
                // As a signed-in user of A, and carrying B's own user token into A.
                "client" => vec![Some(&a_user.access), Some(&b.user.access), None],
                _ => vec![None],
            };
            for token in tokens {
                ip += 1;
                let mut req = app
                    .as_(access, method_v.clone(), &path)
                    .header("x-forwarded-for", format!("10.99.{}.{}", ip / 250, ip % 250 + 1));
                if let Some(t) = token {
                    req = req.header("x-service-access-token", t);
                }
                if refresh_route {
                    req = req.header("x-service-refresh-token", &b.user.refresh);
                }
                if let Some(body) = &body {
                    req = req.json(body);
                }
                let res = send(req).await;
                let status = res.status().as_u16();
                let text = res.text().await.unwrap_or_default();
                calls += 1;
                let code = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["code"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let sent = format!("{path} {body:?}");
                let leaked: Vec<&String> = b
                    .markers
                    .iter()
                    .chain([
                        &b.team, &b.user.user_id, &b.channel, &b.session, &b.endpoint, &b.api_key,
                        &b.invitation, &b.user_key, &b.team_key, &b.passkey,
                    ])
                    .filter(|m| text.contains(m.as_str()) && !sent.contains(m.as_str()))
                    .collect();
                let who = format!(
                    "{access}{} {method} {path}",
                    match token {
                        Some(t) if t == b.user.access => " +B token",
                        Some(_) => " +A token",
                        None => "",
                    }
                );
                if !leaked.is_empty() {
                    failures.push(format!("{who}: answer {status} carries B's {leaked:?}: {text}"));
                }
                let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if aims {
                    *kinds.entry(refusal(status, &parsed).unwrap_or("NOT REFUSED")).or_insert(0) += 1;
                }
                if aims && refusal(status, &parsed).is_none() {
                    failures.push(format!("{who}: {status} {code} {text}"));
                }
            }
        }
        if aims {
            aimed += 1;
        } else {
            leak_checked += 1;
        }
    }
    let after = snapshot(app, &b).await;
    for (x, y) in before.iter().zip(&after) {
        if x != y {
            failures.push(format!("B changed: {x}\n  became {y}"));
        }
    }
    // B still works for B: its keys, its user's token and refresh token.
    let me = ok(
        send(
            keyed(app, &b.project, "client", Method::GET, "/api/v1/users/me")
                .header("x-service-access-token", &b.user.access),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(me["id"], b.user.user_id.as_str());
    // B's CLI login was neither completed nor claimed from A.
    let polled = ok(
        send(
            keyed(app, &b.project, "client", Method::POST, "/api/v1/auth/cli/poll")
                .json(&json!({ "polling_code": b.codes["cli polling"] })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(polled, json!({ "status": "waiting" }));
    // B's passkey is not A's user's either.
    let res = send(app.client(
        Method::DELETE,
        &format!("/api/v1/users/me/passkeys/{}", b.passkey),
        Some(&a_user.access),
    ))
    .await;
    assert_error(res, 404, "PASSKEY_NOT_FOUND").await;
    // B's pending passkey challenges still answer for B: A's tries did not use them up.
    let finish = |route: &str, body: Value| {
        keyed(app, &b.project, "client", Method::POST, &format!("/api/v1/auth/passkey/{route}"))
            .header("x-service-access-token", &b.user.access)
            .json(&body)
    };
    let signed = ok(
        send(finish(
            "sign-in",
            json!({ "authentication_response": b.passkey_assertion, "code": b.codes["passkey authentication"] }),
        ))
        .await,
        200,
    )
    .await;
    assert_eq!(signed["user_id"], b.user.user_id.as_str());
    ok(
        send(finish(
            "register",
            json!({ "credential": b.passkey_registration, "code": b.codes["passkey registration"] }),
        ))
        .await,
        200,
    )
    .await;
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    crate::hardening::report(format!(
        "isolation: {} operations in the document; {aimed} aimed at project B and {leak_checked} reads checked for leaks, {calls} calls, 0 reached B; refusals {kinds:?}",
        ops.len()
    ));
});

/// The console's routes that take an id, aimed at B's, with the form each posts; the pages
/// that take none are read for leaks. Checked against the router's source below, so a new
/// console route cannot be left out.
/// A console request: method, path and the form fields beside the CSRF token.
type ConsoleCall = (Method, String, Vec<(&'static str, String)>);

fn console_calls(b: &Target) -> Vec<ConsoleCall> {
    let (uid, team) = (&b.user.user_id, &b.team);
    let both = |path: String, form: Vec<(&'static str, String)>| {
        [
            (Method::GET, path.clone(), vec![]),
            (Method::POST, path, form),
        ]
    };
    let mut calls = vec![
        (Method::GET, format!("/console/users/{uid}"), vec![]),
        (
            Method::POST,
            format!("/console/users/{uid}/metadata"),
            vec![("client_metadata", r#"{"from":"a"}"#.to_owned())],
        ),
        (
            Method::POST,
            format!("/console/users/{uid}/sessions/{}/revoke", b.session),
            vec![],
        ),
        (
            Method::POST,
            format!("/console/users/{uid}/sessions/revoke-all"),
            vec![],
        ),
        (Method::GET, format!("/console/teams/{team}"), vec![]),
        (
            Method::POST,
            format!("/console/teams/{team}/members"),
            vec![("user_id", uid.clone())],
        ),
        (
            Method::GET,
            format!("/console/webhooks/{}", b.endpoint),
            vec![],
        ),
        (
            Method::POST,
            format!("/console/webhooks/{}/test", b.endpoint),
            vec![],
        ),
        (
            Method::POST,
            format!(
                "/console/webhooks/{}/deliveries/{}/replay",
                b.endpoint, b.message
            ),
            vec![],
        ),
        (
            Method::POST,
            "/console/switch".to_owned(),
            vec![("project_id", b.project.id.clone())],
        ),
        (
            Method::GET,
            format!("/console/users?query={}", b.email),
            vec![],
        ),
    ];
    calls.extend(both(format!("/console/users/{uid}/delete"), vec![]));
    calls.extend(both(
        format!("/console/teams/{team}/members/{uid}/remove"),
        vec![],
    ));
    calls.extend(both(
        format!("/console/permissions/team/{}/delete", b.team_permission),
        vec![],
    ));
    calls.extend(both(
        format!(
            "/console/permissions/project/{}/delete",
            b.project_permission
        ),
        vec![],
    ));
    calls.extend(both(
        format!("/console/webhooks/{}/rotate", b.endpoint),
        vec![],
    ));
    calls.extend(both(format!("/console/keys/{}/revoke", b.api_key), vec![]));
    calls
}

/// Console pages that take no id: read for leaks only. The rest of the console's routes take
/// no id of anything either (sign-in and -out, forms that create in the signed-in project,
/// assets).
const CONSOLE_PAGES: &[&str] = &[
    "/console/project",
    "/console/keys",
    "/console/users",
    "/console/teams",
    "/console/permissions",
    "/console/webhooks",
    "/console/mail",
];
const CONSOLE_UNAIMED: &[&str] = &[
    "/console",
    "/console/sign-in",
    "/console/sign-out",
    "/console/project/test-mail",
    "/console/project/oauth",
    "/console/permissions/{scope}",
    "/console/assets/console.css",
    "/console/assets/console.js",
];

both_modes!(ignored project_as_console_never_reaches_project_b, |app: &TestApp| async move {
    let b = project_b(app).await;
    // An OAuth provider of B's, for A's console to aim at by id.
    let provider = format!("b-corp-{}", &b.team[..8]);
    ok(
        send(keyed(app, &b.project, "admin", Method::PATCH, "/api/v1/internal/project").json(
            &json!({ "oauth_providers": [{
                "id": provider, "type": "github", "client_id": "b-client", "client_secret": "b-oauth-secret",
            }] }),
        ))
        .await,
        200,
    )
    .await;
    let before = snapshot(app, &b).await;
    let mut calls = console_calls(&b);
    calls.push((
        Method::POST,
        format!("/console/project/oauth/{provider}"),
        vec![("type", "github".to_owned()), ("client_id", "from-a".to_owned())],
    ));
    calls.push((Method::GET, format!("/console/project/oauth/{provider}"), vec![]));
    calls.push((Method::GET, format!("/console/project/oauth/{provider}/remove"), vec![]));
    calls.push((Method::POST, format!("/console/project/oauth/{provider}/remove"), vec![]));
    // Every route the console's router declares is aimed at B, read, or takes no id.
    let router = include_str!("../../../src/console/mod.rs");
    let declared: Vec<&str> = router
        .split(".route(")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1))
        .collect();
    assert!(declared.len() > 20, "{declared:?}");
    let aimed_templates = [
        "/console/users/{id}", "/console/users/{id}/metadata",
        "/console/users/{id}/sessions/{session_id}/revoke",
        "/console/users/{id}/sessions/revoke-all", "/console/users/{id}/delete",
        "/console/teams/{id}", "/console/teams/{id}/members",
        "/console/teams/{id}/members/{user_id}/remove",
        "/console/permissions/{scope}/{id}/delete", "/console/webhooks/{id}",
        "/console/webhooks/{id}/test", "/console/webhooks/{id}/rotate",
        "/console/webhooks/{id}/deliveries/{message_id}/replay", "/console/keys/{id}/revoke",
        "/console/switch", "/console/project/oauth/{id}", "/console/project/oauth/{id}/remove",
    ];
    for route in &declared {
        assert!(
            aimed_templates.contains(route) || CONSOLE_PAGES.contains(route) || CONSOLE_UNAIMED.contains(route),
            "console route {route} is not covered by the isolation test"
        );
    }
    let mut browser = crate::console::Browser::new(app);
    assert_eq!(browser.sign_in(&app.project.id, &app.project.admin_key).await.status(), 303);
    let (_, page) = browser.get("/console/project").await;
    let csrf = crate::console::csrf_in(&page);
    assert!(
        csrf.len() >= 20 && csrf.chars().all(|c| c.is_ascii_alphanumeric()),
        "no CSRF token on the page: {csrf:?}"
    );
    let oauth_markers = ["b-client".to_owned(), "b-oauth-secret".to_owned(), provider.clone()];
    let markers: Vec<&String> = b
        .markers
        .iter()
        .chain([&b.team, &b.user.user_id, &b.channel, &b.session, &b.api_key, &b.invitation, &b.passkey, &b.endpoint])
        .chain(&oauth_markers)
        .collect();
    let mut failures = Vec::new();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for (method, path, form) in &calls {
        let mut fields: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
        fields.extend(form.iter().map(|(k, v)| (*k, v.as_str())));
        let res = browser.send(method.clone(), path, &fields).await;
        let status = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        *statuses.entry(status).or_insert(0) += 1;
        // A search for B's address answers A's (empty) list; everything else is refused.
        let searched = path.starts_with("/console/users?");
        // A refusal for the form's token would pass without the handler ever running.
        if text.contains("CSRF token missing or wrong") {
            failures.push(format!("{method} {path}: refused for its CSRF token, not for B"));
        }
        if !(searched && status == 200 || matches!(status, 400 | 403 | 404)) {
            failures.push(format!("{method} {path}: {status} {text}"));
        }
        let leaked: Vec<_> = markers
            .iter()
            .filter(|m| text.contains(m.as_str()) && !path.contains(m.as_str()))
            .collect();
        if !leaked.is_empty() {
            failures.push(format!("{method} {path}: answer carries B's {leaked:?}"));
        }
    }
    for path in CONSOLE_PAGES {
        let (status, text) = browser.get(path).await;
        if status != 200 {
            failures.push(format!("GET {path}: {status}"));
        }
        for m in &markers {
            if text.contains(m.as_str()) {
                failures.push(format!("GET {path}: A's page shows B's {m}"));
            }
        }
    }
    let after = snapshot(app, &b).await;
    for (x, y) in before.iter().zip(&after) {
        if x != y {
            failures.push(format!("B changed: {x}\n  became {y}"));
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    crate::hardening::report(format!(
        "console isolation: {} calls aimed at project B from A's console session and {} pages read, 0 reached B; statuses {statuses:?}",
        calls.len(),
        CONSOLE_PAGES.len()
    ));
});
