//! systemd's service notifications (the `sd_notify(3)` protocol, without libsystemd): when
//! iodump runs as a `Type=notify` service, `READY=1` once recording has really started
//! (programs attached, outputs open), a `STATUS=` line now and then for `systemctl status`,
//! `WATCHDOG=1` pings while the recording loop goes round (`WatchdogSec=`: a recorder whose
//! loop is stuck is restarted), and `STOPPING=1` as it stops. Each is one datagram to the
//! `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or an abstract name written `@name`);
//! without that variable nothing is sent. Sending never blocks: a datagram that cannot be
//! sent now (the manager's queue full, the manager gone) is dropped, since a service manager
//! slow to read must not stop the recording.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::time::{Duration, Instant};

/// The environment variables of the protocol, which the traced command must not inherit
/// (it would be taken for the service).
pub const ENV_VARS: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// How often a `STATUS=` line is sent.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// The service manager's socket, and when to ping and report next.
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
    /// Half the watchdog's timeout (`WATCHDOG_USEC`), when there is a watchdog for us.
    ping_every: Option<Duration>,
    last_ping: Instant,
    last_status: Instant,
    stopping: bool,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` asks for, or None (not a notify service, or a socket
    /// name that cannot be one). The watchdog is ours when `$WATCHDOG_USEC` is set and
    /// `$WATCHDOG_PID` is unset or our pid.
    pub fn from_env() -> Option<Notifier> {
        let name = std::env::var_os("NOTIFY_SOCKET")?;
        let bytes = name.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(abs) => SocketAddr::from_abstract_name(abs).ok()?,
            None if bytes.starts_with(b"/") => SocketAddr::from_pathname(Path::new(&name)).ok()?,
            None => return None,
        };
        let ours = std::env::var("WATCHDOG_PID")
            .ok()
            .is_none_or(|p| p.trim().parse::<u32>().ok() == Some(std::process::id()));
        let ping_every = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|&u| u > 0 && ours)
            .map(|u| Duration::from_micros(u / 2));
        Notifier::to(addr, ping_every)
    }

    /// A notifier sending to `addr`, pinging every `ping_every`.
    fn to(addr: SocketAddr, ping_every: Option<Duration>) -> Option<Notifier> {
        let now = Instant::now();
        let sock = UnixDatagram::unbound().ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(Notifier {
            sock,
            addr,
            ping_every,
            last_ping: now,
            last_status: now,
            stopping: false,
        })
    }

    fn send(&self, msg: &str) {
        let _ = self.sock.send_to_addr(msg.as_bytes(), &self.addr);
    }

    /// Recording has started: `READY=1` with a first status line.
    pub fn ready(&mut self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
        self.last_status = Instant::now();
    }

    /// One pass of the recording loop: a watchdog ping when half its timeout has passed,
    /// a status line (made by `status`) every 10 s.
    pub fn tick(&mut self, status: impl FnOnce() -> String) {
        if let Some(every) = self.ping_every {
            if self.last_ping.elapsed() >= every {
                self.send("WATCHDOG=1");
                self.last_ping = Instant::now();
            }
        }
        if !self.stopping && self.last_status.elapsed() >= STATUS_EVERY {
            self.send(&format!("STATUS={}", one_line(&status())));
            self.last_status = Instant::now();
        }
    }

    /// The recording is stopping (once): `STOPPING=1`.
    pub fn stopping(&mut self) {
        if !self.stopping {
            self.stopping = true;
            self.send("STOPPING=1\nSTATUS=stopping: draining the last events, closing the outputs");
        }
    }
}

/// A status is one line: systemd shows it as such.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_pings_status_and_stopping_arrive_in_order() {
        let dir = std::env::temp_dir().join(format!("iodump-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        server.set_nonblocking(true).unwrap();
        let addr = SocketAddr::from_pathname(&path).unwrap();
        let mut n = Notifier::to(addr, Some(Duration::from_millis(20))).unwrap();
        n.ready("recording\nevery device");
        std::thread::sleep(Duration::from_millis(25));
        n.tick(|| unreachable!("no status before 10 s"));
        n.last_status -= STATUS_EVERY;
        n.tick(|| "1 event".into());
        n.stopping();
        n.stopping();
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(len) = server.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..len]).into_owned());
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got,
            [
                "READY=1\nSTATUS=recording every device",
                "WATCHDOG=1",
                "STATUS=1 event",
                "STOPPING=1\nSTATUS=stopping: draining the last events, closing the outputs",
            ]
        );
    }

    #[test]
    fn a_manager_that_does_not_read_does_not_hold_up_the_recorder() {
        let dir = std::env::temp_dir().join(format!("iodump-notify-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let _server = UnixDatagram::bind(&path).unwrap();
        let addr = SocketAddr::from_pathname(&path).unwrap();
        let mut n = Notifier::to(addr, Some(Duration::ZERO)).unwrap();
        // Far more than a datagram socket queues (net.unix.max_dgram_qlen, 10 by default):
        // a blocking send would wait here for ever.
        for _ in 0..1000 {
            n.tick(String::new);
        }
        n.stopping();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
