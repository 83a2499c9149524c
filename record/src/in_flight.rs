//! The once-a-second look at the I/Os in flight: what the kernel side's in-flight tables hold
//! of I/Os that started a while ago ([`crate::bpf::Program::in_flight_events`]), checked
//! against the kernel's own count of each device's I/Os in flight, for the trigger (an I/O
//! that hangs fires it before it completes, if ever) and for `--serve`'s gauges (the oldest
//! I/O in flight per device: what no completion-based figure shows while an I/O hangs).
//!
//! An entry whose completion the recorder missed (the kernel skipped both of its completion
//! programs, or never ran them: README, Limits) stays in the tables until its slot is taken
//! again, and would read as an I/O hanging. A read or write entry on a device whose kernel
//! count says nothing is in flight ([`iodump_host::sysfs::Sysfs::in_flight`]) is such an
//! entry: it is left out and counted ([`InFlightLook::stale`]). Other ops (flushes,
//! discards), and devices whose driver keeps no count, are kept: the kernel cannot tell.
//! Which counts to believe is the caller's: a request-based device's is the block layer's
//! own (its started requests), a bio-based driver's is its own accounting, which may count
//! I/Os done and never those in flight (5.10's md: always 0 in flight), so the session
//! believes a bio-based device's 0 only once the device has shown more than 0.

use iodump_format::{DevT, Op};

use crate::abi::{IoEvent, IO_EVENT_BYTES};
use crate::convert::Converter;

/// A device's name where the look's figures are shown: the converter's, else its number (a
/// device it does not know yet).
pub fn device_name(conv: &Converter, dev: DevT) -> String {
    match conv.dev_label(dev) {
        "?" => dev.to_string(),
        name => name.to_string(),
    }
}

/// An I/O in flight at least this long counts in [`DeviceInFlight::slow`].
pub const SLOW_NS: u64 = 1_000_000_000;

/// The look at one device's I/Os in flight.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInFlight {
    /// The device.
    pub dev: DevT,
    /// Its I/Os in flight that the look saw (those started at least the look's minimum age
    /// before it).
    pub ios: u64,
    /// Of them, those in flight for [`SLOW_NS`] or more.
    pub slow: u64,
    /// How long the oldest has been in flight (ns).
    pub oldest_ns: u64,
}

/// One I/O the look saw in flight, and whose it is (for a sink that shows some only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlightIo {
    /// Its device.
    pub dev: DevT,
    /// How long it has been in flight (ns).
    pub age_ns: u64,
    /// Its cgroup (v2 id).
    pub cgroup_id: u64,
}

/// What one look saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InFlightLook {
    /// When it looked (CLOCK_MONOTONIC, ns).
    pub at_ns: u64,
    /// The I/Os it saw in flight, stale entries left out.
    pub ios: Vec<InFlightIo>,
    /// Read and write entries left out because their device's kernel count said nothing
    /// was in flight: completions the recorder missed.
    pub stale: u64,
}

