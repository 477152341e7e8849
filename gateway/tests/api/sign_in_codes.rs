//! One-time-code sign-in (10 §2) and TOTP multi-factor sign-in (10 §3), over real SMTP.

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const CALLBACK: &str = "http://localhost/magic";
const PASSWORD: &str = "correct horse battery";

impl TestApp {
    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client(Method::POST, path, None)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Sends a sign-in code; returns the nonce, the mailed OTP and the link's full code.
    async fn send_otp(&self, address: &str) -> (String, String, String) {
        let body = json!({ "email": address, "callback_url": CALLBACK });
        let sent = ok(
            self.post("/api/v1/auth/otp/send-sign-in-code", body).await,
            200,
        )
        .await;
        assert_eq!(sent.as_object().map(|o| o.len()), Some(1), "{sent}");
        let nonce = sent["nonce"].as_str().unwrap_or_default().to_owned();
        let mail = self.mail.wait_for(address).await;
        let link_code = crate::smtp::code_in(&mail);
        let text = mail.data.replace("=\n", "");
        let at = text
            .find("code is ")
            .unwrap_or_else(|| panic!("no OTP in {text}"))
            + 8;
        let otp: String = text[at..].chars().take(6).collect();
        (nonce, otp, link_code)
    }
}

/// RFC 6238 code for `secret` at `unix_seconds`, written independently of the server's.
fn totp(secret: &[u8], unix_seconds: u64) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret);
    let tag = ring::hmac::sign(&key, &(unix_seconds / 30).to_be_bytes());
    let d = tag.as_ref();
    let o = (d[19] & 0xf) as usize;
    let n = u32::from_be_bytes([d[o] & 0x7f, d[o + 1], d[o + 2], d[o + 3]]) % 1_000_000;
    format!("{n:06}")
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

