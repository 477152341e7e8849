//! Read-your-writes across services and replicas (issue 15, DESIGN §1): every effect of a write
//! that answered is visible to the very next request, with no sleep and no retry in between,
//! whichever gateway and service replica serve it; and a write whose effect another service
//! must apply, while that service is down, fails with nothing changed.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, email, ok, parts, send, TestApp};

const PASSWORD: &str = "amber-quarry-signal-17";

fn id(body: &Value) -> String {
    body["id"].as_str().unwrap_or_default().to_owned()
}

/// A team created by the server with `user` as its creator (membership, profile, grants).
async fn team_of(app: &TestApp, user: &str) -> String {
    id(&ok(
        send(
            app.as_("server", Method::POST, "/api/v1/teams")
                .json(&json!({"display_name": "Crew", "creator_user_id": user})),
        )
        .await,
        201,
    )
    .await)
}

async fn select(app: &TestApp, token: &str, team: &str) {
    let me = ok(
        send(
            app.client(Method::PATCH, "/api/v1/users/me", Some(token))
                .json(&json!({ "selected_team_id": team })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(me["selected_team_id"], team);
}

/// A list read that must show nothing of a deleted user: either refused, or empty of `user`.
async fn shows_nothing_of(app: &TestApp, path: &str, user: &str) {
    let (status, body, _) = parts(send(app.as_("server", Method::GET, path)).await).await;
    if status == 200 {
        let items = body["items"].as_array().cloned().unwrap_or_default();
        assert!(
            items
                .iter()
                .all(|i| i["user_id"] != user && i["id"] != user),
            "{path} still lists the deleted user: {body}"
        );
    } else {
        assert!(
            (400..500).contains(&status),
            "{path} answered {status}: {body}"
        );
    }
}

both_modes!(
    user_deletion_is_visible_at_once,
    |app: &TestApp| async move {
        let address = email("leaver");
        let user = app.sign_up(&address, PASSWORD).await;
        let uid = user.user_id.clone();
        let team = team_of(app, &uid).await;
        select(app, &user.access, &team).await;
        ok(
            send(
                app.as_(
                    "admin",
                    Method::POST,
                    "/api/v1/project-permission-definitions",
                )
                .json(&json!({"id": "reports"})),
            )
            .await,
            201,
        )
        .await;
        ok(
            send(
                app.as_(
                    "server",
                    Method::POST,
                    &format!("/api/v1/project-permissions/{uid}/reports"),
                )
                .json(&json!({})),
            )
            .await,
            201,
        )
        .await;

        ok(
            send(app.as_("server", Method::DELETE, &format!("/api/v1/users/{uid}"))).await,
            200,
        )
        .await;

        // Immediately: the token is dead, the address is free, and nothing lists the user.
        let res = send(app.client(Method::GET, "/api/v1/users/me", Some(&user.access))).await;
        assert_error(res, 401, "ACCESS_TOKEN_EXPIRED").await;
        let again = app.sign_up(&address, PASSWORD).await;
        assert_ne!(again.user_id, uid);
        let profiles = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/team-member-profiles?team_id={team}"),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(profiles["items"], json!([]), "{profiles}");
        for path in [
            format!("/api/v1/team-permissions?team_id={team}&user_id={uid}"),
            format!("/api/v1/team-permissions?team_id={team}"),
            format!("/api/v1/project-permissions?user_id={uid}"),
            format!("/api/v1/contact-channels?user_id={uid}"),
            format!("/api/v1/teams?user_id={uid}"),
            format!("/api/v1/oauth-providers?user_id={uid}"),
            format!("/api/v1/auth/sessions?user_id={uid}"),
            format!("/api/v1/users?team_id={team}"),
        ] {
            shows_nothing_of(app, &path, &uid).await;
        }
        let res = send(app.as_("server", Method::GET, &format!("/api/v1/users/{uid}"))).await;
        assert_error(res, 404, "USER_NOT_FOUND").await;
        // The new account under the old address signs in.
        let (status, body) = app.sign_in(&address, PASSWORD).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["user_id"], again.user_id.as_str());
    }
);

both_modes!(
    team_deletion_and_leaving_are_visible_at_once,
    |app: &TestApp| async move {
        app.settings(json!({"allow_localhost": true})).await;
        let user = app.sign_up(&email("member"), PASSWORD).await;
        let uid = user.user_id.clone();

        // A deleted team is unselected, and its profiles and invitations are gone.
        let doomed = team_of(app, &uid).await;
        select(app, &user.access, &doomed).await;
        ok(
            send(
                app.as_("server", Method::POST, "/api/v1/team-invitations/send-code")
                    .json(&json!({"team_id": doomed, "email": email("guest"),
                        "callback_url": "http://localhost/join"})),
            )
            .await,
            200,
        )
        .await;
        ok(
            send(app.as_("server", Method::DELETE, &format!("/api/v1/teams/{doomed}"))).await,
            200,
        )
        .await;
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(&user.access))).await,
            200,
        )
        .await;
        assert_eq!(me["selected_team_id"], Value::Null, "{me}");
        assert_eq!(me["selected_team"], Value::Null, "{me}");
        let server_view = ok(
            send(app.as_("server", Method::GET, &format!("/api/v1/users/{uid}"))).await,
            200,
        )
        .await;
        assert_eq!(server_view["selected_team_id"], Value::Null);
        for path in [
            format!("/api/v1/team-member-profiles?team_id={doomed}"),
            format!("/api/v1/team-invitations?team_id={doomed}"),
            format!("/api/v1/team-permissions?team_id={doomed}"),
        ] {
            let (status, body, _) = parts(send(app.as_("server", Method::GET, &path)).await).await;
            let gone = (status, body["code"].as_str()) == (404, Some("TEAM_NOT_FOUND"))
                || (status == 200 && body["items"] == json!([]));
            assert!(gone, "{path}: {status} {body}");
        }

        // A team left is unselected, and its profile and grants for the user are gone.
        let left = team_of(app, &uid).await;
        select(app, &user.access, &left).await;
        ok(
            send(app.client(
                Method::DELETE,
                &format!("/api/v1/team-memberships/{left}/me"),
                Some(&user.access),
            ))
            .await,
            200,
        )
        .await;
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(&user.access))).await,
            200,
        )
        .await;
        assert_eq!(me["selected_team_id"], Value::Null, "{me}");
        for path in [
            format!("/api/v1/team-member-profiles?team_id={left}"),
            format!("/api/v1/team-permissions?team_id={left}&user_id={uid}"),
            format!("/api/v1/teams?user_id={uid}"),
        ] {
            shows_nothing_of(app, &path, &uid).await;
        }
        let teams = ok(
            send(app.client(Method::GET, "/api/v1/teams?user_id=me", Some(&user.access))).await,
            200,
        )
        .await;
        assert_eq!(teams["items"], json!([]));
    }
);

