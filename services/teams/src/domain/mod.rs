//! Rules of the teams service.

pub mod permissions;
pub mod teams;
