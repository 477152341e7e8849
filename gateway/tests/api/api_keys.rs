//! API keys of users and teams (issue 19 §3; Stack Auth's `/user-api-keys`, `/team-api-keys`):
//! shown once, read back by their last four characters, revoked for good, and checked by a
//! backend that wants to know whose a key is.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const PASSWORD: &str = "an api key password 1";

impl TestApp {
    async fn key_call(
        &self,
        access: &str,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> reqwest::Response {
        let mut req = self.as_(access, method, path);
        if let Some(t) = token {
            req = req.header("x-service-access-token", t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        send(req).await
    }

    async fn check_key(&self, family: &str, secret: &str) -> reqwest::Response {
        let path = format!("/api/v1/{family}-api-keys/check");
        let body = json!({ "api_key": secret });
        self.key_call("server", None, Method::POST, &path, Some(body))
            .await
    }
}

both_modes!(
    users_keep_api_keys_that_backends_can_check,
    |app: &TestApp| async move {
        let ada = app.sign_up(&email("ada-keys"), PASSWORD).await;
        let bob = app.sign_up(&email("bob-keys"), PASSWORD).await;
        let create = |expires: Value| json!({ "user_id": "me", "description": "laptop", "expires_at_millis": expires });
        let path = "/api/v1/user-api-keys";

        // Off until the project allows them.
        let current = ok(
            send(app.as_("client", Method::GET, "/api/v1/projects/current")).await,
            200,
        )
        .await;
        assert_eq!(current["config"]["allow_user_api_keys"], json!(false));
        let res = app
            .key_call(
                "client",
                Some(&ada.access),
                Method::POST,
                path,
                Some(create(Value::Null)),
            )
            .await;
        assert_error(res, 400, "API_KEYS_NOT_ENABLED").await;
        assert_error(
            app.check_key("user", "sk_user_x").await,
            400,
            "API_KEYS_NOT_ENABLED",
        )
        .await;
        app.settings(json!({ "allow_user_api_keys": true })).await;
        let current = ok(
            send(app.as_("client", Method::GET, "/api/v1/projects/current")).await,
            200,
        )
        .await;
        assert_eq!(current["config"]["allow_user_api_keys"], json!(true));
        assert_eq!(current["config"]["allow_team_api_keys"], json!(false));

        // Created by the signed-in user: the whole secret this once.
        let res = app
            .key_call(
                "client",
                None,
                Method::POST,
                path,
                Some(create(Value::Null)),
            )
            .await;
        assert_error(res, 401, "CANNOT_GET_OWN_USER_WITHOUT_USER").await;
        let other =
            json!({ "user_id": bob.user_id, "description": "x", "expires_at_millis": null });
        let res = app
            .key_call("client", Some(&ada.access), Method::POST, path, Some(other))
            .await;
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        let key = ok(
            app.key_call(
                "client",
                Some(&ada.access),
                Method::POST,
                path,
                Some(create(Value::Null)),
            )
            .await,
            200,
        )
        .await;
        let secret = key["value"].as_str().unwrap_or_default().to_owned();
        assert!(
            secret.starts_with("sk_user_") && secret.len() == 53,
            "{key}"
        );
        assert_eq!(key["user_id"], json!(ada.user_id));
        assert_eq!(
            (&key["type"], &key["is_public"]),
            (&json!("user"), &json!(false))
        );
        assert!(
            key.get("expires_at_millis").is_none()
                && key.get("manually_revoked_at_millis").is_none()
        );
        let id = key["id"].as_str().unwrap_or_default().to_owned();
        let public = ok(
            app.key_call(
                "client",
                Some(&ada.access),
                Method::POST,
                path,
                Some(json!({ "user_id": "me", "description": "web", "is_public": true, "expires_at_millis": null })),
            )
            .await,
            200,
        )
        .await;
        assert!(
            public["value"]
                .as_str()
                .is_some_and(|v| v.starts_with("pk_user_")),
            "{public}"
        );

        // Read back by the last four characters only, newest first; never another user's.
        let listed = ok(
            app.key_call(
                "client",
                Some(&ada.access),
                Method::GET,
                &format!("{path}?user_id=me"),
                None,
            )
            .await,
            200,
        )
        .await;
        assert_eq!(
            listed["items"].as_array().map(Vec::len),
            Some(2),
            "{listed}"
        );
        assert_eq!(
            listed["items"][1]["value"],
            json!({ "last_four": &secret[secret.len() - 4..] })
        );
        assert!(!listed.to_string().contains(&secret));
        let res = app
            .key_call("client", Some(&ada.access), Method::GET, path, None)
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let one = format!("{path}/{id}");
        let res = app
            .key_call("client", Some(&bob.access), Method::GET, &one, None)
            .await;
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        let revoke = Some(json!({ "revoked": true }));
        let res = app
            .key_call("client", Some(&bob.access), Method::PATCH, &one, revoke)
            .await;
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        let res = app
            .key_call(
                "server",
                None,
                Method::GET,
                &format!("{path}/not-a-uuid"),
                None,
            )
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let long =
            json!({ "user_id": "me", "description": "x".repeat(1001), "expires_at_millis": null });
        let res = app
            .key_call("client", Some(&ada.access), Method::POST, path, Some(long))
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let read = ok(
            app.key_call("server", None, Method::GET, &one, None).await,
            200,
        )
        .await;
        assert_eq!(read["id"], json!(id));
        let res = app
            .key_call(
                "server",
                None,
                Method::GET,
                &format!("/api/v1/team-api-keys/{id}"),
                None,
            )
            .await;
        assert_error(res, 400, "API_KEYS_NOT_ENABLED").await;

        // A backend checks a key: whose it is, or why not.
        let checked = ok(app.check_key("user", &secret).await, 200).await;
        assert_eq!(
            (&checked["id"], &checked["user_id"]),
            (&json!(id), &json!(ada.user_id))
        );
        let res = app
            .key_call(
                "client",
                Some(&ada.access),
                Method::POST,
                &format!("{path}/check"),
                Some(json!({ "api_key": secret })),
            )
            .await;
        assert_error(res, 401, "INSUFFICIENT_ACCESS_TYPE").await;
        assert_error(
            app.check_key("user", "sk_user_nothing").await,
            404,
            "API_KEY_NOT_FOUND",
        )
        .await;
        let expired = ok(
            app.key_call("server", None, Method::POST, path, Some(json!({
                "user_id": ada.user_id, "description": "old", "expires_at_millis": now_millis() - 1000,
            })))
            .await,
            200,
        )
        .await;
        let expired_secret = expired["value"].as_str().unwrap_or_default();
        assert_error(
            app.check_key("user", expired_secret).await,
            401,
            "API_KEY_EXPIRED",
        )
        .await;

        // Described again, then revoked for good.
        let patched = ok(
            app.key_call(
                "client",
                Some(&ada.access),
                Method::PATCH,
                &one,
                Some(json!({ "description": "old laptop" })),
            )
            .await,
            200,
        )
        .await;
        assert_eq!(patched["description"], json!("old laptop"));
        let res = app
            .key_call(
                "client",
                Some(&ada.access),
                Method::PATCH,
                &one,
                Some(json!({ "revoked": false })),
            )
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let revoked = ok(
            app.key_call(
                "client",
                Some(&ada.access),
                Method::PATCH,
                &one,
                Some(json!({ "revoked": true })),
            )
            .await,
            200,
        )
        .await;
        let at = revoked["manually_revoked_at_millis"].as_i64();
        assert!(at.is_some(), "{revoked}");
        assert_error(app.check_key("user", &secret).await, 401, "API_KEY_REVOKED").await;
        let again = ok(
            app.key_call(
                "server",
                None,
                Method::PATCH,
                &one,
                Some(json!({ "revoked": true })),
            )
            .await,
            200,
        )
        .await;
        assert_eq!(again["manually_revoked_at_millis"].as_i64(), at);

        // Another project knows none of it; a deleted user's keys go with the user.
        let b = app.other_project().await;
        let allow = app
            .request(Method::PATCH, "/api/v1/internal/project")
            .header("x-service-access-type", "admin")
            .header("x-service-project-id", &b.id)
            .header("x-service-super-secret-admin-key", &b.admin_key)
            .json(&json!({ "allow_user_api_keys": true }));
        ok(send(allow).await, 200).await;
        let elsewhere = app
            .request(Method::POST, "/api/v1/user-api-keys/check")
            .header("x-service-access-type", "server")
            .header("x-service-project-id", &b.id)
            .header("x-service-secret-server-key", &b.server_key)
            .json(&json!({ "api_key": public["value"] }));
        assert_error(send(elsewhere).await, 404, "API_KEY_NOT_FOUND").await;
        let public_secret = public["value"].as_str().unwrap_or_default();
        ok(app.check_key("user", public_secret).await, 200).await;
        ok(
            send(app.as_(
                "server",
                Method::DELETE,
                &format!("/api/v1/users/{}", ada.user_id),
            ))
            .await,
            200,
        )
        .await;
        assert_error(
            app.check_key("user", public_secret).await,
            404,
            "API_KEY_NOT_FOUND",
        )
        .await;
    }
);

both_modes!(
    team_keys_need_the_manage_permission_and_end_with_the_team,
    |app: &TestApp| async move {
        app.settings(json!({
            "allow_user_api_keys": true, "allow_team_api_keys": true, "client_team_creation_enabled": true,
        }))
        .await;
        let owner = app.sign_up(&email("team-owner"), PASSWORD).await;
        let member = app.sign_up(&email("team-member"), PASSWORD).await;
        let team = ok(
            app.key_call(
                "client",
                Some(&owner.access),
                Method::POST,
                "/api/v1/teams",
                Some(json!({
                    "display_name": "Keys", "creator_user_id": "me",
                })),
            )
            .await,
            201,
        )
        .await;
        let team_id = team["id"].as_str().unwrap_or_default().to_owned();
        ok(
            app.key_call(
                "server",
                None,
                Method::POST,
                &format!("/api/v1/team-memberships/{team_id}/{}", member.user_id),
                Some(json!({})),
            )
            .await,
            201,
        )
        .await;
        let path = "/api/v1/team-api-keys";
        let create = json!({ "team_id": team_id, "description": "ci", "expires_at_millis": null });

        // The creator holds $manage_api_keys (team_admin); a plain member finds nothing.
        let key = ok(
            app.key_call(
                "client",
                Some(&owner.access),
                Method::POST,
                path,
                Some(create.clone()),
            )
            .await,
            200,
        )
        .await;
        let secret = key["value"].as_str().unwrap_or_default().to_owned();
        assert!(secret.starts_with("sk_team_"), "{key}");
        assert_eq!(
            (&key["type"], &key["team_id"]),
            (&json!("team"), &json!(team_id))
        );
        assert!(key.get("user_id").is_none(), "{key}");
        let list = format!("{path}?team_id={team_id}");
        let listed = ok(
            app.key_call("client", Some(&owner.access), Method::GET, &list, None)
                .await,
            200,
        )
        .await;
        assert_eq!(
            listed["items"].as_array().map(Vec::len),
            Some(1),
            "{listed}"
        );
        for (method, path, body) in [
            (Method::GET, list.clone(), None),
            (Method::POST, path.to_owned(), Some(create.clone())),
            (
                Method::PATCH,
                format!("{path}/{}", key["id"].as_str().unwrap_or_default()),
                Some(json!({ "revoked": true })),
            ),
            (
                Method::GET,
                format!(
                    "{path}/{}?team_id={team_id}",
                    key["id"].as_str().unwrap_or_default()
                ),
                None,
            ),
        ] {
            let res = app
                .key_call("client", Some(&member.access), method, &path, body)
                .await;
            assert_error(res, 404, "API_KEY_NOT_FOUND").await;
        }
        // Granting the permission to the member lets them in.
        ok(
            app.key_call(
                "server",
                None,
                Method::POST,
                &format!(
                    "/api/v1/team-permissions/{team_id}/{}/$manage_api_keys",
                    member.user_id
                ),
                Some(json!({})),
            )
            .await,
            201,
        )
        .await;
        ok(
            app.key_call("client", Some(&member.access), Method::GET, &list, None)
                .await,
            200,
        )
        .await;

        // Checked as a team key, refused as a user key; a user key is refused as a team key.
        let checked = ok(app.check_key("team", &secret).await, 200).await;
        assert_eq!(checked["team_id"], json!(team_id));
        let res = app.check_key("user", &secret).await;
        let body = assert_error(res, 400, "WRONG_API_KEY_TYPE").await;
        assert_eq!(
            body["details"],
            json!({ "expected_type": "user", "actual_type": "team" })
        );
        let user_key = ok(
            app.key_call(
                "client",
                Some(&owner.access),
                Method::POST,
                "/api/v1/user-api-keys",
                Some(json!({
                    "user_id": "me", "description": "mine", "expires_at_millis": null,
                })),
            )
            .await,
            200,
        )
        .await;
        let res = app
            .check_key("team", user_key["value"].as_str().unwrap_or_default())
            .await;
        let body = assert_error(res, 400, "WRONG_API_KEY_TYPE").await;
        assert_eq!(
            body["details"],
            json!({ "expected_type": "team", "actual_type": "user" })
        );
        let user_path = format!(
            "/api/v1/user-api-keys/{}",
            key["id"].as_str().unwrap_or_default()
        );
        assert_error(
            app.key_call("server", None, Method::GET, &user_path, None)
                .await,
            404,
            "API_KEY_NOT_FOUND",
        )
        .await;

        // A server names a team that does not exist; a deleted team's keys stop at once.
        let nowhere = json!({ "team_id": uuid::Uuid::new_v4(), "description": "x", "expires_at_millis": null });
        assert_error(
            app.key_call("server", None, Method::POST, path, Some(nowhere))
                .await,
            404,
            "TEAM_NOT_FOUND",
        )
        .await;
        ok(
            app.key_call(
                "server",
                None,
                Method::DELETE,
                &format!("/api/v1/teams/{team_id}"),
                None,
            )
            .await,
            200,
        )
        .await;
        assert_error(
            app.check_key("team", &secret).await,
            404,
            "API_KEY_NOT_FOUND",
        )
        .await;
    }
);
