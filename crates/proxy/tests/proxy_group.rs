//! A proxy group of 3 in front of one real 3-master, 1-replica cluster (docs/group.md): every
//! member advertises the same 3 proxies with the same slot split; each still serves every
//! key (never a MOVED); a stopped member drops out of what the others advertise within a
//! few seconds, and comes back once it answers again; a reload changes the group.
//!
//! The client-level test (go-redis ClusterClient under load, one proxy killed) is
//! `scripts/group_failover.py`, run by `make compat`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{scrape, start_proxy, text, wait_until, Client};
use proxy::{Config, Proxy};
use resp::Value;

/// Generous: the default checks drop a member after 2 failed checks 1 s apart.
const CEILING: Duration = Duration::from_secs(20);

/// The proxies' shared settings, as `start_proxy` makes them, with a group of `peers`.
fn config(cluster: &devcluster::Cluster, peers: &[SocketAddr], me: SocketAddr) -> Config {
    let mut config = Config::default();
    config.proxy.listen = "127.0.0.1:0".into();
    config.proxy.threads = 2;
    config.cluster.seeds = cluster.masters().iter().map(|a| a.to_string()).collect();
    config.group.peers = peers.iter().map(|a| a.to_string()).collect();
    config.group.self_addr = me.to_string();
    config
}

/// CLUSTER SLOTS from `addr`: (first, last, port) per range, and the raw reply.
fn advertised(addr: SocketAddr) -> (Vec<(i64, i64, i64)>, Value) {
    let reply = Client::connect(addr).call(&["CLUSTER", "SLOTS"]);
    let ranges = reply
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            let p = r.as_array().expect("a range");
            let node = p[2].as_array().expect("a node");
            (
                p[0].as_int().unwrap(),
                p[1].as_int().unwrap(),
                node[1].as_int().unwrap(),
            )
        })
        .collect();
    (ranges, reply)
}

/// The ports `addr` advertises, in slot order.
fn ports(addr: SocketAddr) -> Vec<u16> {
    advertised(addr)
        .0
        .iter()
        .map(|r| u16::try_from(r.2).unwrap())
        .collect()
}

fn sorted_ports(addrs: &[SocketAddr]) -> Vec<u16> {
    let mut ports: Vec<u16> = addrs.iter().map(|a| a.port()).collect();
    ports.sort();
    ports
}

