//! The auth service's gRPC APIs: `Projects` and `Users`. Each method turns the request into a
//! domain call and the result back into proto messages.

pub mod projects;
pub mod users;

pub use projects::{created_project_to_pb, Projects};
pub use users::Users;