both_modes!(
    sign_in_follows_contact_channel_changes_at_once,
    |app: &TestApp| async move {
        let first = email("first");
        let user = app.sign_up(&first, PASSWORD).await;
        let token = Some(user.access.as_str());
        let second = email("second");
        let channel = ok(
            send(
                app.client(Method::POST, "/api/v1/contact-channels", token)
                    .json(&json!({"user_id": "me", "type": "email", "value": second,
                        "used_for_auth": true})),
            )
            .await,
            201,
        )
        .await;
        let channel = id(&channel);
        assert_eq!(app.sign_in(&second, PASSWORD).await.0, 200);

        // Not used for sign-in any more: refused at once; used again: accepted at once.
        let path = format!("/api/v1/contact-channels/me/{channel}");
        for (used, status) in [(false, 400), (true, 200), (false, 400), (true, 200)] {
            ok(
                send(
                    app.client(Method::PATCH, &path, token)
                        .json(&json!({ "used_for_auth": used })),
                )
                .await,
                200,
            )
            .await;
            let (got, body) = app.sign_in(&second, PASSWORD).await;
            assert_eq!(got, status, "used_for_auth {used}: {body}");
        }

        // Made primary: the user shows it at once.
        ok(
            send(
                app.client(Method::PATCH, &path, token)
                    .json(&json!({ "is_primary": true })),
            )
            .await,
            200,
        )
        .await;
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", token)).await,
            200,
        )
        .await;
        assert_eq!(me["primary_email"], second.as_str(), "{me}");

        // Deleted: its address no longer signs in, and is free for someone else.
        ok(send(app.client(Method::DELETE, &path, token)).await, 200).await;
        let (got, body) = app.sign_in(&second, PASSWORD).await;
        assert_eq!(got, 400, "{body}");
        app.sign_up(&second, PASSWORD).await;
    }
);

/// Two auth replicas and two gateways, each behind a balancer that hands every new connection
/// to the next instance, and a test client that opens a connection per request: a settings
/// change is in force for the next request wherever it lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_in_force_on_every_replica_at_once() {
    let mut app = TestApp::spawn_balanced_with(&[("LATCHKEY_RATE_LIMITS", "on".into())]).await;
    app.add_replica("auth").await;
    app.add_replica("gateway").await;
    app.http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    settings_take_effect_at_once(&app).await;
    app.finish().await;
}

both_modes!(
    settings_take_effect_at_once_in_each_mode,
    |app: &TestApp| async move {
        settings_take_effect_at_once(app).await;
    }
);

