//! Client authentication, per-user permissions, pre-auth limits and backend credentials, on
//! a real cluster.

mod common;

use std::time::Duration;

use common::{start_proxy, text, Client, Harness};
use proxy::config::AuthConfig;
use resp::Value;

fn users() -> AuthConfig {
    let reporting = toml::from_str(
        "name = 'reporting'\npassword = 'r3p'\ncommands = ['+@read', '-@dangerous']\nkeys = ['report:*']",
    )
    .unwrap();
    AuthConfig {
        requirepass: "s3cret".into(),
        users: vec![reporting],
    }
}

#[test]
fn clients_must_authenticate_and_users_are_confined() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.auth = users());
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["PING"])), "-NOAUTH Authentication required.");
    assert_eq!(
        text(&c.call(&["AUTH", "wrong"])),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    let hello = text(&c.call(&["HELLO", "3"]));
    assert!(
        hello.starts_with("-NOAUTH HELLO must be called with the client already authenticated"),
        "{hello}"
    );
    assert_eq!(text(&c.call(&["AUTH", "s3cret"])), "OK");
    assert_eq!(text(&c.call(&["SET", "report:1", "x"])), "OK");

    let mut r = Client::connect(proxy.local_addr());
    assert!(matches!(
        r.call(&["HELLO", "3", "AUTH", "reporting", "r3p"]),
        Value::Map(_)
    ));
    assert_eq!(text(&r.call(&["GET", "report:1"])), "x");
    assert_eq!(
        text(&r.call(&["SET", "report:1", "y"])),
        "-NOPERM this user has no permissions to run the 'set' command"
    );
    assert_eq!(
        text(&r.call(&["GET", "other"])),
        "-NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert!(
        text(&r.call(&["KEYS", "*"])).starts_with("-NOPERM"),
        "@dangerous denied"
    );
    proxy.shutdown();
}

#[test]
fn unauthenticated_clients_get_redis_pre_auth_limits() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.auth.requirepass = "pw".into());
    let mut c = Client::connect(proxy.local_addr());
    c.send_raw(b"*11\r\n");
    let (got, closed) = c.read_raw(Duration::from_secs(2));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(closed);
    let mut big = Client::connect(proxy.local_addr());
    big.send_raw(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n");
    let (got, closed) = big.read_raw(Duration::from_secs(2));
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert!(closed);
    proxy.shutdown();
}

#[test]
fn backend_credentials_are_used_and_never_shown() {
    let h = Harness::start(3, 0);
    let secret = "backend-Pa55-word";
    for node in h.cluster.masters() {
        h.cluster
            .command(node, &["CONFIG", "SET", "requirepass", secret])
            .unwrap()
            .ok()
            .unwrap();
    }
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.cluster.backend_password = secret.into()
    });
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["SET", "cred:k", "v"])), "OK");
    assert_eq!(text(&c.call(&["GET", "cred:k"])), "v");
    assert_eq!(text(&c.call(&["DBSIZE"])), ":1");
    for probe in [
        &["INFO"][..],
        &["INFO", "everything"],
        &["CLIENT", "LIST"],
        &["CONFIG", "GET", "*"],
        &["CLUSTER", "NODES"],
    ] {
        let reply = format!("{:?}", c.call(probe));
        assert!(
            !reply.contains(secret),
            "{probe:?} shows the backend password"
        );
    }
    proxy.shutdown();
}

