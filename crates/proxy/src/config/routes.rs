//! `[[routes]]`: key-prefix routes, each to a sharded pool of its own, in front of the
//! `[sharded]` pool as catch-all (`cluster::routes`). Several nutcracker pools, or key
//! families split over sets of servers, behind one listener.

use serde::Deserialize;

use cluster::routes::Routes;

use super::{ConfigError, ShardedConfig};

/// One route: the keys starting with `prefix` live in `pool`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RouteConfig {
    /// The bytes a key starts with; the longest matching prefix of all routes wins.
    pub prefix: String,
    /// The pool, placed as twemproxy places keys (`[sharded]`'s settings).
    pub pool: ShardedConfig,
}

/// The route table `routes` make over the catch-all pool `catch_all`, every pool checked.
pub(super) fn table(
    catch_all: &ShardedConfig,
    routes: &[RouteConfig],
) -> Result<Routes, ConfigError> {
    if !catch_all.is_set() {
        return Err(ConfigError::Routes(
            "routes need a [sharded] pool as catch-all, for the keys no prefix matches".into(),
        ));
    }
    let pools = routes
        .iter()
        .map(|r| {
            let pool = r
                .pool
                .sharding()
                .map_err(|e| ConfigError::Routes(format!("prefix {:?}: {e}", r.prefix)))?;
            Ok((r.prefix.as_bytes().to_vec(), pool))
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Routes::new(catch_all.sharding()?, pools).map_err(|e| ConfigError::Routes(e.to_string()))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn routes_read_from_toml_and_checked() {
        let c = Config::from_toml(
            r#"
            [sharded]
            servers = ["127.0.0.1:7001:1"]
            [[routes]]
            prefix = "user:"
            [routes.pool]
            servers = ["127.0.0.1:7002:1", "127.0.0.1:7003:1"]
            hash = "murmur"
            "#,
        )
        .unwrap();
        assert_eq!(c.routes.len(), 1);
        let cluster::Placement::Routes(r) = c.placement().unwrap() else {
            panic!("routes expected")
        };
        assert_eq!(r.pools().len(), 2);
        assert_eq!(r.slot(b"other"), 0);
        assert!((1..=2).contains(&r.slot(b"user:1")));
        c.validate().unwrap();

        let bad = |text: &str| {
            Config::from_toml(text)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string()
        };
        let orphan =
            bad("[[routes]]\nprefix = \"a:\"\n[routes.pool]\nservers = [\"127.0.0.1:7002:1\"]");
        assert!(orphan.contains("catch-all"), "{orphan}");
        let empty = bad(
            "[sharded]\nservers = [\"127.0.0.1:7001:1\"]\n[[routes]]\nprefix = \"\"\n\
             [routes.pool]\nservers = [\"127.0.0.1:7002:1\"]",
        );
        assert!(empty.contains("prefix is empty"), "{empty}");
        let no_servers =
            bad("[sharded]\nservers = [\"127.0.0.1:7001:1\"]\n[[routes]]\nprefix = \"a:\"");
        assert!(no_servers.contains("prefix \"a:\""), "{no_servers}");
        let with_cluster = bad(
            "[cluster]\nseeds = [\"127.0.0.1:7000\"]\n[[routes]]\nprefix = \"a:\"\n\
             [routes.pool]\nservers = [\"127.0.0.1:7002:1\"]",
        );
        assert!(with_cluster.contains("catch-all"), "{with_cluster}");
    }
}
