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
//! Every request has one deadline, taken when the request gets the
//! connection, and it bounds the whole request: resolving the address,
//! connecting and the handshake, each write and each `recv` of the reply
//! (lines and bulk bodies alike) get only the time left of it. A socket
//! timeout alone applies per `recv`, so a server trickling a valid reply a
//! byte at a time, each byte just inside it, kept a `GET` alive for as long
//! as the reply lasted (issue 38: `$-1\r\n`, a byte per 1.9 s, took ~10 s
//! per `GET` under a 2 s timeout and never turned the remote off).
//!
//! A request that fails (other than by an error reply about its key) makes
//! the client give up: every later request fails at once with [`GaveUp`]
//! and never reaches the server. The remote tier turns itself off after
//! such a failure anyway (`remote.rs`); giving up here, under the
//! connection's lock, also stops the requests already queued behind the
//! failed one, which would each have waited out a deadline of their own.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
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

/// A request not made: an earlier request of this client failed (see the
/// module's documentation).
#[derive(Debug, thiserror::Error)]
#[error("not sent: an earlier request to this server failed")]
pub(crate) struct GaveUp;

/// Whether `e` is [`GaveUp`]: no request was made.
pub(crate) fn gave_up(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<GaveUp>())
}

/// The connection, and whether the client gave up.
#[derive(Debug, Default)]
struct Conn {
    stream: Option<BufReader<TcpStream>>,
    gave_up: bool,
}

/// One lazily opened connection, reopened after an error reply about a
/// key; any other failure ends the client's requests ([`GaveUp`]).
#[derive(Debug)]
pub(crate) struct RedisClient {
    target: RedisTarget,
    timeout: Duration,
    conn: Mutex<Conn>,
}

impl RedisClient {
    pub(crate) fn new(target: RedisTarget, timeout: Duration) -> Self {
        Self {
            target,
            timeout,
            conn: Mutex::new(Conn::default()),
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
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if conn.gave_up {
            return Err(io::Error::other(GaveUp));
        }
        // Taken once the connection is ours: time spent queued behind
        // another thread's request is not this server's delay.
        let deadline = Instant::now() + self.timeout;
        let result = match conn.stream.take() {
            Some(stream) => Ok(stream),
            None => self.connect(deadline),
        }
        .and_then(|mut stream| {
            let reply = call(&mut stream, args, deadline);
            // The stream may be mid-reply after any other error: never
            // reuse it. (An error reply was read whole, so the stream is at
            // the next reply.)
            if reply
                .as_ref()
                .map_or_else(|e| error_reply(e).is_some(), |_| true)
            {
                conn.stream = Some(stream);
            }
            reply
        });
        if let Err(e) = &result
            && !error_reply(e).is_some_and(ErrorReply::is_about_the_key)
        {
            conn.gave_up = true;
            conn.stream = None;
        }
        // A socket timeout reads "Resource temporarily unavailable": say
        // what happened instead.
        result.map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no complete answer within {:?}", self.timeout),
            ),
            _ => e,
        })
    }

    fn connect(&self, deadline: Instant) -> io::Result<BufReader<TcpStream>> {
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} resolves to no address", self.target.address),
        );
        for addr in resolve(&self.target.address, deadline)? {
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

/// The addresses of `address` (`host:port`), resolved within the time
/// left: a literal address at once, a name on a helper thread, since
/// `getaddrinfo` has no timeout of its own (a resolver that does not
/// answer would hold the request for its own retries, 5 s each). A helper
/// still waiting past the deadline is left to finish on its own.
fn resolve(address: &str, deadline: Instant) -> io::Result<Vec<SocketAddr>> {
    if let Ok(addr) = address.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let name = address.to_owned();
    std::thread::Builder::new()
        .name("scene-cache-resolve".into())
        .spawn(move || {
            let _ = tx.send(name.to_socket_addrs().map(Vec::from_iter));
        })?;
    match rx.recv_timeout(left(deadline)?) {
        Ok(addrs) => addrs,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("resolving {address}: no answer in time"),
        )),
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
    // Each `send` gets only the time left: a server that reads a byte at a
    // time cannot stretch the write past the deadline either.
    let stream = conn.get_mut();
    let mut sent = 0;
    while sent < out.len() {
        stream.set_write_timeout(Some(left(deadline)?))?;
        match stream.write(&out[sent..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the server stopped reading",
                ));
            }
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    read_reply(conn, deadline, 0)
}

