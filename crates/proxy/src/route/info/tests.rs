//! INFO replies from the masters merged into one, section by section.

use super::*;

fn bulk(text: &str) -> Bytes {
    let mut out = BytesMut::new();
    resp::write_bulk(&mut out, text.as_bytes());
    out.freeze()
}

fn master(used: u64, policy: &str, replicas: usize, saved: u64, status: &str) -> Bytes {
    let mut t = format!(
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:x\r\nused_memory_peak_perc:{}.00%\r\n\
         maxmemory:100\r\nmaxmemory_policy:{policy}\r\nallocator_active:10\r\n\
         mem_fragmentation_ratio:1.{used}\r\n\r\n\
         # Persistence\r\nloading:0\r\nrdb_changes_since_last_save:2\r\n\
         rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{saved}\r\n\
         rdb_last_bgsave_status:{status}\r\nrdb_last_bgsave_time_sec:-1\r\n\r\n\
         # Replication\r\nrole:master\r\nconnected_slaves:{replicas}\r\n",
        used % 100,
        u8::from(status != "ok"),
    );
    for i in 0..replicas {
        t.push_str(&format!(
            "slave{i}:ip=127.0.0.1,port={used}{i},state=online\r\n"
        ));
    }
    t.push_str("master_repl_offset:5\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\n\r\n");
    t.push_str("# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\n");
    bulk(&t)
}

fn prefix() -> String {
    let mut p = String::from("# Server\r\nredis_version:7.0.15\r\n");
    for (name, title) in [
        ("memory", "Memory"),
        ("persistence", "Persistence"),
        ("replication", "Replication"),
        ("keyspace", "Keyspace"),
    ] {
        p.push_str(&format!("\r\n# {title}\r\n{}", marker(name)));
    }
    p
}

#[test]
fn sections_merge_by_their_rules_in_redis_order() {
    let a = master(1000, "noeviction", 1, 300, "ok");
    let b = master(2048, "noeviction", 2, 200, "err");
    let down = Bytes::from_static(b"-ERR node down\r\n");
    let merged = merge_info(prefix().as_bytes(), &[&a, &b, &down]);
    let expected = "# Server\r\nredis_version:7.0.15\r\n\
        \r\n# Memory\r\nused_memory:3048\r\nused_memory_human:2.98K\r\n\
        used_memory_peak_perc:48.00%\r\nmaxmemory:200\r\nmaxmemory_policy:noeviction\r\n\
        allocator_active:20\r\nmem_fragmentation_ratio:1.2048\r\n\
        \r\n# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:4\r\n\
        rdb_bgsave_in_progress:1\r\nrdb_last_save_time:200\r\nrdb_last_bgsave_status:err\r\n\
        rdb_last_bgsave_time_sec:-1\r\n\
        \r\n# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
        slave0:ip=127.0.0.1,port=10000,state=online\r\n\
        slave1:ip=127.0.0.1,port=20480,state=online\r\n\
        slave2:ip=127.0.0.1,port=20481,state=online\r\n\
        master_repl_offset:10\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\n\
        \r\n# Keyspace\r\ndb0:keys=4,expires=0,avg_ttl=0\r\n";
    assert_eq!(merged, bulk(expected));
}

#[test]
fn text_fields_take_the_common_value_or_the_first_masters() {
    assert_eq!(
        merge_values("maxmemory_policy", &["noeviction", "noeviction"]),
        "noeviction"
    );
    assert_eq!(
        merge_values("maxmemory_policy", &["allkeys-lru", "noeviction"]),
        "allkeys-lru"
    );
    assert_eq!(merge_values("role", &["slave"]), "master");
    assert_eq!(merge_values("maxmemory", &["0", "100"]), "0");
    assert_eq!(merge_values("total_system_memory", &["8", "8"]), "8");
    assert_eq!(merge_values("number_of_cached_scripts", &["3", "3"]), "3");
}

#[test]
fn human_sizes_as_redis_prints_them() {
    assert_eq!(bytes_to_human(200), "200B");
    assert_eq!(bytes_to_human(914_536), "893.10K");
    assert_eq!(bytes_to_human(12_099_584), "11.54M");
    assert_eq!(bytes_to_human(25_276_502_016), "23.54G");
}

#[test]
fn resp3_verbatim_replies_merge_like_bulk_ones() {
    // Redis 7 answers INFO over RESP3 with a verbatim string: `=LEN\r\ntxt:…`.
    let text = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";
    let verbatim = Bytes::from(format!("={}\r\ntxt:{text}\r\n", text.len() + 4));
    let merged = merge_info(marker("replication").as_bytes(), &[&verbatim, &verbatim]);
    let merged = String::from_utf8_lossy(&merged).into_owned();
    assert!(merged.contains("role:master\r\n"), "{merged}");
}

#[test]
fn keysizes_sum_bin_by_bin_in_redis_order_and_vanish_behind_older_servers() {
    let prefix = format!(
        "# Server\r\nx:1\r\n\r\n# Keysizes\r\n{}",
        marker("keysizes")
    );
    let a =
        bulk("# Keysizes\r\ndb0_distrib_lists_items:2=1\r\ndb0_distrib_strings_sizes:1=1,2K=2\r\n");
    let b = bulk("# Keysizes\r\ndb0_distrib_strings_sizes:16=1,2K=1,1M=1\r\n");
    let merged = merge_info(prefix.as_bytes(), &[&a, &b]);
    let expected = "# Server\r\nx:1\r\n\r\n# Keysizes\r\n\
        db0_distrib_strings_sizes:1=1,16=1,2K=3,1M=1\r\ndb0_distrib_lists_items:2=1\r\n";
    assert_eq!(merged, bulk(expected));
    // Redis 7.0 and Valkey have no such section: the reply has none either.
    let old = bulk("# Memory\r\nused_memory:1\r\n");
    assert_eq!(
        merge_info(prefix.as_bytes(), &[&old]),
        bulk("# Server\r\nx:1\r\n")
    );
}

#[test]
fn stats_take_only_what_the_nodes_count_of_the_data() {
    let prefix = format!(
        "# Stats\r\ntotal_connections_received:7\r\n{}",
        marker("stats")
    );
    let a =
        bulk("# Stats\r\ntotal_connections_received:100\r\nexpired_keys:3\r\nkeyspace_hits:1\r\n");
    let b =
        bulk("# Stats\r\ntotal_connections_received:50\r\nexpired_keys:2\r\nexpired_fields:4\r\n");
    let merged = merge_info(prefix.as_bytes(), &[&a, &b]);
    let expected = "# Stats\r\ntotal_connections_received:7\r\nexpired_keys:5\r\n\
        keyspace_hits:1\r\nexpired_fields:4\r\n";
    assert_eq!(merged, bulk(expected));
}