impl InFlightLook {
    /// Per device, by device number: how many of `ios` the keep function wants, how many
    /// of them are slow, and the oldest's age.
    pub fn by_device(&self, mut keep: impl FnMut(&InFlightIo) -> bool) -> Vec<DeviceInFlight> {
        let mut out: Vec<DeviceInFlight> = Vec::new();
        for io in self.ios.iter().filter(|io| keep(io)) {
            let d = match out.iter_mut().find(|d| d.dev == io.dev) {
                Some(d) => d,
                None => {
                    out.push(DeviceInFlight {
                        dev: io.dev,
                        ..DeviceInFlight::default()
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            d.ios += 1;
            d.slow += u64::from(io.age_ns >= SLOW_NS);
            d.oldest_ns = d.oldest_ns.max(io.age_ns);
        }
        out.sort_by_key(|d| d.dev);
        out
    }

    /// The devices with I/O the keep function wants in flight for [`SLOW_NS`] or more,
    /// named ([`device_name`]): what [`slow_text`] shows.
    pub fn slow_devices(
        &self,
        conv: &Converter,
        mut keep: impl FnMut(&InFlightIo) -> bool,
    ) -> Vec<(String, DeviceInFlight)> {
        self.by_device(|io| io.age_ns >= SLOW_NS && keep(io))
            .into_iter()
            .map(|d| (device_name(conv, d.dev), d))
            .collect()
    }
}

/// The devices with I/O in flight for a while (`(name, figures)`) as text, the longest
/// waiting first: `sdb 3 I/Os (oldest 42.5 s), sda 1 I/O (oldest 1.2 s)` (`top`'s line, the
/// service's status).
pub fn slow_text(devs: &[(String, DeviceInFlight)]) -> String {
    let mut devs: Vec<&(String, DeviceInFlight)> = devs.iter().collect();
    devs.sort_by(|a, b| b.1.oldest_ns.cmp(&a.1.oldest_ns).then(a.0.cmp(&b.0)));
    let parts: Vec<String> = devs
        .iter()
        .map(|(name, d)| {
            format!(
                "{name} {} I/O{} (oldest {:.1} s)",
                d.slow,
                if d.slow == 1 { "" } else { "s" },
                d.oldest_ns as f64 / 1e9
            )
        })
        .collect();
    parts.join(", ")
}

/// Which of the kernel's counts of I/Os in flight to believe: a request-based device's always
/// (the block layer's own, its started requests); a bio-based device's, its driver's own
/// accounting, only once it has shown more than 0 (5.10's md counts I/Os done and never those
/// in flight: its 0 says nothing).
#[derive(Clone, Debug, Default)]
pub struct Believed {
    shown: std::collections::HashSet<u32>,
}

impl Believed {
    /// `count`, the kernel's count of `dev`'s I/Os in flight, if it is to be believed.
    pub fn count(&mut self, dev: DevT, bio_based: bool, count: Option<u64>) -> Option<u64> {
        let n = count?;
        if n > 0 {
            self.shown.insert(dev.0);
        }
        (!bio_based || self.shown.contains(&dev.0)).then_some(n)
    }
}

/// Keeps of `recs` (records of I/Os in flight, as if completing at `now_ns`) those the kernel
/// does not contradict, and says what they are. `kernel(dev, bio_based)`: the kernel's count
/// of dev's reads and writes in flight, None where it keeps none or it is not to be believed;
/// asked once per device.
pub fn look(
    recs: Vec<[u8; IO_EVENT_BYTES]>,
    now_ns: u64,
    mut kernel: impl FnMut(DevT, bool) -> Option<u64>,
) -> (Vec<[u8; IO_EVENT_BYTES]>, InFlightLook) {
    let mut counts: Vec<(DevT, Option<u64>)> = Vec::new();
    let mut out = InFlightLook {
        at_ns: now_ns,
        ..InFlightLook::default()
    };
    let mut kept = Vec::with_capacity(recs.len());
    for rec in recs {
        let Some(r) = IoEvent::parse(&rec) else {
            continue;
        };
        let dev = DevT(r.dev);
        let count = match counts.iter().find(|(d, _)| *d == dev) {
            Some(&(_, c)) => c,
            None => {
                let c = kernel(dev, r.ioflags & crate::abi::io_flag::BIO_BASED != 0);
                counts.push((dev, c));
                c
            }
        };
        let read_or_write = r.op == Op::Read as u8 || r.op == Op::Write as u8;
        if read_or_write && count == Some(0) {
            out.stale += 1;
            continue;
        }
        out.ios.push(InFlightIo {
            dev,
            age_ns: now_ns.saturating_sub(r.start_ns),
            cgroup_id: r.cgroup_id,
        });
        kept.push(rec);
    }
    (kept, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of an I/O in flight on `dev`, started at `start_ns`.
    fn rec(dev: DevT, op: Op, start_ns: u64, cgroup_id: u64) -> [u8; IO_EVENT_BYTES] {
        rec_flags(dev, op, start_ns, cgroup_id, 0)
    }

    fn rec_flags(
        dev: DevT,
        op: Op,
        start_ns: u64,
        cgroup_id: u64,
        ioflags: u8,
    ) -> [u8; IO_EVENT_BYTES] {
        // the offsets of struct iodump_io_event (abi.rs pins them against iodump.h)
        let mut r = [0u8; IO_EVENT_BYTES];
        r[..2].copy_from_slice(&crate::abi::EV_IO.to_le_bytes());
        r[2] = op as u8;
        r[5] = ioflags;
        r[8..16].copy_from_slice(&start_ns.to_le_bytes());
        r[40..48].copy_from_slice(&cgroup_id.to_le_bytes());
        r[64..68].copy_from_slice(&dev.0.to_le_bytes());
        r[68..72].copy_from_slice(&4096u32.to_le_bytes());
        let e = IoEvent::parse(&r).unwrap();
        assert_eq!(
            (e.op, e.ioflags, e.start_ns, e.cgroup_id, e.dev),
            (op as u8, ioflags, start_ns, cgroup_id, dev.0)
        );
        r
    }

    #[test]
    fn entries_the_kernel_contradicts_are_stale_and_the_rest_summed_per_device() {
        let (busy, idle, silent) = (DevT::new(8, 0), DevT::new(7, 0), DevT::new(252, 0));
        let now = 10 * SLOW_NS;
        let bio = crate::abi::io_flag::BIO_BASED;
        let recs = vec![
            rec(busy, Op::Write, now - 3 * SLOW_NS, 1),
            rec(busy, Op::Read, now - SLOW_NS / 2, 2),
            rec(idle, Op::Read, now - 5 * SLOW_NS, 1), // completion missed
            rec(idle, Op::Write, now - 5 * SLOW_NS, 1), // completion missed
            rec(idle, Op::Flush, now - 2 * SLOW_NS, 1), // the kernel does not count flushes
            rec_flags(silent, Op::Write, now - 4 * SLOW_NS, 1, bio), // a count not believed
        ];
        let mut asked = Vec::new();
        let (kept, look) = look(recs, now, |d, bio_based| {
            asked.push((d, bio_based));
            match d {
                d if d == busy => Some(2),
                d if d == idle => Some(0),
                _ => None,
            }
        });
        assert_eq!(
            asked,
            [(busy, false), (idle, false), (silent, true)],
            "once per device, saying whether it is bio-based"
        );
        assert_eq!(kept.len(), 4);
        assert_eq!(look.stale, 2);
        assert_eq!(look.at_ns, now);
        let all = look.by_device(|_| true);
        assert_eq!(
            all,
            [
                DeviceInFlight {
                    dev: idle,
                    ios: 1,
                    slow: 1,
                    oldest_ns: 2 * SLOW_NS
                },
                DeviceInFlight {
                    dev: busy,
                    ios: 2,
                    slow: 1,
                    oldest_ns: 3 * SLOW_NS
                },
                DeviceInFlight {
                    dev: silent,
                    ios: 1,
                    slow: 1,
                    oldest_ns: 4 * SLOW_NS
                },
            ]
        );
        // a sink that shows one cgroup's I/O only
        let one = look.by_device(|io| io.cgroup_id == 2);
        assert_eq!(
            one,
            [DeviceInFlight {
                dev: busy,
                ios: 1,
                slow: 0,
                oldest_ns: SLOW_NS / 2
            }]
        );
    }

    #[test]
    fn a_bio_based_count_is_believed_once_it_has_shown_more_than_zero() {
        let mut b = Believed::default();
        let (md, sda) = (DevT::new(9, 127), DevT::new(8, 0));
        assert_eq!(
            b.count(md, true, Some(0)),
            None,
            "never shown more: not believed"
        );
        assert_eq!(b.count(md, true, None), None);
        assert_eq!(b.count(md, true, Some(2)), Some(2));
        assert_eq!(b.count(md, true, Some(0)), Some(0), "believed from then on");
        assert_eq!(
            b.count(sda, false, Some(0)),
            Some(0),
            "request-based: always"
        );
        assert_eq!(b.count(sda, false, None), None);
    }

    #[test]
    fn slow_devices_read_longest_first() {
        let d = |n, oldest_ns| DeviceInFlight {
            dev: DevT::new(8, 0),
            ios: n,
            slow: n,
            oldest_ns,
        };
        let devs = [
            ("sda".to_string(), d(1, 1_240_000_000)),
            ("sdb".to_string(), d(3, 42_500_000_000)),
        ];
        assert_eq!(
            slow_text(&devs),
            "sdb 3 I/Os (oldest 42.5 s), sda 1 I/O (oldest 1.2 s)"
        );
        assert_eq!(slow_text(&[]), "");
    }

    #[test]
    fn unreadable_records_are_skipped() {
        let (kept, look) = look(vec![[0u8; IO_EVENT_BYTES]], 5, |_, _| Some(1));
        assert!(kept.is_empty());
        assert_eq!(
            look,
            InFlightLook {
                at_ns: 5,
                ..InFlightLook::default()
            }
        );
    }
}
