//! Values above the big-buffer threshold (4 MiB) on a real cluster. Their frames reuse the
//! buffers of earlier big frames once those are written, so this checks that pipelined
//! values, each with its own bytes, come back intact and never mixed.

mod common;

use common::Harness;
use resp::Value;

const SIZE: usize = 5 << 20;

fn value(i: usize) -> Vec<u8> {
    (0..SIZE)
        .map(|j| b'a' + ((i * 7 + j / 4096) % 26) as u8)
        .collect()
}

#[test]
fn pipelined_big_values_come_back_intact() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    let values: Vec<Vec<u8>> = (0..8).map(value).collect();
    let keys: Vec<String> = (0..8).map(|i| format!("big:{{b}}{i}")).collect();
    for round in 0..2 {
        for (k, v) in keys.iter().zip(&values) {
            c.send(&[b"SET", k.as_bytes(), v]);
        }
        for _ in &keys {
            assert_eq!(
                common::text(&c.read().expect("reply")),
                "OK",
                "round {round}"
            );
        }
        for k in &keys {
            c.send(&[b"GET", k.as_bytes()]);
        }
        for (i, v) in values.iter().enumerate() {
            match c.read().expect("reply") {
                Value::BulkString(got) => assert!(got[..] == v[..], "value {i} of round {round}"),
                other => panic!("GET {i}: {other:?}"),
            }
        }
    }
}
