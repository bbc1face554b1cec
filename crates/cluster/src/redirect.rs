//! Parsing of cluster redirections (`-MOVED` / `-ASK`) and classification of
//! error replies, so the proxy can follow slot migrations and decide which
//! errors are retryable. Anything malformed is reported as "not a redirect",
//! letting the proxy pass the error through unchanged instead of guessing.

use crate::slot::SLOT_COUNT;

/// Host part of a redirection target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host<'a> {
    /// Empty host (`MOVED 3999 :6380`): the same host as the node that
    /// answered, sent by servers that do not know their own address.
    Same,
    /// `?`: the server does not know the endpoint (no announced hostname).
    Unknown,
    /// A hostname or IP address. IPv6 addresses come without brackets.
    Name(&'a str),
}

/// A redirection target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint<'a> {
    pub host: Host<'a>,
    /// Always in 1..=65535.
    pub port: u16,
}

/// A parsed cluster redirection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect<'a> {
    /// The slot now lives at `to`; refresh the slot map.
    Moved { slot: u16, to: Endpoint<'a> },
    /// Retry this one command at `to`, preceded by ASKING.
    Ask { slot: u16, to: Endpoint<'a> },
}

/// Parses a redirection. `line` is an error reply's text without the leading
/// '-' and trailing CRLF, e.g. `b"MOVED 3999 127.0.0.1:6381"`.
///
/// The format is exactly `MOVED|ASK <slot> <host>:<port>`, single spaces,
/// nothing after. The host/port split is at the LAST colon, so the unbracketed
/// IPv6 form Redis sends (`::1:7000`) works; a bracketed `[::1]:7000` is also
/// accepted and yields `Name("::1")`. Slot must be < 16384, port 1..=65535,
/// host printable ASCII. Anything else gives `None`.
pub fn parse_redirect(line: &[u8]) -> Option<Redirect<'_>> {
    let mut fields = line.split(|&b| b == b' ');
    let (kind, slot, endpoint) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    let slot = parse_decimal(slot).filter(|&s| s < SLOT_COUNT as u32)?;
    let slot = u16::try_from(slot).ok()?;
    let to = parse_endpoint(endpoint)?;
    match kind {
        b"MOVED" => Some(Redirect::Moved { slot, to }),
        b"ASK" => Some(Redirect::Ask { slot, to }),
        _ => None,
    }
}

/// Up to five ASCII digits (enough for slots and ports), nothing else.
fn parse_decimal(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 5 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0, |n, &d| n * 10 + u32::from(d - b'0')))
}

fn parse_endpoint(s: &[u8]) -> Option<Endpoint<'_>> {
    let colon = s.iter().rposition(|&b| b == b':')?;
    let port = parse_decimal(&s[colon + 1..])
        .and_then(|p| u16::try_from(p).ok())
        .filter(|&p| p != 0)?;
    let host = parse_host(&s[..colon])?;
    Some(Endpoint { host, port })
}

fn parse_host(s: &[u8]) -> Option<Host<'_>> {
    let host = match s {
        b"" => return Some(Host::Same),
        b"?" => return Some(Host::Unknown),
        [b'[', inner @ .., b']'] => inner,
        _ => s,
    };
    // Printable ASCII only, and no stray brackets (`[::1` is malformed).
    let valid = !host.is_empty()
        && host
            .iter()
            .all(|&b| b.is_ascii_graphic() && b != b'[' && b != b']');
    if !valid {
        return None;
    }
    std::str::from_utf8(host).ok().map(Host::Name)
}

