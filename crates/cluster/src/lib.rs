//! Pure Redis Cluster routing logic for slotgate: key → slot hashing, the
//! data-driven command table (arity, flags, key positions), and parsing of
//! cluster redirections. No I/O and no async runtime, so every rule here is
//! unit-testable and can never block or panic on client input.

pub mod command;
pub mod placement;
pub mod redirect;
pub mod routes;
pub mod sharding;
pub mod slot;
pub mod slot_map;

pub use command::{
    acl, flags, lookup, CommandSpec, KeyError, KeyPositions, KeySpec, KeywordTake, NumKeysErrors,
    RequestPolicy, ResponsePolicy,
};
pub use placement::Placement;
pub use redirect::{error_kind, parse_redirect, Endpoint, ErrorKind, Host, Redirect};
pub use slot::{key_slot, SLOT_COUNT};
