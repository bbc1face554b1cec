//! What one `INFO server replication persistence` reply says about a node's fitness to serve reads:
//! parsed here, apart from the sampler's I/O, so it can be tested line by line.

/// The fields of INFO the replica view needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeInfo {
    /// `availability_zone` (Valkey 8.1+) is the proxy's own (a configured, equal zone).
    pub in_zone: bool,
    /// `role:slave` (Redis still says slave).
    pub replica: bool,
    /// `master_repl_offset` on a master; `slave_repl_offset` (what it applied) on a replica.
    pub offset: u64,
    /// `loading:1`: the dataset is still being read from disk.
    pub loading: bool,
    /// A replica whose link to its master is down or still syncing serves old data.
    pub link_down: bool,
}

/// Parse INFO's `field:value` lines; unknown lines are skipped. `zone`: the proxy's own
/// availability zone, or empty.
pub(crate) fn parse(text: &str, zone: &str) -> NodeInfo {
    let mut info = NodeInfo::default();
    let mut master_offset = 0;
    let mut replica_offset = None;
    for line in text.lines() {
        let Some((field, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        match field {
            "role" => info.replica = value == "slave",
            "master_repl_offset" => master_offset = value.parse().unwrap_or(0),
            "slave_repl_offset" => replica_offset = value.parse().ok(),
            "loading" | "async_loading" => info.loading |= value == "1",
            "master_link_status" => info.link_down |= value != "up",
            "master_sync_in_progress" => info.link_down |= value == "1",
            "availability_zone" => info.in_zone = !zone.is_empty() && value == zone,
            _ => {}
        }
    }
    info.offset = match info.replica {
        true => replica_offset.unwrap_or(master_offset),
        false => master_offset,
    };
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_master_reports_its_offset() {
        let text = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
            slave0:ip=127.0.0.1,port=1,state=online,offset=90,lag=0\r\n\
            master_repl_offset:100\r\n# Persistence\r\nloading:0\r\n";
        let info = parse(text, "");
        assert_eq!(
            (info.replica, info.offset, info.loading),
            (false, 100, false)
        );
    }

    #[test]
    fn a_replica_reports_what_it_applied_and_its_link() {
        let text = "role:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n\
            slave_repl_offset:80\r\nmaster_repl_offset:80\r\nloading:0\r\n";
        let info = parse(text, "");
        assert_eq!(
            (info.replica, info.offset, info.link_down),
            (true, 80, false)
        );
        let syncing = parse("role:slave\r\nmaster_link_status:down\r\nloading:1\r\n", "");
        assert!(syncing.link_down && syncing.loading);
    }

    #[test]
    fn a_node_in_the_proxys_zone_is_marked() {
        // As valkey-server 8.1 reports `availability-zone` in INFO server.
        let text = "# Server\r\navailability_zone:eu-1b\r\n# Replication\r\nrole:slave\r\n";
        assert!(parse(text, "eu-1b").in_zone);
        assert!(!parse(text, "eu-1a").in_zone);
        assert!(!parse(text, "").in_zone);
        assert!(!parse("availability_zone:\r\n", "").in_zone);
    }
}
