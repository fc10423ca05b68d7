//! A minimal blocking `wasi:http` client for the egress test guests: one request, body
//! streamed out in 4 KiB writes, response body counted.

use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

/// Sends `body` to `url` (`http://host[:port]/path`) with `method`; returns the response
/// status and how many body bytes came back.
///
/// # Errors
///
/// A message naming the step that failed (the host's denial shows up here).
pub fn send(method: Method, url: &str, body: &[u8]) -> Result<(u16, usize), String> {
    let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let req = OutgoingRequest::new(Fields::new());
    req.set_method(&method).map_err(|()| "method")?;
    let scheme = if scheme == "https" { Scheme::Https } else { Scheme::Http };
    req.set_scheme(Some(&scheme)).map_err(|()| "scheme")?;
    req.set_authority(Some(authority)).map_err(|()| "authority")?;
    req.set_path_with_query(Some(if path.is_empty() { "/" } else { path }))
        .map_err(|()| "path")?;
    let out = req.body().map_err(|()| "body")?;
    let pending = outgoing_handler::handle(req, None).map_err(|e| format!("request refused: {e:?}"))?;
    {
        let stream = out.write().map_err(|()| "write")?;
        for chunk in body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| format!("request body cut: {e:?}"))?;
        }
    }
    OutgoingBody::finish(out, None).map_err(|e| format!("finish: {e:?}"))?;
    pending.subscribe().block();
    let resp = pending
        .get()
        .ok_or("no response")?
        .map_err(|()| "response taken twice")?
        .map_err(|e| format!("request failed: {e:?}"))?;
    let status = resp.status();
    let incoming = resp.consume().map_err(|()| "consume")?;
    let stream = incoming.stream().map_err(|()| "stream")?;
    let mut received = 0;
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(bytes) => received += bytes.len(),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(format!("response body cut: {e:?}")),
        }
    }
    Ok((status, received))
}
