//! How a client's socket ends beyond a plain drop: Redis's refusal past `maxclients`, and
//! TLS's goodbye, which also pushes out what TLS still holds.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::tls::Stream;

/// How long a closing client gets to take the last bytes: it may be gone already.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Redis's answer past maxclients, then close. A plain socket takes it at once or never;
/// TLS needs a flush, bounded so a client that does not read cannot hold the task.
pub(super) async fn reject(stream: &mut Stream) {
    const TEXT: &[u8] = b"-ERR max number of clients reached\r\n";
    match stream {
        Stream::Plain(tcp) => {
            let _ = tcp.try_write(TEXT);
        }
        tls => {
            let write = async {
                tls.write_all(TEXT).await?;
                tls.shutdown().await
            };
            let _ = tokio::time::timeout(CLOSE_WAIT, write).await;
        }
    }
}

/// A TLS session's end: flush what TLS holds and send close_notify, briefly. A plain
/// socket needs nothing: the kernel sends what was written before the FIN.
pub(super) async fn goodbye(stream: &mut Stream) {
    if stream.is_tls() {
        let _ = tokio::time::timeout(CLOSE_WAIT, stream.shutdown()).await;
    }
}