/// Error classes the proxy reacts to differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `MOVED`: slot moved permanently.
    Moved,
    /// `ASK`: slot is migrating; retry once at the target with ASKING.
    Ask,
    /// `TRYAGAIN`: multi-key command during resharding; retry later.
    TryAgain,
    /// `CLUSTERDOWN`: the cluster cannot serve the slot right now.
    ClusterDown,
    /// `MASTERDOWN`: a replica lost its primary and refuses stale reads.
    MasterDown,
    /// `READONLY`: a write reached a replica (topology changed).
    ReadOnly,
    /// `LOADING`: the node is loading its dataset.
    Loading,
    /// `CROSSSLOT`: the keys of one command hash to different slots.
    CrossSlot,
    /// `UNBLOCKED … instance state changed`: a blocked command was released because its
    /// master became a replica (failover). It had not run (nothing popped or moved), and the
    /// node closes the connection after it. Other `UNBLOCKED` texts (CLIENT UNBLOCK, a
    /// deleted stream) are replies the client asked for: `Other`.
    Demoted,
    /// Anything else, or not an error frame.
    Other,
}

/// Classifies an error reply frame (starting with '-') by its first word,
/// i.e. the bytes up to the first space or CR. Codes are case-sensitive, as
/// servers send them uppercase. A frame not starting with '-' is `Other`.
pub fn error_kind(frame: &[u8]) -> ErrorKind {
    let Some(text) = frame.strip_prefix(b"-") else {
        return ErrorKind::Other;
    };
    let end = text
        .iter()
        .position(|&b| matches!(b, b' ' | b'\r' | b'\n'))
        .unwrap_or(text.len());
    match &text[..end] {
        b"MOVED" => ErrorKind::Moved,
        b"ASK" => ErrorKind::Ask,
        b"TRYAGAIN" => ErrorKind::TryAgain,
        b"CLUSTERDOWN" => ErrorKind::ClusterDown,
        b"MASTERDOWN" => ErrorKind::MasterDown,
        b"READONLY" => ErrorKind::ReadOnly,
        b"LOADING" => ErrorKind::Loading,
        b"CROSSSLOT" => ErrorKind::CrossSlot,
        b"UNBLOCKED" if text[end..].starts_with(DEMOTED) => ErrorKind::Demoted,
        _ => ErrorKind::Other,
    }
}

