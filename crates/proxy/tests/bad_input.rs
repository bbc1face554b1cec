//! Bad input answered as redis-server 7.0 answers it (reliability catalogue §A.1–A.2), or
//! stricter where documented; other clients are never affected and nothing panics.

mod common;

use std::time::Duration;

use common::{Client, Harness};

/// What a case must produce: the exact reply bytes, and whether the proxy closes afterwards.
struct Case {
    name: &'static str,
    input: Vec<u8>,
    reply: Vec<u8>,
    closes: bool,
}

fn case(name: &'static str, input: impl Into<Vec<u8>>, reply: &str, closes: bool) -> Case {
    Case {
        name,
        input: input.into(),
        reply: reply.as_bytes().to_vec(),
        closes,
    }
}

fn proto_err(msg: &str) -> String {
    format!("-ERR Protocol error: {msg}\r\n")
}

fn cases() -> Vec<Case> {
    let digits = |prefix: &str| {
        let mut v = prefix.as_bytes().to_vec();
        v.extend(std::iter::repeat_n(b'1', 70 * 1024));
        v
    };
    vec![
        case("R01 empty line", "\r\n", "", false),
        case("R02 *0", "*0\r\n", "", false),
        case("R02 *-1", "*-1\r\n", "", false),
        case("R02 *-10", "*-10\r\n", "", false),
        case(
            "R03 huge count",
            "*3000000000\r\n",
            &proto_err("invalid multibulk length"),
            true,
        ),
        case(
            "R04 *abc",
            "*abc\r\n",
            &proto_err("invalid multibulk length"),
            true,
        ),
        case(
            "R04 *+1",
            "*+1\r\n$4\r\nPING\r\n",
            &proto_err("invalid multibulk length"),
            true,
        ),
        case(
            "R04 *01",
            "*01\r\n$4\r\nPING\r\n",
            &proto_err("invalid multibulk length"),
            true,
        ),
        case(
            "R05 no $",
            "*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
            &proto_err("expected '$', got 'f'"),
            true,
        ),
        case(
            "R06 no $",
            "*1\r\nfoo\r\n",
            &proto_err("expected '$', got 'f'"),
            true,
        ),
        case(
            "R07 $-10",
            "*1\r\n$-10\r\n",
            &proto_err("invalid bulk length"),
            true,
        ),
        case(
            "R07 $-1",
            "*1\r\n$-1\r\n",
            &proto_err("invalid bulk length"),
            true,
        ),
        case(
            "R08 $2000000000",
            "*1\r\n$2000000000\r\n",
            &proto_err("invalid bulk length"),
            true,
        ),
        case(
            "R09 $blabla",
            "*1\r\n$blabla\r\n",
            &proto_err("invalid bulk length"),
            true,
        ),
        case(
            "R10 empty key",
            "*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
            "$-1\r\n",
            false,
        ),
        case(
            "R11 empty name",
            "*1\r\n$0\r\n\r\n",
            "-ERR unknown command '', with args beginning with: \r\n",
            false,
        ),
        case(
            "R12 no CRLF after bulk (stricter)",
            "*1\r\n$4\r\nPINGX\r\n",
            &proto_err("invalid CRLF in request"),
            true,
        ),
        case_bytes(
            "R13 long count",
            digits("*"),
            &proto_err("too big mbulk count string"),
            true,
        ),
        case_bytes(
            "R14 long bulk len",
            digits("*1\r\n$"),
            &proto_err("too big bulk count string"),
            true,
        ),
        case(
            "R16 three pipelined",
            "PING\r\nPING\r\nPING\r\n",
            "+PONG\r\n+PONG\r\n+PONG\r\n",
            false,
        ),
        case(
            "R19 wrong arity",
            "*1\r\n$3\r\nGET\r\n",
            "-ERR wrong number of arguments for 'get' command\r\n",
            false,
        ),
        case(
            "R20 unknown",
            "*1\r\n$7\r\nNOSUCHC\r\n",
            "-ERR unknown command 'NOSUCHC', with args beginning with: \r\n",
            false,
        ),
        case("I01 bare LF", "PING\n", "+PONG\r\n", false),
        case(
            "MSET odd args across slots",
            "*4\r\n$4\r\nMSET\r\n$3\r\nmfa\r\n$1\r\n1\r\n$3\r\nmfb\r\n",
            "-ERR wrong number of arguments for 'mset' command\r\n",
            false,
        ),
        case(
            "I02 quotes",
            "set \"\"\"test-key\"\"\" test-value\r\nping\r\n",
            &proto_err("unbalanced quotes in request"),
            true,
        ),
        case(
            "I03 quote then char",
            "ECHO \"a\"b\r\n",
            &proto_err("unbalanced quotes in request"),
            true,
        ),
        case(
            "I04 hex escape",
            "ECHO \"a\\x41b\"\r\n",
            "$3\r\naAb\r\n",
            false,
        ),
        case_bytes(
            "I05 long inline",
            vec![b'a'; 70 * 1024],
            &proto_err("too big inline request"),
            true,
        ),
        case(
            "I07 HTTP POST",
            "POST / HTTP/1.1\r\nHost: x\r\n\r\n",
            "",
            true,
        ),
        case(
            "I08 HTTP GET",
            "GET / HTTP/1.1\r\n",
            "-ERR wrong number of arguments for 'get' command\r\n",
            false,
        ),
        case(
            "R18 RESP3 frame as request",
            "%1\r\n$1\r\na\r\n$1\r\nb\r\n",
            concat!(
                "-ERR unknown command '%1', with args beginning with: \r\n",
                "-ERR unknown command '$1', with args beginning with: \r\n",
                "-ERR unknown command 'a', with args beginning with: \r\n",
                "-ERR unknown command '$1', with args beginning with: \r\n",
                "-ERR unknown command 'b', with args beginning with: \r\n"
            ),
            false,
        ),
    ]
}

