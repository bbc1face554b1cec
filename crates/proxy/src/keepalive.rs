//! TCP keepalive on every connection the proxy opens to a node: the workers' shared
//! connections, sessions' dedicated and pub/sub connections, and the topology thread's.
//!
//! Why: a node that vanishes without a FIN or RST (a host powered off, a NAT or firewall
//! that dropped the flow) leaves a connection that looks idle for ever. Shared connections
//! notice through the request watchdog only when a request is owed; a subscriber's stream
//! or a BLPOP with no timeout owes nothing the proxy could time, so only the kernel's
//! probes can tell. With these values a dead peer is detected within about a minute of
//! silence (30 s idle + 3 probes 10 s apart), while a live idle connection costs one small
//! packet every 30 s.

use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};

/// Silence before the first probe.
pub(crate) const IDLE: Duration = Duration::from_secs(30);
/// Time between unanswered probes.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes after which the kernel resets the connection.
pub(crate) const PROBES: u32 = 3;

/// Turn keepalive on for `stream`. A failure is logged, not fatal: the connection works
/// without it, as it did before.
pub(crate) fn enable(stream: &tokio::net::TcpStream) {
    let params = TcpKeepalive::new()
        .with_time(IDLE)
        .with_interval(INTERVAL)
        .with_retries(PROBES);
    if let Err(e) = SockRef::from(stream).set_tcp_keepalive(&params) {
        tracing::debug!(error = %e, "cannot enable TCP keepalive");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn enable_sets_so_keepalive_and_the_timings() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let sock = SockRef::from(&stream);
        assert!(!sock.keepalive().unwrap(), "off by default");
        enable(&stream);
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.keepalive_time().unwrap(), IDLE);
        assert_eq!(sock.keepalive_interval().unwrap(), INTERVAL);
        assert_eq!(sock.keepalive_retries().unwrap(), PROBES);
    }
}
