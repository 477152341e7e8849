//! Teams, memberships and team permissions (30 §1–2, 50 §2) through the gateway.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, email, ok, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

fn ids(list: &Value, key: &str) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i[key].as_str().map(str::to_owned))
        .collect()
}

both_modes!(teams_and_permissions, |app: &TestApp| async move {
    let admin = app.sign_up(&email("admin"), PASSWORD).await;
    let member = app.sign_up(&email("member"), PASSWORD).await;

    // Clients may not create teams until the project allows it.
    let create = |token: &str, body: Value| {
        app.client(Method::POST, "/api/v1/teams", Some(token))
            .json(&body)
            .send()
    };
    let res = create(&admin.access, json!({"display_name": "Ops"}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "CLIENT_TEAM_CREATION_DISABLED").await;
    app.settings(json!({"client_team_creation_enabled": true}))
        .await;
    let res = create(
        &admin.access,
        json!({"display_name": "Ops", "server_metadata": {}}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 400, "SCHEMA_ERROR").await;
    let res = create(
        &admin.access,
        json!({"display_name": "Ops", "creator_user_id": member.user_id}),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
    let team = ok(
        create(
            &admin.access,
            json!({"display_name": "Ops", "client_metadata": {"a": 1}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        201,
    )
    .await;
    assert!(team.get("server_metadata").is_none() && team.get("created_at_millis").is_none());
    let team_id = team["id"].as_str().unwrap_or_default().to_owned();

    // The creator holds team_admin; listing needs the caller's own user id.
    let mine = ok(
        app.client(Method::GET, "/api/v1/teams?user_id=me", Some(&admin.access))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(ids(&mine, "id"), std::slice::from_ref(&team_id));
    let res = app
        .client(Method::GET, "/api/v1/teams", Some(&admin.access))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
    let perms = ok(
        app.client(
            Method::GET,
            &format!("/api/v1/team-permissions?user_id=me&team_id={team_id}&recursive=true"),
            Some(&admin.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let held = ids(&perms, "id");
    for p in [
        "team_admin",
        "$update_team",
        "$delete_team",
        "$remove_members",
        "$manage_api_keys",
    ] {
        assert!(held.contains(&p.to_owned()), "{p} not in {held:?}");
    }

    // Memberships (server): defaults granted, duplicates and unknowns refused.
    let add = |user: &str| {
        app.as_(
            "server",
            Method::POST,
            &format!("/api/v1/team-memberships/{team_id}/{user}"),
        )
        .json(&json!({}))
        .send()
    };
    let body = ok(
        add(&member.user_id).await.unwrap_or_else(|e| panic!("{e}")),
        201,
    )
    .await;
    assert_eq!(body, json!({"team_id": team_id, "user_id": member.user_id}));
    assert_error(
        add(&member.user_id).await.unwrap_or_else(|e| panic!("{e}")),
        409,
        "TEAM_MEMBERSHIP_ALREADY_EXISTS",
    )
    .await;
    assert_error(
        add("0a0b0c0d-0000-4000-8000-000000000000")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        404,
        "USER_NOT_FOUND",
    )
    .await;
    let res = app
        .as_(
            "server",
            Method::POST,
            &format!(
                "/api/v1/team-memberships/0a0b0c0d-0000-4000-8000-000000000000/{}",
                member.user_id
            ),
        )
        .json(&json!({}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_NOT_FOUND").await;
    let res = app
        .client(
            Method::POST,
            &format!("/api/v1/team-memberships/{team_id}/me"),
            Some(&member.access),
        )
        .json(&json!({}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
    let direct = ok(
        app.as_(
            "server",
            Method::GET,
            &format!(
                "/api/v1/team-permissions?team_id={team_id}&user_id={}",
                member.user_id
            ),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_eq!(ids(&direct, "id"), ["team_member"]);

    // Permission checks for clients: member, then permission.
    let patch = |token: &str| {
        app.client(
            Method::PATCH,
            &format!("/api/v1/teams/{team_id}"),
            Some(token),
        )
        .json(&json!({"display_name": "Ops 2"}))
        .send()
    };
    let res = patch(&member.access)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let body = assert_error(res, 403, "TEAM_PERMISSION_REQUIRED").await;
    assert_eq!(
        body["details"],
        json!({"team_id": team_id, "user_id": member.user_id, "permission_id": "$update_team"})
    );
    assert_eq!(
        ok(
            patch(&admin.access).await.unwrap_or_else(|e| panic!("{e}")),
            200
        )
        .await["display_name"],
        "Ops 2"
    );
    let outsider = app.sign_up(&email("outsider"), PASSWORD).await;
    let res = app
        .client(
            Method::GET,
            &format!("/api/v1/teams/{team_id}"),
            Some(&outsider.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_MEMBERSHIP_NOT_FOUND").await;
    let res = app
        .as_(
            "server",
            Method::GET,
            "/api/v1/teams/0a0b0c0d-0000-4000-8000-000000000000",
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_NOT_FOUND").await;

    // Grants: direct ones can be revoked, contained ones cannot; ids are checked.
    let grant = |m: Method, perm: &str| {
        app.as_(
            "server",
            m,
            &format!(
                "/api/v1/team-permissions/{team_id}/{}/{perm}",
                member.user_id
            ),
        )
        .json(&json!({}))
        .send()
    };
    let body = ok(
        grant(Method::POST, "$update_team")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        201,
    )
    .await;
    assert_eq!(
        body,
        json!({"id": "$update_team", "user_id": member.user_id, "team_id": team_id})
    );
    ok(
        patch(&member.access)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    ok(
        grant(Method::DELETE, "$update_team")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_error(
        grant(Method::DELETE, "$read_members")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        404,
        "TEAM_PERMISSION_NOT_FOUND",
    )
    .await;
    assert_error(
        grant(Method::POST, "custom_thing")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        404,
        "PERMISSION_NOT_FOUND",
    )
    .await;
    assert_error(
        grant(Method::POST, "$bogus")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        400,
        "SCHEMA_ERROR",
    )
    .await;
    let res = app
        .as_(
            "server",
            Method::POST,
            &format!(
                "/api/v1/team-permissions/{team_id}/{}/team_member",
                outsider.user_id
            ),
        )
        .json(&json!({}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_MEMBERSHIP_NOT_FOUND").await;

    // Members are listed for servers through /users?team_id.
    let users = ok(
        app.as_(
            "server",
            Method::GET,
            &format!("/api/v1/users?team_id={team_id}"),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let mut got = ids(&users, "id");
    got.sort();
    let mut want = vec![admin.user_id.clone(), member.user_id.clone()];
    want.sort();
    assert_eq!(got, want);

    // Removing others needs $remove_members; leaving needs nothing.
    let remove = |token: &str, user: &str| {
        app.client(
            Method::DELETE,
            &format!("/api/v1/team-memberships/{team_id}/{user}"),
            Some(token),
        )
        .send()
    };
    assert_error(
        remove(&member.access, &admin.user_id)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        403,
        "TEAM_PERMISSION_REQUIRED",
    )
    .await;
    ok(
        remove(&member.access, "me")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    assert_error(
        remove(&member.access, "me")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        404,
        "TEAM_MEMBERSHIP_NOT_FOUND",
    )
    .await;

    // Deleting needs $delete_team; afterwards the team is gone.
    ok(
        app.client(
            Method::DELETE,
            &format!("/api/v1/teams/{team_id}"),
            Some(&admin.access),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}")),
        200,
    )
    .await;
    let res = app
        .as_("server", Method::GET, &format!("/api/v1/teams/{team_id}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(res, 404, "TEAM_NOT_FOUND").await;
});

both_modes!(
    selected_teams_and_server_creation,
    |app: &TestApp| async move {
        let user = app.sign_up(&email("sel"), PASSWORD).await;
        let team = ok(app.as_("server", Method::POST, "/api/v1/teams")
        .json(&json!({"display_name": "Sales", "creator_user_id": user.user_id, "server_metadata": {"tier": 1}}))
        .send().await.unwrap_or_else(|e| panic!("{e}")), 201).await;
        assert_eq!(team["server_metadata"], json!({"tier": 1}));
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        let res = app
            .as_(
                "server",
                Method::POST,
                "/api/v1/teams?add_current_user=true",
            )
            .json(&json!({"display_name": "X"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "USER_AUTHENTICATION_REQUIRED").await;
        let res = app
            .as_(
                "server",
                Method::POST,
                "/api/v1/teams?add_current_user=true",
            )
            .header("x-service-access-token", &user.access)
            .json(&json!({"display_name": "X", "creator_user_id": "me"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "BAD_REQUEST").await;
        let res = app.as_("server", Method::POST, "/api/v1/teams").json(&json!({"display_name": "X", "creator_user_id": "0a0b0c0d-0000-4000-8000-000000000000"})).send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "USER_NOT_FOUND").await;

        // Selecting a team the user belongs to shows it, in the client's team shape.
        let me = ok(
            app.client(Method::PATCH, "/api/v1/users/me", Some(&user.access))
                .json(&json!({"selected_team_id": team_id}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(me["selected_team"]["display_name"], "Sales");
        assert!(me["selected_team"].get("server_metadata").is_none());
        let server_view = ok(
            app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/users/{}", user.user_id),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(
            server_view["selected_team"]["server_metadata"],
            json!({"tier": 1})
        );

        // Leaving the team clears the selection (auth follows team_membership.deleted).
        ok(
            app.client(
                Method::DELETE,
                &format!("/api/v1/team-memberships/{team_id}/me"),
                Some(&user.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let mut selected = Value::Null;
        for _ in 0..100 {
            let me = ok(
                app.client(Method::GET, "/api/v1/users/me", Some(&user.access))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
                200,
            )
            .await;
            selected = me["selected_team_id"].clone();
            if selected.is_null() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(selected, Value::Null);

        // Deleting a user drops their memberships and announces them.
        ok(
            app.as_(
                "server",
                Method::POST,
                &format!("/api/v1/team-memberships/{team_id}/{}", user.user_id),
            )
            .json(&json!({}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        ok(
            app.as_(
                "server",
                Method::DELETE,
                &format!("/api/v1/users/{}", user.user_id),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let events = app.auth_outbox().await;
        let tail: Vec<&str> = events.iter().rev().take(2).map(String::as_str).collect();
        assert_eq!(tail, ["user.deleted", "team_membership.deleted"]);
        let mut members = usize::MAX;
        for _ in 0..100 {
            let users = ok(
                app.as_(
                    "server",
                    Method::GET,
                    &format!("/api/v1/users?team_id={team_id}&include_restricted=true"),
                )
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
                200,
            )
            .await;
            let perms = ok(
                app.as_(
                    "server",
                    Method::GET,
                    &format!("/api/v1/team-permissions?team_id={team_id}"),
                )
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
                200,
            )
            .await;
            members = ids(&users, "id").len() + ids(&perms, "id").len();
            if members == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(members, 0);
    }
);

both_modes!(
    member_profiles_and_personal_teams,
    |app: &TestApp| async move {
        app.settings(json!({"create_team_on_sign_up": true})).await;
        let owner_address = email("owner");
        let owner = app.sign_up(&owner_address, PASSWORD).await;
        // Sign-up made a personal team named after the address and selected it.
        let me = ok(
            app.client(Method::GET, "/api/v1/users/me", Some(&owner.access))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(
            me["selected_team"]["display_name"],
            format!("{owner_address}'s Team")
        );
        let team_id = me["selected_team_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let named = ok(
            app.as_("server", Method::POST, "/api/v1/users")
                .json(&json!({"display_name": "Zoe"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        assert_eq!(named["selected_team"]["display_name"], "Zoe's Team");

        let member = app.sign_up(&email("member"), PASSWORD).await;
        ok(
            app.as_(
                "server",
                Method::POST,
                &format!("/api/v1/team-memberships/{team_id}/{}", member.user_id),
            )
            .json(&json!({}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        let outsider = app.sign_up(&email("outsider"), PASSWORD).await;

        // Clients: team_id required, members only, others' profiles need $read_members.
        let list = |token: &str, query: &str| {
            app.client(
                Method::GET,
                &format!("/api/v1/team-member-profiles?{query}"),
                Some(token),
            )
            .send()
        };
        assert_error(
            list(&member.access, "")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            400,
            "BAD_REQUEST",
        )
        .await;
        assert_error(
            list(&outsider.access, &format!("team_id={team_id}"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            404,
            "TEAM_MEMBERSHIP_NOT_FOUND",
        )
        .await;
        let profiles = ok(
            list(&member.access, &format!("team_id={team_id}"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(
            ids(&profiles, "user_id"),
            [owner.user_id.clone(), member.user_id.clone()]
        );
        assert!(profiles["items"][0].get("user").is_none());
        // Without $read_members only the own profile is readable.
        ok(
            app.as_(
                "server",
                Method::DELETE,
                &format!(
                    "/api/v1/team-permissions/{team_id}/{}/team_member",
                    member.user_id
                ),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_error(
            list(&member.access, &format!("team_id={team_id}"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            403,
            "TEAM_PERMISSION_REQUIRED",
        )
        .await;
        ok(
            list(&member.access, &format!("team_id={team_id}&user_id=me"))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let res = app
            .client(
                Method::GET,
                &format!("/api/v1/team-member-profiles/{team_id}/{}", owner.user_id),
                Some(&member.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 403, "TEAM_PERMISSION_REQUIRED").await;

        // Own profile: set a team-specific name, which overrides the user's; others' are refused.
        let path = format!("/api/v1/team-member-profiles/{team_id}/me");
        let updated = ok(
            app.client(Method::PATCH, &path, Some(&member.access))
                .json(&json!({"display_name": "Mem in Ops"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(updated["display_name"], "Mem in Ops");
        let res = app
            .client(
                Method::PATCH,
                &format!("/api/v1/team-member-profiles/{team_id}/{}", owner.user_id),
                Some(&member.access),
            )
            .json(&json!({"display_name": "x"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        let res = app
            .client(Method::PATCH, &path, Some(&member.access))
            .json(&json!({"display_name": null}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;

        // Servers see the full user and may filter by either id.
        let server = ok(
            app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/team-member-profiles?user_id={}", member.user_id),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let items = server["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 2, "personal team and the shared one: {server}");
        let shared = items
            .iter()
            .find(|p| p["team_id"] == team_id.as_str())
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            (&shared["display_name"], &shared["user"]["id"]),
            (&json!("Mem in Ops"), &json!(member.user_id))
        );
        let res = app
            .as_(
                "server",
                Method::GET,
                "/api/v1/team-member-profiles?team_id=0a0b0c0d-0000-4000-8000-000000000000",
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "TEAM_NOT_FOUND").await;
        let res = app
            .as_(
                "server",
                Method::GET,
                &format!(
                    "/api/v1/team-member-profiles/{team_id}/{}",
                    outsider.user_id
                ),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "TEAM_MEMBERSHIP_NOT_FOUND").await;
    }
);

/// Calls admitted by the services (one shared counter per process; embedded runs one process).
async fn calls_served(app: &TestApp) -> i64 {
    use latchkey_proto::common::v1::{service_client::ServiceClient, DescribeRequest};
    let services: &[&str] = if app.auth_db_url.starts_with("sqlite") {
        &["auth"]
    } else {
        &["auth", "teams", "contacts"]
    };
    let mut total = 0;
    for service in services {
        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr(service))
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
        total += ServiceClient::new(channel)
            .describe(request)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner()
            .calls_served;
    }
    total
}

both_modes!(
    member_profiles_use_a_bounded_number_of_calls,
    |app: &TestApp| async move {
        let team = ok(
            app.as_("server", Method::POST, "/api/v1/teams")
                .json(&json!({"display_name": "Big"}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        let join = |i: usize| {
            let team_id = team_id.clone();
            async move {
                let user = ok(
                    app.as_("server", Method::POST, "/api/v1/users")
                        .json(&json!({"display_name": format!("member {i}")}))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{e}")),
                    201,
                )
                .await;
                let path = format!(
                    "/api/v1/team-memberships/{team_id}/{}",
                    user["id"].as_str().unwrap_or_default()
                );
                ok(
                    app.as_("server", Method::POST, &path)
                        .json(&json!({}))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{e}")),
                    201,
                )
                .await;
            }
        };
        for chunk in 0..40 {
            futures::future::join_all((0..25).map(|i| join(chunk * 25 + i))).await;
        }
        let before = calls_served(app).await;
        let profiles = ok(
            app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/team-member-profiles?team_id={team_id}"),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let after = calls_served(app).await;
        let items = profiles["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1000);
        assert!(items.iter().all(|p| p["user"]["id"] == p["user_id"]));
        // The listing, the batch user read, its batch channel read, a key check and the counting
        // calls themselves: a handful, whatever the team's size.
        assert!(
            after - before <= 12,
            "{} gRPC calls for one listing of 1,000 members",
            after - before
        );
    }
);
