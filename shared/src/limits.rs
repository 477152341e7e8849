//! The rate-limit buckets of 70 §7.1 and their defaults: the auth service validates and shows
//! project overrides against this table, the gateway enforces it.

/// (bucket, limit, window in seconds).
pub const BUCKETS: [(&str, u32, u32); 7] = [
    ("client_general", 600, 60),
    ("server_general", 6000, 60),
    ("client_auth_sensitive", 100, 60),
    ("email_sending", 60, 3600),
    ("unauthenticated", 600, 60),
    // Wrong passwords at password sign-in (issue 18 §2): per address typed and client address,
    // and per address typed; a correct password does not count.
    ("password_guesses_per_email_and_ip", 10, 15 * 60),
    ("password_guesses_per_email", 100, 60 * 60),
];
