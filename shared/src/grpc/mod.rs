//! gRPC plumbing shared by every service and the gateway.

/// What services ask of auth.
pub mod auth;
/// Per-call balancing over the replicas of a target.
pub mod balance;
/// Who may call a service: the internal token or a project's secret server key.
pub mod caller;
/// Channels to other components.
pub mod client;
/// The verified access context carried in metadata.
pub mod context;
/// What a failed call's error says about whether it reached the service.
pub mod failure;
/// Calls between components in one process, without sockets.
pub mod local;
/// Unary calls to one replica that travel together under load.
pub mod mux;
/// Resending calls that never reached a component.
pub mod retry;
/// Serving a service: health, reflection, tracing, outbox relay, `Describe`.
pub mod server;

pub use caller::{is_internal, Callers, PresentCaller, ServerKeys};
pub use client::{lazy_channel, AccessChecker, AuthClient, Channel};
pub use context::{Context, DEFAULT_DEADLINE, REQUEST_ID};
pub use server::{
    also_guarded, guarded, run_describe_only, run_service, serve, with_describe, Deps,
};