#[test]
fn a_group_advertises_its_healthy_members_and_drops_a_stopped_one() {
    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 3,
        replicas: 1,
        dir: common::tempdir("group"),
        ..Default::default()
    })
    .expect("cluster starts");
    let mut proxies: Vec<Option<Proxy>> = (0..3)
        .map(|i| {
            Some(start_proxy(&cluster, |c| {
                if i == 0 {
                    c.admin.listen = "127.0.0.1:0".into();
                }
            }))
        })
        .collect();
    let addrs: Vec<SocketAddr> = proxies.iter().flatten().map(|p| p.local_addr()).collect();
    let all = sorted_ports(&addrs);
    // Started alone, each is a one-node cluster; the group comes with a reload.
    assert_eq!(ports(addrs[0]), [addrs[0].port()]);
    for (p, me) in proxies.iter().flatten().zip(&addrs) {
        let mut c = config(&cluster, &addrs, *me);
        if p.admin_addr().is_some() {
            c.admin.listen = "127.0.0.1:0".into();
        }
        let report = p.reload_with(c).expect("group reload");
        assert!(report.applied.contains(&"group"), "{report:?}");
        assert!(report.needs_restart.is_empty(), "{report:?}");
    }
    let took = wait_until(CEILING, || addrs.iter().all(|a| ports(*a) == all));
    eprintln!("3 members advertised by all after {took:?}");
    let (ranges, first) = advertised(addrs[0]);
    assert_eq!(
        ranges.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        [(0, 5460), (5461, 10921), (10922, 16383)]
    );
    for a in &addrs[1..] {
        assert_eq!(
            advertised(*a).1,
            first,
            "every member gives the same answer"
        );
    }
    let ids: Vec<String> = addrs
        .iter()
        .map(|a| text(&Client::connect(*a).call(&["CLUSTER", "MYID"])))
        .collect();
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0].len() == 40);
    serves_every_slot_itself(&addrs);
    let info = text(&Client::connect(addrs[0]).call(&["INFO", "group"]));
    assert!(
        info.contains("group_members_up:3\r\ngroup_advertised:3\r\n"),
        "{info}"
    );
    let admin = proxies[0].as_ref().unwrap().admin_addr().unwrap();
    assert!(scrape(admin).contains("slotgate_group_members{state=\"up\"} 3"));

    // The member owning the last range drains (SIGTERM's path) while one of its clients
    // waits in a BLPOP that nothing answers yet: the others drop it while it drains, and
    // split anew.
    let victim = addrs.iter().position(|a| a.port() == all[2]).unwrap();
    let mut waiting = Client::connect(addrs[victim]);
    waiting.send(&[b"BLPOP", b"{group}drain", b"0"]);
    let mut admin_client = Client::connect(addrs[victim]);
    wait_until(CEILING, || {
        text(&admin_client.call(&["CLIENT", "LIST"])).contains("cmd=blpop")
    });
    drop(admin_client);
    let draining = proxies[victim].take().unwrap();
    let drained = std::thread::spawn(move || draining.shutdown_gracefully(CEILING));
    let rest: Vec<SocketAddr> = (0..3).filter(|i| *i != victim).map(|i| addrs[i]).collect();
    let took = wait_until(CEILING, || rest.iter().all(|a| ports(*a) == all[..2]));
    eprintln!("the draining member dropped out after {took:?}");
    assert!(!drained.is_finished(), "dropped while still draining");
    let mut pusher = Client::connect(rest[0]);
    assert_eq!(text(&pusher.call(&["LPUSH", "{group}drain", "x"])), ":1");
    let popped = waiting
        .read()
        .expect("the BLPOP is answered before the close");
    assert_eq!(popped.as_array().map(|a| a.len()), Some(2), "{popped:?}");
    drained.join().expect("drained");
    let (ranges, _) = advertised(rest[0]);
    assert_eq!(
        ranges.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        [(0, 8191), (8192, 16383)]
    );
    let info = text(&Client::connect(rest[0]).call(&["INFO", "group"]));
    assert!(
        info.contains(&format!("addr={},state=down", addrs[victim])),
        "{info}"
    );
    serves_every_slot_itself(&rest);

    // It comes back on the same address: advertised again once it answers.
    let me = addrs[victim];
    let back = Proxy::start(Config {
        proxy: proxy::config::ProxyConfig {
            listen: me.to_string(),
            ..config(&cluster, &addrs, me).proxy
        },
        ..config(&cluster, &addrs, me)
    })
    .expect("restarts on its address");
    proxies[victim] = Some(back);
    wait_until(CEILING, || addrs.iter().all(|a| ports(*a) == all));

    // A reload without the group: a one-node cluster again.
    let p0 = proxies[0].as_ref().unwrap();
    let mut alone = config(&cluster, &[], addrs[0]);
    alone.group.self_addr.clear();
    alone.admin.listen = "127.0.0.1:0".into();
    p0.reload_with(alone).expect("reload");
    wait_until(CEILING, || ports(addrs[0]) == [addrs[0].port()]);
    // Behind a load balancer: a one-member group advertising the balancer's address.
    let balancer: SocketAddr = "192.0.2.1:6379".parse().unwrap();
    let mut behind = config(&cluster, &[balancer], balancer);
    behind.admin.listen = "127.0.0.1:0".into();
    p0.reload_with(behind).expect("reload");
    wait_until(CEILING, || ports(addrs[0]) == [6379]);
    for p in proxies.into_iter().flatten() {
        p.shutdown();
    }
}

/// A key of each advertised range, written and read through every member: served there,
/// never redirected.
fn serves_every_slot_itself(addrs: &[SocketAddr]) {
    for (i, a) in addrs.iter().enumerate() {
        let mut c = Client::connect(*a);
        for key in ["{a}k", "{b}k", "{c}k", "{group}k"] {
            let value = format!("{i}");
            assert_eq!(text(&c.call(&["SET", key, &value])), "OK");
            assert_eq!(text(&c.call(&["GET", key])), value);
        }
    }
}

