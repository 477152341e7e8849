//! Users (20) through the gateway: server CRUD and listing, client rules, e-mail rules,
//! restricted users, deletion reaching tokens and contacts, and the sign-up saga.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, email, parts, Mode, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

async fn create(app: &TestApp, body: Value) -> Value {
    let res = app
        .as_("server", Method::POST, "/api/v1/users")
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, user, _) = parts(res).await;
    assert_eq!(status, 201, "{user}");
    user
}

both_modes!(server_manages_users, |app: &TestApp| async move {
    let empty = create(app, json!({})).await;
    assert_eq!(
        (
            &empty["primary_email"],
            &empty["has_password"],
            &empty["server_metadata"]
        ),
        (&Value::Null, &json!(false), &Value::Null)
    );
    assert_eq!(
        empty["risk_scores"],
        json!({"sign_up": {"bot": 0, "free_trial_abuse": 0}})
    );

    let address = email("srv");
    let user = create(app, json!({
        "primary_email": address, "primary_email_auth_enabled": true, "primary_email_verified": true,
        "password": PASSWORD, "display_name": "Grace", "server_metadata": {"plan": "pro"},
        "client_read_only_metadata": [1, 2], "country_code": "de",
    })).await;
    assert_eq!(
        (
            &user["primary_email_verified"],
            &user["country_code"],
            &user["server_metadata"]["plan"]
        ),
        (&json!(true), &json!("DE"), &json!("pro"))
    );
    let id = user["id"].as_str().unwrap_or_default().to_owned();
    app.signed_in(&address, PASSWORD).await;

    let res = app.as_("server", Method::PATCH, &format!("/api/v1/users/{id}"))
        .json(&json!({"display_name": "", "client_metadata": {"theme": "dark"}, "restricted_by_admin": true, "restricted_by_admin_reason": "spam"}))
        .send().await.unwrap_or_else(|e| panic!("{e}"));
    let (status, updated, _) = parts(res).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(
        (&updated["display_name"], &updated["is_restricted"]),
        (&Value::Null, &json!(true))
    );
    assert_eq!(
        updated["restricted_reason"],
        json!({"type": "restricted_by_administrator"})
    );
    let res = app
        .as_("server", Method::GET, &format!("/api/v1/users/{id}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parts(res).await.1["client_metadata"],
        json!({"theme": "dark"})
    );

    // Validation and errors.
    for (body, status, code) in [
        (
            json!({"restricted_by_admin_reason": "x"}),
            400,
            "SCHEMA_ERROR",
        ),
        (
            json!({"password": "a", "password_hash": "b"}),
            400,
            "BAD_REQUEST",
        ),
        (
            json!({"password_hash": "md5:abc"}),
            400,
            "INVALID_PASSWORD_HASH",
        ),
        (json!({"primary_email_verified": true}), 400, "BAD_REQUEST"),
        (json!({"password": PASSWORD}), 400, "BAD_REQUEST"),
        (json!({"otp_auth_enabled": true}), 400, "BAD_REQUEST"),
        (json!({"is_anonymous": true}), 400, "BAD_REQUEST"),
        (json!({"unknown_field": 1}), 400, "SCHEMA_ERROR"),
        (
            json!({"primary_email": address, "primary_email_auth_enabled": true}),
            409,
            "USER_EMAIL_ALREADY_EXISTS",
        ),
    ] {
        let res = app
            .as_("server", Method::POST, "/api/v1/users")
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, status, code).await;
    }
    let res = app
        .as_(
            "server",
            Method::GET,
            "/api/v1/users/0a0b0c0d-0000-4000-8000-000000000000",
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "USER_NOT_FOUND").await;
    let res = app
        .as_("server", Method::PATCH, &format!("/api/v1/users/{id}"))
        .json(&json!({"selected_team_id": "0a0b0c0d-0000-4000-8000-000000000000"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_MEMBERSHIP_NOT_FOUND").await;

    // Creation and the update each wrote their event with the change.
    let events = app.auth_outbox().await;
    assert!(
        events.iter().filter(|t| *t == "user.created").count() >= 2,
        "{events:?}"
    );
    assert!(events.iter().any(|t| t == "user.updated"), "{events:?}");

    // An imported bcrypt hash signs in.
    let imported = email("bcrypt");
    let hash = bcrypt::hash("imported-secret-1", 4).unwrap_or_default();
    create(app, json!({"primary_email": imported, "primary_email_auth_enabled": true, "password_hash": hash})).await;
    app.signed_in(&imported, "imported-secret-1").await;

    // Setting a password through the server ends every session.
    let res = app
        .as_("server", Method::PATCH, &format!("/api/v1/users/{id}"))
        .json(&json!({"restricted_by_admin": false}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parts(res).await.1["restricted_by_admin_reason"],
        Value::Null
    );
    let session = app.signed_in(&address, PASSWORD).await;
    let res = app
        .as_("server", Method::PATCH, &format!("/api/v1/users/{id}"))
        .json(&json!({"password": "server-set-pass-1"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    app.me_becomes(&session.access, 401, Duration::from_secs(1))
        .await;
});

both_modes!(listing_users, |app: &TestApp| async move {
    let mut ids = Vec::new();
    for name in ["anna", "bert", "carl", "dora"] {
        let u = create(
            app,
            json!({"display_name": name, "primary_email": email(name)}),
        )
        .await;
        ids.push(u["id"].as_str().unwrap_or_default().to_owned());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let list = |query: &str| {
        let path = format!("/api/v1/users?{query}");
        async move {
            let res = app
                .as_("server", Method::GET, &path)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (status, body, _) = parts(res).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let names = |body: &Value| -> Vec<String> {
        body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["display_name"].as_str().map(str::to_owned))
            .collect()
    };
    let page = list("limit=2").await;
    assert_eq!(names(&page), ["anna", "bert"]);
    assert_eq!(page["is_paginated"], true);
    let cursor = page["pagination"]["next_cursor"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(cursor, ids[2]);
    let page = list(&format!("limit=2&cursor={cursor}")).await;
    assert_eq!(names(&page), ["carl", "dora"]);
    assert_eq!(page["pagination"]["next_cursor"], Value::Null);
    assert_eq!(names(&list("desc=true&limit=1").await), ["dora"]);
    assert_eq!(names(&list("query=ERT").await), ["bert"]);
    assert_eq!(names(&list("query=carl-").await), ["carl"]);
    assert_eq!(names(&list(&format!("query={}", ids[3])).await), ["dora"]);
    assert_eq!(
        list("cursor=0a0b0c0d-0000-4000-8000-000000000000").await["items"],
        json!([])
    );
    for bad in ["limit=0", "limit=x", "desc=yes", "cursor=nope", "sort=1"] {
        let res = app
            .as_("server", Method::GET, &format!("/api/v1/users?{bad}"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;
    }
    let res = app
        .as_("server", Method::GET, "/api/v1/users?only_anonymous=true")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BAD_REQUEST").await;
    // Restricted users are hidden unless asked for.
    app.settings(json!({"require_email_verification": true}))
        .await;
    assert_eq!(list("").await["items"], json!([]));
    assert_eq!(
        list("include_restricted=true").await["items"]
            .as_array()
            .map(Vec::len),
        Some(4)
    );
});

/// (id, display name, address, in the team)
type Listed = (String, String, String, bool);

// Every list variant pages through a project larger than the search's walking windows (a few
// hundred rows for these page sizes), so rare text is found through the text indexes and common
// text by walking, in sign-up order, ascending and descending: search by display name and by
// address (rare, common, shorter than a trigram, an exact id), a team's members, and search
// within a team.
both_modes!(
    list_variants_page_through_indexes,
    |app: &TestApp| async move {
        let team = crate::helpers::ok(
            app.as_("server", Method::POST, "/api/v1/teams")
                .json(&json!({"display_name": "Listed"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        let team_ref = &team_id;
        let mut users: Vec<Listed> = Vec::new();
        for chunk in 0..44 {
            let made = futures::future::join_all((0..25).map(|k| {
                let i = chunk * 25 + k;
                let name = match i {
                    1_050 => "Zanzibar Quux".to_owned(),
                    _ => format!("member {i}"),
                };
                let address = match i {
                    7 => format!("needle-{i}@rare.example"),
                    _ => format!("u{i}-{}", email("list")),
                };
                async move {
                    let u =
                        create(app, json!({"display_name": name, "primary_email": address})).await;
                    let id = u["id"].as_str().unwrap_or_default().to_owned();
                    if i % 37 == 0 {
                        let path = format!("/api/v1/team-memberships/{team_ref}/{id}");
                        crate::helpers::ok(
                            app.as_("server", Method::POST, &path)
                                .json(&json!({}))
                                .send()
                                .await
                                .unwrap_or_else(|e| panic!("{e}")),
                            201,
                        )
                        .await;
                    }
                    (id, name, address, i % 37 == 0)
                }
            }))
            .await;
            users.extend(made);
        }
        // Sign-up order is id order (ids are minted from the sign-up instant).
        users.sort();
        let all_pages = |query: String, limit: usize| {
            let team_id = team_id.clone();
            async move {
                let mut got: Vec<String> = Vec::new();
                let mut cursor: Option<String> = None;
                loop {
                    let mut path = format!("/api/v1/users?limit={limit}&{query}");
                    if let Some(c) = &cursor {
                        path.push_str(&format!("&cursor={c}"));
                    }
                    let path = path.replace("TEAM", &team_id);
                    let res = app
                        .as_("server", Method::GET, &path)
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    let (status, body, _) = parts(res).await;
                    assert_eq!(status, 200, "{path}: {body}");
                    let items = body["items"].as_array().cloned().unwrap_or_default();
                    assert!(items.len() <= limit, "{path}: more than the limit");
                    got.extend(
                        items
                            .iter()
                            .filter_map(|u| u["id"].as_str().map(str::to_owned)),
                    );
                    match body["pagination"]["next_cursor"].as_str() {
                        Some(next) => cursor = Some(next.to_owned()),
                        None => break,
                    }
                }
                got
            }
        };
        let expected = |keep: &dyn Fn(&Listed) -> bool, desc: bool| {
            let mut ids: Vec<String> = users
                .iter()
                .filter(|u| keep(u))
                .map(|u| u.0.clone())
                .collect();
            if desc {
                ids.reverse();
            }
            ids
        };
        let contains = |t: &str, needle: &str| t.to_lowercase().contains(&needle.to_lowercase());
        // Rare: one display name, one address, each past the first window or inside it.
        for (query, needle) in [
            ("query=zanZIBAR", "zanzibar"),
            ("query=RARE.example", "rare.example"),
        ] {
            let want = expected(&|u| contains(&u.1, needle) || contains(&u.2, needle), false);
            assert_eq!(want.len(), 1, "{query}");
            assert_eq!(all_pages(query.to_owned(), 10).await, want, "{query}");
        }
        // Common, both directions, many pages.
        for desc in [false, true] {
            let want = expected(&|u| contains(&u.1, "member 10"), desc);
            assert!(want.len() > 100);
            let got = all_pages(format!("query=member%2010&desc={desc}"), 40).await;
            assert_eq!(got, want, "member 10, desc={desc}");
        }
        // Shorter than a trigram: matches the first page's worth at once.
        let want: Vec<String> = expected(&|u| contains(&u.1, "r ") || contains(&u.2, "r "), false);
        let got = all_pages("query=r%20".to_owned(), 300).await;
        assert_eq!(got, want, "short text");
        // An exact id.
        let target = users[500].0.clone();
        assert_eq!(all_pages(format!("query={target}"), 5).await, vec![target]);
        // A team's members, and search within the team, both directions.
        for desc in [false, true] {
            let want = expected(&|u| u.3, desc);
            assert_eq!(want.len(), 30);
            assert_eq!(
                all_pages(format!("team_id=TEAM&desc={desc}"), 7).await,
                want
            );
            let want = expected(&|u| u.3 && contains(&u.1, "member 1"), desc);
            assert!(!want.is_empty());
            assert_eq!(
                all_pages(format!("team_id=TEAM&query=member%201&desc={desc}"), 4).await,
                want
            );
        }
        // Plain pages, descending, across the whole project.
        assert_eq!(
            all_pages("desc=true".to_owned(), 250).await,
            expected(&|_| true, true)
        );
    }
);

both_modes!(clients_and_their_own_user, |app: &TestApp| async move {
    let address = email("cli");
    let me = app.sign_up(&address, PASSWORD).await;
    let patch = |body: Value| {
        app.client(Method::PATCH, "/api/v1/users/me", Some(&me.access))
            .json(&body)
            .send()
    };
    let res = patch(json!({"display_name": "Me", "client_metadata": {"a": 1}, "profile_image_url": "data:image/png;base64,aGVsbG8="})).await.unwrap_or_else(|e| panic!("{e}"));
    let (status, user, _) = parts(res).await;
    assert_eq!((status, &user["display_name"]), (200, &json!("Me")));
    assert!(user.get("server_metadata").is_none());
    let res = patch(json!({"server_metadata": {}}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = patch(json!({"profile_image_url": "https://img.example/a.png"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "INVALID_PROFILE_IMAGE_URL").await;
    // A client may change its e-mail; the new address starts unverified and keeps sign-in.
    let new_address = email("moved");
    let res = patch(json!({"primary_email": new_address}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (status, user, _) = parts(res).await;
    assert_eq!(
        (
            status,
            &user["primary_email"],
            &user["primary_email_verified"]
        ),
        (200, &json!(new_address), &json!(false))
    );
    app.signed_in(&new_address, PASSWORD).await;

    let res = app
        .client(Method::GET, "/api/v1/users/me", None)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "CANNOT_GET_OWN_USER_WITHOUT_USER").await;
    let res = app
        .client(Method::GET, "/api/v1/users", Some(&me.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
    let res = app
        .client(Method::DELETE, "/api/v1/users/me", Some(&me.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "CLIENT_USER_DELETION_DISABLED").await;

    // Server access with the user's token reads the server shape of `me`.
    let res = app
        .as_("server", Method::GET, "/api/v1/users/me")
        .header("x-service-access-token", &me.access)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_, server_view, _) = parts(res).await;
    assert_eq!(server_view["primary_email_auth_enabled"], true);

    // Restricted users need the opt-in header.
    app.settings(json!({"require_email_verification": true}))
        .await;
    let restricted = app.signed_in(&new_address, PASSWORD).await;
    let res = app
        .client(Method::GET, "/api/v1/users/me", Some(&restricted.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "RESTRICTED_USER_NOT_ALLOWED").await;
    let res = app
        .client(Method::GET, "/api/v1/users/me", Some(&restricted.access))
        .header("x-stack-allow-anonymous-user", "true")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_, user, _) = parts(res).await;
    assert_eq!(
        user["restricted_reason"],
        json!({"type": "email_not_verified"})
    );
});

both_modes!(deleting_users, |app: &TestApp| async move {
    let address = email("gone");
    let session = app.sign_up(&address, PASSWORD).await;
    app.settings(json!({"client_user_deletion_enabled": true}))
        .await;
    let describe = || async {
        use latchkey_proto::common::v1::{service_client::ServiceClient, DescribeRequest};
        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("contacts"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut request = tonic::Request::new(DescribeRequest {});
        request.metadata_mut().insert(
            "x-latchkey-project-id",
            app.project.id.parse().unwrap_or_else(|e| panic!("{e:?}")),
        );
        request.metadata_mut().insert(
            "x-latchkey-secret-server-key",
            app.project
                .server_key
                .parse()
                .unwrap_or_else(|e| panic!("{e:?}")),
        );
        ServiceClient::new(channel)
            .describe(request)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner()
            .consumed_events
    };
    assert_eq!(describe().await, 0);
    let res = app
        .client(Method::DELETE, "/api/v1/users/me", Some(&session.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    // The token dies within a second, contacts consumes user.deleted, the address is free again.
    let body = app
        .me_becomes(&session.access, 401, Duration::from_secs(1))
        .await;
    assert_eq!(body["code"], "ACCESS_TOKEN_EXPIRED");
    for _ in 0..100 {
        if describe().await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(describe().await, 1);
    let again = app.sign_up(&address, PASSWORD).await;
    assert_ne!(again.user_id, session.user_id);
    let res = app
        .as_(
            "server",
            Method::DELETE,
            &format!("/api/v1/users/{}", session.user_id),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "USER_NOT_FOUND").await;
    let res = app
        .as_(
            "server",
            Method::DELETE,
            &format!("/api/v1/users/{}", again.user_id),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
});

both_modes!(sign_up_saga_leaves_no_orphan, |app: &TestApp| async move {
    // Make every user insert fail inside auth's own database, after contacts reserved the address.
    let db = latchkey_shared::db::Database::connect(&app.auth_db_url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (install, remove): (&[&str], &[&str]) = match (&db, app_mode(app)) {
        (latchkey_shared::db::Database::Postgres(_), _) => (
            &[
                "CREATE FUNCTION refuse_users() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$ LANGUAGE plpgsql",
                "CREATE TRIGGER refuse_users BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION refuse_users()",
            ],
            &["DROP TRIGGER refuse_users ON users", "DROP FUNCTION refuse_users()"],
        ),
        (latchkey_shared::db::Database::Sqlite(_), _) => (
            &["CREATE TRIGGER refuse_users BEFORE INSERT ON users BEGIN SELECT RAISE(ABORT, 'injected'); END"],
            &["DROP TRIGGER refuse_users"],
        ),
    };
    for sql in install {
        latchkey_shared::with_pool!(&db, pool => sqlx::query(sql).execute(pool).await.map(drop))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let address = email("saga");
    let res = app
        .client(Method::POST, "/api/v1/auth/password/sign-up", None)
        .json(&json!({"email": address, "password": PASSWORD}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 500, "INTERNAL_SERVER_ERROR").await;
    for sql in remove {
        latchkey_shared::with_pool!(&db, pool => sqlx::query(sql).execute(pool).await.map(drop))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    db.close().await;
    // The reservation was released: the address is free, not "already exists".
    app.sign_up(&address, PASSWORD).await;
});

fn app_mode(app: &TestApp) -> Mode {
    if app.auth_db_url.starts_with("sqlite") {
        Mode::Embedded
    } else {
        Mode::Distributed
    }
}

both_modes!(primary_email_rules, |app: &TestApp| async move {
    let first = email("first");
    let user = create(app, json!({"primary_email": first, "primary_email_verified": true, "primary_email_auth_enabled": true, "password": PASSWORD})).await;
    let path = format!("/api/v1/users/{}", user["id"].as_str().unwrap_or_default());
    let patch = |body: Value| app.as_("server", Method::PATCH, &path).json(&body).send();
    let view = |res: reqwest::Response| async move {
        let (status, body, _) = parts(res).await;
        assert_eq!(status, 200, "{body}");
        (
            body["primary_email"].clone(),
            body["primary_email_verified"].clone(),
            body["primary_email_auth_enabled"].clone(),
        )
    };
    // A new address becomes primary, unverified, keeping sign-in; the old one is demoted.
    let second = email("second");
    let got = view(
        patch(json!({"primary_email": second}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, (json!(second), json!(false), json!(true)));
    // Back to the old address: that channel is promoted with its verification intact.
    let got = view(
        patch(json!({"primary_email": first.to_uppercase()}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, (json!(first), json!(true), json!(true)));
    // The same address again changes nothing.
    let got = view(
        patch(json!({"primary_email": first}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, (json!(first), json!(true), json!(true)));
    // null: no primary, so neither verified nor auth-enabled; flags without an address fail.
    let got = view(
        patch(json!({"primary_email": null}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, (Value::Null, json!(false), json!(false)));
    let res = patch(json!({"primary_email_auth_enabled": true}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "BAD_REQUEST").await;
    // An address another user signs in with cannot become an auth-enabled primary.
    let taken = email("taken");
    app.sign_up(&taken, PASSWORD).await;
    let res = patch(json!({"primary_email": taken, "primary_email_auth_enabled": true}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 409, "USER_EMAIL_ALREADY_EXISTS").await;
    assert_eq!(body["details"]["email"], taken.as_str());
    // Without sign-in it may be shared.
    let got = view(
        patch(json!({"primary_email": taken, "primary_email_auth_enabled": false}))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, (json!(taken), json!(false), json!(false)));
});
