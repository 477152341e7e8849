//! The access context the gateway verified, carried to services in gRPC metadata, with the
//! request id and a deadline.

use std::time::Duration;

use tonic::metadata::MetadataMap;
use tonic::{Request, Status};
use uuid::Uuid;

use crate::error::{CodedError, ErrorCode};
use crate::headers::AccessType;

pub(crate) const PROJECT_ID: &str = "x-latchkey-project-id";
pub(crate) const ACCESS_TYPE: &str = "x-latchkey-access-type";
const USER_ID: &str = "x-latchkey-user-id";
pub const REQUEST_ID: &str = "x-request-id";

/// Default deadline for a gateway → service call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// What the gateway verified about a request, carried to services in metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub project_id: Uuid,
    pub access_type: AccessType,
    pub user_id: Option<Uuid>,
    pub request_id: Option<String>,
}

impl Context {
    pub fn write(&self, metadata: &mut MetadataMap) {
        let mut put = |key: &'static str, value: &str| {
            if let Ok(v) = value.parse() {
                metadata.insert(key, v);
            }
        };
        put(PROJECT_ID, &self.project_id.to_string());
        put(ACCESS_TYPE, self.access_type.as_str());
        if let Some(user) = self.user_id {
            put(USER_ID, &user.to_string());
        }
        if let Some(id) = &self.request_id {
            put(REQUEST_ID, id);
        }
    }

    /// Reads the context a caller sent; a call without one cannot name a project.
    pub fn read(metadata: &MetadataMap) -> Result<Self, Status> {
        let text = |key: &str| metadata.get(key).and_then(|v| v.to_str().ok());
        let missing = || {
            CodedError::new(ErrorCode::BadRequest, "call carries no project context").into_status()
        };
        let project_id = text(PROJECT_ID)
            .and_then(|v| Uuid::parse_str(v).ok())
            .ok_or_else(missing)?;
        let access_type = text(ACCESS_TYPE)
            .and_then(|v| v.parse().ok())
            .ok_or_else(missing)?;
        let user_id = text(USER_ID).and_then(|v| Uuid::parse_str(v).ok());
        Ok(Self {
            project_id,
            access_type,
            user_id,
            request_id: text(REQUEST_ID).map(str::to_owned),
        })
    }

    /// Reads the context of a call that only servers and Latchkey's own components may make
    /// (effects one service applies to another's data).
    pub fn read_server(metadata: &MetadataMap) -> Result<Self, Status> {
        let ctx = Self::read(metadata)?;
        if ctx.access_type == AccessType::Client {
            return Err(Status::permission_denied("server access required"));
        }
        Ok(ctx)
    }

    /// Wraps a message in a request that carries this context and a deadline.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        self.write(request.metadata_mut());
        request.set_timeout(DEFAULT_DEADLINE);
        request
    }
}
