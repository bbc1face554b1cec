//! Blocking commands on dedicated connections, on a real cluster: a BLPOP
//! parked on a node never holds up the shared connection's callers, its own
//! timeout argument (not `Config::timeout`) bounds it, an idle connection the
//! server closed is not reused, and pipelines refuse blocking and subscribe
//! commands instead of putting them on the shared FIFO.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use slotgate_client::{Client, Cmd, Config, Error, Pipeline, Value};

/// `blocked_clients` in the node's INFO clients.
fn blocked_clients(cluster: &devcluster::Cluster, node: SocketAddr) -> u64 {
    let info = cluster.command(node, &["INFO", "clients"]).expect("INFO");
    info.lines()
        .iter()
        .find_map(|l| l.strip_prefix("blocked_clients:")?.trim().parse().ok())
        .expect("blocked_clients in INFO clients")
}

/// Client-side ports of `node`'s normal clients (its CLIENT LIST), the listing one aside.
fn client_ports(cluster: &devcluster::Cluster, node: SocketAddr) -> Vec<u16> {
    let list = cluster
        .command(node, &["CLIENT", "LIST", "TYPE", "normal"])
        .expect("CLIENT LIST");
    list.lines()
        .iter()
        .filter(|l| !l.contains(" cmd=client|list "))
        .filter_map(|l| {
            let addr = l.split(' ').find_map(|f| f.strip_prefix("addr="))?;
            addr.rsplit_once(':')?.1.parse().ok()
        })
        .collect()
}

/// Whether this host's TCP socket from local `port` to `node` is still established, i.e.
/// has not received the node's FIN (`/proc/net/tcp`, state 01).
fn established(port: u16, node: SocketAddr) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let (local, remote) = (format!(":{port:04X}"), format!(":{:04X}", node.port()));
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&local) && f[2].ends_with(&remote) && f[3] == "01"
    })
}

fn bulk(s: &str) -> Value {
    Value::BulkString(bytes::Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn blpop_waits_on_its_own_connection() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let c = common::connect(&cluster).await;
        for i in 0..100 {
            c.set(format!("{{q}}k{i}"), i).await.expect("set");
        }
        let waiter = c.clone();
        // BLPOP 0 never ends by itself: the GETs below can only complete if they do not
        // wait behind it (ordering proves it, not a time bound; slow CI VMs).
        let pop = tokio::spawn(async move {
            let started = Instant::now();
            let r = waiter.cmd(Cmd::new("BLPOP").arg("{q}list").arg(0)).await;
            (r, started.elapsed())
        });
        // Wait until the BLPOP is parked on the node, then hammer the same node.
        let node = cluster.owner_of(b"{q}").expect("owner");
        let ceiling = Instant::now() + Duration::from_secs(30);
        while blocked_clients(&cluster, node) != 1 {
            assert!(Instant::now() < ceiling, "the BLPOP never reached the node");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let parked = Instant::now();
        let gets = async {
            for i in 0..100 {
                let v = c.get(format!("{{q}}k{i}")).await.expect("get");
                assert_eq!(v.as_deref(), Some(i.to_string().as_bytes()));
            }
        };
        tokio::time::timeout(Duration::from_secs(30), gets)
            .await
            .expect("the GETs completed while the BLPOP was parked");
        assert!(!pop.is_finished(), "the BLPOP is still parked");
        assert_eq!(blocked_clients(&cluster, node), 1, "and still blocks");
        // No pause before the push: the BLPOP stayed parked through the whole burst of GETs
        // (the events above), and it is still pending now, so only the push can end it.
        let held = parked.elapsed();
        assert!(
            !pop.is_finished(),
            "the BLPOP is still parked before the push"
        );
        let pusher = c.clone();
        tokio::spawn(async move {
            pusher
                .cmd(Cmd::new("LPUSH").arg("{q}list").arg("woken"))
                .await
        })
        .await
        .expect("join")
        .expect("lpush");
        let (r, waited) = pop.await.expect("join");
        assert_eq!(
            r.expect("blpop"),
            Value::Array(vec![bulk("{q}list"), bulk("woken")])
        );
        assert!(waited >= held, "woke after {waited:?}, parked for {held:?}");
    });
}

#[test]
fn own_timeout_argument_bounds_a_blocking_command() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let cfg = Config::default().with_timeout(Duration::from_millis(300));
        let c = Client::cluster_with([common::seed(&cluster)], cfg)
            .await
            .expect("connect");
        // 1 s of BLPOP outlives the 300 ms call timeout: its own argument rules.
        let started = Instant::now();
        let r = c.cmd(Cmd::new("BLPOP").arg("t:empty").arg(1)).await;
        assert!(matches!(r, Ok(Value::NullArray | Value::Null)), "{r:?}");
        assert!(started.elapsed() >= Duration::from_millis(900));
        // The connection is reused after a clean reply, and still works.
        c.cmd(Cmd::new("RPUSH").arg("t:l").arg("a"))
            .await
            .expect("rpush");
        let r = c.cmd(Cmd::new("BLPOP").arg("t:l").arg(1)).await;
        assert_eq!(
            r.expect("blpop"),
            Value::Array(vec![bulk("t:l"), bulk("a")])
        );
        // An idle connection the server closed is noticed, not used.
        let node = cluster.owner_of(b"t:l").expect("owner");
        let ports = client_ports(&cluster, node);
        assert!(
            ports.iter().any(|&port| established(port, node)),
            "the idle connection is the node's client: {ports:?}"
        );
        common::admin(&cluster, node, &["CLIENT", "KILL", "TYPE", "normal"]);
        // Until the server's FIN reached this side of every killed connection (the idle one
        // is then readable as closed, which is what the client must notice).
        let ceiling = Instant::now() + Duration::from_secs(10);
        while ports.iter().any(|&port| established(port, node)) {
            assert!(Instant::now() < ceiling, "the kill never reached {ports:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = c.cmd(Cmd::new("BLPOP").arg("t:l").arg("0.2")).await;
        assert!(matches!(r, Ok(Value::NullArray | Value::Null)), "{r:?}");
        let xread = ["XREAD", "BLOCK", "100", "STREAMS", "t:s", "$"];
        let r = c.cmd(Cmd::from_args(xread)).await;
        assert!(matches!(r, Ok(Value::NullArray | Value::Null)), "{r:?}");
    });
}

#[test]
fn pipelines_refuse_blocking_and_subscribe_commands() {
    let cluster = common::cluster();
    let rt = common::runtime();
    rt.block_on(async {
        let c = common::connect(&cluster).await;
        let mut p = Pipeline::new();
        p.cmd(["SET", "p:a", "1"])
            .cmd(["BLPOP", "p:l", "1"])
            .cmd(["SUBSCRIBE", "ch"])
            .cmd(["GET", "p:a"]);
        let out = c.execute(&p).await;
        assert_eq!(out.len(), 4);
        assert!(matches!(out[1], Err(Error::Invalid(_))), "{:?}", out[1]);
        assert!(matches!(out[2], Err(Error::Invalid(_))), "{:?}", out[2]);
        assert_eq!(out[3], Ok(bulk("1")));
        let sub = c.cmd(Cmd::new("SUBSCRIBE").arg("ch")).await;
        assert!(matches!(sub, Err(Error::Invalid(_))), "{sub:?}");
    });
}
