//! OAuth sign-in (10 §4), the user's provider records (10 §5) and connected accounts (10 §6).

pub mod flow;
pub mod linking;
pub mod provider;
pub mod records;
