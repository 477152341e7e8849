//! Rules of the contacts service.

pub mod channels;
pub mod verification;
