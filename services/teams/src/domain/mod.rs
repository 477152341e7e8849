//! Rules of the teams service.

pub mod definitions;
pub mod invitations;
pub mod permissions;
pub mod profiles;
pub mod project_permissions;
pub mod teams;
