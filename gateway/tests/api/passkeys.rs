//! Passkeys (issue 19 §1; Stack Auth's `/auth/passkey/*`): registration by a signed-in user,
//! usernameless sign-in, the relying party taken from a trusted origin, single-use challenges,
//! counters, user verification, TOTP after a passkey, and passkeys listed and deleted. Every
//! answer comes from `authenticator`, a software authenticator signing with real keys.

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use crate::authenticator::Authenticator;
use crate::helpers::*;

const PASSWORD: &str = "a passkey user password 1";
const PLACEHOLDER: &str = "THIS_VALUE_WILL_BE_REPLACED.example.com";
pub(crate) const ORIGIN: &str = "http://localhost:5173";

impl TestApp {
    /// What the SDK does before calling the browser: the page's host replaces the placeholder.
    pub(crate) async fn passkey_options(
        &self,
        route: &str,
        token: Option<&str>,
    ) -> (Value, String) {
        let path = format!("/api/v1/auth/passkey/{route}");
        let body = ok(
            send(self.client(Method::POST, &path, token).json(&json!({}))).await,
            200,
        )
        .await;
        let mut options = body["options_json"].clone();
        if options["rp"].is_object() {
            assert_eq!(options["rp"]["id"], PLACEHOLDER, "{options}");
            options["rp"]["id"] = json!("localhost");
        } else {
            assert_eq!(options["rpId"], PLACEHOLDER, "{options}");
            options["rpId"] = json!("localhost");
        }
        (
            options,
            body["code"].as_str().unwrap_or_default().to_owned(),
        )
    }

    async fn register_passkey(&self, device: &mut Authenticator, token: &str) -> Value {
        let (options, code) = self
            .passkey_options("initiate-passkey-registration", Some(token))
            .await;
        let credential = device.register(&options, ORIGIN);
        let res = self
            .client(Method::POST, "/api/v1/auth/passkey/register", Some(token))
            .json(&json!({ "credential": credential, "code": code }));
        ok(send(res).await, 200).await
    }

    /// A sign-in with the device's credential `index`, answered as the gateway answers it.
    async fn passkey_sign_in(
        &self,
        device: &mut Authenticator,
        index: usize,
        origin: &str,
    ) -> reqwest::Response {
        let (options, code) = self
            .passkey_options("initiate-passkey-authentication", None)
            .await;
        let answer = device.sign(index, &options, origin);
        self.passkey_answer(&answer, &code).await
    }

    pub(crate) async fn passkey_answer(&self, answer: &Value, code: &str) -> reqwest::Response {
        let body = json!({ "authentication_response": answer, "code": code });
        send(
            self.client(Method::POST, "/api/v1/auth/passkey/sign-in", None)
                .json(&body),
        )
        .await
    }

    async fn me(&self, token: &str) -> Value {
        ok(
            send(self.client(Method::GET, "/api/v1/users/me", Some(token))).await,
            200,
        )
        .await
    }

    async fn passkeys_of_me(&self, token: &str) -> Vec<Value> {
        let list = ok(
            send(self.client(Method::GET, "/api/v1/users/me/passkeys", Some(token))).await,
            200,
        )
        .await;
        list["items"].as_array().cloned().unwrap_or_default()
    }
}

