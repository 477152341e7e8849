//! Team invitations (30 §4, 80 §10) through the gateway, mailed over real SMTP.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, email, ok, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

both_modes!(invitations_by_code_and_by_id, |app: &TestApp| async move {
    app.settings(json!({"allow_localhost": true})).await;
    let owner = app.sign_up(&email("owner"), PASSWORD).await;
    let team = ok(
        app.as_("server", Method::POST, "/api/v1/teams")
            .json(&json!({"display_name": "Crew", "creator_user_id": owner.user_id}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        201,
    )
    .await;
    let team_id = team["id"].as_str().unwrap_or_default().to_owned();
    let guest_address = email("guest");
    let guest = app.sign_up(&guest_address, PASSWORD).await;
    let send = |token: Option<&str>, to: &str, extra: Value| {
        let mut body =
            json!({"team_id": team_id, "email": to, "callback_url": "http://localhost/join"});
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        match token {
            Some(t) => app.client(Method::POST, "/api/v1/team-invitations/send-code", Some(t)),
            None => app.as_("server", Method::POST, "/api/v1/team-invitations/send-code"),
        }
        .json(&body)
        .send()
    };

    // The owner invites by code; the mail carries the link.
    let sent = ok(
        send(Some(&owner.access), &guest_address, json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(sent["success"], true);
    let code = crate::smtp::code_in(&app.mail.wait_for(&guest_address).await);
    let listed = ok(
        app.client(
            Method::GET,
            &format!("/api/v1/team-invitations?team_id={team_id}"),
            Some(&owner.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let item = listed["items"][0].clone();
    assert_eq!(
        item.as_object().map(|m| {
            let mut k: Vec<_> = m.keys().cloned().collect();
            k.sort();
            k
        }),
        Some(vec![
            "expires_at_millis".to_owned(),
            "id".into(),
            "recipient_email".into(),
            "team_id".into()
        ])
    );
    assert_eq!(item["id"], sent["id"]);

    let post = |path: &'static str, token: Option<&str>| {
        app.client(Method::POST, path, token)
            .json(&json!({"code": code}))
    };
    assert_eq!(
        ok(
            post("/api/v1/team-invitations/accept/check-code", None)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200
        )
        .await,
        json!({"is_code_valid": true})
    );
    assert_error(
        post("/api/v1/team-invitations/accept/details", None)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        401,
        "USER_AUTHENTICATION_REQUIRED",
    )
    .await;
    let details = ok(
        post(
            "/api/v1/team-invitations/accept/details",
            Some(&guest.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(
        details,
        json!({"team_id": team_id, "team_display_name": "Crew"})
    );
    assert_eq!(
        ok(
            post("/api/v1/team-invitations/accept", Some(&guest.access))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200
        )
        .await,
        json!({})
    );
    assert_error(
        post("/api/v1/team-invitations/accept", Some(&guest.access))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        409,
        "VERIFICATION_CODE_ALREADY_USED",
    )
    .await;
    let perms = ok(
        app.as_(
            "server",
            Method::GET,
            &format!(
                "/api/v1/team-permissions?team_id={team_id}&user_id={}",
                guest.user_id
            ),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(perms["items"][0]["id"], "team_member");

    // Revoked invitations cannot be accepted.
    let third_address = email("third");
    let sent = ok(
        send(None, &third_address, json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let revoked_code = crate::smtp::code_in(&app.mail.wait_for(&third_address).await);
    let id = sent["id"].as_str().unwrap_or_default().to_owned();
    let res = app
        .client(
            Method::DELETE,
            &format!("/api/v1/team-invitations/{id}"),
            Some(&owner.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BAD_REQUEST").await;
    ok(
        app.client(
            Method::DELETE,
            &format!("/api/v1/team-invitations/{id}?team_id={team_id}"),
            Some(&owner.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let third = app.sign_up(&third_address, PASSWORD).await;
    let res = app
        .client(
            Method::POST,
            "/api/v1/team-invitations/accept",
            Some(&third.access),
        )
        .json(&json!({"code": revoked_code}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "VERIFICATION_CODE_NOT_FOUND").await;

    // By id: for a user whose verified address is the recipient's, with extra permissions.
    let sent = ok(
        send(
            None,
            &third_address,
            json!({"permission_ids": ["$update_team"]}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let id = sent["id"].as_str().unwrap_or_default().to_owned();
    let accept_by_id = || {
        app.client(
            Method::POST,
            &format!("/api/v1/team-invitations/{id}/accept?user_id=me"),
            Some(&third.access),
        )
        .send()
    };
    assert_error(
        accept_by_id().await.unwrap_or_else(|e| panic!("{e}")),
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    .await;
    ok(
        app.as_(
            "server",
            Method::PATCH,
            &format!("/api/v1/users/{}", third.user_id),
        )
        .json(&json!({"primary_email_verified": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let mine = ok(
        app.client(
            Method::GET,
            "/api/v1/team-invitations?user_id=me",
            Some(&third.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(mine["items"].as_array().map(Vec::len), Some(1));
    ok(accept_by_id().await.unwrap_or_else(|e| panic!("{e}")), 200).await;
    let perms = ok(
        app.as_(
            "server",
            Method::GET,
            &format!(
                "/api/v1/team-permissions?team_id={team_id}&user_id={}",
                third.user_id
            ),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let held: Vec<&str> = perms["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(held, ["$update_team", "team_member"]);

    // Refusals.
    let res = send(Some(&owner.access), &email("x"), json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let res = app.as_("server", Method::POST, "/api/v1/team-invitations/send-code")
        .json(&json!({"team_id": team_id, "email": email("x"), "callback_url": "https://evil.example/join"})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
    let res = app.as_("server", Method::POST, "/api/v1/team-invitations/send-code")
        .json(&json!({"team_id": "0a0b0c0d-0000-4000-8000-000000000000", "email": email("x"), "callback_url": "http://localhost/join"})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_NOT_FOUND").await;
    let res = app
        .as_(
            "server",
            Method::GET,
            &format!(
                "/api/v1/team-invitations?team_id={team_id}&user_id={}",
                guest.user_id
            ),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BAD_REQUEST").await;
    let outsider = app.sign_up(&email("outsider"), PASSWORD).await;
    let res = send(Some(&outsider.access), &email("x"), json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_MEMBERSHIP_NOT_FOUND").await;
    // A member without $update_team cannot hand it out.
    let res = send(
        Some(&guest.access),
        &email("x"),
        json!({"permission_ids": ["$update_team"]}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "TEAM_PERMISSION_REQUIRED").await;

    // Restricted users cannot accept.
    app.settings(json!({"require_email_verification": true}))
        .await;
    let late_address = email("late");
    ok(
        send(None, &late_address, json!({}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let late_code = crate::smtp::code_in(&app.mail.wait_for(&late_address).await);
    let late = app.sign_up(&late_address, PASSWORD).await;
    let res = app
        .client(
            Method::POST,
            "/api/v1/team-invitations/accept",
            Some(&late.access),
        )
        .header("x-service-allow-restricted-user", "true")
        .json(&json!({"code": late_code}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED").await;

    // Deleting the team deletes its pending invitations.
    ok(
        app.as_(
            "server",
            Method::DELETE,
            &format!("/api/v1/teams/{team_id}"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let res = app
        .client(
            Method::POST,
            "/api/v1/team-invitations/accept/check-code",
            None,
        )
        .json(&json!({"code": late_code}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "VERIFICATION_CODE_NOT_FOUND").await;
});
