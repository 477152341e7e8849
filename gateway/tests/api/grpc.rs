//! The services' gRPC surface directly: caller admission (DESIGN §2), health, reflection.

use latchkey_proto::auth::v1 as auth;
use latchkey_proto::common::v1::service_client::ServiceClient;
use latchkey_proto::common::v1::DescribeRequest;
use tonic::metadata::MetadataValue;
use tonic::Code;

use crate::helpers::{both_modes, TestApp};

fn meta(value: &str) -> MetadataValue<tonic::metadata::Ascii> {
    value.parse().unwrap_or_else(|e| panic!("{e}"))
}

/// A request carrying a project's server key the way direct callers send it.
fn with_key<T>(message: T, project: &str, key: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("x-latchkey-project-id", meta(project));
    request
        .metadata_mut()
        .insert("x-latchkey-secret-server-key", meta(key));
    request
}

both_modes!(callers_must_authenticate, |app: &TestApp| async move {
    let p = &app.project;
    for service in ["teams", "contacts", "webhooks"] {
        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr(service))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut client = ServiceClient::new(channel);
        // No credentials, a wrong key, another type's key: refused.
        let err = client
            .describe(tonic::Request::new(DescribeRequest {}))
            .await
            .err()
            .map(|s| s.code());
        assert_eq!(err, Some(Code::Unauthenticated), "{service}");
        for key in ["ssk_wrong", p.client_key.as_str(), p.admin_key.as_str()] {
            let err = client
                .describe(with_key(DescribeRequest {}, &p.id, key))
                .await
                .err()
                .map(|s| s.code());
            assert_eq!(err, Some(Code::Unauthenticated), "{service} with {key}");
        }
        // The project's server key is admitted.
        let ok = client
            .describe(with_key(DescribeRequest {}, &p.id, &p.server_key))
            .await;
        let ok = ok.unwrap_or_else(|e| panic!("{service}: {e}")).into_inner();
        assert!(
            ok.service.starts_with(&format!("latchkey.{service}.v1")),
            "{}",
            ok.service
        );
        assert_eq!(ok.consumed_events, 0);
        // Health needs no credentials.
        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr(service))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: String::new(),
            })
            .await;
        assert_eq!(
            status.map(|r| r.into_inner().status).ok(),
            Some(1),
            "{service} health"
        );
    }

    // Auth: a server key reads its own project but cannot act as admin or operator.
    let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("auth"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut direct = auth::projects_client::ProjectsClient::new(channel);
    let current = direct
        .get_current_project(with_key(auth::Empty {}, &p.id, &p.server_key))
        .await;
    assert_eq!(current.map(|r| r.into_inner().id).ok(), Some(p.id.clone()));
    let mut admin_claim = with_key(auth::Empty {}, &p.id, &p.server_key);
    admin_claim
        .metadata_mut()
        .insert("x-latchkey-access-type", meta("admin"));
    let err = direct
        .get_settings(admin_claim)
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(err, Some(Code::PermissionDenied));
    let create = with_key(
        auth::CreateProjectRequest {
            display_name: "x".into(),
        },
        &p.id,
        &p.server_key,
    );
    assert_eq!(
        direct.create_project(create).await.err().map(|s| s.code()),
        Some(Code::PermissionDenied)
    );
    let err = direct
        .list_projects(tonic::Request::new(auth::Empty {}))
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(err, Some(Code::Unauthenticated));

    // Reflection lists the services.
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("auth"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = reflection
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_inner();
    let first = stream
        .message()
        .await
        .ok()
        .flatten()
        .and_then(|m| m.message_response);
    let Some(MessageResponse::ListServicesResponse(list)) = first else {
        panic!("no service list")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"latchkey.auth.v1.Projects".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
});

// The README's `grpcurl` example, done with a gRPC client: discover the method through
// reflection, then call it with a project's server key, as a company service would.
both_modes!(
    reflection_then_a_call_with_a_server_key,
    |app: &TestApp| async move {
        use prost::Message;
        use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
        use tonic_reflection::pb::v1::ServerReflectionRequest;

        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("auth"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut reflection = ServerReflectionClient::new(channel.clone());
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "latchkey.auth.v1.Projects".into(),
            )),
        };
        let mut stream = reflection
            .server_reflection_info(futures::stream::iter([request]))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner();
        let answer = stream
            .message()
            .await
            .ok()
            .flatten()
            .and_then(|m| m.message_response);
        let Some(MessageResponse::FileDescriptorResponse(files)) = answer else {
            panic!("no descriptor for latchkey.auth.v1.Projects")
        };
        let methods: Vec<(String, String)> = files
            .file_descriptor_proto
            .iter()
            .filter_map(|bytes| prost_types::FileDescriptorProto::decode(bytes.as_slice()).ok())
            .flat_map(|file| file.service)
            .filter(|service| service.name() == "Projects")
            .flat_map(|service| service.method)
            .map(|m| (m.name().to_owned(), m.output_type().to_owned()))
            .collect();
        assert!(
            methods.contains(&(
                "GetCurrentProject".to_owned(),
                ".latchkey.auth.v1.CurrentProject".to_owned()
            )),
            "{methods:?}"
        );

        let p = &app.project;
        let mut projects = auth::projects_client::ProjectsClient::new(channel);
        let current = projects
            .get_current_project(with_key(auth::Empty {}, &p.id, &p.server_key))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner();
        assert_eq!(current.id, p.id);
    }
);

