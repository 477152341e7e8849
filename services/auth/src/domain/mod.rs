//! Rules of the auth service. Functions take the stores and clients they need (`App`).

pub mod anonymous;
pub mod cli;
pub mod keys;
pub mod mail;
pub mod mfa;
pub mod oauth;
pub mod otp;
pub mod owned_keys;
pub mod passkeys;
pub mod passwords;
pub mod projects;
pub mod sessions;
pub mod settings;
pub mod signing;
pub mod tokens;
pub mod totp;
pub mod user_list;
pub mod user_write;
pub mod users;
