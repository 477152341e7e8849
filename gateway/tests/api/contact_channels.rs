//! Contact channels and e-mail verification (40) through the gateway.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, claims, email, ok, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

both_modes!(clients_manage_their_channels, |app: &TestApp| async move {
    let address = email("owner");
    let me = app.sign_up(&address, PASSWORD).await;
    let other = app.sign_up(&email("other"), PASSWORD).await;
    let req = |m: Method, path: &str| app.client(m, path, Some(&me.access));

    let list = ok(
        req(Method::GET, "/api/v1/contact-channels?user_id=me")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let primary = list["items"][0].clone();
    assert_eq!(
        (
            &primary["value"],
            &primary["is_primary"],
            &primary["used_for_auth"],
            &primary["type"]
        ),
        (&json!(address), &json!(true), &json!(true), &json!("email"))
    );

    // A second address, auth-enabled: signing in with it works at once.
    let second = email("second");
    let created = ok(req(Method::POST, "/api/v1/contact-channels")
        .json(&json!({"user_id": "me", "type": "email", "value": second.to_uppercase(), "used_for_auth": true}))
        .send().await.unwrap_or_else(|e| panic!("{e}")), 201).await;
    assert_eq!(
        (
            &created["value"],
            &created["is_primary"],
            &created["is_verified"]
        ),
        (&json!(second), &json!(false), &json!(false))
    );
    let id = created["id"].as_str().unwrap_or_default().to_owned();
    // Its token names the primary address, whichever address signed in.
    let via_second = app.signed_in(&second, PASSWORD).await;
    assert_eq!(claims(&via_second.access)["email"], address.as_str());
    let via_any_case = app.signed_in(&second.to_uppercase(), PASSWORD).await;
    assert_eq!(claims(&via_any_case.access)["email"], address.as_str());
    let path = format!("/api/v1/contact-channels/me/{id}");
    assert_eq!(
        ok(
            req(Method::GET, &path)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200
        )
        .await["id"],
        id.as_str()
    );

    // Rules: duplicates, other users' addresses, verification is not the client's to set.
    let res = req(Method::POST, "/api/v1/contact-channels")
        .json(&json!({"user_id": "me", "type": "email", "value": second, "used_for_auth": false}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "CONTACT_CHANNEL_ALREADY_EXISTS").await;
    let res = app
        .client(
            Method::POST,
            "/api/v1/contact-channels",
            Some(&other.access),
        )
        .json(&json!({"user_id": "me", "type": "email", "value": second, "used_for_auth": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(
        res,
        409,
        "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE",
    )
    .await;
    assert_eq!(
        body["details"],
        json!({"type": "email", "contact_channel_value": second, "would_work_if_email_was_verified": false})
    );
    let res = req(Method::POST, "/api/v1/contact-channels").json(&json!({"user_id": "me", "type": "email", "value": email("v"), "used_for_auth": false, "is_verified": true})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = req(Method::POST, "/api/v1/contact-channels")
        .json(
            &json!({"user_id": "me", "type": "phone", "value": email("v"), "used_for_auth": false}),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    for (m, p) in [
        (
            Method::GET,
            format!("/api/v1/contact-channels?user_id={}", other.user_id),
        ),
        (
            Method::GET,
            format!("/api/v1/contact-channels/{}/{id}", other.user_id),
        ),
    ] {
        let res = req(m, &p).send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
    }
    let res = app
        .client(
            Method::GET,
            &format!("/api/v1/contact-channels/{}/{id}", other.user_id),
            Some(&other.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "CONTACT_CHANNEL_NOT_FOUND").await;
    let res = app
        .client(Method::GET, "/api/v1/contact-channels?user_id=me", None)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "CANNOT_GET_OWN_USER_WITHOUT_USER").await;
    let res = req(Method::GET, "/api/v1/contact-channels")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;

    // Making it primary moves the user's primary e-mail; taking it off auth stops sign-in.
    let updated = ok(
        req(Method::PATCH, &path)
            .json(&json!({"is_primary": true}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(updated["is_primary"], true);
    let user = ok(
        req(Method::GET, "/api/v1/users/me")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(user["primary_email"], second.as_str());
    ok(
        req(Method::PATCH, &path)
            .json(&json!({"used_for_auth": false}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(
        app.sign_in(&second, PASSWORD).await.1["code"],
        "EMAIL_PASSWORD_MISMATCH"
    );
    // A changed value starts unverified.
    let third = email("third");
    let changed = ok(
        req(Method::PATCH, &path)
            .json(&json!({"value": third}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(
        (&changed["value"], &changed["is_verified"]),
        (&json!(third), &json!(false))
    );
    // Deleting the primary leaves no primary e-mail; the first address still signs in.
    ok(
        req(Method::DELETE, &path)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let user = ok(
        req(Method::GET, "/api/v1/users/me")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(user["primary_email"], Value::Null);
    app.signed_in(&address, PASSWORD).await;
    let res = req(Method::DELETE, &path)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "CONTACT_CHANNEL_NOT_FOUND").await;
    let res = req(Method::GET, "/api/v1/contact-channels/me/not-a-uuid")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "CONTACT_CHANNEL_NOT_FOUND").await;
});

both_modes!(servers_manage_any_channel, |app: &TestApp| async move {
    let a = app.sign_up(&email("a"), PASSWORD).await;
    app.sign_up(&email("b"), PASSWORD).await;
    let all = ok(
        app.as_("server", Method::GET, "/api/v1/contact-channels")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(2));
    let verified = ok(app.as_("server", Method::POST, "/api/v1/contact-channels")
        .json(&json!({"user_id": a.user_id, "type": "email", "value": email("srv"), "used_for_auth": false, "is_verified": true}))
        .send().await.unwrap_or_else(|e| panic!("{e}")), 201).await;
    assert_eq!(verified["is_verified"], true);
    let one = ok(
        app.as_(
            "server",
            Method::GET,
            &format!(
                "/api/v1/contact-channels?contact_channel_id={}",
                verified["id"].as_str().unwrap_or_default()
            ),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(one["items"].as_array().map(Vec::len), Some(1));
    let res = app.as_("server", Method::POST, "/api/v1/contact-channels")
        .json(&json!({"user_id": "0c0d0e0f-0000-4000-8000-000000000000", "type": "email", "value": email("x"), "used_for_auth": false}))
        .send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "USER_ID_DOES_NOT_EXIST").await;
    let res = app.as_("server", Method::POST, "/api/v1/contact-channels/0c0d0e0f-0000-4000-8000-000000000000/0c0d0e0f-0000-4000-8000-000000000001/send-verification-code")
        .json(&json!({"callback_url": "http://localhost/v"})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
    app.settings(json!({"allow_localhost": true})).await;
    let res = app.as_("server", Method::POST, "/api/v1/contact-channels/0c0d0e0f-0000-4000-8000-000000000000/0c0d0e0f-0000-4000-8000-000000000001/send-verification-code")
        .json(&json!({"callback_url": "http://localhost/v"})).send().await.unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "USER_ID_DOES_NOT_EXIST").await;
    let res = app
        .as_(
            "server",
            Method::POST,
            &format!(
                "/api/v1/contact-channels/{}/{}/send-verification-code",
                a.user_id,
                verified["id"].as_str().unwrap_or_default()
            ),
        )
        .json(&json!({"callback_url": "http://localhost/v"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 409, "EMAIL_ALREADY_VERIFIED").await;
});

both_modes!(verification_over_smtp, |app: &TestApp| async move {
    app.settings(json!({"allow_localhost": true, "require_email_verification": true}))
        .await;
    let address = email("verify");
    let me = app.sign_up(&address, PASSWORD).await;
    let req = |m: Method, path: &str| {
        app.client(m, path, Some(&me.access))
            .header("x-service-allow-restricted-user", "true")
    };
    let list = ok(
        req(Method::GET, "/api/v1/contact-channels?user_id=me")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let id = list["items"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // The legacy form checks that the address is the primary one.
    let res = req(
        Method::POST,
        "/api/v1/contact-channels/send-verification-code",
    )
    .json(&json!({"email": email("elsewhere"), "callback_url": "http://localhost/v"}))
    .send()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 400, "EMAIL_IS_NOT_PRIMARY_EMAIL").await;
    assert_eq!(body["details"]["primary_email"], address.as_str());
    let res = app
        .client(
            Method::POST,
            "/api/v1/contact-channels/send-verification-code",
            None,
        )
        .json(&json!({"email": address, "callback_url": "http://localhost/v"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "USER_AUTHENTICATION_REQUIRED").await;
    let res = req(
        Method::POST,
        &format!("/api/v1/contact-channels/me/{id}/send-verification-code"),
    )
    .json(&json!({"callback_url": "https://evil.example/v"}))
    .send()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
    ok(
        req(
            Method::POST,
            "/api/v1/contact-channels/send-verification-code",
        )
        .json(&json!({"email": address, "callback_url": "http://localhost/v"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let code = crate::smtp::code_in(&app.mail.wait_for(&address).await);

    let post = |path: &'static str, code: &str| {
        app.client(Method::POST, path, None)
            .json(&json!({"code": code}))
            .send()
    };
    for _ in 0..2 {
        let body = ok(
            post("/api/v1/contact-channels/verify/check-code", &code)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(body, json!({"is_code_valid": true}));
    }
    let res = post(
        "/api/v1/contact-channels/verify",
        &latchkey_shared::crypto::random_base32(45),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "VERIFICATION_CODE_NOT_FOUND").await;
    let res = post("/api/v1/contact-channels/verify", "short")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    // Verified: the channel, the user, and no longer restricted on the next sign-in.
    ok(
        post("/api/v1/contact-channels/verify", &code)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let res = post("/api/v1/contact-channels/verify", &code)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;
    let channel = ok(
        req(Method::GET, &format!("/api/v1/contact-channels/me/{id}"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(channel["is_verified"], true);
    let fresh = app.signed_in(&address, PASSWORD).await;
    let user = app
        .me_becomes(&fresh.access, 200, Duration::from_secs(1))
        .await;
    assert_eq!(
        (&user["primary_email_verified"], &user["is_restricted"]),
        (&json!(true), &json!(false))
    );
    let res = req(
        Method::POST,
        &format!("/api/v1/contact-channels/me/{id}/send-verification-code"),
    )
    .json(&json!({"callback_url": "http://localhost/v"}))
    .send()
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 409, "EMAIL_ALREADY_VERIFIED").await;

    // A code whose channel was deleted is consumed and answers CONTACT_CHANNEL_NOT_FOUND.
    let extra = email("extra");
    let created = ok(
        req(Method::POST, "/api/v1/contact-channels")
            .json(
                &json!({"user_id": "me", "type": "email", "value": extra, "used_for_auth": false}),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        201,
    )
    .await;
    let extra_id = created["id"].as_str().unwrap_or_default().to_owned();
    ok(
        req(
            Method::POST,
            &format!("/api/v1/contact-channels/me/{extra_id}/send-verification-code"),
        )
        .json(&json!({"callback_url": "http://localhost/v"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let extra_code = crate::smtp::code_in(&app.mail.wait_for(&extra).await);
    ok(
        req(
            Method::DELETE,
            &format!("/api/v1/contact-channels/me/{extra_id}"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let res = post("/api/v1/contact-channels/verify", &extra_code)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "CONTACT_CHANNEL_NOT_FOUND").await;
    let res = post("/api/v1/contact-channels/verify", &extra_code)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;
});

both_modes!(user_deleted_is_consumed_once, |app: &TestApp| async move {
    let gone = app.sign_up(&email("gone"), PASSWORD).await;
    let kept_address = email("kept");
    app.sign_up(&kept_address, PASSWORD).await;
    let res = app
        .as_(
            "server",
            Method::DELETE,
            &format!("/api/v1/users/{}", gone.user_id),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let channels = || async {
        let all = ok(
            app.as_("server", Method::GET, "/api/v1/contact-channels")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        all["items"].as_array().cloned().unwrap_or_default()
    };
    for _ in 0..100 {
        if channels().await.len() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(channels().await.len(), 1);
    // The same event again (same id, as a broker redelivery would bring it) changes nothing.
    let event = latchkey_shared::events::Event {
        id: uuid::Uuid::parse_str(&app.last_event_id("user.deleted").await)
            .unwrap_or_else(|e| panic!("{e}")),
        event_type: "user.deleted".into(),
        project_id: uuid::Uuid::parse_str(&app.project.id).unwrap_or_else(|e| panic!("{e}")),
        created_at_millis: 0,
        data: json!({"id": gone.user_id, "teams": []}),
    };
    app.bus
        .publish(&event)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = channels().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["value"], kept_address.as_str());
    app.signed_in(&kept_address, PASSWORD).await;
});
