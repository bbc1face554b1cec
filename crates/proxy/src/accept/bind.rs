//! Binding the listeners: one socket per worker and per kind (plain, TLS) on the same
//! address with `SO_REUSEPORT`, so the kernel spreads clients over the workers, and a new
//! process can bind the same port while an old one drains (zero-downtime upgrade).

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::config::ListenAddrs;

/// One worker's listeners: the plain one, the TLS one, or both, and the extra plain ones.
pub(crate) struct Listeners<L> {
    pub plain: Option<L>,
    pub tls: Option<L>,
    /// `proxy.extra_listen`, each with the address it was bound to.
    pub extra: Vec<(L, SocketAddr)>,
}

impl Listeners<std::net::TcpListener> {
    /// Register the sockets with this thread's runtime.
    pub(crate) fn into_tokio(self) -> std::io::Result<Listeners<TcpListener>> {
        Ok(Listeners {
            plain: self.plain.map(TcpListener::from_std).transpose()?,
            tls: self.tls.map(TcpListener::from_std).transpose()?,
            extra: self
                .extra
                .into_iter()
                .map(|(l, a)| Ok((TcpListener::from_std(l)?, a)))
                .collect::<std::io::Result<_>>()?,
        })
    }
}

/// A listener that could not be bound.
#[derive(Debug)]
pub(crate) struct BindError {
    pub addr: SocketAddr,
    pub source: std::io::Error,
}

/// Every worker's listening sockets, and the addresses they were bound to.
pub(crate) struct Bound {
    /// The plain listener's address, or the TLS one's when there is no plain listener.
    pub addr: SocketAddr,
    pub tls_addr: Option<SocketAddr>,
    pub per_worker: Vec<Listeners<std::net::TcpListener>>,
}

/// The plain and the TLS listeners, one of each per worker.
pub(crate) fn bind_listeners(addrs: ListenAddrs, n: usize) -> Result<Bound, BindError> {
    let plain = addrs.plain.map(|a| bind_n(a, n)).transpose()?;
    let tls = addrs.tls.map(|a| bind_n(a, n)).transpose()?;
    let mut extra = Vec::with_capacity(addrs.extra.len());
    for addr in &addrs.extra {
        // Port 0 takes the plain listener's port, as `bind` shares one port.
        let addr = match (addr.port(), &plain) {
            (0, Some((bound, _))) => SocketAddr::new(addr.ip(), bound.port()),
            _ => *addr,
        };
        let (bound, sockets) = bind_n(addr, n)?;
        extra.push((bound, sockets.into_iter()));
    }
    let first = |set: &Option<(SocketAddr, Vec<_>)>| set.as_ref().map(|(a, _)| *a);
    let tls_addr = first(&tls);
    // `validate` guarantees at least one listener.
    let addr = first(&plain)
        .or(tls_addr)
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut plain = plain.map(|(_, l)| l.into_iter());
    let mut tls = tls.map(|(_, l)| l.into_iter());
    let per_worker = (0..n)
        .map(|_| Listeners {
            plain: plain.as_mut().and_then(Iterator::next),
            tls: tls.as_mut().and_then(Iterator::next),
            extra: extra
                .iter_mut()
                .filter_map(|(addr, sockets)| Some((sockets.next()?, *addr)))
                .collect(),
        })
        .collect();
    Ok(Bound {
        addr,
        tls_addr,
        per_worker,
    })
}

/// One listening socket per worker on the same address (SO_REUSEPORT): the kernel spreads
/// connections over workers, so accepting never hops threads. Returns the bound address.
fn bind_n(
    addr: SocketAddr,
    n: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), BindError> {
    let mut out: Vec<std::net::TcpListener> = Vec::with_capacity(n);
    let mut addr = addr;
    for _ in 0..n {
        let listener = bind_one(addr).map_err(|source| BindError { addr, source })?;
        if addr.port() == 0 {
            // The first bind chose the port; the others must share it.
            addr = listener
                .local_addr()
                .map_err(|source| BindError { addr, source })?;
        }
        out.push(listener);
    }
    Ok((addr, out))
}

fn bind_one(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    // Linux copies TCP_NODELAY from the listener to every accepted socket: one setsockopt
    // here instead of one per connection (short-lived clients pay for each syscall).
    socket.set_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}
