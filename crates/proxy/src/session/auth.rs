//! AUTH and HELLO … AUTH: how a session logs in (who it then is, and what that user may
//! do, is `login.rs`).
//!
//! Until a client authenticates (when the proxy requires it), only AUTH, HELLO … AUTH and
//! QUIT are served, Redis's pre-auth limits apply (10 arguments, 16 KiB each, 1 MiB of
//! buffered input), and everything else gets `-NOAUTH`.

use bytes::Bytes;
use resp::Request;

use crate::session::local::Hello;
use crate::session::login::Login;
use crate::session::Session;

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const HELLO_NOAUTH: &[u8] = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n";

/// Most bytes an unauthenticated client may have buffered (Redis: 1 MiB).
pub(crate) const PRE_AUTH_BUFFER: usize = 1024 * 1024;

// === impl Session (authentication) ===

impl Session {
    /// What an unauthenticated client may do. Returns the request back when it may run
    /// (QUIT, and HELLO, which checks its own AUTH option when it runs: `hello`).
    pub(crate) fn gate_unauthenticated(&mut self, req: Request) -> Option<Request> {
        let name = req.arg(0).to_ascii_lowercase();
        match name.as_slice() {
            b"auth" => {
                let reply = self.auth_command(&req);
                self.cell.push_ready(reply);
                None
            }
            b"hello" | b"quit" => Some(req),
            _ => {
                self.cell.push_ready(Bytes::from_static(NOAUTH));
                None
            }
        }
    }

    /// `AUTH [user] password`, before or after a first login, as Redis answers it: a right
    /// pair switches the connection to that user, a wrong one leaves it as it was.
    pub(crate) fn auth_command(&mut self, req: &Request) -> Bytes {
        match req.argc() {
            2 if !self.worker.live().config.auth_required() => crate::reply::error(
                "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ),
            2 => self.authenticate(b"default", req.arg(1)),
            3 => self.authenticate(req.arg(1), req.arg(2)),
            _ => crate::reply::error("syntax error"),
        }
    }

    /// HELLO, once everything before it is answered: its arguments checked first, then its
    /// AUTH option (as AUTH), then, if the connection is authenticated, the switch.
    pub(crate) fn hello(&mut self, req: &Request) -> Bytes {
        let hello = match Hello::parse(req) {
            Ok(hello) => hello,
            Err(reply) => return reply,
        };
        if let Some((user, pass)) = &hello.auth {
            let reply = self.authenticate(user, pass);
            if reply.first() == Some(&b'-') {
                return reply;
            }
        }
        if !self.login.authenticated() {
            return Bytes::from_static(HELLO_NOAUTH);
        }
        let id = self.worker.shared.identity.current();
        hello.apply(&mut self.info, &id)
    }

    /// Check a user's password; on success the session is authenticated as that user, on
    /// failure it keeps the user it had (if any). With no client password configured,
    /// Redis's default user is `nopass`: any password is right for it, and only for it.
    pub(crate) fn authenticate(&mut self, user: &[u8], pass: &[u8]) -> Bytes {
        // A snapshot, not a borrow: dropping connections below may look at the live config.
        let live = std::sync::Arc::clone(&self.worker.live());
        if !live.config.auth_required() {
            return match user {
                b"default" => Bytes::from_static(b"+OK\r\n"),
                _ => Bytes::from_static(WRONGPASS),
            };
        }
        let found = live
            .users
            .iter()
            .position(|u| u.name.as_bytes() == user && u.password_matches(pass));
        match found {
            Some(idx) => {
                let acting_before = self.login.acting_setup(&live);
                if self.login.user().is_some_and(|old| old != idx) {
                    // Its own connections run as the old user's mirror (`acting_setup`).
                    self.drop_dedicated();
                }
                self.login = Login::User(idx);
                if self.login.acting_setup(&live) != acting_before {
                    // A WATCH's connection runs as the former user (its mirror, or the
                    // backend user): an EXEC there would run the new user's transaction
                    // with the old rights. The WATCH is dropped, so EXEC answers nil, as
                    // when a watched key was touched, and nothing runs.
                    self.lose_watch();
                }
                self.parser.set_unauthenticated(false);
                Bytes::from_static(b"+OK\r\n")
            }
            None => {
                tracing::debug!(client.id = self.info.id, "authentication failed");
                Bytes::from_static(WRONGPASS)
            }
        }
    }
}
