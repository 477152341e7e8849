//! Anonymous users (issue 19 §2; Stack Auth's `/auth/anonymous/sign-up`): their own token
//! audience and header, left out of lists unless asked for, upgraded in place by signing up,
//! and deleted after the project's age. (The OAuth upgrade is in `oauth`.)

use reqwest::Method;
use serde_json::json;

use crate::helpers::*;

const PASSWORD: &str = "an anonymous password 1";
const ALLOW: &str = "x-stack-allow-anonymous-user";

impl TestApp {
    async fn anonymous(&self) -> Session {
        let body = ok(
            send(self.client(Method::POST, "/api/v1/auth/anonymous/sign-up", None)).await,
            200,
        )
        .await;
        let field = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
        Session {
            access: field("access_token"),
            refresh: field("refresh_token"),
            user_id: field("user_id"),
        }
    }

    fn as_anonymous(&self, method: Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.client(method, path, Some(token)).header(ALLOW, "true")
    }

    async fn server_users(&self, query: &str) -> Vec<String> {
        let page = ok(
            send(self.as_("server", Method::GET, &format!("/api/v1/users?{query}"))).await,
            200,
        )
        .await;
        page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u["id"].as_str().map(str::to_owned))
            .collect()
    }
}

both_modes!(
    anonymous_users_have_their_own_tokens_and_stay_out_of_lists,
    |app: &TestApp| async move {
        let anon = app.anonymous().await;
        let c = claims(&anon.access);
        let project = &app.project.id;
        assert_eq!(c["aud"], json!(format!("{project}:anon")), "{c}");
        assert!(c["iss"]
            .as_str()
            .is_some_and(|i| i.ends_with(&format!("/api/v1/projects-anonymous-users/{project}"))));
        assert_eq!(
            (
                &c["is_anonymous"],
                &c["is_restricted"],
                &c["restricted_reason"]
            ),
            (&json!(true), &json!(true), &json!({ "type": "anonymous" }))
        );

        // The token works only where the request welcomes anonymous users.
        let res = send(app.client(Method::GET, "/api/v1/users/me", Some(&anon.access))).await;
        assert_error(res, 401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED").await;
        let res = send(
            app.client(Method::GET, "/api/v1/users/me", Some(&anon.access))
                .header("x-stack-allow-restricted-user", "true"),
        )
        .await;
        assert_error(res, 401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED").await;
        let me = ok(
            send(app.as_anonymous(Method::GET, "/api/v1/users/me", &anon.access)).await,
            200,
        )
        .await;
        assert_eq!(
            (&me["id"], &me["is_anonymous"]),
            (&json!(anon.user_id), &json!(true))
        );

        // The JWKS lists its key only when asked for anonymous keys.
        let jwks = |query: &'static str| {
            let path = format!("/api/v1/projects/{project}/.well-known/jwks.json{query}");
            async move {
                let keys = ok(send(app.get(&path)).await, 200).await;
                keys["keys"].as_array().map(Vec::len).unwrap_or_default()
            }
        };
        let (plain, restricted, anonymous) = (
            jwks("").await,
            jwks("?include_restricted=true").await,
            jwks("?include_anonymous=true").await,
        );
        assert!(
            plain < restricted && restricted < anonymous,
            "{plain} {restricted} {anonymous}"
        );

        // Lists leave anonymous users out unless asked for.
        let member = app.sign_up(&email("not-anon"), PASSWORD).await;
        let all = app.server_users("").await;
        assert!(
            all.contains(&member.user_id) && !all.contains(&anon.user_id),
            "{all:?}"
        );
        let with = app.server_users("include_anonymous=true").await;
        assert!(with.contains(&member.user_id) && with.contains(&anon.user_id));
        let only = app
            .server_users("include_anonymous=true&only_anonymous=true")
            .await;
        assert!(only.contains(&anon.user_id) && !only.contains(&member.user_id));
        // Paged one by one, each list is the same as in one page.
        for _ in 0..2 {
            app.anonymous().await;
        }
        app.sign_up(&email("not-anon-2"), PASSWORD).await;
        for (query, at_least) in [
            ("", 2),
            ("include_anonymous=true", 5),
            ("include_anonymous=true&only_anonymous=true", 3),
        ] {
            let whole = app.server_users(query).await;
            assert!(whole.len() >= at_least, "{query}: {whole:?}");
            let mut paged = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let after = cursor
                    .as_ref()
                    .map(|c| format!("&cursor={c}"))
                    .unwrap_or_default();
                let page = ok(
                    send(app.as_(
                        "server",
                        Method::GET,
                        &format!("/api/v1/users?limit=1&{query}{after}"),
                    ))
                    .await,
                    200,
                )
                .await;
                paged.extend(
                    page["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|u| u["id"].as_str().map(str::to_owned)),
                );
                cursor = page["pagination"]["next_cursor"]
                    .as_str()
                    .map(str::to_owned);
                if cursor.is_none() {
                    break;
                }
            }
            assert_eq!(paged, whole, "{query}");
        }
        let res = send(app.as_("server", Method::GET, "/api/v1/users?only_anonymous=true")).await;
        assert_error(res, 400, "BAD_REQUEST").await;
        let one = ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/users/{}", anon.user_id),
            ))
            .await,
            200,
        )
        .await;
        assert_eq!(one["is_anonymous"], json!(true));
        // The SDK accepts no other role, anonymous users' tokens included.
        assert_eq!(claims(&anon.access)["role"], json!("authenticated"));

        // A CLI signs in as a full user only.
        let cli = ok(
            send(app.client(Method::POST, "/api/v1/auth/cli", None)).await,
            200,
        )
        .await;
        let res = send(
            app.client(Method::POST, "/api/v1/auth/cli/complete", None)
                .json(&json!({
                    "login_code": cli["login_code"], "refresh_token": anon.refresh,
                })),
        )
        .await;
        assert_error(res, 401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED").await;
    }
);

