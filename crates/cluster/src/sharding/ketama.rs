//! Ketama's continuum as nutcracker builds it, and modula's table by weight.
//!
//! Each server gets points in proportion to its weight (160 per server on average, in
//! groups of four: one MD5 of `name-i` gives four 32-bit points). A key goes to the first
//! point at or after its hash, wrapping to the first point. The point count is computed in
//! single precision as nutcracker does, so a pool with uneven weights gets the same
//! number of points per server, hence the same placement.

use super::hash::md5_le32;
use super::ShardServer;

/// One point: its position on the ring and the server it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Point {
    pub(super) value: u32,
    pub(super) server: u32,
}

/// Points per server in a pool of equal weights.
const POINTS_PER_SERVER: f32 = 160.0;

/// The sorted ring of every server's points.
pub(super) fn continuum(servers: &[ShardServer]) -> Vec<Point> {
    let total: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
    let n = servers.len() as f32;
    let mut points = Vec::with_capacity(servers.len() * 160);
    for (index, server) in servers.iter().enumerate() {
        let pct = server.weight as f32 / total as f32;
        // nutcracker: floorf(pct * 160 / 4 * n + 0.0000000001) * 4, the sum in double.
        let groups = ((pct * (POINTS_PER_SERVER / 4.0) * n) as f64 + 0.000_000_000_1) as f32;
        let groups = groups.floor() as u32;
        for group in 0..groups {
            let name = format!("{}-{}", server.name, group);
            for word in 0..4 {
                points.push(Point {
                    value: md5_le32(name.as_bytes(), word),
                    server: index as u32,
                });
            }
        }
    }
    // nutcracker sorts with qsort; equal values (two MD5 words alike) are vanishingly rare.
    points.sort_by_key(|p| p.value);
    points
}

/// Modula's (and random's) table: each server once per unit of its weight, in order.
pub(super) fn by_weight(servers: &[ShardServer]) -> Vec<Point> {
    servers
        .iter()
        .enumerate()
        .flat_map(|(index, s)| {
            (0..s.weight).map(move |_| Point {
                value: 0,
                server: index as u32,
            })
        })
        .collect()
}

/// The server of the first point at or after `hash`, wrapping round.
pub(super) fn dispatch(points: &[Point], hash: u32) -> u32 {
    let at = points.partition_point(|p| p.value < hash);
    points.get(at).unwrap_or(&points[0]).server
}
