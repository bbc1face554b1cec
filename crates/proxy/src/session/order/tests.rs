//! The ordering rule as pure logic: connections are plain numbers, `resolve` a closure.

use std::time::Duration;

use super::*;

const X: ConnId = 1;
const Y: ConnId = 2;

fn key(seq: u64) -> Option<RouteKey> {
    let stamp = Stamp { map: 1, seq };
    Some(RouteKey {
        stamp,
        wire: Default::default(),
        via: 0,
    })
}

fn waiting(seq: u64, slot: Option<u16>) -> Waiting {
    Waiting {
        slot,
        ..Waiting::fresh(seq, 0, slot.unwrap_or(0), Bytes::new(), Default::default())
    }
}

/// One pass, every request routed to `to`; the sequence numbers released, with their conn.
fn pass(order: &mut Order, now: Instant, to: ConnId) -> Vec<(u64, Option<ConnId>)> {
    let mut ready = Vec::new();
    order.release(now, |_| Some(to), |c| *c, &mut ready);
    ready.into_iter().map(|(w, c)| (w.seq, c)).collect()
}

/// An active order with `n` requests of slot 7 found in flight on `conn`.
fn tracking(n: usize, conn: ConnId) -> Order {
    let mut order = Order::default();
    for _ in 0..n {
        order.track(7, conn);
    }
    order.settle();
    order
}

#[test]
fn nothing_is_tracked_while_routes_stay_the_same() {
    let mut order = Order::default();
    assert!(order.route_changed(key(2)), "the first route is news");
    assert!(!order.route_changed(key(2)));
    assert!(order.route_changed(key(4)), "an in-place patch counts");
    assert!(order.route_changed(None), "a routing that raced a patch");
    assert!(order.route_changed(key(4)), "and the one after it");
    order.settle();
    assert!(!order.is_active(), "nothing in flight: nothing to track");
}

#[test]
fn a_new_request_waits_for_one_in_flight_elsewhere() {
    let mut order = tracking(1, X);
    assert_eq!(
        order.admit(7, Y, false),
        Admit::Wait,
        "the map moved slot 7 to Y"
    );
    order.wait(waiting(2, Some(7)));
    assert_eq!(
        order.admit(8, Y, false),
        Admit::Go,
        "other slots are not held"
    );
    assert_eq!(
        order.admit(7, X, false),
        Admit::Wait,
        "nothing passes a waiting request"
    );
    assert!(pass(&mut order, Instant::now(), Y).is_empty());
    assert!(order.answered(7), "the lane drained: wake the session");
    assert_eq!(pass(&mut order, Instant::now(), Y), [(2, Some(Y))]);
    assert!(!order.answered(7));
    assert!(!order.answered(8));
    assert!(!order.is_active(), "all drained: back to untracked");
}

#[test]
fn requests_on_the_same_connection_go_at_once() {
    let mut order = tracking(2, X);
    assert_eq!(order.admit(7, X, false), Admit::Go);
    for _ in 0..3 {
        order.answered(7);
    }
    assert!(!order.is_active());
}

#[test]
fn waiting_requests_leave_in_sequence_order_one_at_a_time() {
    let mut order = tracking(0, X);
    for seq in [5, 3, 9, 4] {
        order.wait(waiting(seq, Some(7)));
    }
    let mut released = Vec::new();
    for _ in 0..4 {
        let now = pass(&mut order, Instant::now(), X);
        assert_eq!(
            now.len(),
            1,
            "one released request of a slot in flight at a time"
        );
        released.push(now[0].0);
        order.answered(7);
    }
    assert_eq!(released, [3, 4, 5, 9]);
}

#[test]
fn a_new_request_waits_while_a_released_one_of_its_slot_is_in_flight() {
    let mut order = tracking(0, X);
    order.wait(waiting(1, Some(7)));
    assert_eq!(pass(&mut order, Instant::now(), X), [(1, Some(X))]);
    assert_eq!(
        order.admit(7, X, false),
        Admit::Wait,
        "even on the same connection"
    );
    assert_eq!(order.admit(8, X, false), Admit::Go, "another slot goes");
}

#[test]
fn a_retry_delay_holds_the_later_requests_of_its_slot_only() {
    let now = Instant::now();
    let mut order = tracking(0, X);
    let mut retry = waiting(1, Some(7));
    retry.not_before = Some(now + Duration::from_millis(50));
    order.wait(retry);
    order.wait(waiting(2, Some(7)));
    order.wait(waiting(3, Some(8)));
    order.wait(waiting(4, None));
    assert_eq!(pass(&mut order, now, X), [(3, Some(X)), (4, Some(X))]);
    assert!(!order.wants_pass(now));
    let later = now + Duration::from_millis(60);
    assert!(order.wants_pass(later), "the delay is over");
    assert_eq!(pass(&mut order, later, X), [(1, Some(X))]);
    order.answered(7);
    assert_eq!(pass(&mut order, later, X), [(2, Some(X))]);
}

#[test]
fn a_resend_waits_for_later_requests_still_on_the_old_connection() {
    let mut order = tracking(1, X);
    order.wait(waiting(1, Some(7)));
    assert!(
        pass(&mut order, Instant::now(), Y).is_empty(),
        "seq 2 still on X"
    );
    order.answered(7);
    assert_eq!(pass(&mut order, Instant::now(), Y), [(1, Some(Y))]);
}

#[test]
fn requests_found_on_two_connections_hold_the_slot_until_both_answer() {
    let mut order = Order::default();
    order.track(7, X);
    order.track(7, Y);
    order.settle();
    assert_eq!(order.admit(7, X, false), Admit::Wait);
    order.wait(waiting(3, Some(7)));
    assert!(!order.answered(7));
    assert!(pass(&mut order, Instant::now(), X).is_empty());
    assert!(order.answered(7));
    assert_eq!(pass(&mut order, Instant::now(), X), [(3, Some(X))]);
}

#[test]
fn an_unroutable_request_is_released_to_be_failed() {
    let mut order = tracking(0, X);
    order.wait(waiting(1, Some(7)));
    let mut ready: Vec<(Waiting, Option<ConnId>)> = Vec::new();
    order.release(Instant::now(), |_| None, |c| *c, &mut ready);
    assert_eq!(ready.len(), 1);
    assert!(ready[0].1.is_none());
    assert!(!order.is_active(), "nothing left in flight or waiting");
}

#[test]
fn clear_forgets_everything() {
    let mut order = tracking(3, X);
    order.wait(waiting(9, Some(7)));
    order.clear();
    assert!(!order.is_active());
    assert!(!order.wants_pass(Instant::now()));
}