both_modes!(
    signing_up_upgrades_the_anonymous_user_in_place,
    |app: &TestApp| async move {
        app.settings(json!({ "magic_link_enabled": true, "allow_localhost": true }))
            .await;
        // An anonymous visitor with metadata and a team.
        let anon = app.anonymous().await;
        ok(
            send(
                app.as_anonymous(Method::PATCH, "/api/v1/users/me", &anon.access)
                    .json(&json!({ "client_metadata": { "cart": [1, 2] } })),
            )
            .await,
            200,
        )
        .await;
        let team = ok(
            send(
                app.as_("server", Method::POST, "/api/v1/teams")
                    .json(&json!({
                        "display_name": "Visitors", "creator_user_id": anon.user_id,
                    })),
            )
            .await,
            201,
        )
        .await;

        // A password sign-up while signed in as it: the same user, a new session.
        let address = email("upgraded");
        let res = send(
            app.as_anonymous(Method::POST, "/api/v1/auth/password/sign-up", &anon.access)
                .json(&json!({ "email": address, "password": PASSWORD })),
        )
        .await;
        let signed = ok(res, 200).await;
        assert_eq!(signed["user_id"], json!(anon.user_id));
        assert_ne!(signed["refresh_token"], json!(anon.refresh));
        let access = signed["access_token"].as_str().unwrap_or_default();
        assert_eq!(claims(access)["aud"], json!(app.project.id));
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(access))).await,
            200,
        )
        .await;
        assert_eq!(
            (&me["id"], &me["is_anonymous"], &me["primary_email"]),
            (&json!(anon.user_id), &json!(false), &json!(address))
        );
        assert_eq!(me["client_metadata"], json!({ "cart": [1, 2] }));
        let teams = ok(
            send(app.client(Method::GET, "/api/v1/teams?user_id=me", Some(access))).await,
            200,
        )
        .await;
        assert_eq!(teams["items"][0]["id"], team["id"]);
        assert!(app.server_users("").await.contains(&anon.user_id));
        let (status, _) = app.sign_in(&address, PASSWORD).await;
        assert_eq!(status, 200);

        // A full user signing up again makes another user, as without a token.
        let other = send(
            app.client(Method::POST, "/api/v1/auth/password/sign-up", Some(access))
                .json(&json!({ "email": email("second"), "password": PASSWORD })),
        )
        .await;
        assert_ne!(ok(other, 200).await["user_id"], json!(anon.user_id));

        // Two sign-ups at once by one anonymous user: exactly one upgrades it. The other is
        // refused and leaves its address free (or, had it come after the upgrade, signed up a
        // user of its own). The loser loses either at the upgrade or, when both reserve their
        // address at the same moment, at the reservation; a few rounds meet both.
        for round in 0..4 {
            let anon = app.anonymous().await;
            let (first, second) = (
                email(&format!("race-a{round}")),
                email(&format!("race-b{round}")),
            );
            let sign_up = |address: &str| {
                send(
                    app.as_anonymous(Method::POST, "/api/v1/auth/password/sign-up", &anon.access)
                        .json(&json!({ "email": address, "password": PASSWORD })),
                )
            };
            let (a, b) = tokio::join!(sign_up(&first), sign_up(&second));
            let (a, b) = (parts(a).await, parts(b).await);
            let upgraded = [&a, &b]
                .iter()
                .filter(|(status, body, _)| {
                    *status == 200 && body["user_id"] == json!(anon.user_id)
                })
                .count();
            assert_eq!(upgraded, 1, "{a:?} {b:?}");
            for ((status, body, _), address) in [(&a, &first), (&b, &second)] {
                match status {
                    200 => {}
                    400 => {
                        assert_eq!(body["code"], json!("BAD_REQUEST"), "{body}");
                        app.sign_up(address, PASSWORD).await;
                    }
                    other => panic!("{other} {body}"),
                }
            }
        }

        // A one-time code signs up and upgrades too.
        let anon = app.anonymous().await;
        let address = email("otp-upgraded");
        let res = send(
            app.client(Method::POST, "/api/v1/auth/otp/send-sign-in-code", None)
                .json(&json!({ "email": address, "callback_url": "http://localhost/magic" })),
        )
        .await;
        ok(res, 200).await;
        let code = crate::smtp::code_in(&app.mail.wait_for(&address).await);
        let signed = ok(
            send(
                app.as_anonymous(Method::POST, "/api/v1/auth/otp/sign-in", &anon.access)
                    .json(&json!({ "code": code })),
            )
            .await,
            200,
        )
        .await;
        assert_eq!(signed["user_id"], json!(anon.user_id));
        assert_ne!(signed["refresh_token"], json!(anon.refresh));
        let access = signed["access_token"].as_str().unwrap_or_default();
        let me = ok(
            send(app.client(Method::GET, "/api/v1/users/me", Some(access))).await,
            200,
        )
        .await;
        assert_eq!(
            (&me["is_anonymous"], &me["primary_email"]),
            (&json!(false), &json!(address))
        );
    }
);

both_modes!(
    old_anonymous_users_are_deleted,
    |app: &TestApp| async move {
        let keep = app.anonymous().await;
        let member = app.sign_up(&email("stays"), PASSWORD).await;
        // Shorter ages are swept more often: at half the age.
        app.settings(json!({ "anonymous_user_max_age_seconds": 2 }))
            .await;
        let started = std::time::Instant::now();
        loop {
            let res = send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/users/{}", keep.user_id),
            ))
            .await;
            if res.status() == 404 {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "the anonymous user was not deleted"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        let res = send(
            app.client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
                .header("x-stack-refresh-token", &keep.refresh),
        )
        .await;
        assert_error(res, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED").await;
        ok(
            send(app.as_(
                "server",
                Method::GET,
                &format!("/api/v1/users/{}", member.user_id),
            ))
            .await,
            200,
        )
        .await;
        let res = send(
            app.as_("admin", Method::PATCH, "/api/v1/internal/project")
                .json(&json!({ "anonymous_user_max_age_seconds": 0 })),
        )
        .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
    }
);
