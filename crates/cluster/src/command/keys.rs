//! Key extraction: turns a command row plus the actual arguments into the
//! argument positions that hold keys, so the proxy can hash them to slots.
//! Invalid numkeys arguments produce the same error text the command itself
//! would answer with, so the proxy can reply without a server round trip.

use smallvec::SmallVec;

use super::{CommandSpec, KeySpec, KeywordTake, NumKeysErrors};

/// Argument positions of a command's keys (0 is the command name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPositions {
    /// The command has no keys here.
    None,
    /// `first`, `first + step`, ... up to and including `last`
    /// (`first <= last`, `step >= 1`, all below argc).
    Range {
        first: usize,
        last: usize,
        step: usize,
    },
    /// Explicit positions, in the order Redis reports the keys.
    List(SmallVec<[usize; 4]>),
}

impl KeyPositions {
    /// The positions in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (range, list): (Option<_>, &[usize]) = match self {
            KeyPositions::None => (None, &[]),
            KeyPositions::Range { first, last, step } => {
                (Some((*first..=*last).step_by((*step).max(1))), &[])
            }
            KeyPositions::List(list) => (None, list),
        };
        range.into_iter().flatten().chain(list.iter().copied())
    }

    /// The first key position, if any.
    pub fn first(&self) -> Option<usize> {
        // Direct, not through `iter`: every single-key request asks this.
        match self {
            KeyPositions::None => None,
            KeyPositions::Range { first, .. } => Some(*first),
            KeyPositions::List(list) => list.first().copied(),
        }
    }

    /// How many keys there are.
    pub fn count(&self) -> usize {
        match self {
            KeyPositions::None => 0,
            KeyPositions::Range { first, last, step } => last
                .checked_sub(*first)
                .map_or(0, |d| d / (*step).max(1) + 1),
            KeyPositions::List(list) => list.len(),
        }
    }

    /// A range, or `None` when it would be empty. `last` is snapped down
    /// to the last position actually reached (MSET a 1 b 2: 1..=3, not 4).
    fn range(first: usize, last: usize, step: usize) -> KeyPositions {
        let step = step.max(1);
        match last.checked_sub(first) {
            None => KeyPositions::None,
            Some(span) => KeyPositions::Range {
                first,
                last: first + span / step * step,
                step,
            },
        }
    }
}

