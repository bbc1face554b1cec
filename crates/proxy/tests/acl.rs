//! Permission decisions of restricted users, compared with redis-server's own ACL: the same
//! rules are set on a standalone server with `ACL SETUSER` and on the proxy's user, the same
//! commands sent to both, and the raw replies compared (review S2: scripts and functions
//! read and wrote keys outside the user's patterns).

mod common;

use common::reference::Reference;
use common::{start_proxy, text, Client, Harness};
use proxy::config::AuthConfig;

const COMMANDS: &str = "['+@all', '-@dangerous']";
const KEYS: &str = "['app:*']";

fn users() -> AuthConfig {
    let app = toml::from_str(&format!(
        "name = 'app'\npassword = 'apppw'\ncommands = {COMMANDS}\nkeys = {KEYS}"
    ))
    .unwrap();
    AuthConfig {
        requirepass: "adminpw".into(),
        users: vec![app],
    }
}

/// One raw reply as text: what the assertions compare.
fn raw(c: &mut Client, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args);
    String::from_utf8_lossy(&c.read_frame().expect("a reply")).into_owned()
}

#[test]
fn scripts_and_functions_run_with_the_users_rights() {
    let h = Harness::start(3, 0);
    let proxy = start_proxy(&h.cluster, |cfg| cfg.auth = users());
    let reference = Reference::start();
    let mut admin_ref = reference.client();
    assert_eq!(
        text(&admin_ref.call(&[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">apppw",
            "+@all",
            "-@dangerous",
            "~app:*"
        ])),
        "OK"
    );
    let mut admin = Client::connect(proxy.local_addr());
    assert_eq!(text(&admin.call(&["AUTH", "adminpw"])), "OK");
    let lib = "#!lua name=acllib\n\
        redis.register_function('getit', function(keys, args) return redis.call('GET', args[1]) end)\n\
        redis.register_function{function_name='getit_ro', callback=function(keys, args) return redis.call('GET', args[1]) end, flags={'no-writes'}}";
    for c in [&mut admin, &mut admin_ref] {
        assert_eq!(text(&c.call(&["SET", "secret{t}", "s"])), "OK");
        assert_eq!(text(&c.call(&["SET", "app:{t}", "a"])), "OK");
        assert_eq!(text(&c.call(&["FUNCTION", "LOAD", lib])), "acllib");
    }
    let mut p = Client::connect(proxy.local_addr());
    let mut r = reference.client();
    for c in [&mut p, &mut r] {
        assert_eq!(text(&c.call(&["AUTH", "app", "apppw"])), "OK");
    }
    let get_secret = "return redis.call('GET','secret{t}')";
    let get_app = "return redis.call('GET','app:{t}')";
    let set_secret = "return redis.call('SET','secret{t}','x')";
    let sha = text(&p.call(&["SCRIPT", "LOAD", get_secret]));
    assert_eq!(text(&r.call(&["SCRIPT", "LOAD", get_secret])), sha);
    // Undeclared keys a script may read are only those of the node it runs on, in any
    // cluster: the allowed ones are declared here, the forbidden ones are refused first.
    let cases: Vec<Vec<&str>> = vec![
        vec!["EVAL", get_secret, "1", "app:{t}"],
        vec!["EVAL", get_secret, "0"],
        vec!["EVAL", set_secret, "1", "app:{t}"],
        vec!["EVAL", get_app, "1", "app:{t}"],
        vec!["EVAL_RO", get_secret, "1", "app:{t}"],
        vec!["EVAL_RO", get_app, "1", "app:{t}"],
        vec!["EVALSHA", &sha, "1", "app:{t}"],
        vec!["EVALSHA_RO", &sha, "0"],
        vec!["EVAL", get_secret, "1", "secret{t}"],
        vec!["FCALL", "getit", "1", "app:{t}", "secret{t}"],
        vec!["FCALL", "getit", "1", "app:{t}", "app:{t}"],
        vec!["FCALL_RO", "getit_ro", "0", "secret{t}"],
        vec!["EVAL", "return redis.call('FLUSHALL')", "0"],
        vec!["EVAL", "return redis.call('KEYS', '*')", "0"],
        vec!["GET", "app:{t}"],
        vec!["GET", "secret{t}"],
    ];
    let mut differ = Vec::new();
    for args in &cases {
        let (got, want) = (raw(&mut p, args), raw(&mut r, args));
        if got != want {
            differ.push(format!("{args:?}\n  proxy: {got:?}\n  redis: {want:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // Nothing was written outside the patterns.
    assert_eq!(text(&admin.call(&["GET", "secret{t}"])), "s");
    proxy.shutdown();
}

/// The mirror user is in force before anything of the client is written, or nothing runs:
/// with a backend user that may not create ACL users, a restricted user's script fails with
/// a clear error instead of running with the backend user's rights.
#[test]
fn a_mirror_the_nodes_refuse_fails_closed() {
    let h = Harness::start(3, 0);
    for node in h.cluster.masters() {
        let setuser = [
            "ACL", "SETUSER", "proxy", "on", ">pp", "+@all", "-acl", "~*", "&*",
        ];
        h.cluster.command(node, &setuser).unwrap().ok().unwrap();
    }
    let proxy = start_proxy(&h.cluster, |cfg| {
        cfg.auth = users();
        cfg.cluster.backend_user = "proxy".into();
        cfg.cluster.backend_password = "pp".into();
    });
    let mut admin = Client::connect(proxy.local_addr());
    assert_eq!(text(&admin.call(&["AUTH", "adminpw"])), "OK");
    assert_eq!(text(&admin.call(&["SET", "secret{t}", "s"])), "OK");
    let mut p = Client::connect(proxy.local_addr());
    assert_eq!(text(&p.call(&["AUTH", "app", "apppw"])), "OK");
    let set_secret = "return redis.call('SET','secret{t}','x')";
    let reply = text(&p.call(&["EVAL", set_secret, "1", "app:{t}"]));
    assert!(
        reply.starts_with("-ERR slotgate: node") && reply.contains("refused the ACL user"),
        "{reply}"
    );
    assert!(!reply.contains("pp"), "no password in the error: {reply}");
    assert_eq!(
        text(&p.call(&["SET", "app:{t}", "a"])),
        "OK",
        "still served"
    );
    assert_eq!(text(&admin.call(&["GET", "secret{t}"])), "s");
    proxy.shutdown();
}
