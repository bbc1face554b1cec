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

#[test]
fn marks_are_checked_as_popped_and_a_whole_requests_frame_is_read_only_if_logged() {
    let cell = ClientCell::new();
    cell.set_slow_check(Some(SlowCheck {
        origin: tokio::time::Instant::now(),
        slow_us: u64::MAX,
        request_bytes: 1000,
        reply_bytes: 8,
    }));
    let frame = Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    let mark = |request| Mark {
        read_us: 0,
        request,
        request_bytes: 20,
    };
    // Sent whole: the mark holds no bytes, the entry's frame is logged.
    cell.arm_slowlog(Some(mark(None)));
    let big = cell.push(Entry::sent(Sent::unrouted(Resend::Frame(frame.clone()), 1)));
    // Small reply: not taken.
    cell.arm_slowlog(Some(mark(None)));
    let small = cell.push(Entry::sent(Sent::unrouted(Resend::Frame(frame.clone()), 1)));
    // A fan-out's or local answer's mark carries its bytes.
    cell.arm_slowlog(Some(mark(Some(Bytes::from_static(b"own")))));
    let local = cell.push(entry());
    // Not marked.
    let unmarked = cell.push(entry());
    cell.deliver(big, 0, Bytes::from_static(b"$5\r\nhello\r\n"));
    cell.deliver(small, 0, Bytes::from_static(b"+OK\r\n"));
    cell.deliver(local, 0, Bytes::from_static(b"$5\r\nworld\r\n"));
    cell.deliver(unmarked, 0, Bytes::from_static(b"$5\r\nagain\r\n"));
    let mut out = VecDeque::new();
    cell.pop_ready(&mut out);
    let mut logged = Vec::new();
    cell.take_logged(&mut logged);
    let got: Vec<(&[u8], u64)> = logged
        .iter()
        .map(|a| (&a.request[..], a.reply_bytes))
        .collect();
    assert_eq!(got, vec![(&frame[..], 11), (&b"own"[..], 11)]);
}
