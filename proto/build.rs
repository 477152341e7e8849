//! Compiles every `.proto` with protox (pure Rust), so builds need no system `protoc`, and
//! writes the descriptor set that gRPC reflection serves.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "latchkey/common/v1/common.proto",
    "latchkey/auth/v1/auth.proto",
    "latchkey/contacts/v1/contacts.proto",
    "latchkey/teams/v1/teams.proto",
    "latchkey/events/v1/events.proto",
    "latchkey/webhooks/v1/webhooks.proto",
    "latchkey/mux/v1/mux.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(PROTOS, ["."])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("latchkey_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