/// The longest reply line accepted (a type byte and a number or a short
/// message in practice).
const MAX_LINE: usize = 64 * 1024;

/// One reply line, without its `\r\n`. Reads what the buffer holds, one
/// `recv` at a time when it is empty, each with only the time left: never
/// `read_until`, whose `recv`s all get the timeout set before it.
fn read_line(conn: &mut BufReader<TcpStream>, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        if conn.buffer().is_empty() {
            conn.get_ref().set_read_timeout(Some(left(deadline)?))?;
        }
        let buf = match conn.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        let (taken, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..taken]);
        conn.consume(taken);
        if done && line.ends_with(b"\r\n") {
            line.truncate(line.len() - 2);
            return Ok(line);
        }
        if line.len() > MAX_LINE {
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
                if conn.buffer().is_empty() {
                    conn.get_ref().set_read_timeout(Some(left(deadline)?))?;
                }
                let got = match io::Read::read(conn, &mut value[filled..]) {
                    Ok(got) => got,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
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
        let client = RedisClient::new(target(address.clone(), 0, None), Duration::from_millis(300));
        let err = client.get("k").expect_err("no answer");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        // That client asks no more.
        assert!(gave_up(&client.get("k").expect_err("gave up")));
        done_tx.send(()).expect("signal");
        let client = RedisClient::new(target(address, 0, None), Duration::from_millis(300));
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

    /// Issue 38, cause 4: the read timeout was set once per reply line and
    /// `SO_RCVTIMEO` applies per `recv`, so a server trickling `$-1\r\n` a
    /// byte at a time, each byte within the timeout, kept the `GET` alive
    /// for the whole reply, and it then *succeeded* (a miss): the remote
    /// stayed on and every later `GET` paid the same again. Before the
    /// fix this `get` returned `Ok(None)` after five intervals, the client
    /// went on to send the `SET` and the second `GET` on the same
    /// connection (3 commands). Now the first request fails at its
    /// deadline and the server never sees another one.
    #[test]
    fn a_reply_trickled_within_each_recv_timeout_still_ends_at_the_deadline() {
        let timeout = Duration::from_millis(600);
        let server = trickle::Server::start(timeout / 3);
        let client = RedisClient::new(target(server.address(), 0, None), timeout);
        let err = client
            .get("k")
            .expect_err("the deadline bounds the whole request");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err:?}");
        assert_eq!(err.to_string(), "no complete answer within 600ms");
        for later in [
            client.set("k2", b"v").expect_err("not sent"),
            client.get("k3").expect_err("not sent"),
        ] {
            assert!(gave_up(&later), "{later:?}");
        }
        let seen = server.finish();
        assert_eq!(seen.connections, 1, "{seen:?}");
        assert_eq!(seen.commands, ["GET"], "{seen:?}");
    }

    /// A `SET` whose `+OK` trickles ends at the deadline too (a write's
    /// reply is read the same way).
    #[test]
    fn a_trickled_set_reply_ends_at_the_deadline() {
        let timeout = Duration::from_millis(600);
        let server = trickle::Server::start(timeout / 3);
        let client = RedisClient::new(target(server.address(), 0, None), timeout);
        let err = client.set("k", b"v").expect_err("the deadline bounds it");
        assert!(
            matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{err:?}"
        );
        assert!(gave_up(&client.get("k").expect_err("not sent")));
        let seen = server.finish();
        assert_eq!(
            (seen.connections, seen.commands.as_slice()),
            (1, &["SET".to_owned()][..]),
            "{seen:?}"
        );
    }

    /// A name that resolves still connects (the resolver runs on a helper
    /// thread bounded by the deadline).
    #[test]
    fn a_host_name_resolves_within_the_deadline() {
        let (address, server) = serve(vec![(
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
            b"$1\r\nv\r\n".to_vec(),
        )]);
        let port = address.rsplit_once(':').expect("port").1;
        let client = RedisClient::new(
            target(format!("localhost:{port}"), 0, None),
            Duration::from_secs(10),
        );
        // `localhost` may resolve to ::1 first, where nobody listens: the
        // client tries the next address.
        assert_eq!(client.get("k").expect("get"), Some(b"v".to_vec()));
        server.join().expect("server");
    }
}

