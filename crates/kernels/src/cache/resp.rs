//! A minimal Redis client for the remote tier: `AUTH`, `SELECT`, `GET`,
//! `SET` over RESP2 on one blocking TCP connection.
//!
//! The remote tier needs four commands, and the `redis` crate (with
//! opendal's Redis service around it: cluster support, a connection
//! manager, TLS, big-number replies) was the largest part of a fresh build
//! (about 55 s of the ~7.5 CPU-minutes on two cores). Objects keep the key
//! names opendal's Redis service used (`scene-cache/v<schema>/...`, no
//! leading slash), so caches written by earlier builds stay readable.
//!
//! Every request has a deadline: connecting, writing and each read get the
//! time left of it, so a server that stops answering, or answers a byte at
//! a time, costs at most the remote's timeout.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest reply accepted (a bulk string past it is a protocol error,
/// not an allocation).
const MAX_BULK: usize = 1 << 30;

/// Where and as whom to connect.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RedisTarget {
    /// `host:port`.
    pub(crate) address: String,
    pub(crate) db: i64,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials, only whether there are any.
        f.debug_struct("RedisTarget")
            .field("address", &self.address)
            .field("db", &self.db)
            .field("user", &self.user.is_some())
            .field("password", &self.password.is_some())
            .finish()
    }
}

/// A reply, as far as these commands need one.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// An error reply (`-CODE message`): the server answered, in full, and
/// refused this one command. Displayed as `server error: CODE message`.
#[derive(Debug, thiserror::Error)]
#[error("server error: {0}")]
pub(crate) struct ErrorReply(String);

impl ErrorReply {
    /// Whether the refusal is about the key, not the server: `WRONGTYPE`
    /// (the key holds a list, set, ...). Another key can still be read;
    /// any other code (`NOAUTH`, `LOADING`, `MISCONF`, ...) would refuse
    /// every request alike.
    pub(crate) fn is_about_the_key(&self) -> bool {
        self.0.starts_with("WRONGTYPE")
    }
}

/// The [`ErrorReply`] inside `e`, if `e` is one.
pub(crate) fn error_reply(e: &io::Error) -> Option<&ErrorReply> {
    e.get_ref()?.downcast_ref::<ErrorReply>()
}

/// One lazily opened connection, reopened after any failure.
#[derive(Debug)]
pub(crate) struct RedisClient {
    target: RedisTarget,
    timeout: Duration,
    conn: Mutex<Option<BufReader<TcpStream>>>,
}

impl RedisClient {
    pub(crate) fn new(target: RedisTarget, timeout: Duration) -> Self {
        Self {
            target,
            timeout,
            conn: Mutex::new(None),
        }
    }

    /// The value of `key`; `None` when there is none.
    pub(crate) fn get(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        match self.request(&[b"GET", key.as_bytes()])? {
            Reply::Bulk(value) => Ok(value),
            other => Err(unexpected("GET", &other)),
        }
    }

    /// Sets `key` to `value` (no expiry), replacing any.
    pub(crate) fn set(&self, key: &str, value: &[u8]) -> io::Result<()> {
        match self.request(&[b"SET", key.as_bytes(), value])? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(unexpected("SET", &other)),
        }
    }

    fn request(&self, args: &[&[u8]]) -> io::Result<Reply> {
        let deadline = Instant::now() + self.timeout;
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(self.connect(deadline)?);
        }
        let Some(conn) = slot.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        let result = call(conn, args, deadline);
        if let Err(e) = &result
            && error_reply(e).is_none()
        {
            // The stream may be mid-reply: never reuse it. (An error reply
            // was read whole, so the stream is at the next reply.)
            *slot = None;
        }
        result
    }

    fn connect(&self, deadline: Instant) -> io::Result<BufReader<TcpStream>> {
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} resolves to no address", self.target.address),
        );
        for addr in self.target.address.to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, left(deadline)?) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    let mut conn = BufReader::new(stream);
                    self.handshake(&mut conn, deadline)?;
                    return Ok(conn);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn handshake(&self, conn: &mut BufReader<TcpStream>, deadline: Instant) -> io::Result<()> {
        let t = &self.target;
        if let Some(password) = &t.password {
            let reply = match &t.user {
                Some(user) => call(
                    conn,
                    &[b"AUTH", user.as_bytes(), password.as_bytes()],
                    deadline,
                )?,
                None => call(conn, &[b"AUTH", password.as_bytes()], deadline)?,
            };
            if reply != Reply::Simple("OK".into()) {
                return Err(unexpected("AUTH", &reply));
            }
        }
        if t.db != 0 {
            let db = t.db.to_string();
            let reply = call(conn, &[b"SELECT", db.as_bytes()], deadline)?;
            if reply != Reply::Simple("OK".into()) {
                return Err(unexpected("SELECT", &reply));
            }
        }
        Ok(())
    }
}

/// The time left until `deadline`, or a timeout error.
fn left(deadline: Instant) -> io::Result<Duration> {
    let now = Instant::now();
    if now >= deadline {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
    }
    Ok(deadline - now)
}

fn unexpected(command: &str, reply: &Reply) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected reply to {command}: {reply:?}"),
    )
}