/// What follows `UNBLOCKED` when Redis releases blocked clients on becoming a replica
/// (`disconnectOrRedirectAllBlockedClients`, 6.2 to 7.x).
const DEMOTED: &[u8] = b" force unblock from blocking operation, instance state changed";

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(host: Host<'_>, port: u16) -> Endpoint<'_> {
        Endpoint { host, port }
    }

    #[test]
    fn parses_valid_redirects() {
        let cases: &[(&[u8], Redirect<'_>)] = &[
            (
                b"MOVED 3999 127.0.0.1:6381",
                Redirect::Moved {
                    slot: 3999,
                    to: ep(Host::Name("127.0.0.1"), 6381),
                },
            ),
            (
                b"ASK 3999 127.0.0.1:6381",
                Redirect::Ask {
                    slot: 3999,
                    to: ep(Host::Name("127.0.0.1"), 6381),
                },
            ),
            (
                b"MOVED 3999 :6380",
                Redirect::Moved {
                    slot: 3999,
                    to: ep(Host::Same, 6380),
                },
            ),
            (
                b"ASK 0 ?:1",
                Redirect::Ask {
                    slot: 0,
                    to: ep(Host::Unknown, 1),
                },
            ),
            (
                b"MOVED 1 ::1:7000",
                Redirect::Moved {
                    slot: 1,
                    to: ep(Host::Name("::1"), 7000),
                },
            ),
            (
                b"MOVED 1 [::1]:7000",
                Redirect::Moved {
                    slot: 1,
                    to: ep(Host::Name("::1"), 7000),
                },
            ),
            (
                b"MOVED 16383 fe80::1:2:65535",
                Redirect::Moved {
                    slot: 16383,
                    to: ep(Host::Name("fe80::1:2"), 65535),
                },
            ),
            (
                b"MOVED 7 node-3.example.com:6379",
                Redirect::Moved {
                    slot: 7,
                    to: ep(Host::Name("node-3.example.com"), 6379),
                },
            ),
        ];
        for (line, want) in cases {
            assert_eq!(
                parse_redirect(line),
                Some(*want),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn rejects_malformed_redirects() {
        let cases: &[&[u8]] = &[
            b"MOVED 1111",
            b"MOVED",
            b"ASK 1111",
            b"ASK",
            b"",
            b"MOVED 2222 badfield",
            b"MOVED 1 127.0.0.1:100000",
            b"MOVED 1 127.0.0.1:badport",
            b"MOVED 99999 1.2.3.4:5",
            b"MOVED 16384 1.2.3.4:5",
            b"MOVED 1 1.2.3.4:0",
            b"MOVED 1 1.2.3.4:",
            b"MOVED -1 1.2.3.4:5",
            b"MOVED +1 1.2.3.4:5",
            b"MOVED 1 1.2.3.4:+5",
            b"MOVED  1 1.2.3.4:5",
            b"MOVED 1 1.2.3.4:5 extra",
            b"MOVED 1 1.2.3.4:5\r\n",
            b"moved 1 1.2.3.4:5",
            b"-MOVED 1 1.2.3.4:5",
            b"TRYAGAIN 1 1.2.3.4:5",
            b"MOVED 1 [::1:7000",
            b"MOVED 1 []:7000",
            b"MOVED 1 ho\xffst:7000",
            b"MOVED 1 ho\tst:7000",
        ];
        for line in cases {
            assert_eq!(
                parse_redirect(line),
                None,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn classifies_errors() {
        let cases: &[(&[u8], ErrorKind)] = &[
            (b"-MOVED 1 a:1\r\n", ErrorKind::Moved),
            (b"-ASK 1 a:1\r\n", ErrorKind::Ask),
            (b"-MOVED garbage\r\n", ErrorKind::Moved),
            (
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                ErrorKind::TryAgain,
            ),
            (
                b"-CLUSTERDOWN Hash slot not served\r\n",
                ErrorKind::ClusterDown,
            ),
            (
                b"-MASTERDOWN Link with MASTER is down\r\n",
                ErrorKind::MasterDown,
            ),
            (
                b"-READONLY You can't write against a read only replica.\r\n",
                ErrorKind::ReadOnly,
            ),
            (
                b"-LOADING loading the dataset in memory\r\n",
                ErrorKind::Loading,
            ),
            (
                b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
                ErrorKind::CrossSlot,
            ),
            (b"-LOADING", ErrorKind::Loading),
            (
                b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
                ErrorKind::Demoted,
            ),
            (b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n", ErrorKind::Other),
            (b"-UNBLOCKED the stream key no longer exists\r\n", ErrorKind::Other),
            (b"-ERR unknown command\r\n", ErrorKind::Other),
            (b"-MOVEDX 1 a:1\r\n", ErrorKind::Other),
            (b"-moved 1 a:1\r\n", ErrorKind::Other),
            (b"+MOVED 1 a:1\r\n", ErrorKind::Other),
            (b"MOVED 1 a:1", ErrorKind::Other),
            (b"-", ErrorKind::Other),
            (b"", ErrorKind::Other),
        ];
        for (frame, want) in cases {
            assert_eq!(
                error_kind(frame),
                *want,
                "{}",
                String::from_utf8_lossy(frame)
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(line in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = parse_redirect(&line);
            let _ = error_kind(&line);
        }

        #[test]
        fn round_trips(slot in 0u16..16384, port in 1u16..=65535, host in "[a-z0-9.:-]{0,20}") {
            let line = format!("MOVED {slot} {host}:{port}");
            let parsed = parse_redirect(line.as_bytes());
            let want_host = if host.is_empty() { Host::Same } else { Host::Name(&host) };
            proptest::prop_assert_eq!(parsed, Some(Redirect::Moved { slot, to: ep(want_host, port) }));
        }
    }
}