fn case_bytes(name: &'static str, input: Vec<u8>, reply: &str, closes: bool) -> Case {
    Case {
        name,
        input,
        reply: reply.as_bytes().to_vec(),
        closes,
    }
}

#[test]
fn bad_input_gets_redis_answers_and_harms_no_one_else() {
    let h = Harness::start(3, 0);
    let mut bystander = h.client();
    assert_eq!(
        common::text(&bystander.call(&["SET", "bystander", "still-here"])),
        "OK"
    );
    let cases = cases();
    assert!(cases.len() >= 20);
    for case in cases {
        let mut c = h.client();
        c.send_raw(&case.input);
        if case.closes {
            let (got, closed) = c.read_raw(Duration::from_secs(3));
            assert!(closed, "{}: connection should be closed", case.name);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&case.reply),
                "{}",
                case.name
            );
        } else {
            // Follow with a PING: the reply must be exactly the expected bytes, then +PONG.
            c.send_raw(b"*1\r\n$4\r\nPING\r\n");
            let mut want = case.reply.clone();
            want.extend_from_slice(b"+PONG\r\n");
            let got = read_exactly(&mut c, want.len());
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{}",
                case.name
            );
        }
        assert_eq!(
            common::text(&bystander.call(&["GET", "bystander"])),
            "still-here",
            "after {}",
            case.name
        );
    }
}

#[test]
fn a_request_sent_one_byte_at_a_time_is_served() {
    let h = Harness::start(1, 0);
    let mut c = h.client();
    for b in b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" {
        c.send_raw(&[*b]);
        std::thread::sleep(Duration::from_millis(1)); // pacing: one byte per segment
    }
    assert_eq!(read_exactly(&mut c, 13), b"+OK\r\n$2\r\nv1\r\n");
}

fn read_exactly(c: &mut Client, n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    c.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.stream.read_exact(&mut buf).expect("expected reply bytes");
    buf
}
