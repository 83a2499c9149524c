//! The HTTP endpoint of `iodump top --serve`: a listener bound before recording starts
//! ([`bind`]), a thread accepting connections, each answered on a thread of its own
//! (`GET /metrics`, HTTP/1.1, one request per connection, no async runtime; a slow client
//! holds only its own), and the hand-over of expositions from the recording thread.
//!
//! The recording thread owns the [`crate::metrics::Metrics`]; nothing is locked per event. A
//! request sets a flag ([`Endpoint::wanted`]) that the recording thread looks at on each tick
//! (at least every ~100 ms): it renders the exposition asked for and [`Endpoint::publish`]es
//! it, and the request is answered with it (after 1 s without one, with the last one).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Prometheus text format 0.0.4.
pub const PROMETHEUS: u8 = 1;
/// OpenMetrics 1.0 (asked for with `Accept: application/openmetrics-text`).
pub const OPENMETRICS: u8 = 2;

/// How long a request waits for a fresh exposition.
const FRESH_WAIT: Duration = Duration::from_secs(1);

/// Connections answered at once, each on a thread of its own: a client that connects and
/// sends nothing (or a byte at a time) holds one, never the others' scrapes. At this many,
/// a new connection closes the oldest one still sending its request's head (a scraper sends
/// its head at once: only idle clients are closed); when none is, the new one is closed.
const MAX_CONNECTIONS: usize = 32;

/// How long a client has to send its request's head, in all (not per read).
const HEAD_DEADLINE: Duration = Duration::from_secs(5);

/// Why `--serve`'s value gives no address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrError {
    /// Not `PORT`, `:PORT`, `HOST:PORT` or `[V6]:PORT` with a port of 0–65535: a usage error.
    Syntax(String),
    /// Well formed, but the host name does not resolve.
    Resolve(String),
}

impl std::fmt::Display for AddrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddrError::Syntax(m) | AddrError::Resolve(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for AddrError {}

/// Parses `--serve`: `PORT`, `:PORT` (both on 127.0.0.1), `HOST:PORT` or `[V6]:PORT`.
pub fn parse_addr(spec: &str) -> Result<SocketAddr, AddrError> {
    let s = spec.trim();
    let full = if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        format!("127.0.0.1:{s}")
    } else if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        s.to_string()
    };
    let syntax = |why: &str| {
        AddrError::Syntax(format!(
            "--serve {spec:?}: give PORT, :PORT or ADDR:PORT ({why})"
        ))
    };
    let (host, port) = full.rsplit_once(':').ok_or_else(|| syntax("no port"))?;
    if host.is_empty() {
        return Err(syntax("no host"));
    }
    port.parse::<u16>()
        .map_err(|_| syntax(&format!("{port:?} is not a port: 0 to 65535")))?;
    let mut addrs = full
        .to_socket_addrs()
        .map_err(|e| AddrError::Resolve(format!("--serve {spec:?}: {e}")))?;
    addrs
        .next()
        .ok_or_else(|| AddrError::Resolve(format!("--serve {spec:?}: no address")))
}

/// Binds the listener (an error names the address: in use, not permitted…).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr).map_err(|e| format!("--serve {addr}: cannot listen: {e}"))
}

#[derive(Default)]
struct Latest {
    /// Exposition by format (index: PROMETHEUS, OPENMETRICS), and how many were published.
    text: [Option<Arc<String>>; 3],
    generation: [u64; 3],
}

#[derive(Default)]
struct Shared {
    want: AtomicU8,
    latest: Mutex<Latest>,
    published: Condvar,
    /// The connections still sending their request's head: id → (accepted at, a handle to
    /// shut it down).
    reading: Mutex<Vec<(u64, std::time::Instant, TcpStream)>>,
}

impl Shared {
    /// Shuts the oldest connection still sending its head down (its thread then ends);
    /// false when there is none.
    fn close_oldest_reading(&self) -> bool {
        let mut r = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        let Some(at) = (0..r.len()).min_by_key(|&i| r[i].1) else {
            return false;
        };
        let (_, _, c) = r.swap_remove(at);
        let _ = c.shutdown(std::net::Shutdown::Both);
        true
    }

    /// Connection `id`'s head has come (or it ended): no longer to be closed for a new one.
    fn head_read(&self, id: u64) {
        let mut r = self.reading.lock().unwrap_or_else(|p| p.into_inner());
        r.retain(|(i, _, _)| *i != id);
    }
}