/// The embedded system's components call each other in-process: a sign-up, user reads and a
/// team creation cross gateway → auth → contacts → teams without one connection to a gRPC
/// listener, yet each call is still admitted, served and counted as a gRPC call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_components_call_each_other_without_sockets() {
    use crate::helpers::{email, Mode};
    let app = TestApp::spawn(Mode::Embedded).await;
    app.settings(serde_json::json!({"client_team_creation_enabled": true}))
        .await;
    let user = app.sign_up(&email("local"), "correct-horse-battery").await;
    for _ in 0..5 {
        let res = app
            .client(reqwest::Method::GET, "/api/v1/users/me", Some(&user.access))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200);
    }
    let res = app
        .client(reqwest::Method::POST, "/api/v1/teams", Some(&user.access))
        .json(&serde_json::json!({"display_name": "in-process", "creator_user_id": "me"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 201);
    let ports: Vec<String> = app
        .grpc
        .iter()
        .map(|(_, addr)| {
            let port: u16 = addr
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_default();
            format!(":{port:04X}")
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let connected: Vec<&str> = table
        .lines()
        .skip(1)
        .filter(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // Anyone's open connection (01 = ESTABLISHED) to a gRPC listener of this system.
            matches!(cols[..], [_, _, remote, "01", ..] if ports.iter().any(|p| remote.ends_with(p.as_str())))
        })
        .collect();
    assert!(
        connected.is_empty(),
        "connections to gRPC listeners: {connected:?}"
    );
    let metrics = app
        .get("/metrics")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .text()
        .await
        .unwrap_or_default();
    for method in [
        "/latchkey.auth.v1.Users/GetUser",
        "/latchkey.contacts.v1.Contacts/ListChannels",
        "/latchkey.teams.v1.Teams/CreateTeam",
    ] {
        assert!(
            metrics.contains(&format!("method=\"{method}\",code=\"0\"")),
            "{method} not served as a gRPC call:\n{metrics}"
        );
    }
    app.finish().await;
}

/// Between processes, calls that meet at a replica travel together (`latchkey.mux.v1`): a
/// burst of `/users/me` reaches auth in `Mux.Call` batches, and every answer is the caller's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_a_burst_travel_in_batches_between_processes() {
    use crate::helpers::{email, Mode};
    let app = TestApp::spawn(Mode::Distributed).await;
    let mut users = Vec::new();
    for i in 0..4 {
        users.push(
            app.sign_up(&email(&format!("burst{i}")), "correct-horse-battery")
                .await,
        );
    }
    let reads = (0..64).map(|i| {
        let user = &users[i % users.len()];
        let app = &app;
        async move {
            let res = app
                .client(reqwest::Method::GET, "/api/v1/users/me", Some(&user.access))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(res.status(), 200);
            let me: serde_json::Value = res.json().await.unwrap_or_else(|e| panic!("{e}"));
            (
                user.user_id.clone(),
                me["id"].as_str().unwrap_or_default().to_owned(),
            )
        }
    });
    for (asked, answered) in futures::future::join_all(reads).await {
        assert_eq!(asked, answered, "an answer went to another caller");
    }
    let auth = app
        .metrics_addrs()
        .into_iter()
        .find(|(component, _)| *component == "auth")
        .map(|(_, addr)| addr)
        .unwrap_or_else(|| panic!("no auth metrics address"));
    let metrics = reqwest::get(format!("http://{auth}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .text()
        .await
        .unwrap_or_default();
    assert!(
        metrics.contains("method=\"/latchkey.mux.v1.Mux/Call\",code=\"0\""),
        "64 concurrent reads reached auth without one batch:\n{metrics}"
    );
    app.finish().await;
}

/// Composing no users reads no one's addresses: an empty `GetUsers` asks contacts nothing
/// (an empty address list there means the whole project's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_user_batch_reads_nothing_elsewhere() {
    use crate::helpers::Mode;
    let app = TestApp::spawn(Mode::Distributed).await;
    let p = &app.project;
    let contacts_calls = || async {
        let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("contacts"))
            .unwrap_or_else(|e| panic!("{e}"));
        ServiceClient::new(channel)
            .describe(with_key(DescribeRequest {}, &p.id, &p.server_key))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_inner()
            .calls_served
    };
    let before = contacts_calls().await;
    let channel = latchkey_shared::grpc::lazy_channel(&app.grpc_addr("auth"))
        .unwrap_or_else(|e| panic!("{e}"));
    let users = auth::users_client::UsersClient::new(channel)
        .get_users(with_key(
            auth::UserIdList {
                user_ids: Vec::new(),
            },
            &p.id,
            &p.server_key,
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_inner();
    assert!(users.items_json.is_empty());
    // The second `Describe` is the only call contacts served meanwhile.
    assert_eq!(contacts_calls().await - before, 1);
    app.finish().await;
}
