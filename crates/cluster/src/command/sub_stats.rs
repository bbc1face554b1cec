//! Statistics slots of subcommands. Redis counts `client|id` and `client|list` apart (INFO
//! commandstats, LATENCY HISTOGRAM, errorstats' rejected and failed calls), never the
//! container: so does the proxy.
//!
//! Slots come after the commands' (the generated rows, then one per learned name): first
//! every generated row's subcommands in table order, then one per subcommand a learned
//! table added (`learn.rs`), kept for the life of the process as learned commands are, so a
//! counter never changes its name when another table is installed.
//!
//! ```text
//!   0 .. rows | rows .. +MAX_LEARNED | generated subcommands | learned subcommands
//!   get, set… | learned commands     | acl|cat … xinfo|stream | client|capa…
//! ```

use std::sync::OnceLock;

use super::{learn, table, CommandSpec};

/// Learned subcommands that get slots of their own (past that, the container's).
pub const MAX_LEARNED_SUBS: usize = 256;

/// Each generated row's first subcommand slot past [`base`], then their count.
fn offsets() -> &'static [usize] {
    static OFFSETS: OnceLock<Vec<usize>> = OnceLock::new();
    OFFSETS.get_or_init(|| {
        let mut at = 0;
        let mut out = Vec::with_capacity(table::COMMANDS.len() + 1);
        for row in table::COMMANDS {
            out.push(at);
            at += row.subcommands.len();
        }
        out.push(at);
        out
    })
}

/// Where subcommand slots start.
fn base() -> usize {
    table::COMMANDS.len() + learn::MAX_LEARNED
}

fn generated_count() -> usize {
    offsets().last().copied().unwrap_or(0)
}

/// Every slot: commands, learned commands, subcommands, learned subcommands.
pub(super) fn stats_len() -> usize {
    base() + generated_count() + MAX_LEARNED_SUBS
}

/// The first slot of learned subcommands.
pub(super) fn learned_base() -> usize {
    base() + generated_count()
}

/// The slot of generated row `row`'s subcommand `name`, if the generated table has it.
pub(super) fn generated_slot(row: usize, name: &str) -> Option<usize> {
    let at = table::COMMANDS
        .get(row)?
        .subcommands
        .iter()
        .position(|s| s.name == name)?;
    Some(base() + offsets()[row] + at)
}

/// The statistics slot of a call of `command` (a top-level slot) naming its subcommand
/// `sub` (position plus one among the row's subcommands as routed now; 0 for none): the
/// subcommand's own slot, else `command`'s.
pub fn stats_slot(command: usize, sub: u16) -> usize {
    let Some(i) = usize::from(sub).checked_sub(1) else {
        return command;
    };
    let Some(named) = super::at_stats_index(command).and_then(|s| s.subcommands.get(i)) else {
        return command;
    };
    if let Some(row) = table::COMMANDS.get(command) {
        // The generated row as routed (no learned override): the position is the slot.
        if row
            .subcommands
            .get(i)
            .is_some_and(|r| std::ptr::eq(r, named))
        {
            return base() + offsets()[command] + i;
        }
        if let Some(slot) = generated_slot(command, named.name) {
            return slot;
        }
    }
    learn::current()
        .and_then(|l| l.sub_slot(named.name))
        .unwrap_or(command)
}

/// The subcommand behind slot `index` (at least [`base`]), as the generated table or the
/// installed learned table names it.
pub(super) fn at(index: usize) -> Option<&'static CommandSpec> {
    let k = index.checked_sub(base())?;
    let offsets = offsets();
    if k < generated_count() {
        let row = offsets.partition_point(|&o| o <= k).checked_sub(1)?;
        return table::COMMANDS.get(row)?.subcommands.get(k - offsets[row]);
    }
    learn::current()?.sub_at(k - generated_count())
}
