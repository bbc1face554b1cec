//! INFO's sections that applications read (memory, persistence, replication, CPU) through
//! the proxy on a real 3x1 cluster: Redis's format and section order, and each field's rule
//! (summed over masters, the masters' common value, or the proxy's own).

mod common;

use std::time::Duration;

use common::{text, wait_until, Client, Harness};

fn headers(info: &str) -> Vec<&str> {
    info.split("\r\n").filter(|l| l.starts_with("# ")).collect()
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
}

fn int(info: &str, name: &str) -> i64 {
    let value = field(info, name).unwrap_or_else(|| panic!("{name} in {info}"));
    value.parse().unwrap_or_else(|_| panic!("{name}:{value}"))
}

#[test]
fn info_has_the_sections_applications_read() {
    let h = Harness::start(3, 1);
    let mut c = h.client();
    let info = text(&c.call(&["INFO"]));
    assert!(!info.contains('\0'), "no marker left: {info:?}");
    assert!(info.split("\r\n").all(|l| !l.contains('\n')), "CRLF lines");
    assert_eq!(
        headers(&info),
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Topology",
            "# Errorstats",
            "# Keyspace"
        ]
    );
    assert_eq!(field(&info, "maxmemory_policy"), Some("noeviction"));
    assert_eq!(field(&info, "role"), Some("master"));
    assert_eq!(field(&info, "rdb_last_bgsave_status"), Some("ok"));
    assert!(int(&info, "used_memory") > 0);
    assert!(field(&info, "used_memory_human").is_some());
    assert!(field(&info, "used_cpu_user").is_some_and(|v| v.parse::<f64>().is_ok()));
    // used_memory is the masters' sum: more than any one of them holds.
    let one = text(&Client::connect(h.cluster.masters()[0]).call(&["INFO", "memory"]));
    assert!(int(&info, "used_memory") > int(&one, "used_memory"));
    // connected_slaves is summed: one replica per master.
    wait_until(Duration::from_secs(20), || {
        let r = text(&c.call(&["INFO", "replication"]));
        int(&r, "connected_slaves") == 3
            && (0..3).all(|i| field(&r, &format!("slave{i}")).is_some())
    });
}

#[test]
fn info_sections_by_name_all_and_everything() {
    let h = Harness::start(3, 0);
    let mut c = h.client();
    let memory = text(&c.call(&["INFO", "memory"]));
    assert_eq!(headers(&memory), ["# Memory"]);
    assert!(memory.starts_with("# Memory\r\nused_memory:"), "{memory}");
    let cpu = text(&c.call(&["INFO", "cpu"]));
    let names: Vec<&str> = cpu
        .split("\r\n")
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert_eq!(
        names,
        [
            "used_cpu_sys",
            "used_cpu_user",
            "used_cpu_sys_children",
            "used_cpu_user_children",
            "used_cpu_sys_main_thread",
            "used_cpu_user_main_thread"
        ]
    );
    let two = text(&c.call(&["INFO", "persistence", "replication"]));
    assert_eq!(headers(&two), ["# Persistence", "# Replication"]);
    for all in ["all", "everything"] {
        let info = text(&c.call(&["INFO", all]));
        assert_eq!(
            headers(&info),
            [
                "# Server",
                "# Clients",
                "# Memory",
                "# Persistence",
                "# Stats",
                "# Replication",
                "# CPU",
                "# Topology",
                "# Commandstats",
                "# Errorstats",
                "# Latencystats",
                "# Backends",
                "# Tls",
                "# Group",
                "# Hotkeys",
                "# Keyspace"
            ]
        );
    }
}
