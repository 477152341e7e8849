//! The OAuth provider types a project may configure (80 §9): the generic ones first, then the
//! named ones, whose endpoints the auth service knows.

pub const PROVIDER_TYPES: &[&str] = &[
    "oidc",
    "oauth2",
    "google",
    "github",
    "microsoft",
    "spotify",
    "facebook",
    "discord",
    "gitlab",
    "bitbucket",
    "linkedin",
    "apple",
    "x",
    "twitch",
];
