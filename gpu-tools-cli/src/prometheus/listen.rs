//! The exporter's address: `--prometheus`'s value, binding it before sampling starts, and the host name its
//! samples carry.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};

use crate::failure::Failure;

/// `--prometheus`'s value: `PORT` (on 127.0.0.1) or `ADDRESS:PORT` (`127.0.0.1:9400`, `[::1]:9400`,
/// `0.0.0.0:9400` to serve other hosts).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse::<SocketAddr>().map_err(|_| {
        format!(
            "{s:?} is neither a port (9400) nor an IP address and port (127.0.0.1:9400, [::1]:9400)"
        )
    })
}

/// Binds the exporter's address (before any sampling starts), or says why it cannot.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, Failure> {
    TcpListener::bind(addr).map_err(|e| {
        let why = match e.kind() {
            ErrorKind::AddrInUse => format!(
                "the port is in use by another program ({e}); dcgm-exporter's default is 9400, choose another \
                 with --prometheus PORT"
            ),
            ErrorKind::AddrNotAvailable => {
                format!("no interface of this machine has that address ({e})")
            }
            ErrorKind::PermissionDenied => format!("not allowed ({e}); ports below 1024 need privileges"),
            _ => e.to_string(),
        };
        Failure::new(1, format!("cannot serve Prometheus metrics on {addr}: {why}"))
    })
}

/// This machine's host name (the `Hostname` label), or `"unknown"`.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a writable buffer of the length passed; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc != 0 || end == 0 {
        return "unknown".to_string();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
