//! F10 of the fault catalogue (reliability.md §C): the nodes kill the proxy's backend
//! connections (`CLIENT KILL`) again and again under pipelined load from 50 clients. Every
//! value names its key, client and sequence number, so a reply delivered to the wrong
//! request is caught at once. A request on a killed connection may fail (its outcome is
//! unknown, the proxy never resends it), but no reply may ever cross.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{text, wait_until, Client, Harness};
use resp::Value;

const CLIENTS: usize = 50;
const KILLS: usize = 100;
const DEPTH: usize = 8;

#[test]
fn backend_connection_kills_never_cross_replies() {
    let h = Harness::start(3, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (stop, served, failed) = (stop.clone(), served.clone(), failed.clone());
            let mut c = h.client();
            std::thread::spawn(move || pipeline_loop(&mut c, id, &stop, &served, &failed))
        })
        .collect();
    wait_until(Duration::from_secs(30), || {
        served.load(Ordering::Relaxed) > 1000
    });
    let mut killed = 0;
    for round in 0..KILLS {
        let node = h.cluster.masters()[round % 3];
        killed += kill_clients_of(node);
        let before = served.load(Ordering::Relaxed);
        // Let the load reconnect and move on before the next kill.
        wait_until(Duration::from_secs(30), || {
            served.load(Ordering::Relaxed) > before + 50
        });
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("no crossed reply");
    }
    eprintln!(
        "{killed} backend connections killed in {KILLS} rounds; {} pairs served, {} failed",
        served.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert!(killed >= KILLS, "the kills hit the proxy's connections");
    // Still serving afterwards.
    let mut c = h.client();
    assert_eq!(text(&c.call(&["SET", "f10:after", "v"])), "OK");
}

/// `SET k v, GET k` pairs, `DEPTH` per write, until `stop`. Each reply must be the one for
/// its own request, or an error.
fn pipeline_loop(c: &mut Client, id: usize, stop: &AtomicBool, ok: &AtomicU64, bad: &AtomicU64) {
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let pairs: Vec<(String, String)> = (0..DEPTH)
            .map(|i| {
                seq += 1;
                (format!("f10:{id}:{i}"), format!("v:{id}:{seq}"))
            })
            .collect();
        for (k, v) in &pairs {
            c.send(&[b"SET", k.as_bytes(), v.as_bytes()]);
            c.send(&[b"GET", k.as_bytes()]);
        }
        for (k, v) in &pairs {
            let set = c.read().expect("SET reply");
            let get = c.read().expect("GET reply");
            match (&set, &get) {
                (Value::SimpleString(s), Value::BulkString(g)) if &s[..] == b"OK" => {
                    assert_eq!(&g[..], v.as_bytes(), "GET {k}: crossed reply");
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    for r in [&set, &get] {
                        let fine = matches!(r, Value::Error(_))
                            || *r == Value::SimpleString("OK".into())
                            || matches!(r, Value::BulkString(g) if g.starts_with(format!("v:{id}:").as_bytes()));
                        assert!(fine, "{k}: crossed or unexpected reply {r:?}");
                    }
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// `CLIENT KILL` every client of `node` but this one (the proxy's connections); how many.
fn kill_clients_of(node: std::net::SocketAddr) -> usize {
    let mut admin = Client::connect(node);
    let me = match admin.call(&["CLIENT", "ID"]) {
        Value::Integer(n) => n,
        other => panic!("CLIENT ID: {other:?}"),
    };
    let list = text(&admin.call(&["CLIENT", "LIST", "TYPE", "normal"]));
    let ids: Vec<String> = list
        .lines()
        .filter_map(|l| l.strip_prefix("id=")?.split(' ').next().map(str::to_string))
        .filter(|id| *id != me.to_string())
        .collect();
    for id in &ids {
        admin.call(&["CLIENT", "KILL", "ID", id]);
    }
    ids.len()
}