/// A Redis server for tests that answers every command slowly: each
/// reply byte after a pause (`GET` gets `$-1\r\n`, a miss; `SET` gets
/// `+OK\r\n`), all of them valid, each pause shorter than a client's
/// timeout but the whole reply longer. It counts connections and
/// commands; [`trickle::Server::finish`] stops it (through a connection
/// of its own, so no sleep decides when) and returns what it saw.
#[cfg(test)]
pub(crate) mod trickle {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    /// What the server saw, the stopping connection left out.
    #[derive(Debug, Default)]
    pub(crate) struct Seen {
        pub(crate) connections: usize,
        /// Command names, in order.
        pub(crate) commands: Vec<String>,
    }

    pub(crate) struct Server {
        address: String,
        thread: std::thread::JoinHandle<Seen>,
    }

    /// The first line of the stopping connection.
    const STOP: &[u8] = b"STOP\r\n";

    impl Server {
        pub(crate) fn start(pause: Duration) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("addr").to_string();
            let thread = std::thread::spawn(move || {
                let mut seen = Seen::default();
                // One connection at a time: a client's requests share its
                // one connection.
                for conn in listener.incoming() {
                    let mut conn = BufReader::new(conn.expect("accept"));
                    if conn
                        .fill_buf()
                        .map(|b| b.starts_with(STOP))
                        .unwrap_or(false)
                    {
                        return seen;
                    }
                    seen.connections += 1;
                    while let Some(command) = read_command(&mut conn) {
                        let reply: &[u8] = if command == "SET" {
                            b"+OK\r\n"
                        } else {
                            b"$-1\r\n"
                        };
                        seen.commands.push(command);
                        if !trickle(conn.get_mut(), reply, pause) {
                            break;
                        }
                    }
                }
                seen
            });
            Server { address, thread }
        }

        pub(crate) fn address(&self) -> String {
            self.address.clone()
        }

        /// Stops the server (after the connection it is serving ends) and
        /// returns what it saw.
        pub(crate) fn finish(self) -> Seen {
            let mut stop = TcpStream::connect(&self.address).expect("connect to stop");
            stop.write_all(STOP).expect("stop");
            self.thread.join().expect("the trickle server")
        }
    }

    /// Writes `reply` a byte at a time, each after `pause`; false when the
    /// client is gone.
    fn trickle(conn: &mut TcpStream, reply: &[u8], pause: Duration) -> bool {
        for byte in reply {
            // The behaviour under test (a slow server), not synchronisation.
            std::thread::sleep(pause);
            if conn.write_all(std::slice::from_ref(byte)).is_err() {
                return false;
            }
        }
        true
    }

    /// The name of the next command (a RESP array of bulk strings); `None`
    /// when the client closed the connection.
    fn read_command(conn: &mut BufReader<TcpStream>) -> Option<String> {
        let count: usize = header(conn, b'*')?;
        let mut name = None;
        for _ in 0..count {
            let len: usize = header(conn, b'$')?;
            let mut arg = vec![0; len + 2];
            conn.read_exact(&mut arg).ok()?;
            arg.truncate(len);
            name.get_or_insert_with(|| String::from_utf8_lossy(&arg).into_owned());
        }
        name
    }

    fn header(conn: &mut BufReader<TcpStream>, kind: u8) -> Option<usize> {
        let mut line = Vec::new();
        conn.read_until(b'\n', &mut line).ok()?;
        let text = std::str::from_utf8(line.strip_prefix(&[kind])?).ok()?;
        text.trim_end().parse().ok()
    }
}
