//! Two proxies in one process, behind servers of different versions (as `slotgate proxy
//! --nutcracker` runs one per pool): each routes by the command table learned from its
//! own masters. The table used to be one per process, the last learned by any proxy.

mod common;

use common::{text, Client};

#[test]
fn each_proxy_routes_by_the_table_of_its_own_masters() {
    let Some(newer) = common::valkey_cluster(1, "learned-valkey") else {
        return;
    };
    let valkey_proxy = common::start_proxy(&newer, |_| {});
    // Started second, so its table (Redis 7.0's, which has no HSETEX) is the last learned.
    let older = devcluster::Cluster::start(&devcluster::Options {
        masters: 1,
        replicas: 0,
        dir: common::tempdir("learned-redis"),
        ..Default::default()
    })
    .expect("Redis cluster starts");
    let redis_proxy = common::start_proxy(&older, |_| {});
    let hsetex = ["HSETEX", "h", "EX", "100", "FIELDS", "1", "f", "v"];
    let mut on_valkey = Client::connect(valkey_proxy.local_addr());
    assert_eq!(text(&on_valkey.call(&hsetex)), ":1");
    assert_eq!(text(&on_valkey.call(&["HGET", "h", "f"])), "v");
    let mut on_redis = Client::connect(redis_proxy.local_addr());
    let refused = text(&on_redis.call(&hsetex));
    assert!(refused.contains("unknown command"), "{refused}");
    // And the Valkey proxy still knows it after the other learned its table.
    assert_eq!(text(&on_valkey.call(&hsetex)), ":1");
    redis_proxy.shutdown();
    valkey_proxy.shutdown();
}
