//! Connection actor tests against a scripted fake server on an ephemeral
//! port: replies dribbled byte by byte still frame, and a malformed reply
//! poisons the connection (every in-flight reply fails, none is misdelivered).

use std::time::Duration;

use bytes::Bytes;
use resp::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A server that reads `expect` bytes, then writes `reply` in `chunk`-byte pieces.
async fn fake_server(expect: usize, reply: &'static [u8], chunk: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let mut buf = vec![0; expect];
        s.read_exact(&mut buf).await.expect("request");
        for piece in reply.chunks(chunk) {
            s.write_all(piece).await.expect("write");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Keep the socket open until the client is done.
        let _ = s.read(&mut [0; 1]).await;
    });
    addr
}

fn ping_batch(n: usize) -> Vec<Bytes> {
    vec![Bytes::from("*1\r\n$4\r\nPING\r\n".repeat(n))]
}

#[tokio::test]
async fn replies_split_into_single_bytes_are_framed_in_order() {
    let addr = fake_server(14 * 3, b"+PONG\r\n$3\r\nabc\r\n*2\r\n:1\r\n$-1\r\n", 1).await;
    let conn = ConnHandle::spawn(addr, Duration::from_secs(1), false);
    let replies = conn.submit(ping_batch(3), 3).wait().await;
    assert_eq!(
        replies,
        vec![
            Ok(Value::SimpleString(Bytes::from("PONG"))),
            Ok(Value::BulkString(Bytes::from("abc"))),
            Ok(Value::Array(vec![Value::Integer(1), Value::Null])),
        ]
    );
}

#[tokio::test]
async fn a_malformed_reply_poisons_the_connection() {
    let addr = fake_server(14 * 3, b"+PONG\r\n?garbage\r\n", 64).await;
    let conn = ConnHandle::spawn(addr, Duration::from_secs(1), false);
    let replies = conn.submit(ping_batch(3), 3).wait().await;
    assert_eq!(replies[0], Ok(Value::SimpleString(Bytes::from("PONG"))));
    assert!(
        matches!(replies[1], Err(Error::OutcomeUnknown(_))),
        "{replies:?}"
    );
    assert!(
        matches!(replies[2], Err(Error::OutcomeUnknown(_))),
        "{replies:?}"
    );
    // The actor is gone: a poisoned connection is never used again.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(conn.is_closed());
    let later = conn.submit(ping_batch(1), 1).wait().await;
    assert!(matches!(later[0], Err(Error::NotSent(_))), "{later:?}");
}

#[tokio::test]
async fn connect_failure_fails_queued_batches_as_not_sent() {
    // Bind then drop: the port is (almost surely) closed now.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr")
        .to_string();
    let conn = ConnHandle::spawn(addr, Duration::from_secs(1), false);
    let replies = conn.submit(ping_batch(2), 2).wait().await;
    assert!(
        replies.iter().all(|r| matches!(r, Err(Error::NotSent(_)))),
        "{replies:?}"
    );
}
