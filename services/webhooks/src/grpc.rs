//! The `Webhooks` gRPC API: each method reads the context project and calls `Endpoints`.

use std::sync::Arc;

use latchkey_proto::webhooks::v1 as pb;
use latchkey_shared::grpc::Context;
use serde_json::Value;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::endpoints::Endpoints;
use crate::error::Error;

pub struct Service(pub Arc<Endpoints>);

fn id(text: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text).map_err(|_| Error::EndpointNotFound(Uuid::nil()))
}

fn body(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Invalid(e.to_string()))
}

fn json(v: Value) -> Response<pb::Json> {
    Response::new(pb::Json {
        json: v.to_string(),
    })
}

#[tonic::async_trait]
impl pb::webhooks_server::Webhooks for Service {
    async fn list_endpoints(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let items = self.0.list(ctx.project_id).await?;
        Ok(Response::new(pb::JsonList {
            items_json: items.iter().map(Value::to_string).collect(),
        }))
    }

    async fn create_endpoint(
        &self,
        request: Request<pb::EndpointWrite>,
    ) -> Result<Response<pb::Json>, Status> {
        let ctx = Context::read(request.metadata())?;
        let created = self
            .0
            .create(ctx.project_id, &body(&request.get_ref().body_json)?)
            .await?;
        Ok(json(created))
    }

    async fn update_endpoint(
        &self,
        request: Request<pb::EndpointWrite>,
    ) -> Result<Response<pb::Json>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let updated = self
            .0
            .update(ctx.project_id, id(&r.endpoint_id)?, &body(&r.body_json)?)
            .await?;
        Ok(json(updated))
    }

    async fn delete_endpoint(
        &self,
        request: Request<pb::EndpointRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        self.0
            .delete(ctx.project_id, id(&request.get_ref().endpoint_id)?)
            .await?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn rotate_secret(
        &self,
        request: Request<pb::EndpointRef>,
    ) -> Result<Response<pb::Json>, Status> {
        let ctx = Context::read(request.metadata())?;
        let rotated = self
            .0
            .rotate(ctx.project_id, id(&request.get_ref().endpoint_id)?)
            .await?;
        Ok(json(rotated))
    }

    async fn send_test(
        &self,
        request: Request<pb::EndpointRef>,
    ) -> Result<Response<pb::Json>, Status> {
        let ctx = Context::read(request.metadata())?;
        let sent = self
            .0
            .send_test(ctx.project_id, id(&request.get_ref().endpoint_id)?)
            .await?;
        Ok(json(sent))
    }

    async fn list_deliveries(
        &self,
        request: Request<pb::ListDeliveriesRequest>,
    ) -> Result<Response<pb::DeliveryPage>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let (items, next_cursor) = self
            .0
            .deliveries(
                ctx.project_id,
                id(&r.endpoint_id)?,
                r.limit,
                r.cursor.as_deref(),
            )
            .await?;
        Ok(Response::new(pb::DeliveryPage {
            items_json: items.iter().map(Value::to_string).collect(),
            next_cursor,
        }))
    }

    async fn replay(
        &self,
        request: Request<pb::ReplayRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        self.0
            .replay(ctx.project_id, id(&r.endpoint_id)?, &r.message_id)
            .await?;
        Ok(Response::new(pb::Empty {}))
    }
}
