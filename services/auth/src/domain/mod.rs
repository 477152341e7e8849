//! Rules of the projects part of auth. Functions take the store and clock they need.

pub mod keys;
pub mod projects;
pub mod settings;
pub mod signing;
