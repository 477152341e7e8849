//! What a failed call's error says: whether it never reached the service (safe to send again)
//! or lost its connection after it may have (UNAVAILABLE, never sent again).

use std::error::Error as StdError;

use tonic::Status;

/// For a call whose connection broke after it was sent (the replica died): UNAVAILABLE, so
/// callers answer 503 and may try again, rather than an unknown error. `None` for other
/// failures (a deadline), which keep their own status.
pub fn connection_lost(e: &(dyn StdError + 'static)) -> Option<Status> {
    let mut source = Some(e);
    while let Some(err) = source {
        if err.is::<Status>() {
            return None;
        }
        if err.is::<h2::Error>() || err.is::<hyper::Error>() || err.is::<std::io::Error>() {
            return Some(Status::unavailable(format!(
                "connection to the service lost: {e}"
            )));
        }
        source = err.source();
    }
    None
}

/// Whether the error chain shows the request was not processed: the connection could not be
/// made, the server refused the stream (GOAWAY or REFUSED_STREAM), or the client dropped the
/// request before writing it.
pub fn never_reached_the_service(error: &(dyn StdError + 'static)) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<tonic::ConnectError>() || e.is::<super::mux::NotSent>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            if h2.is_go_away() || h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            if hyper.is_canceled() {
                return true;
            }
        }
        source = e.source();
    }
    false
}
