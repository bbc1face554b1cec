//! The proxy group's report (docs/group.md): INFO `group` (one `memberN:` line per
//! configured member, in the style of Redis's `slaveN:` lines) and the
//! `slotgate_group_members{state}` gauge. Read from the health checks' latest published
//! round: O(members), no lock.

use std::fmt::Write;

use crate::admin::exposition::{sample, Described};
use crate::context::Shared;

/// `INFO group`.
pub(crate) fn info(shared: &Shared, out: &mut String) {
    let status = shared.group.status();
    let view = shared.group.view();
    let up = status.members.iter().filter(|m| m.up).count();
    let _ = write!(
        out,
        "group_enabled:{}\r\ngroup_members:{}\r\ngroup_members_up:{up}\r\ngroup_advertised:{}\r\n",
        u8::from(!status.members.is_empty()),
        status.members.len(),
        view.members().len(),
    );
    for (i, m) in status.members.iter().enumerate() {
        let state = match (m.me, m.up) {
            (true, _) => "self",
            (false, true) => "up",
            (false, false) => "down",
        };
        let _ = write!(
            out,
            "member{i}:addr={},state={state},checks_ok={},checks_failed={},last_error={}\r\n",
            m.addr,
            m.checks_ok,
            m.checks_failed,
            m.last_error.replace([',', '\r', '\n', ' '], "_"),
        );
    }
}

/// Members advertised (this proxy included) and members failing their checks.
pub(crate) fn metrics(shared: &Shared, out: &mut String, described: &mut Described) {
    let status = shared.group.status();
    let down = status.members.iter().filter(|m| !m.up).count();
    let up = shared.group.view().members().len();
    for (state, n) in [("up", up), ("down", down)] {
        let labels = format!("state=\"{state}\"");
        sample(out, described, "slotgate_group_members", &labels, n);
    }
}