/// Sends one command and reads its reply; a Redis error reply is an
/// error carrying the server's message.
fn call(conn: &mut BufReader<TcpStream>, args: &[&[u8]], deadline: Instant) -> io::Result<Reply> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    let stream = conn.get_mut();
    stream.set_write_timeout(Some(left(deadline)?))?;
    stream.write_all(&out)?;
    read_reply(conn, deadline, 0)
}

fn read_line(conn: &mut BufReader<TcpStream>, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        conn.get_ref().set_read_timeout(Some(left(deadline)?))?;
        let n = io::Read::take(&mut *conn, 64 * 1024).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        if line.ends_with(b"\r\n") {
            line.truncate(line.len() - 2);
            return Ok(line);
        }
        if line.len() > 64 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply line too long",
            ));
        }
    }
}

fn read_reply(conn: &mut BufReader<TcpStream>, deadline: Instant, depth: u32) -> io::Result<Reply> {
    if depth > 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "reply nested too deep",
        ));
    }
    let line = read_line(conn, deadline)?;
    let Some((&kind, rest)) = line.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "empty reply"));
    };
    let text = String::from_utf8_lossy(rest).into_owned();
    let number = || {
        text.parse::<i64>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad length `{text}`")))
    };
    match kind {
        b'+' => Ok(Reply::Simple(text)),
        b'-' => Err(io::Error::other(ErrorReply(text))),
        b':' => Ok(Reply::Integer(number()?)),
        b'$' => {
            let n = number()?;
            if n < 0 {
                return Ok(Reply::Bulk(None));
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_BULK)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "reply too large"))?;
            let mut value = vec![0; n + 2];
            let mut filled = 0;
            while filled < value.len() {
                conn.get_ref().set_read_timeout(Some(left(deadline)?))?;
                let got = io::Read::read(conn, &mut value[filled..])?;
                if got == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection mid-reply",
                    ));
                }
                filled += got;
            }
            if !value.ends_with(b"\r\n") {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bulk reply not terminated",
                ));
            }
            value.truncate(n);
            Ok(Reply::Bulk(Some(value)))
        }
        b'*' => {
            let n = number()?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= 1024)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "array too long"))?;
            let items = (0..n)
                .map(|_| read_reply(conn, deadline, depth + 1))
                .collect::<io::Result<_>>()?;
            Ok(Reply::Array(Some(items)))
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown reply type `{}`", other as char),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A server that answers each command of `script` (what it expects to
    /// read, what it writes back) in turn, then closes.
    fn serve(script: Vec<(Vec<u8>, Vec<u8>)>) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            for (expect, reply) in script {
                let mut got = vec![0; expect.len()];
                conn.read_exact(&mut got).expect("read the command");
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expect)
                );
                conn.write_all(&reply).expect("reply");
            }
        });
        (address, handle)
    }

    fn target(address: String, db: i64, password: Option<&str>) -> RedisTarget {
        RedisTarget {
            address,
            db,
            user: None,
            password: password.map(str::to_owned),
        }
    }

    #[test]
    fn authenticates_selects_sets_and_gets_in_resp2() {
        let (address, server) = serve(vec![
            (
                b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n".to_vec(),
                b"+OK\r\n".to_vec(),
            ),
            (
                b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n".to_vec(),
                b"+OK\r\n".to_vec(),
            ),
            (
                b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n".to_vec(),
                b"+OK\r\n".to_vec(),
            ),
            (
                b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
                b"$4\r\na\r\nb\r\n".to_vec(),
            ),
            (
                b"*2\r\n$3\r\nGET\r\n$1\r\nz\r\n".to_vec(),
                b"$-1\r\n".to_vec(),
            ),
        ]);
        let client = RedisClient::new(target(address, 3, Some("pw")), Duration::from_secs(10));
        client.set("k", b"a\r\nb").expect("set");
        assert_eq!(client.get("k").expect("get"), Some(b"a\r\nb".to_vec()));
        assert_eq!(client.get("z").expect("get"), None);
        server.join().expect("server");
    }

    #[test]
    fn an_error_reply_names_the_servers_message() {
        let (address, server) = serve(vec![(
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
            b"-WRONGTYPE Operation against a key\r\n".to_vec(),
        )]);
        let client = RedisClient::new(target(address, 0, None), Duration::from_secs(10));
        let err = client.get("k").expect_err("an error reply");
        assert!(err.to_string().contains("WRONGTYPE"), "{err}");
        assert!(error_reply(&err).is_some_and(ErrorReply::is_about_the_key));
        server.join().expect("server");
    }

    #[test]
    fn a_silent_server_times_out_and_a_truncated_reply_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            // Accepts and says nothing until the client gave up.
            let (_silent, _) = listener.accept().expect("accept");
            let _ = done_rx.recv();
            // Then a reply cut short: declared 10 bytes, sends 3.
            let (mut conn, _) = listener.accept().expect("accept");
            let mut buf = [0; 64];
            let _ = conn.read(&mut buf);
            conn.write_all(b"$10\r\nabc").expect("write");
        });
        let client = RedisClient::new(target(address, 0, None), Duration::from_millis(300));
        let err = client.get("k").expect_err("no answer");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        done_tx.send(()).expect("signal");
        let err = client.get("k").expect_err("truncated");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        server.join().expect("server");
    }
}