both_modes!(
    otp_sign_in_by_code_and_by_link,
    |app: &TestApp| async move {
        let address = email("otp");
        let code_body = |code: &str| json!({ "code": code });
        let unknown = "a".repeat(45);

        // Off by default: every route says so.
        let send = json!({ "email": address, "callback_url": CALLBACK });
        let res = app
            .post("/api/v1/auth/otp/send-sign-in-code", send.clone())
            .await;
        assert_error(res, 403, "OTP_SIGN_IN_NOT_ENABLED").await;
        for path in [
            "/api/v1/auth/otp/sign-in",
            "/api/v1/auth/otp/sign-in/check-code",
        ] {
            assert_error(
                app.post(path, code_body(&unknown)).await,
                403,
                "OTP_SIGN_IN_NOT_ENABLED",
            )
            .await;
        }
        app.settings(json!({ "magic_link_enabled": true, "allow_localhost": true }))
            .await;

        let untrusted = json!({ "email": address, "callback_url": "https://evil.example/cb" });
        let res = app
            .post("/api/v1/auth/otp/send-sign-in-code", untrusted)
            .await;
        assert_error(res, 400, "REDIRECT_URL_NOT_WHITELISTED").await;
        let res = app
            .post(
                "/api/v1/auth/otp/send-sign-in-code",
                json!({ "email": "not-an-email", "callback_url": CALLBACK }),
            )
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;

        // A new address: the code signs up, shown as six upper-case characters plus the nonce.
        let (nonce, otp, link_code) = app.send_otp(&address).await;
        assert_eq!(nonce.len(), 39);
        assert_eq!(otp, link_code[..6].to_uppercase());
        assert_eq!(nonce, link_code[6..]);
        let typed = format!("{otp}{nonce}");
        let res = app
            .post("/api/v1/auth/otp/sign-in/check-code", code_body(&typed))
            .await;
        assert_eq!(ok(res, 200).await, json!({ "is_code_valid": true }));
        let first = ok(
            app.post("/api/v1/auth/otp/sign-in", code_body(&typed))
                .await,
            200,
        )
        .await;
        assert_eq!(first["is_new_user"], true);
        let token = first["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let me = ok(
            app.client(Method::GET, "/api/v1/users/me", Some(&token))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            200,
        )
        .await;
        assert_eq!(me["primary_email"], address.as_str());
        assert_eq!(me["primary_email_verified"], true);
        assert_eq!(me["otp_auth_enabled"], true);
        assert_eq!(me["has_password"], false);
        let res = app
            .post("/api/v1/auth/otp/sign-in", code_body(&typed))
            .await;
        assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;

        // The same address again, by the link's code: the same user, not new.
        let (_, _, link_code) = app.send_otp(&address).await;
        let again = ok(
            app.post("/api/v1/auth/otp/sign-in", code_body(&link_code))
                .await,
            200,
        )
        .await;
        assert_eq!(again["is_new_user"], false);
        assert_eq!(again["user_id"], first["user_id"]);

        // Bad codes.
        assert_error(
            app.post("/api/v1/auth/otp/sign-in", code_body(&unknown))
                .await,
            404,
            "VERIFICATION_CODE_NOT_FOUND",
        )
        .await;
        assert_error(
            app.post("/api/v1/auth/otp/sign-in", code_body("short"))
                .await,
            400,
            "SCHEMA_ERROR",
        )
        .await;

        // An address signed up by password and not verified gets a code like any other (the
        // answer must not tell that an account exists), but the code cannot sign in: the
        // refusal comes only to whoever holds the mailbox.
        let unverified = email("unverified");
        app.sign_up(&unverified, PASSWORD).await;
        let (_, _, unverified_code) = app.send_otp(&unverified).await;
        let err = assert_error(
            app.post("/api/v1/auth/otp/sign-in", code_body(&unverified_code))
                .await,
            409,
            "USER_EMAIL_ALREADY_EXISTS",
        )
        .await;
        assert_eq!(err["details"]["would_work_if_email_was_verified"], true);

        // No sign-up: a new address gets a code that is refused at sign-in; a known one works.
        app.settings(json!({ "sign_up_enabled": false })).await;
        let (_, _, newcomer_code) = app.send_otp(&email("newcomer")).await;
        assert_error(
            app.post("/api/v1/auth/otp/sign-in", code_body(&newcomer_code))
                .await,
            400,
            "SIGN_UP_NOT_ENABLED",
        )
        .await;
        let (_, _, link_code) = app.send_otp(&address).await;
        ok(
            app.post("/api/v1/auth/otp/sign-in", code_body(&link_code))
                .await,
            200,
        )
        .await;
    }
);