/// Review S3: AUTH and HELLO … AUTH after a first login switch the connection's user on a
/// right pair and keep the current one on a wrong pair, as Redis does; connection pools
/// that re-AUTH per borrower rely on it.
#[test]
fn re_auth_switches_users_as_redis_does() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.auth = users());
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["AUTH", "s3cret"])), "OK");
    assert_eq!(text(&c.call(&["SET", "secret", "s"])), "OK");
    let wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(text(&c.call(&["AUTH", "default", "anything"])), wrongpass);
    assert_eq!(text(&c.call(&["AUTH", "reporting", "nope"])), wrongpass);
    assert_eq!(
        text(&c.call(&["GET", "secret"])),
        "s",
        "a wrong AUTH keeps the user"
    );

    assert_eq!(text(&c.call(&["AUTH", "reporting", "r3p"])), "OK");
    assert_eq!(
        text(&c.call(&["GET", "secret"])),
        "-NOPERM this user has no permissions to access one of the keys used as arguments",
        "the new user's rules apply at once"
    );
    assert_eq!(text(&c.call(&["AUTH", "s3cret"])), "OK");
    assert_eq!(text(&c.call(&["GET", "secret"])), "s");

    assert_eq!(
        text(&c.call(&["HELLO", "3", "AUTH", "reporting", "bad"])),
        wrongpass
    );
    assert_eq!(
        text(&c.call(&["GET", "secret"])),
        "s",
        "still default, still RESP2"
    );
    assert!(matches!(
        c.call(&["HELLO", "3", "AUTH", "reporting", "r3p"]),
        Value::Map(_)
    ));
    assert!(text(&c.call(&["GET", "secret"])).starts_with("-NOPERM"));
    // Arguments are checked before the credentials, and nothing is applied on an error.
    assert_eq!(
        text(&c.call(&["HELLO", "4", "AUTH", "default", "s3cret"])),
        "-NOPROTO unsupported protocol version"
    );
    assert!(text(&c.call(&["GET", "secret"])).starts_with("-NOPERM"));
    assert_eq!(text(&c.call(&["AUTH", "a", "b", "c"])), "-ERR syntax error");
    proxy.shutdown();
}

/// With no client password, Redis's default user is `nopass`: any password is right for
/// it, and only for it.
#[test]
fn without_a_password_only_the_default_user_exists() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |_| {});
    let mut c = Client::connect(proxy.local_addr());
    assert_eq!(text(&c.call(&["AUTH", "default", "x"])), "OK");
    assert_eq!(
        text(&c.call(&["AUTH", "app", "x"])),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(
        text(&c.call(&["HELLO", "2", "AUTH", "app", "x"])),
        "-WRONGPASS invalid username-password pair or user is disabled."
    );
    assert!(matches!(
        c.call(&["HELLO", "3", "AUTH", "default", "x"]),
        Value::Map(_)
    ));
    proxy.shutdown();
}

/// CONFIG SET requirepass through a proxy that forwards admin commands sets the password
/// its clients give, as on one Redis (the caller stays logged in; new clients get NOAUTH),
/// and never the nodes', whose password is the proxy's backend one: an admin client cannot
/// lock the proxy out of its own nodes. Among other parameters it is refused.
#[test]
fn config_set_requirepass_sets_the_clients_password_not_the_nodes() {
    let h = Harness::start(1, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.proxy.allow_admin_commands = true);
    let mut admin = Client::connect(proxy.local_addr());
    let set = |c: &mut Client, v: &str| text(&c.call(&["CONFIG", "SET", "requirepass", v]));
    assert_eq!(set(&mut admin, "12345"), "OK");
    assert_eq!(
        text(&admin.call(&["PING"])),
        "PONG",
        "the caller stays logged in"
    );
    let mut other = Client::connect(proxy.local_addr());
    assert_eq!(
        text(&other.call(&["PING"])),
        "-NOAUTH Authentication required."
    );
    assert_eq!(text(&other.call(&["AUTH", "12345"])), "OK");
    assert_eq!(
        text(&other.call(&["SET", "k", "v"])),
        "OK",
        "the nodes still serve"
    );
    let node = h.cluster.nodes()[0].addr;
    let mut direct = Client::connect(node);
    assert_eq!(
        text(&direct.call(&["PING"])),
        "PONG",
        "the node has no password"
    );
    let both = ["CONFIG", "SET", "requirepass", "x", "maxmemory", "0"];
    assert!(text(&admin.call(&both)).contains("set it alone"));
    assert_eq!(set(&mut admin, ""), "OK");
    let mut open = Client::connect(proxy.local_addr());
    assert_eq!(text(&open.call(&["PING"])), "PONG");
    proxy.shutdown();
}
