//! Placement rules that need no server: tags, weights, spread. The comparison with the real
//! nutcracker, key by key, is in `crates/proxy/tests/sharded.rs`.

use super::*;

fn servers(n: usize) -> Vec<ShardServer> {
    (0..n)
        .map(|i| ShardServer {
            addr: format!("127.0.0.1:{}", 7000 + i),
            weight: 1,
            name: format!("127.0.0.1:{}", 7000 + i),
        })
        .collect()
}

fn pool(n: usize, distribution: Distribution, tag: &[u8]) -> Sharding {
    // md5 spreads sequential keys evenly under modula too; nutcracker's fnv1a_64 (32-bit,
    // with the 64-bit prime truncated to 435) does not.
    Sharding::new(servers(n), HashFn::Md5, distribution, tag).unwrap()
}

#[test]
fn one_server_takes_every_key() {
    let p = pool(1, Distribution::Ketama, b"");
    assert!((0..1000).all(|i| p.server_of(format!("k{i}").as_bytes()) == 0));
}

#[test]
fn keys_spread_over_every_server() {
    for d in [
        Distribution::Ketama,
        Distribution::Modula,
        Distribution::Random,
    ] {
        let p = pool(3, d, b"");
        let mut counts = [0u32; 3];
        for i in 0..30_000 {
            counts[usize::from(p.server_of(format!("key:{i}").as_bytes()))] += 1;
        }
        assert!(counts.iter().all(|&c| c > 5_000), "{d}: {counts:?}");
    }
}

#[test]
fn ketama_gives_160_points_per_server_of_equal_weight() {
    let p = pool(3, Distribution::Ketama, b"");
    assert_eq!(p.continuum.len(), 480);
    assert!(p.continuum.windows(2).all(|w| w[0].value <= w[1].value));
}

#[test]
fn weights_shape_ketama_and_modula() {
    let mut s = servers(2);
    s[1].weight = 3;
    let k = Sharding::new(s.clone(), HashFn::Md5, Distribution::Ketama, b"").unwrap();
    let on = |srv: u32| k.continuum.iter().filter(|p| p.server == srv).count();
    assert_eq!((on(0), on(1)), (80, 240));
    let m = Sharding::new(s, HashFn::Md5, Distribution::Modula, b"").unwrap();
    assert_eq!(m.continuum.len(), 4);
}

#[test]
fn hash_tag_takes_the_first_non_empty_span() {
    let p = pool(5, Distribution::Ketama, b"{}");
    assert_eq!(p.tagged(b"user:{42}:name"), b"42");
    assert_eq!(p.tagged(b"{}x{y}"), b"{}x{y}", "empty tag: the whole key");
    assert_eq!(p.tagged(b"a{b"), b"a{b");
    assert_eq!(p.tagged(b"a{b}c}"), b"b");
    for i in 0..100 {
        let a = format!("{{tag}}:{i}");
        assert_eq!(p.server_of(a.as_bytes()), p.server_of(b"{tag}"));
    }
}

#[test]
fn bad_pools_are_refused() {
    let none = Sharding::new(vec![], HashFn::Md5, Distribution::Ketama, b"");
    assert_eq!(none.unwrap_err(), ShardingError::NoServers);
    let mut s = servers(2);
    s[0].weight = 0;
    let zero = Sharding::new(s, HashFn::Md5, Distribution::Ketama, b"");
    assert!(matches!(zero, Err(ShardingError::ZeroWeight(_))));
    let tag = Sharding::new(servers(2), HashFn::Md5, Distribution::Ketama, b"{");
    assert_eq!(tag.unwrap_err(), ShardingError::BadHashTag);
    let mut s = servers(2);
    s[0].weight = 2_000_000;
    let heavy = Sharding::new(s, HashFn::Md5, Distribution::Modula, b"");
    assert_eq!(heavy.unwrap_err(), ShardingError::WeightTooLarge);
}

#[test]
fn servers_are_ordered_by_name_as_nutcracker_orders_them() {
    let named = |names: &[&str]| {
        let servers = names
            .iter()
            .enumerate()
            .map(|(i, n)| ShardServer {
                addr: format!("10.0.0.{i}:6379"),
                weight: 1,
                name: n.to_string(),
            })
            .collect();
        Sharding::new(servers, HashFn::Md5, Distribution::Modula, b"")
    };
    let p = named(&["b", "aa", "a"]).unwrap();
    let order: Vec<&str> = p.servers().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        order,
        ["a", "b", "aa"],
        "shorter names first, then bytewise"
    );
    assert_eq!(
        named(&["x", "x"]).unwrap_err(),
        ShardingError::DuplicateName("x".into())
    );
}
