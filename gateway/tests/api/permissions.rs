//! Permission definitions (50 §4) and project permissions (50 §3) through the gateway.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_error, both_modes, email, ok, TestApp};

const PASSWORD: &str = "blue-harbor-lantern-42";

fn ids(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["id"].as_str().map(str::to_owned))
        .collect()
}

both_modes!(
    definitions_and_project_permissions,
    |app: &TestApp| async move {
        let admin = |m: Method, path: &str| app.as_("admin", m, path);
        // Defaults: the team list has team_admin, team_member and the six system ids.
        let team_defs = ok(
            admin(Method::GET, "/api/v1/team-permission-definitions")
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(
            ids(&team_defs),
            [
                "$delete_team",
                "$invite_members",
                "$manage_api_keys",
                "$read_members",
                "$remove_members",
                "$update_team",
                "team_admin",
                "team_member"
            ]
        );
        assert_eq!(
            ok(
                admin(Method::GET, "/api/v1/project-permission-definitions")
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
                200
            )
            .await["items"],
            json!([])
        );
        let res = app
            .as_("server", Method::GET, "/api/v1/team-permission-definitions")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;

        // Create with containment; clashes and unknown contained ids refused.
        let create = |path: &'static str, body: Value| admin(Method::POST, path).json(&body).send();
        let reader = ok(
            create(
                "/api/v1/project-permission-definitions",
                json!({"id": "read_reports", "description": "Read reports"}),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        assert_eq!(
            reader,
            json!({"id": "read_reports", "description": "Read reports", "contained_permission_ids": []})
        );
        ok(
            create(
                "/api/v1/project-permission-definitions",
                json!({"id": "analyst", "contained_permission_ids": ["read_reports"]}),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;
        let res = create(
            "/api/v1/team-permission-definitions",
            json!({"id": "read_reports"}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "PERMISSION_ID_ALREADY_EXISTS").await;
        let res = create(
            "/api/v1/team-permission-definitions",
            json!({"id": "editor", "contained_permission_ids": ["read_reports"]}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "CONTAINED_PERMISSION_NOT_FOUND").await;
        let res = create(
            "/api/v1/team-permission-definitions",
            json!({"id": "$custom"}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 400, "SCHEMA_ERROR").await;
        ok(
            create(
                "/api/v1/team-permission-definitions",
                json!({"id": "editor", "contained_permission_ids": ["$update_team"]}),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            201,
        )
        .await;

        // Project grants: recursive listing expands containment; scopes are checked.
        let user = app.sign_up(&email("analyst"), PASSWORD).await;
        let grant = |m: Method, perm: &str| {
            app.as_(
                "server",
                m,
                &format!("/api/v1/project-permissions/{}/{perm}", user.user_id),
            )
            .json(&json!({}))
            .send()
        };
        assert_eq!(
            ok(
                grant(Method::POST, "analyst")
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
                201
            )
            .await,
            json!({"id": "analyst", "user_id": user.user_id})
        );
        let res = grant(Method::POST, "editor")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let body = assert_error(res, 404, "WRONG_PERMISSION_SCOPE").await;
        assert_eq!(
            (
                &body["details"]["expected_scope"],
                &body["details"]["actual_scope"]
            ),
            (&json!("project"), &json!("team"))
        );
        // System ids are team-scoped, yet as project permissions they are simply not found
        // (50 §4, issue 15).
        assert_error(
            grant(Method::POST, "$read_members")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            404,
            "PERMISSION_NOT_FOUND",
        )
        .await;
        assert_error(
            grant(Method::POST, "nothing_here")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            404,
            "PERMISSION_NOT_FOUND",
        )
        .await;
        let mine = ok(
            app.client(
                Method::GET,
                "/api/v1/project-permissions?user_id=me&recursive=true",
                Some(&user.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(ids(&mine), ["analyst", "read_reports"]);
        let res = app
            .client(
                Method::GET,
                "/api/v1/project-permissions",
                Some(&user.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        assert_error(
            grant(Method::DELETE, "read_reports")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            404,
            "PERMISSION_NOT_FOUND",
        )
        .await;

        // Rename follows grants and containment; delete removes grants and references.
        let renamed = ok(
            admin(
                Method::PATCH,
                "/api/v1/project-permission-definitions/read_reports",
            )
            .json(&json!({"id": "view_reports"}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(
            (&renamed["id"], &renamed["description"]),
            (&json!("view_reports"), &json!("Read reports"))
        );
        let mine = ok(
            app.as_(
                "server",
                Method::GET,
                &format!(
                    "/api/v1/project-permissions?user_id={}&recursive=true",
                    user.user_id
                ),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(ids(&mine), ["analyst", "view_reports"]);
        let res = admin(
            Method::PATCH,
            "/api/v1/team-permission-definitions/$update_team",
        )
        .json(&json!({"description": "x"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "PERMISSION_NOT_FOUND").await;
        ok(
            admin(
                Method::DELETE,
                "/api/v1/project-permission-definitions/analyst",
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        let mine = ok(
            app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/project-permissions?user_id={}", user.user_id),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(mine["items"], json!([]));
        let res = admin(
            Method::DELETE,
            "/api/v1/project-permission-definitions/analyst",
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_error(res, 404, "PERMISSION_NOT_FOUND").await;

        // New users get the project's user_default_permissions.
        app.settings(json!({"user_default_permissions": [{"id": "view_reports"}]}))
            .await;
        let fresh = app.sign_up(&email("fresh"), PASSWORD).await;
        let theirs = ok(
            app.client(
                Method::GET,
                "/api/v1/project-permissions?user_id=me",
                Some(&fresh.access),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(ids(&theirs), ["view_reports"]);
    }
);