both_modes!(
    a_passkey_registers_signs_in_and_is_deleted,
    |app: &TestApp| async move {
        // Off until the project enables it, as in Stack Auth.
        let res = send(
            app.client(
                Method::POST,
                "/api/v1/auth/passkey/initiate-passkey-authentication",
                None,
            )
            .json(&json!({})),
        )
        .await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_NOT_ENABLED").await;
        app.settings(json!({ "passkey_enabled": true, "allow_localhost": true }))
            .await;
        let current = ok(
            send(app.client(Method::GET, "/api/v1/projects/current", None)).await,
            200,
        )
        .await;
        assert_eq!(current["config"]["passkey_enabled"], true, "{current}");

        let user = app.sign_up(&email("passkey"), PASSWORD).await;
        // Registration needs a signed-in user.
        let res = send(
            app.client(
                Method::POST,
                "/api/v1/auth/passkey/initiate-passkey-registration",
                None,
            )
            .json(&json!({})),
        )
        .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;

        let (options, code) = app
            .passkey_options("initiate-passkey-registration", Some(&user.access))
            .await;
        let selection = &options["authenticatorSelection"];
        assert_eq!(selection["residentKey"], "required", "{options}");
        assert_eq!(selection["userVerification"], "required", "{options}");
        // The browser gives up before the code expires (65 s).
        assert!(
            options["timeout"].as_u64().is_some_and(|t| t <= 60_000),
            "{options}"
        );
        let user_handle = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(options["user"]["id"].as_str().unwrap_or_default())
            .unwrap_or_default();
        assert_eq!(
            uuid::Uuid::from_slice(&user_handle)
                .map(|u| u.to_string())
                .ok(),
            Some(user.user_id.clone())
        );
        let updates = |events: Vec<String>| events.iter().filter(|t| *t == "user.updated").count();
        let updated_before = updates(app.auth_outbox().await);
        let mut device = Authenticator::default();
        let credential = device.register(&options, ORIGIN);
        let register = |credential: &Value, code: &str| {
            app.client(
                Method::POST,
                "/api/v1/auth/passkey/register",
                Some(&user.access),
            )
            .json(&json!({ "credential": credential, "code": code }))
        };
        let done = ok(send(register(&credential, &code)).await, 200).await;
        assert_eq!(done["user_handle"], credential["id"], "{done}");
        // The challenge was answered; it is not answered twice.
        let res = send(register(&credential, &code)).await;
        assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;
        assert_eq!(app.me(&user.access).await["passkey_auth_enabled"], true);
        assert_eq!(updates(app.auth_outbox().await), updated_before + 1);

        // Usernameless sign-in: no credentials listed, the user found from the credential.
        let (options, _) = app
            .passkey_options("initiate-passkey-authentication", None)
            .await;
        assert!(
            options["allowCredentials"]
                .as_array()
                .is_none_or(Vec::is_empty),
            "{options}"
        );
        let signed = ok(app.passkey_sign_in(&mut device, 0, ORIGIN).await, 200).await;
        assert_eq!(signed["user_id"], json!(user.user_id), "{signed}");
        assert_eq!(signed["is_new_user"], false);
        let token = signed["access_token"].as_str().unwrap_or_default();
        assert_eq!(app.me(token).await["id"], json!(user.user_id));
        let listed = app.passkeys_of_me(&user.access).await;
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0]["credential_id"], credential["id"]);
        assert!(listed[0]["last_used_at_millis"].is_i64(), "{listed:?}");

        // A page the project does not trust cannot use the passkey.
        let res = app
            .passkey_sign_in(&mut device, 0, "https://evil.example")
            .await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        // An authenticator that did not verify its user is refused.
        device.skip_verification = true;
        let res = app.passkey_sign_in(&mut device, 0, ORIGIN).await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        device.skip_verification = false;
        // A counter that does not move forward says the key was cloned: the stored counter is
        // 1 (one accepted sign-in), and this answer says 1 again.
        device.credentials[0].counter = 0;
        let res = app.passkey_sign_in(&mut device, 0, ORIGIN).await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        device.credentials[0].counter = 10;
        ok(app.passkey_sign_in(&mut device, 0, ORIGIN).await, 200).await;
        // A registration's code does not answer a sign-in.
        let (options, code) = app
            .passkey_options("initiate-passkey-registration", Some(&user.access))
            .await;
        let answer = device.sign(
            0,
            &json!({ "rpId": "localhost", "challenge": options["challenge"] }),
            ORIGIN,
        );
        assert_error(
            app.passkey_answer(&answer, &code).await,
            404,
            "VERIFICATION_CODE_NOT_FOUND",
        )
        .await;

        // A user with TOTP still answers the second factor after a passkey.
        let secret = base64::engine::general_purpose::STANDARD.encode([9u8; 20]);
        let path = format!("/api/v1/users/{}", user.user_id);
        let set = app
            .as_("server", Method::PATCH, &path)
            .json(&json!({ "totp_secret_base64": secret }));
        ok(send(set).await, 200).await;
        let res = app.passkey_sign_in(&mut device, 0, ORIGIN).await;
        let body = assert_error(res, 400, "MULTI_FACTOR_AUTHENTICATION_REQUIRED").await;
        assert_eq!(
            body["details"]["attempt_code"].as_str().map(str::len),
            Some(45)
        );
        let unset = app
            .as_("server", Method::PATCH, &path)
            .json(&json!({ "totp_secret_base64": null }));
        ok(send(unset).await, 200).await;

        // Deleted as an auth method: the user's flag follows and the credential stops working.
        let id = listed[0]["id"].as_str().unwrap_or_default();
        let delete = |id: &str| {
            app.client(
                Method::DELETE,
                &format!("/api/v1/users/me/passkeys/{id}"),
                Some(&user.access),
            )
        };
        ok(send(delete(id)).await, 200).await;
        assert_error(send(delete(id)).await, 404, "PASSKEY_NOT_FOUND").await;
        assert_eq!(app.me(&user.access).await["passkey_auth_enabled"], false);
        let res = app.passkey_sign_in(&mut device, 0, ORIGIN).await;
        let body = assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        assert_eq!(body["details"]["message"], "Passkey not found", "{body}");
    }
);

