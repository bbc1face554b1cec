//! Fuzzes `RequestParser`: it must never panic, never consume more than it
//! was given, consume something on every `Done` and nothing otherwise, give
//! the same outcomes however the input is split into reads, and every request
//! it yields must re-parse from its own `raw()` to the same arguments.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use resp::{Limits, Parsed, Progress, ProtocolError, RequestParser};

#[derive(Debug, PartialEq)]
enum Outcome {
    Done(Parsed),
    Incomplete(Option<usize>),
    Err(ProtocolError),
}

/// Feeds `input` in chunks of the given sizes (cycled), recording outcomes;
/// intermediate `Incomplete`s are dropped since they depend on the split.
fn run(limits: Limits, unauth: bool, input: &[u8], sizes: &[usize]) -> Vec<Outcome> {
    let mut parser = RequestParser::new(limits);
    parser.set_unauthenticated(unauth);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for &size in sizes.iter().cycle() {
        let take = size.max(1).min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + take]);
        fed += take;
        loop {
            let before = buf.len();
            let result = parser.parse(&mut buf);
            assert!(buf.len() <= before, "parse grew the buffer");
            match result {
                Ok(Progress::Done(p)) => {
                    assert!(buf.len() < before, "Done without consuming");
                    check_request(&p);
                    out.push(Outcome::Done(p));
                }
                Ok(Progress::Incomplete { frame_len_hint }) => {
                    assert_eq!(buf.len(), before, "Incomplete consumed bytes");
                    if fed == input.len() {
                        out.push(Outcome::Incomplete(frame_len_hint));
                        return out;
                    }
                    break;
                }
                Err(e) => {
                    assert_eq!(buf.len(), before, "error consumed bytes");
                    out.push(Outcome::Err(e));
                    return out;
                }
            }
        }
    }
    out
}

/// A request's `raw()` must itself parse back to the same request arguments.
fn check_request(p: &Parsed) {
    let Parsed::Request(req) = p else { return };
    assert!(req.argc() > 0);
    let mut buf = BytesMut::from(&req.raw()[..]);
    let again = RequestParser::new(Limits::default()).parse(&mut buf);
    let Ok(Progress::Done(Parsed::Request(again))) = again else {
        panic!("raw() does not re-parse: {again:?}");
    };
    assert!(buf.is_empty());
    assert!(again.args().eq(req.args()));
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_bulk_len: 16,
            max_inline_len: 24,
            max_multibulk_len: 6,
        }
    };
    let unauth = control & 2 != 0;
    let whole = run(limits, unauth, input, &[usize::MAX]);
    let sizes = [1 + (control >> 2) as usize % 7, 1, 3];
    assert_eq!(
        run(limits, unauth, input, &sizes),
        whole,
        "split changed the result"
    );
    assert_eq!(
        run(limits, unauth, input, &[1]),
        whole,
        "byte-wise feed changed the result"
    );
});
