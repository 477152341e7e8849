//! The auth service's gRPC APIs: `Projects`, `Users`, `OAuth`, `OwnedApiKeys` and `Passkeys`. Each method turns the request into a
//! domain call and the result back into proto messages.

pub mod oauth;
pub mod owned_keys;
pub mod passkeys;
pub mod projects;
pub mod users;

pub use oauth::OAuth;
pub use owned_keys::OwnedApiKeys;
pub use passkeys::Passkeys;
pub use projects::{created_project_to_pb, Projects};
pub use users::Users;