both_modes!(
    passkeys_belong_to_their_user_and_project,
    |app: &TestApp| async move {
        app.settings(json!({ "passkey_enabled": true, "allow_localhost": true }))
            .await;
        let alice = app.sign_up(&email("alice"), PASSWORD).await;
        let bob = app.sign_up(&email("bob"), PASSWORD).await;
        let mut phone = Authenticator::default();
        app.register_passkey(&mut phone, &alice.access).await;
        app.register_passkey(&mut phone, &alice.access).await;
        assert_eq!(app.passkeys_of_me(&alice.access).await.len(), 2);

        // Bob cannot finish Alice's registration, nor read her passkeys.
        let (options, code) = app
            .passkey_options("initiate-passkey-registration", Some(&alice.access))
            .await;
        let credential = phone.register(&options, ORIGIN);
        let res = send(
            app.client(
                Method::POST,
                "/api/v1/auth/passkey/register",
                Some(&bob.access),
            )
            .json(&json!({ "credential": credential, "code": code })),
        )
        .await;
        assert_error(res, 400, "PASSKEY_REGISTRATION_FAILED").await;
        let path = format!("/api/v1/users/{}/passkeys", alice.user_id);
        let res = send(app.client(Method::GET, &path, Some(&bob.access))).await;
        assert_error(res, 403, "CLIENT_ACCESS_OWN_USER_ONLY").await;
        let listed = ok(send(app.as_("server", Method::GET, &path)).await, 200).await;
        assert_eq!(listed["items"].as_array().map(Vec::len), Some(2));
        // Nor delete one of hers through his own path.
        let alices = listed["items"][0]["id"].as_str().unwrap_or_default();
        let res = send(app.client(
            Method::DELETE,
            &format!("/api/v1/users/me/passkeys/{alices}"),
            Some(&bob.access),
        ))
        .await;
        assert_error(res, 404, "PASSKEY_NOT_FOUND").await;
        assert_eq!(app.passkeys_of_me(&alice.access).await.len(), 2);

        // Two sign-ins racing with one counter value (a cloned key): exactly one passes.
        let (first, first_code) = app
            .passkey_options("initiate-passkey-authentication", None)
            .await;
        let (second, second_code) = app
            .passkey_options("initiate-passkey-authentication", None)
            .await;
        let counter = phone.credentials[0].counter;
        let first = phone.sign(0, &first, ORIGIN);
        phone.credentials[0].counter = counter;
        let second = phone.sign(0, &second, ORIGIN);
        let (a, b) = tokio::join!(
            app.passkey_answer(&first, &first_code),
            app.passkey_answer(&second, &second_code)
        );
        let mut statuses = [a.status().as_u16(), b.status().as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400]);

        // An authenticator naming another user for the credential is refused.
        let (options, code) = app
            .passkey_options("initiate-passkey-authentication", None)
            .await;
        let alices_handle = phone.credentials[0].user_handle.clone();
        phone.credentials[0].user_handle = uuid::Uuid::parse_str(&bob.user_id)
            .map(|u| u.as_bytes().to_vec())
            .unwrap_or_default();
        let forged = phone.sign(0, &options, ORIGIN);
        let res = app.passkey_answer(&forged, &code).await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        phone.credentials[0].user_handle = alices_handle;

        // Another project, with passkeys on and the same origin trusted, knows none of them.
        let other = app.other_project().await;
        let in_other = |method: Method, path: &str, access: &str| {
            let key = if access == "admin" {
                ("x-service-super-secret-admin-key", &other.admin_key)
            } else {
                ("x-service-publishable-client-key", &other.client_key)
            };
            app.request(method, path)
                .header("x-service-access-type", access)
                .header("x-service-project-id", &other.id)
                .header(key.0, key.1)
        };
        let enable = in_other(Method::PATCH, "/api/v1/internal/project", "admin")
            .json(&json!({ "passkey_enabled": true, "allow_localhost": true }));
        ok(send(enable).await, 200).await;
        let initiate = in_other(
            Method::POST,
            "/api/v1/auth/passkey/initiate-passkey-authentication",
            "client",
        )
        .json(&json!({}));
        let started = ok(send(initiate).await, 200).await;
        let mut options = started["options_json"].clone();
        options["rpId"] = json!("localhost");
        let answer = phone.sign(0, &options, ORIGIN);
        let body = json!({ "authentication_response": answer, "code": started["code"] });
        let res =
            send(in_other(Method::POST, "/api/v1/auth/passkey/sign-in", "client").json(&body))
                .await;
        assert_error(res, 400, "PASSKEY_AUTHENTICATION_FAILED").await;
        // And the challenge of the other project does not answer in this one.
        let answer = phone.sign(0, &options, ORIGIN);
        let code = started["code"].as_str().unwrap_or_default();
        let res = app.passkey_answer(&answer, code).await;
        assert_error(res, 404, "VERIFICATION_CODE_NOT_FOUND").await;
        ok(app.passkey_sign_in(&mut phone, 0, ORIGIN).await, 200).await;

        // Stack Auth's way to delete: passkey_auth_enabled false on the user removes them all.
        let res = send(
            app.client(Method::PATCH, "/api/v1/users/me", Some(&alice.access))
                .json(&json!({ "passkey_auth_enabled": false })),
        )
        .await;
        let body = ok(res, 200).await;
        assert_eq!(body["passkey_auth_enabled"], false, "{body}");
        assert!(app.passkeys_of_me(&alice.access).await.is_empty());
        let res = send(
            app.client(Method::PATCH, "/api/v1/users/me", Some(&alice.access))
                .json(&json!({ "passkey_auth_enabled": true })),
        )
        .await;
        assert_error(res, 400, "BAD_REQUEST").await;
    }
);
