//! Time: when I/Os are submitted (Poisson arrivals with bursts and idle gaps), when events are
//! lost, and how long each I/O takes (the device's log-normal service time with a heavy tail,
//! queueing, and the odd error).

use iodump_format::{Event, Flags, Loss, LossReason, Op};

use super::draft::Draft;
use super::Generator;
use crate::host::devices::{DeviceModel, DEVICE_MODELS};
use crate::math::exp;

/// The arrival process's state.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Normal,
    /// Arrivals five times as dense; slower devices and deeper queues.
    Burst,
}

impl Generator {
    /// A burst of events lost on one CPU; the clock jumps over the window.
    pub(super) fn loss(&mut self) -> Loss {
        let dur = self.rng.log_uniform(200_000.0, 20_000_000.0);
        let start_ns = self.clock_ns + 1;
        let end_ns = start_ns + dur as u64;
        let count = ((dur / self.mean_gap_ns / 4.0) as u64).clamp(1, 5_000);
        self.clock_ns = end_ns;
        self.next_loss_event = self
            .next_loss_event
            .saturating_add(self.rng.range(1_000_000, 5_000_000));
        Loss {
            cpu: self.rng.below(4) as u16,
            reason: LossReason::RingBufferFull,
            count,
            start_ns,
            end_ns,
        }
    }

    /// The submission time of the next I/O: Poisson arrivals, with bursts and idle gaps.
    #[inline]
    pub(super) fn next_ts(&mut self) -> u64 {
        if self.phase_events_left == 0 {
            let r = self.rng.f64();
            if self.phase == Phase::Normal && r < 0.25 {
                self.phase = Phase::Burst;
                self.phase_events_left = self.rng.range(300, 3_000);
            } else {
                self.phase = Phase::Normal;
                self.phase_events_left = self.rng.range(2_000, 40_000);
                if r > 0.88 {
                    self.clock_ns += self.rng.log_uniform(20e6, 2e9) as u64;
                }
            }
        }
        self.phase_events_left -= 1;
        let factor = if self.phase == Phase::Burst { 0.2 } else { 1.0 };
        self.clock_ns += (self.rng.exp1() * self.mean_gap_ns * factor) as u64;
        self.clock_ns
    }

    /// The event of draft `d` submitted at `ts`: timed on its device, attributed to its
    /// thread and a CPU.
    pub(super) fn timed_event(&mut self, d: &Draft, ts: u64) -> Event {
        let dev = self.files[d.file as usize].dev as usize;
        let model = &DEVICE_MODELS[dev];
        let burst = self.phase == Phase::Burst;
        let fua = d.flags.contains(Flags::FUA);
        let median_ns = model.median_ns(d.op, d.bytes, d.seq, fua);
        let (mut device_ns, tail) = self.service_ns(model, median_ns, burst);
        let queue_ns = if self.devices[dev].bio_based {
            None
        } else {
            Some(self.queue_ns(model, burst, tail))
        };
        let mut error = 0;
        if self.error_probability > 0.0
            && self.rng.chance(self.error_probability)
            && matches!(d.op, Op::Read | Op::Write)
        {
            error = 5;
            device_ns = device_ns * 20.0 + 30e6;
        }
        let latency_ns = device_ns as u64 + 1 + queue_ns.unwrap_or(0);
        let th = &self.threads[d.thread as usize];
        let cpu_r = self.rng.next_u64();
        let cpu = if cpu_r & 7 != 0 {
            (th.tid % 4) as u16
        } else {
            ((cpu_r >> 8) % 4) as u16
        };
        Event {
            timestamp_ns: ts,
            dev: self.devices[dev].dev,
            sector: d.sector,
            bytes: d.bytes,
            op: d.op,
            flags: d.flags,
            pid: th.pid,
            tid: th.tid,
            path_id: d.file + 1,
            queue_ns,
            latency_ns,
            error,
            cpu,
            syscall: d.syscall,
            dirtier_pid: d.dirtier.map(|t| self.threads[t as usize].pid),
            cgroup_id: th.cgroup_id,
            upper: None,
        }
    }

    /// The device's service time around `median_ns` (1.4 times longer in bursts; 0.5 % of
    /// I/Os 10–100× slower: GC, media retries, firmware hiccups), and the random word that
    /// decided the tail.
    fn service_ns(&mut self, model: &DeviceModel, median_ns: f64, burst: bool) -> (f64, u64) {
        let mut device_ns = median_ns * exp(model.sigma * self.rng.normal());
        if burst {
            device_ns *= 1.4;
        }
        let tail = self.rng.next_u64();
        if tail < u64::MAX / 200 {
            device_ns *= self.rng.log_uniform(10.0, 100.0);
        }
        (device_ns, tail)
    }

    /// Time queued before dispatch on a request-based device (deep in bursts; 10–100× longer
    /// when the low bits of `tail` say so).
    fn queue_ns(&mut self, model: &DeviceModel, burst: bool, tail: u64) -> u64 {
        let med = 2_600.0 * model.queue_factor * if burst { 14.0 } else { 1.0 };
        let mut q = med * exp(0.7 * self.rng.normal());
        if tail & 0xFFF < 8 {
            q *= self.rng.log_uniform(10.0, 100.0);
        }
        q as u64 + 300
    }
}
