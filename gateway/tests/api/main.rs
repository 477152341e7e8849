//! Gateway integration tests: ONE binary (link time on two cores). Each test boots the real
//! system on port 0 — in embedded mode (SQLite, in-process bus) and in distributed mode
//! (its own Postgres databases and RabbitMQ vhost) — and drops what it made.

mod authenticator;
mod helpers;
mod smtp;

mod access;
mod accounts;
mod anonymous;
mod api_keys;
mod balancing;
mod basics;
mod cli;
mod cli_sign_in;
mod consistency;
mod console;
mod contact_channels;
mod deployment;
mod grpc;
mod hardening;
mod invitations;
mod keep_alive;
mod limits;
mod oauth;
mod oauth_mock;
mod observability;
mod passkeys;
mod permissions;
mod processes;
mod projects;
mod receiver;
mod rolling;
mod sealing;
mod sign_in_codes;
mod startup;
mod teams;
mod users;
mod webhooks;
