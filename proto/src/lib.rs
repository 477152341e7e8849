//! Generated types and clients/servers for Latchkey's internal gRPC API. No logic lives here.

#![allow(clippy::all, missing_docs, unreachable_pub)]

pub mod common {
    pub mod v1 {
        tonic::include_proto!("latchkey.common.v1");
    }
}
pub mod auth {
    pub mod v1 {
        tonic::include_proto!("latchkey.auth.v1");
    }
}
pub mod teams {
    pub mod v1 {
        tonic::include_proto!("latchkey.teams.v1");
    }
}
pub mod contacts {
    pub mod v1 {
        tonic::include_proto!("latchkey.contacts.v1");
    }
}
pub mod events {
    pub mod v1 {
        tonic::include_proto!("latchkey.events.v1");
    }
}
pub mod mux {
    pub mod v1 {
        tonic::include_proto!("latchkey.mux.v1");
    }
}
pub mod webhooks {
    pub mod v1 {
        tonic::include_proto!("latchkey.webhooks.v1");
    }
}

/// Descriptor set of every package, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("latchkey_descriptor");
