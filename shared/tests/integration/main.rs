//! The shared crate against the real servers: ONE binary (link time on two cores).

mod events;
mod pool;