both_modes!(
    totp_users_get_no_tokens_without_a_valid_totp,
    |app: &TestApp| async move {
        app.settings(json!({ "magic_link_enabled": true, "allow_localhost": true }))
            .await;
        let mut secret = [0u8; 20];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .unwrap_or_else(|_| panic!("random"));
        let secret_b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        let address = email("mfa");
        let create = json!({
            "primary_email": address, "primary_email_verified": true, "primary_email_auth_enabled": true,
            "password": PASSWORD, "totp_secret_base64": secret_b64,
        });
        let res = app
            .as_("server", Method::POST, "/api/v1/users")
            .json(&create)
            .send()
            .await;
        let user = ok(res.unwrap_or_else(|e| panic!("{e}")), 201).await;
        assert_eq!(user["requires_totp_mfa"], true);
        assert!(
            !user.to_string().contains(&secret_b64),
            "the secret is write-only"
        );
        let user_id = user["id"].as_str().unwrap_or_default().to_owned();

        let attempt = |body: Value| -> String {
            assert_eq!(
                body["code"], "MULTI_FACTOR_AUTHENTICATION_REQUIRED",
                "{body}"
            );
            assert!(body.get("access_token").is_none());
            body["details"]["attempt_code"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let (status, body) = app.sign_in(&address, PASSWORD).await;
        assert_eq!(status, 400);
        let code = attempt(body);
        assert_eq!(code.len(), 45);

        let mfa = |code: &str, totp: &str| json!({ "type": "totp", "totp": totp, "code": code });
        let res = app
            .post(
                "/api/v1/auth/mfa/sign-in",
                json!({ "type": "sms", "totp": "123456", "code": code }),
            )
            .await;
        assert_error(res, 400, "SCHEMA_ERROR").await;
        let right = totp(&secret, now_seconds());
        let wrong = if right == "000000" {
            "000001"
        } else {
            "000000"
        };
        assert_error(
            app.post("/api/v1/auth/mfa/sign-in", mfa(&code, wrong))
                .await,
            400,
            "INVALID_TOTP_CODE",
        )
        .await;
        // A wrong TOTP leaves the attempt code usable.
        let signed = ok(
            app.post("/api/v1/auth/mfa/sign-in", mfa(&code, &right))
                .await,
            200,
        )
        .await;
        assert_eq!(signed["user_id"], user_id.as_str());
        assert_eq!(signed["is_new_user"], false);
        let token = signed["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        app.me_becomes(&token, 200, std::time::Duration::from_secs(1))
            .await;
        assert_error(
            app.post("/api/v1/auth/mfa/sign-in", mfa(&code, &right))
                .await,
            409,
            "VERIFICATION_CODE_ALREADY_USED",
        )
        .await;

        // A used TOTP step is refused with a fresh attempt code.
        let (_, body) = app.sign_in(&address, PASSWORD).await;
        let code = attempt(body);
        assert_error(
            app.post("/api/v1/auth/mfa/sign-in", mfa(&code, &right))
                .await,
            400,
            "INVALID_TOTP_CODE",
        )
        .await;
        assert_error(
            app.post("/api/v1/auth/mfa/sign-in", mfa(&"b".repeat(45), &right))
                .await,
            404,
            "VERIFICATION_CODE_NOT_FOUND",
        )
        .await;

        // OTP sign-in asks for the second factor too, and its code is spent anyway.
        let (_, _, link_code) = app.send_otp(&address).await;
        let res = app
            .post("/api/v1/auth/otp/sign-in", json!({ "code": link_code }))
            .await;
        attempt(ok(res, 400).await);
        let res = app
            .post("/api/v1/auth/otp/sign-in", json!({ "code": link_code }))
            .await;
        assert_error(res, 409, "VERIFICATION_CODE_ALREADY_USED").await;

        // A password reset does not skip it.
        let body = json!({ "email": address, "callback_url": "http://localhost/reset" });
        ok(
            app.post("/api/v1/auth/password/send-reset-code", body)
                .await,
            200,
        )
        .await;
        let reset_code = crate::smtp::code_in(&app.mail.wait_for(&address).await);
        let body = json!({ "code": reset_code, "password": "another fine password" });
        ok(app.post("/api/v1/auth/password/reset", body).await, 200).await;
        let (status, body) = app.sign_in(&address, "another fine password").await;
        assert_eq!(status, 400);
        attempt(body);

        // Servers and clients switch it off and on; the secret must be base64.
        let path = format!("/api/v1/users/{user_id}");
        let off = json!({ "totp_secret_base64": null });
        let res = app
            .as_("server", Method::PATCH, &path)
            .json(&off)
            .send()
            .await;
        assert_eq!(
            ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await["requires_totp_mfa"],
            false
        );
        let session = app.signed_in(&address, "another fine password").await;
        let patch_me = |body: Value| {
            app.client(Method::PATCH, "/api/v1/users/me", Some(&session.access))
                .json(&body)
                .send()
        };
        let res = patch_me(json!({ "totp_secret_base64": "not base64!" })).await;
        assert_error(res.unwrap_or_else(|e| panic!("{e}")), 400, "SCHEMA_ERROR").await;
        let res = patch_me(json!({ "totp_secret_base64": secret_b64 })).await;
        assert_eq!(
            ok(res.unwrap_or_else(|e| panic!("{e}")), 200).await["requires_totp_mfa"],
            true
        );
        let (status, _) = app.sign_in(&address, "another fine password").await;
        assert_eq!(status, 400);
    }
);