/// Why keys could not be located. `Display` is Redis's own error text
/// without the `ERR ` prefix, e.g. `value is not an integer or out of range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// argc does not satisfy the arity (`command` is the row name).
    #[error("wrong number of arguments for '{command}' command")]
    WrongArity { command: &'static str },
    /// numkeys is not a valid 64-bit decimal integer (EVAL, ZUNION, ...).
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    /// numkeys is not a valid integer for FCALL / FCALL_RO.
    #[error("Bad number of keys provided")]
    BadNumberOfKeys,
    /// numkeys is negative (EVAL, FCALL families).
    #[error("Number of keys can't be negative")]
    NegativeKeys,
    /// numkeys exceeds the remaining arguments (EVAL, FCALL, SINTERCARD).
    #[error("Number of keys can't be greater than number of args")]
    TooManyKeys,
    /// numkeys is zero or negative for ZUNION/ZINTER/ZDIFF(STORE)/ZINTERCARD.
    #[error("at least 1 input key is needed for '{command}' command")]
    NeedAtLeastOneKey { command: &'static str },
    /// numkeys is not a positive integer (SINTERCARD, LMPOP family).
    #[error("numkeys should be greater than 0")]
    NumKeysNotPositive,
    /// numkeys exceeds the remaining arguments (sorted-set ops, LMPOP family).
    #[error("syntax error")]
    Syntax,
    /// A learned command whose key specs the proxy cannot read (`KeySpec::Unreadable`).
    #[error("has key specs this proxy cannot read")]
    Unreadable,
    /// MIGRATE ... KEYS with a non-empty single-key argument.
    #[error("When using MIGRATE KEYS option, the key argument must be set to the empty string")]
    MigrateKeyNotEmpty,
}

impl NumKeysErrors {
    /// Validates a parsed (or unparsable) numkeys against the `available`
    /// key slots, yielding the count or the family's error.
    fn check(
        self,
        parsed: Option<i64>,
        available: usize,
        name: &'static str,
    ) -> Result<usize, KeyError> {
        use NumKeysErrors::*;
        let n = match (self, parsed) {
            (Script | SortedSetOp | Server, None) => return Err(KeyError::NotAnInteger),
            (Function, None) => return Err(KeyError::BadNumberOfKeys),
            (SetCard | MultiPop, None) => return Err(KeyError::NumKeysNotPositive),
            (_, Some(n)) => n,
        };
        if n < 0 || (n == 0 && !matches!(self, Script | Function | Server)) {
            return Err(match self {
                Script | Function | Server => KeyError::NegativeKeys,
                SortedSetOp => KeyError::NeedAtLeastOneKey { command: name },
                SetCard | MultiPop => KeyError::NumKeysNotPositive,
            });
        }
        match usize::try_from(n) {
            Ok(n) if n <= available => Ok(n),
            _ => Err(match self {
                Script | Function | SetCard | Server => KeyError::TooManyKeys,
                SortedSetOp | MultiPop => KeyError::Syntax,
            }),
        }
    }
}

impl CommandSpec {
    /// Positions (argument indices, 0 = command name) of the keys for a call
    /// with `argc` arguments. `arg(i)` returns argument `i` and is only
    /// called with `i < argc`. Call it on the row [`CommandSpec::resolve`]
    /// returned, so subcommand keys (OBJECT ENCODING key) are found.
    /// Errors carry Redis's exact error text; never panics.
    pub fn key_positions<'a>(
        &self,
        argc: usize,
        arg: impl Fn(usize) -> &'a [u8],
    ) -> Result<KeyPositions, KeyError> {
        if !self.arity_ok(argc) {
            return Err(KeyError::WrongArity { command: self.name });
        }
        match self.keys {
            KeySpec::None => Ok(KeyPositions::None),
            KeySpec::Unreadable => Err(KeyError::Unreadable),
            KeySpec::Legacy => Ok(self
                .legacy_range(argc)
                .map_or(KeyPositions::None, |(f, l, s)| KeyPositions::range(f, l, s))),
            KeySpec::NumKeys {
                numkeys_at,
                first,
                step,
                errors,
            } => self.numkeys_positions(
                argc,
                &arg,
                numkeys_at.into(),
                first.into(),
                step.into(),
                errors,
            ),
            KeySpec::Keyword {
                keywords,
                from,
                skip,
                take,
            } => self.keyword_positions(argc, &arg, keywords, from.into(), skip, take),
        }
    }

    /// The legacy first/last/step range resolved against argc, or `None`
    /// when it is empty (no legacy keys, or a variadic tail with no items).
    fn legacy_range(&self, argc: usize) -> Option<(usize, usize, usize)> {
        let first = usize::try_from(self.first_key).ok().filter(|&f| f > 0)?;
        let last = if self.last_key >= 0 {
            usize::try_from(self.last_key).ok()?
        } else {
            argc.checked_sub(usize::from(self.last_key.unsigned_abs()))?
        };
        let step = usize::try_from(self.step).ok()?.max(1);
        (first <= last && last < argc).then_some((first, last, step))
    }

    /// Legacy positions as a list, the base that movable specs extend.
    fn legacy_list(&self, argc: usize) -> SmallVec<[usize; 4]> {
        match self.legacy_range(argc) {
            Some((first, last, step)) => (first..=last).step_by(step).collect(),
            None => SmallVec::new(),
        }
    }

    fn numkeys_positions<'a>(
        &self,
        argc: usize,
        arg: &impl Fn(usize) -> &'a [u8],
        numkeys_at: usize,
        first: usize,
        step: usize,
        errors: NumKeysErrors,
    ) -> Result<KeyPositions, KeyError> {
        if numkeys_at >= argc {
            return Err(KeyError::WrongArity { command: self.name });
        }
        let step = step.max(1);
        // n keys need (n - 1) * step + 1 arguments from `first` on; with
        // step 1 (every 7.0 command) that is just "n <= remaining".
        let available = argc.saturating_sub(first).div_ceil(step);
        let n = errors.check(resp::string2ll(arg(numkeys_at)), available, self.name)?;
        let tail = n.checked_sub(1).map(|m| (first, first + m * step, step));
        Ok(merge(self.legacy_list(argc), tail))
    }

    fn keyword_positions<'a>(
        &self,
        argc: usize,
        arg: &impl Fn(usize) -> &'a [u8],
        keywords: &[&str],
        from: usize,
        skip: &[(&str, u8)],
        take: KeywordTake,
    ) -> Result<KeyPositions, KeyError> {
        let mut list = self.legacy_list(argc);
        let mut i = from;
        while i < argc {
            let a = arg(i);
            if !keywords
                .iter()
                .any(|k| k.as_bytes().eq_ignore_ascii_case(a))
            {
                i += 1 + option_values(a, skip);
                continue;
            }
            let rest = (i + 1, argc - 1, 1);
            match take {
                KeywordTake::EachNext if i + 1 < argc => list.push(i + 1),
                KeywordTake::EachNext => {}
                KeywordTake::HalfOfRest => {
                    let keys = (argc - i - 1) / 2;
                    return Ok(merge(
                        list,
                        keys.checked_sub(1).map(|m| (i + 1, i + 1 + m, 1)),
                    ));
                }
                KeywordTake::RestReplacingEmptyKey => {
                    if list.iter().any(|&p| !arg(p).is_empty()) {
                        return Err(KeyError::MigrateKeyNotEmpty);
                    }
                    return Ok(merge(SmallVec::new(), Some(rest)));
                }
            }
            i += 2;
        }
        Ok(merge(list, None))
    }
}

/// How many values follow option `a` (0 when it is not in `skip`).
fn option_values(a: &[u8], skip: &[(&str, u8)]) -> usize {
    skip.iter()
        .find(|(option, _)| option.as_bytes().eq_ignore_ascii_case(a))
        .map_or(0, |&(_, n)| usize::from(n))
}

/// Legacy positions followed by an optional `(first, last, step)` tail;
/// a bare tail stays a `Range` so long key lists never allocate.
fn merge(mut list: SmallVec<[usize; 4]>, tail: Option<(usize, usize, usize)>) -> KeyPositions {
    match tail {
        Some((first, last, step)) if list.is_empty() => KeyPositions::range(first, last, step),
        Some((first, last, step)) => {
            list.extend((first..=last).step_by(step.max(1)));
            KeyPositions::List(list)
        }
        None if list.is_empty() => KeyPositions::None,
        None => KeyPositions::List(list),
    }
}
