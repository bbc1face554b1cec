//! `Client`: the cheap, cloneable handle applications hold, and its settings.
//!
//! All clones share one `Inner` (node connections, slot map, counters), so
//! cloning per task or per thread costs one reference count and never opens
//! another connection.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::cmd::{Cmd, Frozen, Kind, ToArg};
use crate::dedicated::Idle;
use crate::engine;
use crate::error::{Error, Result};
use crate::pipeline::Pipeline;
use crate::pool::Pool;
use crate::pubsub::{self, Family, Subscription};
use crate::stats::{Counters, Stats};
use ::topology::{Pacing, Topology, TopologyCommand};
use resp::Value;

/// Client settings.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// let cfg = slotgate_client::Config::default().with_timeout(Duration::from_secs(2));
/// assert_eq!(cfg.timeout, Duration::from_secs(2));
/// assert_eq!(cfg.min_refresh_interval, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Limit for opening one TCP connection.
    pub connect_timeout: Duration,
    /// Deadline for a whole call (a command or pipeline, redirects and retries included).
    pub timeout: Duration,
    /// Least time between two topology refreshes (a random extra of up to the
    /// same amount is added each time).
    pub min_refresh_interval: Duration,
    /// Background refresh period (±20%).
    pub periodic_refresh: Duration,
    /// The topology query: CLUSTER SLOTS (the default) or CLUSTER SHARDS (Redis 7+,
    /// compact when slot ranges are fragmented).
    pub topology_command: TopologyCommand,
    /// Speak RESP3: every connection (shared and dedicated) sends `HELLO 3`
    /// first, and replies keep their RESP3 types (maps, sets, doubles...).
    /// Off by default (RESP2).
    pub resp3: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            connect_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(10),
            min_refresh_interval: Duration::from_secs(1),
            periodic_refresh: Duration::from_secs(60),
            topology_command: TopologyCommand::Slots,
            resp3: false,
        }
    }
}

impl Config {
    /// Sets [`Config::timeout`].
    pub fn with_timeout(mut self, t: Duration) -> Config {
        self.timeout = t;
        self
    }

    /// Sets [`Config::connect_timeout`].
    pub fn with_connect_timeout(mut self, t: Duration) -> Config {
        self.connect_timeout = t;
        self
    }

    /// Sets [`Config::min_refresh_interval`].
    pub fn with_min_refresh_interval(mut self, t: Duration) -> Config {
        self.min_refresh_interval = t;
        self
    }

    /// Sets [`Config::periodic_refresh`].
    pub fn with_periodic_refresh(mut self, t: Duration) -> Config {
        self.periodic_refresh = t;
        self
    }

    /// Sets [`Config::resp3`]: connections that cannot switch to RESP3
    /// (`HELLO 3` refused) fail every call.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f() -> slotgate_client::Result<()> {
    /// let cfg = slotgate_client::Config::default().with_resp3(true);
    /// let client = slotgate_client::Client::cluster_with(["127.0.0.1:7000"], cfg).await?;
    /// // HGETALL now answers a `Value::Map`.
    /// let fields = client.cmd(slotgate_client::Cmd::new("HGETALL").arg("h")).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_resp3(mut self, on: bool) -> Config {
        self.resp3 = on;
        self
    }

    /// Sets [`Config::topology_command`].
    pub fn with_topology_command(mut self, c: TopologyCommand) -> Config {
        self.topology_command = c;
        self
    }
}

/// State shared by all clones of a client.
#[derive(Debug)]
pub(crate) struct Inner {
    pub pool: Arc<Pool>,
    pub stats: Arc<Counters>,
    /// `None` in single-node mode.
    pub topology: Option<Arc<Topology>>,
    pub single_addr: String,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub resp3: bool,
    /// Idle dedicated connections for blocking commands.
    pub idle: Idle,
    /// Dropping it (with the last clone) stops the refresher task.
    _shutdown: Option<watch::Sender<()>>,
}

