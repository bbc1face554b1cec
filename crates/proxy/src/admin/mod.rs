//! What operators read: INFO sections, Prometheus `/metrics` over HTTP, CLIENT LIST, the
//! per-node report and SLOWLOG. Renderers only: the counters they read live in `context`
//! and `backend::stats`, written on the request path with relaxed atomics, so rendering
//! costs O(workers), never O(clients) (CLIENT LIST and KILL excepted).

pub(crate) mod access;
pub(crate) mod backends;
pub(crate) mod client_list;
pub(crate) mod cpu;
pub(crate) mod endpoints;
pub(crate) mod exposition;
pub(crate) mod group;
pub(crate) mod health;
pub(crate) mod hotkeys;
pub(crate) mod http;
pub(crate) mod info;
pub(crate) mod latency;
pub(crate) mod metrics;
pub(crate) mod migration;
pub(crate) mod replicas;
pub(crate) mod slowlog;
pub(crate) mod status;
pub(crate) mod tls;