/// Changes settings that auth, teams and the gateway each apply, and uses each right after.
async fn settings_take_effect_at_once(app: &TestApp) {
    let user = app.sign_up(&email("builder"), PASSWORD).await;

    for round in 0..4 {
        let enabled = round % 2 == 0;
        let min = if enabled { 12 } else { 9 };
        app.settings(json!({"client_team_creation_enabled": enabled, "password_min_length": min}))
            .await;
        for attempt in 0..4 {
            let res = send(
                app.client(Method::POST, "/api/v1/teams", Some(&user.access))
                    .json(&json!({"display_name": "Mine", "creator_user_id": "me"})),
            )
            .await;
            if enabled {
                ok(res, 201).await;
            } else {
                assert_error(res, 403, "CLIENT_TEAM_CREATION_DISABLED").await;
            }
            // A password of min - 1 characters is refused under the new minimum.
            let short = "p".repeat(min - 1);
            let res = send(
                app.client(Method::POST, "/api/v1/auth/password/sign-up", None)
                    .json(&json!({"email": email("short"), "password": short})),
            )
            .await;
            let body = assert_error(res, 400, "PASSWORD_TOO_SHORT").await;
            assert_eq!(
                body["details"]["min_length"], min,
                "round {round} try {attempt}"
            );
        }
    }

    // Rate limits, counted across both gateways through Redis, follow a change at once.
    app.settings(json!({"rate_limits": {"client_general": {"limit": 3, "window_seconds": 3600}}}))
        .await;
    let read = || send(app.client(Method::GET, "/api/v1/projects/current", None));
    for _ in 0..3 {
        ok(read().await, 200).await;
    }
    assert_eq!(read().await.status(), 429);
    app.settings(json!({"rate_limits": {"client_general": null}}))
        .await;
    for _ in 0..4 {
        ok(read().await, 200).await;
    }
}

/// While the service that must apply an effect is down, the write fails with 503 and changes
/// nothing; once it is back, the same write succeeds with every effect visible at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_whose_effects_cannot_be_applied_change_nothing() {
    let mut app = TestApp::spawn_distributed_with(&[]).await;
    let address = email("kept");
    let user = app.sign_up(&address, PASSWORD).await;
    let uid = user.user_id.clone();
    let team = team_of(&app, &uid).await;
    select(&app, &user.access, &team).await;
    let unchanged = Unchanged {
        access: user.access.clone(),
        user: uid.clone(),
        team: team.clone(),
        address: address.clone(),
    };

    // User deletion with contacts, then teams, down.
    for service in ["contacts", "teams"] {
        let halted = app.halt(service);
        let res = send(app.as_("server", Method::DELETE, &format!("/api/v1/users/{uid}"))).await;
        assert_error(res, 503, "SERVICE_UNAVAILABLE").await;
        app.resume(halted).await;
        unchanged.check(&app).await;
    }

    // Team deletion and leaving with auth down. The gateway checks keys with auth too, so the
    // key is remembered first (a read just before); teams is the one that must reach auth.
    for path in [
        format!("/api/v1/teams/{team}"),
        format!("/api/v1/team-memberships/{team}/{uid}"),
    ] {
        ok(
            send(app.as_("server", Method::GET, &format!("/api/v1/teams/{team}"))).await,
            200,
        )
        .await;
        let halted = app.halt("auth");
        let res = send(app.as_("server", Method::DELETE, &path)).await;
        assert_error(res, 503, "SERVICE_UNAVAILABLE").await;
        app.resume(halted).await;
        unchanged.check(&app).await;
    }

    // Everything up: the same writes succeed and their effects show at once.
    ok(
        send(app.as_("server", Method::DELETE, &format!("/api/v1/teams/{team}"))).await,
        200,
    )
    .await;
    let me = ok(
        send(app.client(Method::GET, "/api/v1/users/me", Some(&user.access))).await,
        200,
    )
    .await;
    assert_eq!(me["selected_team_id"], Value::Null);
    ok(
        send(app.as_("server", Method::DELETE, &format!("/api/v1/users/{uid}"))).await,
        200,
    )
    .await;
    app.sign_up(&address, PASSWORD).await;
    app.finish().await;
}

/// What an outage must leave as it was: the user signed in, with its address and its team
/// selected and joined.
struct Unchanged {
    access: String,
    user: String,
    team: String,
    address: String,
}

impl Unchanged {
    async fn check(&self, app: &TestApp) {
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(&self.access))).await,
            200,
        )
        .await;
        assert_eq!(me["selected_team_id"], self.team.as_str(), "{me}");
        assert_eq!(me["primary_email"], self.address.as_str(), "{me}");
        let path = format!("/api/v1/teams?user_id={}", self.user);
        let teams = ok(send(app.as_("server", Method::GET, &path)).await, 200).await;
        assert_eq!(teams["items"].as_array().map(Vec::len), Some(1), "{teams}");
    }
}