/// An async Redis Cluster (or single node) client; `Clone + Send + Sync`.
///
/// Must be created and used inside a tokio runtime. For plain threads use
/// [`crate::blocking::Client`].
///
/// # Examples
///
/// ```no_run
/// # async fn f() -> slotgate_client::Result<()> {
/// let client = slotgate_client::Client::cluster(["127.0.0.1:7000", "127.0.0.1:7001"]).await?;
/// let other = client.clone(); // same connections
/// tokio::spawn(async move { other.incr("hits").await });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects to a cluster through any of `seeds` (`host:port`) with default settings.
    pub async fn cluster<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Result<Client> {
        Client::cluster_with(seeds, Config::default()).await
    }

    /// Connects to a cluster with explicit settings.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f() -> slotgate_client::Result<()> {
    /// let cfg = slotgate_client::Config::default();
    /// let client = slotgate_client::Client::cluster_with(["127.0.0.1:7000"], cfg).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cluster_with<S: Into<String>>(
        seeds: impl IntoIterator<Item = S>,
        cfg: Config,
    ) -> Result<Client> {
        let seeds: Vec<String> = seeds.into_iter().map(Into::into).collect();
        let stats = Arc::new(Counters::default());
        let pool = Arc::new(Pool::new(cfg.connect_timeout, cfg.resp3, stats.clone()));
        let pacing = Pacing {
            min_interval: cfg.min_refresh_interval,
            max_extra: cfg.min_refresh_interval,
            periodic: cfg.periodic_refresh,
        };
        let (tx, rx) = watch::channel(());
        let topo = crate::topology::start(&seeds, &pool, pacing, cfg.topology_command, rx).await?;
        Ok(Client::from_inner(Inner {
            pool,
            stats,
            topology: Some(topo),
            single_addr: String::new(),
            timeout: cfg.timeout,
            connect_timeout: cfg.connect_timeout,
            resp3: cfg.resp3,
            idle: Idle::default(),
            _shutdown: Some(tx),
        }))
    }

    /// Connects to one non-cluster node (checked with a PING). Redirect
    /// errors, if any, are returned as [`Error::Server`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f() -> slotgate_client::Result<()> {
    /// let client = slotgate_client::Client::single("127.0.0.1:6400").await?;
    /// # Ok(()) }
    /// ```
    pub async fn single(addr: impl Into<String>) -> Result<Client> {
        Client::single_with(addr, Config::default()).await
    }

    /// Connects to one non-cluster node with explicit settings (refresh
    /// settings are unused).
    pub async fn single_with(addr: impl Into<String>, cfg: Config) -> Result<Client> {
        let stats = Arc::new(Counters::default());
        let client = Client::from_inner(Inner {
            pool: Arc::new(Pool::new(cfg.connect_timeout, cfg.resp3, stats.clone())),
            stats,
            topology: None,
            single_addr: addr.into(),
            timeout: cfg.timeout,
            connect_timeout: cfg.connect_timeout,
            resp3: cfg.resp3,
            idle: Idle::default(),
            _shutdown: None,
        });
        client.cmd(Cmd::new("PING")).await?;
        Ok(client)
    }

    fn from_inner(inner: Inner) -> Client {
        Client {
            inner: Arc::new(inner),
        }
    }

    /// Runs one command; Redis error replies become [`Error::Server`].
    ///
    /// Blocking commands (BLPOP, BLMOVE, XREAD with BLOCK, WAIT...) run on a
    /// dedicated connection, so they never hold up other callers; their
    /// deadline is their own timeout argument plus [`Config::timeout`] (none
    /// for a timeout of 0). SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and MONITOR are
    /// refused with [`Error::Invalid`]: use [`Client::subscribe`] and friends.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// use slotgate_client::Cmd;
    /// let v = client.cmd(Cmd::new("GET").arg("k")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn cmd(&self, cmd: Cmd) -> Result<Value> {
        let cmds = [cmd.freeze()];
        if let Kind::Blocking(wait) = cmds[0].route.kind {
            return crate::blockcmd::run(&self.inner, &cmds[0], wait).await;
        }
        let mut out = self.run(&cmds).await;
        out.pop()
            .unwrap_or_else(|| Err(Error::Protocol("no reply".into())))
    }

    /// Runs a pipeline: one write per node, one result per command in the
    /// pipeline's order, whatever nodes and redirects were involved.
    ///
    /// Blocking and subscribe commands are not run in a pipeline: their
    /// entries fail with [`Error::Invalid`] (run them with [`Client::cmd`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) {
    /// let mut p = slotgate_client::Pipeline::new();
    /// p.cmd(["GET", "a"]).cmd(["GET", "b"]);
    /// let replies = client.execute(&p).await;
    /// # }
    /// ```
    pub async fn execute(&self, pipeline: &Pipeline) -> Vec<Result<Value>> {
        self.run(pipeline.commands()).await
    }

    /// Subscribes to `channels` on a dedicated connection (to the owner of
    /// the first channel's slot; a cluster delivers PUBLISH on every node).
    /// Returns once the server confirmed every channel, so later publishes
    /// are received. [`Client::cmd`] routes PUBLISH by its channel's slot,
    /// so one channel's messages keep their publish order.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let mut sub = client.subscribe(&["news", "sport"]).await?;
    /// client.cmd(slotgate_client::Cmd::new("PUBLISH").arg("news").arg("hi")).await?;
    /// let msg = sub.next().await.expect("subscribed")?;
    /// assert_eq!(&msg.payload[..], b"hi");
    /// # Ok(()) }
    /// ```
    pub async fn subscribe<T: ToArg>(&self, channels: &[T]) -> Result<Subscription> {
        pubsub::open(&self.inner, Family::Channel, channels).await
    }

    /// Subscribes to glob `patterns` (PSUBSCRIBE); messages carry the
    /// matching pattern in [`Message::pattern`](crate::Message::pattern).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let mut sub = client.psubscribe(&["news.*"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn psubscribe<T: ToArg>(&self, patterns: &[T]) -> Result<Subscription> {
        pubsub::open(&self.inner, Family::Pattern, patterns).await
    }

    /// Subscribes to shard channels (SSUBSCRIBE, Redis 7+) on a dedicated
    /// connection to the owner of their slot. All channels must hash to one
    /// slot (use a `{tag}`), else [`Error::Invalid`] with `CROSSSLOT`.
    /// Publish to them with SPUBLISH through [`Client::cmd`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn f(client: slotgate_client::Client) -> slotgate_client::Result<()> {
    /// let mut sub = client.ssubscribe(&["{room}a", "{room}b"]).await?;
    /// client.cmd(slotgate_client::Cmd::new("SPUBLISH").arg("{room}a").arg("hi")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ssubscribe<T: ToArg>(&self, channels: &[T]) -> Result<Subscription> {
        pubsub::open(&self.inner, Family::Shard, channels).await
    }

    /// The client's counters (refreshes, redirects, retries).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn f(client: slotgate_client::Client) {
    /// assert_eq!(client.stats().refresh_failed, 0);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner
            .stats
            .snapshot(self.inner.topology.as_deref().map(|t| &t.stats))
    }

    async fn run(&self, cmds: &[Frozen]) -> Vec<Result<Value>> {
        if cmds.iter().any(|c| c.route.kind != Kind::Plain) {
            return self.run_plain_only(cmds).await;
        }
        let work = engine::execute(&self.inner, cmds);
        match tokio::time::timeout(self.inner.timeout, work).await {
            Ok(results) => results,
            // Abandoned replies are read and dropped by their connections.
            Err(_) => vec![Err(Error::Timeout); cmds.len()],
        }
    }

    /// Runs the plain commands of `cmds`; the others get `Error::Invalid`,
    /// since the shared connection must never carry them.
    async fn run_plain_only(&self, cmds: &[Frozen]) -> Vec<Result<Value>> {
        let plain: Vec<Frozen> = cmds
            .iter()
            .filter(|c| c.route.kind == Kind::Plain)
            .cloned()
            .collect();
        let mut done = Box::pin(self.run(&plain)).await.into_iter();
        let refuse = |c: &Frozen| match c.route.kind {
            Kind::Stream => "subscribe commands need Client::subscribe",
            _ => "blocking commands run alone through Client::cmd",
        };
        cmds.iter()
            .map(|c| match c.route.kind {
                Kind::Plain => done
                    .next()
                    .unwrap_or_else(|| Err(Error::Protocol("missing reply".into()))),
                _ => Err(Error::Invalid(refuse(c).into())),
            })
            .collect()
    }
}
