//! AUTH and HELLO … AUTH: how a session logs in (who it then is, and what that user may
//! do, is `login.rs`).
//!
//! Until a client authenticates (when the proxy requires it), only AUTH, HELLO … AUTH and
//! QUIT are served, Redis's pre-auth limits apply (10 arguments, 16 KiB each, 1 MiB of
//! buffered input), and everything else gets `-NOAUTH`.

use bytes::Bytes;
use resp::Request;

use crate::session::client::Client;
use crate::session::local::Hello;
use crate::session::login::Login;

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const HELLO_NOAUTH: &[u8] = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n";

/// Most bytes an unauthenticated client may have buffered (Redis: 1 MiB).
pub(crate) const PRE_AUTH_BUFFER: usize = 1024 * 1024;

/// What a successful login changed, for the session to act on: its own connections run as
/// the former user, and a WATCH's connection too (`Session::logged_in`).
#[derive(Default)]
pub(crate) struct LoggedIn {
    /// The client was another user: its dedicated connection runs as that user's mirror.
    pub(crate) other_user: bool,
    /// The connections it opens now run with other rights (`Login::acting_setup`).
    pub(crate) other_acting: bool,
}

/// What an unauthenticated client may send.
pub(crate) enum Gate {
    /// QUIT, and HELLO, which checks its own AUTH option when it runs (`hello`).
    Run(Request),
    /// AUTH: answered at once (`command`).
    Auth(Request),
    /// Anything else, answered `-NOAUTH`.
    Refused(Bytes),
}

/// What an unauthenticated client may do with this request.
pub(crate) fn gate(req: Request) -> Gate {
    let name = req.arg(0).to_ascii_lowercase();
    match name.as_slice() {
        b"auth" => Gate::Auth(req),
        b"hello" | b"quit" => Gate::Run(req),
        _ => Gate::Refused(Bytes::from_static(NOAUTH)),
    }
}

/// `AUTH [user] password`, before or after a first login, as Redis answers it: a right
/// pair switches the connection to that user, a wrong one leaves it as it was.
pub(crate) fn command(client: &mut Client, req: &Request) -> Result<LoggedIn, Bytes> {
    match req.argc() {
        2 if !client.worker.live().config.auth_required() => Err(crate::reply::error(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        2 => authenticate(client, b"default", req.arg(1)),
        3 => authenticate(client, req.arg(1), req.arg(2)),
        _ => Err(crate::reply::error("syntax error")),
    }
}

/// HELLO, once everything before it is answered: its arguments checked first, then its
/// AUTH option (as AUTH), then, if the connection is authenticated, the switch. The reply,
/// and what its AUTH option changed.
pub(crate) fn hello(client: &mut Client, req: &Request) -> (Bytes, Option<LoggedIn>) {
    let hello = match Hello::parse(req) {
        Ok(hello) => hello,
        Err(reply) => return (reply, None),
    };
    let mut logged_in = None;
    if let Some((user, pass)) = &hello.auth {
        match authenticate(client, user, pass) {
            Ok(done) => logged_in = Some(done),
            Err(reply) => return (reply, None),
        }
    }
    if !client.login.authenticated() {
        return (Bytes::from_static(HELLO_NOAUTH), logged_in);
    }
    let id = client.worker.shared.identity.current();
    (hello.apply(&mut client.info, &id), logged_in)
}

/// Check a user's password; on success the client is authenticated as that user, on
/// failure it keeps the user it had (if any) and gets the error. With no client password
/// configured, Redis's default user is `nopass`: any password is right for it; other users
/// (added by ACL SETUSER) need theirs.
pub(crate) fn authenticate(
    client: &mut Client,
    user: &[u8],
    pass: &[u8],
) -> Result<LoggedIn, Bytes> {
    let live = std::sync::Arc::clone(&client.worker.live());
    let found = live
        .users
        .iter()
        .position(|u| u.name.as_bytes() == user && u.password_matches(pass));
    // Without requirepass the default user is not in `users`: `nopass`, any password.
    let nopass_default = user == b"default" && !live.config.auth_required();
    let next = match found {
        Some(idx) => Login::User(idx),
        None if nopass_default => Login::Default,
        None => {
            tracing::debug!(client.id = client.info.id, "authentication failed");
            return Err(Bytes::from_static(WRONGPASS));
        }
    };
    let acting_before = client.login.acting_setup(&live);
    let other_user = client.login.user() != next.user() && client.login.user().is_some();
    client.login = next;
    let other_acting = client.login.acting_setup(&live) != acting_before;
    Ok(LoggedIn {
        other_user,
        other_acting,
    })
}