/// A member that stays connected but stops answering (here a Redis node standing in for a
/// proxy, paused by CLIENT PAUSE) drops out after `fail_after` timed-out checks, and comes
/// back when it answers again.
#[test]
fn a_silent_member_drops_out_after_its_failed_checks_and_comes_back() {
    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 1,
        replicas: 1,
        dir: common::tempdir("group-silent"),
        ..Default::default()
    })
    .expect("cluster starts");
    let replica = cluster.nodes().iter().find(|n| n.master_of.is_some());
    let silent = replica.expect("a replica").addr;
    let proxy = start_proxy(&cluster, |_| {});
    let me = proxy.local_addr();
    let mut c = config(&cluster, &[me, silent], me);
    c.group.check_interval_ms = 200;
    c.group.check_timeout_ms = 300;
    c.group.fail_after = 3;
    proxy.reload_with(c).expect("group reload");
    let both = sorted_ports(&[me, silent]);
    wait_until(CEILING, || ports(me) == both);
    let paused = Client::connect(silent).call(&["CLIENT", "PAUSE", "4000", "ALL"]);
    assert_eq!(text(&paused), "OK");
    let took = wait_until(CEILING, || ports(me) == [me.port()]);
    eprintln!("the silent member dropped out after {took:?}");
    let info = text(&Client::connect(me).call(&["INFO", "group"]));
    assert!(info.contains("state=down"), "{info}");
    assert!(info.contains("last_error=no_answer_within"), "{info}");
    wait_until(CEILING, || ports(me) == both);
    proxy.shutdown();
}

/// Review S13: a member that answers with an error (here a real proxy at its maxclients,
/// which answers `-ERR max number of clients reached` and closes) is not advertised: a
/// client sent there would be refused. It is advertised again once it has room.
#[test]
fn a_member_at_its_maxclients_is_not_advertised() {
    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir("group-full"),
        ..Default::default()
    })
    .expect("cluster starts");
    let full = start_proxy(&cluster, |c| c.limits.maxclients = 1);
    let mut hog = Client::connect(full.local_addr());
    assert_eq!(text(&hog.call(&["PING"])), "PONG");
    let proxy = start_proxy(&cluster, |_| {});
    let (me, other) = (proxy.local_addr(), full.local_addr());
    let mut c = config(&cluster, &[me, other], me);
    c.group.check_interval_ms = 200;
    c.group.fail_after = 1;
    proxy.reload_with(c).expect("group reload");
    wait_until(CEILING, || {
        text(&Client::connect(me).call(&["INFO", "group"])).contains("max_number_of_clients")
    });
    assert_eq!(ports(me), [me.port()], "the full member is not advertised");
    drop(hog);
    wait_until(CEILING, || ports(me) == sorted_ports(&[me, other]));
    proxy.shutdown();
    full.shutdown();
}

/// A member that accepts a connection and closes it before answering is dropped at its
/// first failed check, as one that refuses: that is what a killed proxy looks like for a
/// moment (its kernel closes the connections it held, which starts a round, before its
/// listening socket), and waiting `fail_after` rounds left JedisCluster reloading its slots
/// onto the dead member and backing off for seconds (scripts/group_failover.py). No real
/// server can be made to do this on cue, so a std listener stands in for the member: it
/// answers PONG until told to stop, then closes what it holds and every new connection.
#[test]
fn a_member_that_closes_before_answering_drops_out_at_its_first_failed_check() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let cluster = devcluster::Cluster::start(&devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir("group-closes"),
        ..Default::default()
    })
    .expect("cluster starts");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let stand_in = listener.local_addr().expect("addr");
    let serving = Arc::new(AtomicBool::new(true));
    let flag = serving.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            if !flag.load(Ordering::SeqCst) {
                continue; // dropped: closed unanswered
            }
            let flag = flag.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
                let mut buf = [0u8; 512];
                while flag.load(Ordering::SeqCst) {
                    match stream.read(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {
                            let _ = stream.write_all(b"+PONG\r\n");
                        }
                        Err(_) => {} // the read timeout: look at the flag again
                    }
                }
            });
        }
    });
    let proxy = start_proxy(&cluster, |_| {});
    let me = proxy.local_addr();
    let mut c = config(&cluster, &[me, stand_in], me);
    c.group.check_interval_ms = 1000;
    c.group.fail_after = 3;
    proxy.reload_with(c).expect("group reload");
    wait_until(CEILING, || ports(me) == sorted_ports(&[me, stand_in]));
    serving.store(false, Ordering::SeqCst);
    wait_until(CEILING, || ports(me) == [me.port()]);
    let info = text(&Client::connect(me).call(&["INFO", "group"]));
    let line = info
        .lines()
        .find(|l| l.contains(&format!("addr={stand_in}")))
        .unwrap_or_else(|| panic!("no line for the stand-in: {info}"));
    assert!(line.contains("state=down"), "{line}");
    assert!(
        line.contains("checks_failed=1,"),
        "dropped at its first failed check: {line}"
    );
    assert!(line.contains("closed_before_answering"), "{line}");
    proxy.shutdown();
}