/// The recording thread's side of the endpoint.
pub struct Endpoint {
    shared: Arc<Shared>,
    /// The address listened on.
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Serves `listener` on a thread of its own (it lives as long as the process).
    pub fn start(listener: TcpListener) -> std::io::Result<Endpoint> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let active = Arc::new(AtomicUsize::new(0));
        std::thread::Builder::new()
            .name("iodump-serve".into())
            .spawn(move || {
                let mut next_id = 0u64;
                for conn in listener.incoming() {
                    let c = match conn {
                        Ok(c) => c,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    };
                    // At the limit, an idle client's connection makes way (its thread ends
                    // at once); with none, the new one is closed: dropped.
                    if active.load(Ordering::Acquire) >= MAX_CONNECTIONS
                        && !s.close_oldest_reading()
                    {
                        continue;
                    }
                    next_id += 1;
                    let id = next_id;
                    if let Ok(handle) = c.try_clone() {
                        let mut r = s.reading.lock().unwrap_or_else(|p| p.into_inner());
                        r.push((id, std::time::Instant::now(), handle));
                    }
                    active.fetch_add(1, Ordering::AcqRel);
                    let (s, done) = (s.clone(), active.clone());
                    let spawned = std::thread::Builder::new()
                        .name("iodump-serve-1".into())
                        .stack_size(256 << 10)
                        .spawn({
                            let s = s.clone();
                            move || {
                                let _ = answer(c, &s, id);
                                s.head_read(id);
                                done.fetch_sub(1, Ordering::AcqRel);
                            }
                        });
                    if spawned.is_err() {
                        s.head_read(id);
                        active.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })?;
        Ok(Endpoint { shared, addr })
    }

    /// The formats asked for since the last call (bits [`PROMETHEUS`], [`OPENMETRICS`]).
    #[inline]
    pub fn wanted(&self) -> u8 {
        if self.shared.want.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.shared.want.swap(0, Ordering::AcqRel)
    }

    /// Hands an exposition of `format` to the requests waiting for it.
    pub fn publish(&self, format: u8, text: String) {
        let mut l = self.shared.latest.lock().unwrap_or_else(|p| p.into_inner());
        let i = format as usize;
        l.text[i] = Some(Arc::new(text));
        l.generation[i] += 1;
        self.shared.published.notify_all();
    }
}

/// The format a request's `Accept` header asks for.
fn format_of(head: &str) -> u8 {
    let accept = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case("accept").then_some(v)
    });
    // Each media range's quality (`;q=`, 1 when not given): OpenMetrics when the client
    // takes it (q > 0) at least as gladly as the text format.
    let quality = |wanted: &str| -> Option<f64> {
        accept?
            .split(',')
            .filter_map(|range| {
                let mut params = range.split(';');
                let media = params.next()?.trim();
                media.eq_ignore_ascii_case(wanted).then(|| {
                    params
                        .filter_map(|p| p.trim().strip_prefix("q="))
                        .find_map(|q| q.trim().parse::<f64>().ok())
                        .unwrap_or(1.0)
                })
            })
            .reduce(f64::max)
    };
    match (
        quality("application/openmetrics-text"),
        quality("text/plain"),
    ) {
        (Some(om), text) if om > 0.0 && om >= text.unwrap_or(0.0) => OPENMETRICS,
        _ => PROMETHEUS,
    }
}

/// A fresh exposition of `format`, or the last one after [`FRESH_WAIT`].
fn exposition(s: &Shared, format: u8) -> Option<Arc<String>> {
    let i = format as usize;
    let mut l = s.latest.lock().unwrap_or_else(|p| p.into_inner());
    let seen = l.generation[i];
    s.want.fetch_or(format, Ordering::AcqRel);
    let deadline = std::time::Instant::now() + FRESH_WAIT;
    while l.generation[i] == seen {
        let now = std::time::Instant::now();
        if now >= deadline {
            break;
        }
        l = s
            .published
            .wait_timeout(l, deadline - now)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    l.text[i].clone()
}

fn answer(mut c: TcpStream, s: &Shared, id: u64) -> std::io::Result<()> {
    c.set_write_timeout(Some(Duration::from_secs(10)))?;
    let deadline = std::time::Instant::now() + HEAD_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // The head ends at an empty line (bare line feeds taken too, as most servers do).
    while !(buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return respond(&mut c, "408 Request Timeout", "text/plain", b"", true);
        }
        c.set_read_timeout(Some(left))?;
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 << 10 {
            return respond(
                &mut c,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"",
                true,
            );
        }
    }
    s.head_read(id);
    let head = String::from_utf8_lossy(&buf);
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let body_too = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut c,
            "405 Method Not Allowed",
            "text/plain",
            b"GET /metrics\n",
            true,
        );
    }
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return respond(
            &mut c,
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"iodump top: the metrics are at /metrics\n",
            body_too,
        );
    }
    let format = format_of(&head);
    match exposition(s, format) {
        Some(text) => {
            let ct = if format == OPENMETRICS {
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
            } else {
                "text/plain; version=0.0.4; charset=utf-8"
            };
            respond(&mut c, "200 OK", ct, text.as_bytes(), body_too)
        }
        None => respond(
            &mut c,
            "503 Service Unavailable",
            "text/plain; charset=utf-8",
            b"iodump top: not recording yet\n",
            body_too,
        ),
    }
}

