//! `Pipeline`: a list of commands sent together and answered in order.
//!
//! It is a plain `Vec` of already-encoded commands, so appending is amortized
//! O(1) and never re-copies earlier commands (field report 004's quadratic
//! output buffer). It holds no connection and no replies: executing it is a
//! separate call, so immediate commands issued while a pipeline is being built
//! can never take its replies, and one pipeline can be executed many times.

use crate::cmd::{Cmd, Frozen, ToArg};

/// Commands to send in one go; see [`crate::Client::execute`].
///
/// # Examples
///
/// ```no_run
/// # async fn f(client: slotgate_client::Client) {
/// use slotgate_client::{Cmd, Pipeline};
/// let mut p = Pipeline::with_capacity(2);
/// p.add(Cmd::new("SET").arg("a").arg("1")).cmd(["GET", "a"]);
/// let replies = client.execute(&p).await; // one result per command, in order
/// assert_eq!(replies.len(), 2);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    cmds: Vec<Frozen>,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// An empty pipeline with room for `n` commands, so appending never reallocates.
    pub fn with_capacity(n: usize) -> Pipeline {
        Pipeline {
            cmds: Vec::with_capacity(n),
        }
    }

    /// Appends a built command.
    pub fn add(&mut self, cmd: Cmd) -> &mut Pipeline {
        self.cmds.push(cmd.freeze());
        self
    }

    /// Appends a command given as its argument list.
    pub fn cmd<A: ToArg>(&mut self, args: impl IntoIterator<Item = A>) -> &mut Pipeline {
        self.add(Cmd::from_args(args))
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when there is no command.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Removes every command, keeping the allocation.
    pub fn clear(&mut self) {
        self.cmds.clear();
    }

    pub(crate) fn commands(&self) -> &[Frozen] {
        &self.cmds
    }
}
