//! Rules of the teams service.

pub mod permissions;
pub mod profiles;
pub mod teams;