fn respond(
    c: &mut TcpStream,
    status: &str,
    ct: &str,
    body: &[u8],
    body_too: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    if body_too {
        c.write_all(body)?;
    }
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_the_one_the_client_prefers() {
        let head = |accept: &str| format!("GET /metrics HTTP/1.1\r\nAccept: {accept}\r\n\r\n");
        // Prometheus 2 and 3.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                          version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(format_of(&head(prometheus)), OPENMETRICS);
        assert_eq!(
            format_of(&head("application/openmetrics-text")),
            OPENMETRICS
        );
        for text in [
            "application/openmetrics-text;q=0, text/plain",
            "text/plain;version=0.0.4, application/openmetrics-text;q=0.5",
            "text/plain",
            "*/*",
        ] {
            assert_eq!(format_of(&head(text)), PROMETHEUS, "{text}");
        }
        assert_eq!(format_of("GET /metrics HTTP/1.1\r\n\r\n"), PROMETHEUS);
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("9100").unwrap().to_string(), "127.0.0.1:9100");
        assert_eq!(parse_addr(":9100").unwrap().to_string(), "127.0.0.1:9100");
        assert_eq!(
            parse_addr("0.0.0.0:9100").unwrap().to_string(),
            "0.0.0.0:9100"
        );
        assert_eq!(parse_addr("[::1]:9100").unwrap().to_string(), "[::1]:9100");
        for bad in ["nonsense", "", "localhost:99999", "host:y", ":", "[::1]"] {
            assert!(
                matches!(parse_addr(bad), Err(AddrError::Syntax(_))),
                "{bad}: {:?}",
                parse_addr(bad)
            );
        }
    }

    #[test]
    fn serves_what_is_published() {
        let l = bind(parse_addr("127.0.0.1:0").unwrap()).unwrap();
        let ep = Endpoint::start(l).unwrap();
        let addr = ep.addr;
        let client = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n")
                .unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        });
        // The recording thread's loop: look for requests, publish.
        for _ in 0..200 {
            let w = ep.wanted();
            if w & OPENMETRICS != 0 {
                ep.publish(OPENMETRICS, "x_total 1\n# EOF\n".into());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let reply = client.join().unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(reply.contains("application/openmetrics-text"), "{reply}");
        assert!(reply.ends_with("\r\n\r\nx_total 1\n# EOF\n"), "{reply}");
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert!(s.starts_with("HTTP/1.1 404"), "{s}");
    }

    /// More idle clients than connections are answered at once (connected, sending
    /// nothing) do not keep a scraper out: each new connection closes the oldest idle one.
    /// (Every scrape was refused with 32 idle connections held open.)
    #[test]
    fn idle_clients_do_not_keep_a_scrape_out() {
        let l = bind(parse_addr("127.0.0.1:0").unwrap()).unwrap();
        let ep = Endpoint::start(l).unwrap();
        let addr = ep.addr;
        ep.publish(PROMETHEUS, "x_total 1\n".into());
        let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS + 8)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let client = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut s = String::new();
            let _ = c.read_to_string(&mut s);
            s
        });
        // The recording thread's loop, as above (the exposition is fresh once asked for).
        for _ in 0..400 {
            if ep.wanted() & PROMETHEUS != 0 {
                ep.publish(PROMETHEUS, "x_total 2\n".into());
            }
            if client.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let reply = client.join().unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply:?}");
        drop(idle);
    }
}
