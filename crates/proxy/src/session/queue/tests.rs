//! The reply queue: entries leave from the head only, in request order.

use super::*;

fn entry() -> Entry {
    Entry {
        reply: None,
        ..Entry::ready(Bytes::new())
    }
}

#[test]
fn replies_leave_in_request_order_whatever_the_delivery_order() {
    let cell = ClientCell::new();
    let seqs: Vec<u64> = (0..3).map(|_| cell.push(entry())).collect();
    let mut out = VecDeque::new();
    cell.deliver(seqs[2], 0, Bytes::from_static(b"+c\r\n"));
    cell.deliver(seqs[1], 0, Bytes::from_static(b"+b\r\n"));
    assert_eq!(cell.pop_ready(&mut out), 0, "head not ready yet");
    cell.deliver(seqs[0], 0, Bytes::from_static(b"+a\r\n"));
    assert_eq!(cell.pop_ready(&mut out), 12);
    assert_eq!(out, vec![&b"+a\r\n"[..], b"+b\r\n", b"+c\r\n"]);
    assert_eq!(cell.queued_bytes(), 0);
}

#[test]
fn redirects_are_reported_not_popped_early() {
    let cell = ClientCell::new();
    let seq = cell.push(entry());
    cell.deliver(seq, 0, Bytes::from_static(b"-MOVED 1 127.0.0.1:7000\r\n"));
    let mut r = Vec::new();
    cell.take_redirected(&mut r);
    assert_eq!(r, vec![(seq, 0)]);
    cell.with_entry(seq, |e| e.reply = None);
    let mut out = VecDeque::new();
    assert_eq!(cell.pop_ready(&mut out), 0);
}

#[test]
fn closed_clients_ignore_late_deliveries() {
    let cell = ClientCell::new();
    let seq = cell.push(entry());
    cell.close();
    cell.deliver(seq, 0, Bytes::from_static(b"+late\r\n"));
    assert_eq!(cell.in_flight(), 0);
}

#[test]
fn redirects_and_refusals_are_acted_on_everything_else_forwarded() {
    for (frame, acted_on) in [
        (&b"-MOVED 1 h:1\r\n"[..], true),
        (b"-ASK 1 h:1\r\n", true),
        (b"-TRYAGAIN Multiple keys\r\n", true),
        (b"-CLUSTERDOWN Hash slot not served\r\n", true),
        (b"-MASTERDOWN Link down\r\n", true),
        (b"-READONLY You can't write\r\n", true),
        (b"-LOADING Redis is loading\r\n", true),
        (b"-MOVED\r\n", false),
        (b"-CROSSSLOT Keys\r\n", false),
        (b"-ERR unknown\r\n", false),
        (b"+MOVED 1 h:1\r\n", false),
    ] {
        assert_eq!(is_redirect(frame), acted_on, "{frame:?}");
    }
}
