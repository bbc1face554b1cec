//! The config's unit tests: the example file documents the defaults, bad keys are named.

use super::*;

#[test]
fn example_file_parses_to_the_defaults_plus_seeds() {
    let text = include_str!("../../../../config/proxy.example.toml");
    let cfg = Config::from_toml(text).expect("example config parses");
    let mut expected = Config::default();
    expected.cluster.seeds = vec!["127.0.0.1:30001".into()];
    assert_eq!(cfg, expected, "the example must document the defaults");
    let addrs = cfg.validate().expect("example validates");
    assert_eq!(addrs.tls, None, "TLS is off by default");
}

#[test]
fn unknown_keys_are_refused() {
    let err = Config::from_toml("[proxy]\nlisten_addr = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");
}

#[test]
fn extra_listeners_parse_and_need_a_password_off_loopback() {
    let mut cfg = Config::default();
    cfg.cluster.seeds = vec!["127.0.0.1:1".into()];
    cfg.proxy.extra_listen = vec!["[::1]:7777".into(), "127.0.0.2:0".into()];
    let addrs = cfg.validate().expect("loopback extras need no password");
    assert_eq!(addrs.extra.len(), 2);
    cfg.proxy.extra_listen = vec!["nowhere".into()];
    assert!(matches!(cfg.validate(), Err(ConfigError::Listen(_))));
    cfg.proxy.extra_listen = vec!["0.0.0.0:7777".into()];
    assert!(matches!(cfg.validate(), Err(ConfigError::Unprotected(_))));
    cfg.auth.requirepass = "secret".into();
    assert!(cfg.validate().is_ok());
}

#[test]
fn validate_names_the_bad_key() {
    let mut cfg = Config::default();
    assert!(matches!(cfg.validate(), Err(ConfigError::NoSeeds)));
    cfg.cluster.seeds = vec!["nope".into()];
    assert!(matches!(cfg.validate(), Err(ConfigError::Seed(_))));
    cfg.cluster.seeds = vec!["127.0.0.1:1".into()];
    cfg.proxy.listen = "localhost".into();
    assert!(matches!(cfg.validate(), Err(ConfigError::Listen(_))));
    cfg.proxy.listen = "0.0.0.0:7777".into();
    assert!(matches!(cfg.validate(), Err(ConfigError::Unprotected(_))));
    cfg.auth.requirepass = "secret".into();
    assert!(
        cfg.validate().is_ok(),
        "with a password any address is allowed"
    );
    cfg.proxy.event_interval = 0;
    assert!(matches!(
        cfg.validate(),
        Err(ConfigError::Zero("proxy.event_interval"))
    ));
    cfg.proxy.event_interval = 16;
    cfg.proxy.turn_quantum_bytes = 0;
    assert!(matches!(
        cfg.validate(),
        Err(ConfigError::Zero("proxy.turn_quantum_bytes"))
    ));
}

#[test]
fn a_parse_error_gives_the_place_not_the_text() {
    for (text, line) in [
        ("[auth]\nrequirepass = hunter2\n", 2),
        ("[auth]\nrequirepass = \"hunter2\nx = 1\n", 2),
        ("[auth]\nrequirepass = 'hunter2\n", 2),
        ("[limits]\nmax_bulk_bytes = \"hunter2\"\n", 2),
        ("[cluster]\nseeds = [\"a:1\"]\nhunter2 = 1\n", 3),
        ("[auth]\nrequirepass = \"pw\" hunter2\n", 2),
        ("[auth]\nrequirepass = \"pw\"\n[auth]\nhunter2 = \"x\"\n", 3),
    ] {
        let err = Config::from_toml(text).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "the error quotes the file: {err}");
        assert!(err.contains(&format!("line {line},")), "{text:?}: {err}");
    }
}

#[test]
fn a_migration_has_one_source_and_a_cluster_source_names_seeds() {
    let text = "[cluster]\nseeds = [\"127.0.0.1:1\"]\n[migration]\n\
                source_cluster = [\"127.0.0.1:7000\", \"[::1]:7001\"]\n";
    let mut cfg = Config::from_toml(text).expect("parses");
    assert!(cfg.migration.is_set());
    assert!(cfg.validate().is_ok());
    cfg.migration.source_cluster = vec!["nowhere".into()];
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("\"nowhere\" is not host:port"), "{err}");
    cfg.migration.source_cluster = vec!["127.0.0.1:7000".into()];
    cfg.migration.source.servers = vec!["127.0.0.1:6379:1".into()];
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("exclusive: one source per migration"), "{err}");
}
