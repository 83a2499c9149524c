//! Synthetic block-I/O traces: deterministic, realistic workloads generated without root.
//!
//! This module owns the synthetic trace generator used by tests and benchmarks: the host it
//! pretends to trace (an NVMe disk, a SATA disk, a virtio disk and a zram swap device; mysqld,
//! postgres, fio, dd, tar, rsync, java, kernel threads…; thousands of files, each with an inode
//! and a contiguous extent on its partition), the [`Workload`]s, and [`generate`], which streams
//! a trace to a [`SynthSink`] in timestamp order using O(files) memory and no allocation per
//! event. The same [`SynthParams`] always produce the same sequence of calls, on every
//! platform: randomness comes from a private xoshiro256** generator seeded with SplitMix64, and
//! `exp`/`ln` are computed here from basic IEEE-754 operations rather than taken from libm.

use crate::event::*;

/// A synthetic workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// fio-like 4 KiB random reads (`O_DIRECT`, libaio / io_uring / psync) over a few large
    /// files, on top of a background of other processes touching thousands of files.
    RandRead,
    /// Large sequential writes (128 KiB–1 MiB) by dd, fio, tar|zstd, pg_basebackup, rsync and
    /// cp as interleaved streams, direct or through writeback, with journal commits on fsync.
    SeqWrite,
    /// A mysqld-like OLTP server: 16 KiB random page reads and flushes, doublewrite, redo and
    /// binlog with fsync, jbd2 journal, metadata reads and cache flushes.
    Oltp,
    /// A busy general-purpose host: a bit of everything, plus readahead, page faults, swap,
    /// discards and (rarely) I/O errors.
    Mixed,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 4] = [
        Workload::RandRead,
        Workload::SeqWrite,
        Workload::Oltp,
        Workload::Mixed,
    ];

    /// Looks a workload up by its [`name`](Workload::name).
    pub fn from_name(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The workload's name: `randread`, `seqwrite`, `oltp` or `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::RandRead => "randread",
            Workload::SeqWrite => "seqwrite",
            Workload::Oltp => "oltp",
            Workload::Mixed => "mixed",
        }
    }

    /// Mean rate of I/Os per second outside bursts and idle gaps.
    fn iops(self) -> f64 {
        match self {
            Workload::RandRead => 150_000.0,
            Workload::SeqWrite => 3_000.0,
            Workload::Oltp => 20_000.0,
            Workload::Mixed => 10_000.0,
        }
    }

    /// Whether the workload produces loss records.
    fn has_losses(self) -> bool {
        matches!(self, Workload::RandRead | Workload::Mixed)
    }
}

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct SynthParams {
    /// Exact number of events to deliver.
    pub events: u64,
    /// The workload.
    pub workload: Workload,
    /// Seed: the same parameters always give the same trace.
    pub seed: u64,
}

/// Receives the generated trace in order. Table entries (device, process, path) are always
/// delivered before the first event that references them.
pub trait SynthSink {
    /// What the sink can fail with; the first error stops generation and is returned.
    type Error;
    /// A device (all devices are delivered first; whole disks before their partitions).
    fn device(&mut self, d: &Device) -> Result<(), Self::Error>;
    /// A thread, delivered just before the first event submitted by it, or the first event
    /// whose `dirtier_pid` it is the dirtying thread for (so every `pid` and `dirtier_pid` of an
    /// event is the `pid` of a delivered thread).
    fn process(&mut self, p: &Process) -> Result<(), Self::Error>;
    /// A path table entry, delivered just before the first event that references it.
    fn path(&mut self, p: &PathEntry) -> Result<(), Self::Error>;
    /// An event; events come in non-decreasing `timestamp_ns` order.
    fn event(&mut self, e: &Event) -> Result<(), Self::Error>;
    /// A loss record; its window lies between the timestamps of the events around it (events
    /// lost in it are not delivered, so the trace has a gap there).
    fn loss(&mut self, l: &Loss) -> Result<(), Self::Error>;
}

/// What [`generate`] delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SynthSummary {
    /// Events delivered (always `params.events`).
    pub events: u64,
    /// Sum of the counts of the loss records delivered.
    pub lost_events: u64,
    /// Devices delivered.
    pub devices: u64,
    /// Processes (threads) delivered.
    pub processes: u64,
    /// Path table entries delivered.
    pub paths: u64,
    /// Timestamp of the first event (0 when there is none).
    pub first_timestamp_ns: u64,
    /// Timestamp of the last event (0 when there is none).
    pub last_timestamp_ns: u64,
}

/// `CLOCK_MONOTONIC` at the header's wall-clock instant.
const MONO_BASE_NS: u64 = 1_000_000_000_000;
/// 2026-01-15T10:00:00Z, in ns since the epoch.
const WALL_BASE_NS: i64 = 1_768_471_200 * 1_000_000_000;
/// The synthetic host's kernel release.
const KERNEL_RELEASE: &str = "6.18.0-synth";

/// The header of a synthetic trace: fixed apart from the workload, the parameters and a
/// seed-dependent offset (under an hour) of the wall clock.
pub fn header(params: &SynthParams) -> Header {
    let name = params.workload.name();
    Header {
        wall_clock_ns: WALL_BASE_NS + (params.seed % 3600) as i64 * 1_000_000_000,
        monotonic_ns: MONO_BASE_NS,
        hostname: format!("synth-{name}"),
        kernel_release: KERNEL_RELEASE.to_string(),
        tool_version: format!("iodump {} synth", env!("CARGO_PKG_VERSION")),
        recorder_argv: [
            "iodump",
            "synth",
            "--workload",
            name,
            "--events",
            &params.events.to_string(),
            "--seed",
            &params.seed.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        command_argv: None,
        metadata: vec![
            ("workload".to_string(), name.to_string()),
            ("seed".to_string(), params.seed.to_string()),
            ("events".to_string(), params.events.to_string()),
            ("synthetic".to_string(), "true".to_string()),
        ],
    }
}

/// Generates the trace described by `params` into `sink`: all devices first, then exactly
/// `params.events` events in non-decreasing timestamp order, each preceded by the table
/// entries it is the first to reference, with loss records (randread and mixed only) in
/// between (the first after 50k–150k events, then every 1–5M). Stops at the sink's first
/// error. The calls for `n` events are a prefix of those for more events with the same
/// workload and seed.
pub fn generate<S: SynthSink>(
    params: &SynthParams,
    sink: &mut S,
) -> Result<SynthSummary, S::Error> {
    Gen::new(params).run(params.events, sink)
}

// ---------------------------------------------------------------------------------------------
// Random numbers.

/// xoshiro256** seeded through SplitMix64.
#[derive(Clone)]
struct Rng {
    s: [u64; 4],
}

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    #[inline]
    fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (0 when n is 0).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [lo, hi].
    #[inline]
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    #[inline]
    fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    /// Approximately standard normal (Irwin–Hall of four 16-bit uniforms; |z| < 3.47).
    #[inline]
    fn normal(&mut self) -> f64 {
        let r = self.next_u64();
        let s = (r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48);
        (s as f64 * (1.0 / 65536.0) - 2.0) * 1.732_050_807_568_877_2
    }

    /// Exponential with mean 1.
    #[inline]
    fn exp1(&mut self) -> f64 {
        -ln(1.0 - self.f64())
    }

    /// Log-uniform in [lo, hi).
    #[inline]
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo * exp(ln(hi / lo) * self.f64())
    }

    /// A power-of-two multiple of `min` not above `max`, each doubling with probability 1/2.
    #[inline]
    fn pow2(&mut self, min: u32, max: u32) -> u32 {
        let steps = self.next_u64().trailing_ones();
        let mut p = min;
        for _ in 0..steps {
            if p * 2 > max {
                break;
            }
            p *= 2;
        }
        p
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    fn hex(&mut self, n: usize) -> String {
        const H: &[u8; 16] = b"0123456789abcdef";
        (0..n).map(|_| H[self.below(16) as usize] as char).collect()
    }
}

// Portable, fast exp and ln. `f64::exp` and `f64::ln` come from the platform's C library,
// whose last bits differ between implementations; these use only basic IEEE-754 operations
// (and tables computed by the compiler from series), so traces are identical everywhere.

/// Adds and subtracts 1.5 * 2^52: rounds to the nearest integer (|x| < 2^51).
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;

/// e^x by its Taylor series, for |x| <= 1 (compile time only).
const fn exp_series(x: f64) -> f64 {
    let mut sum = 1.0;
    let mut term = 1.0;
    let mut k = 1;
    while k < 30 {
        term = term * x / k as f64;
        sum += term;
        k += 1;
    }
    sum
}

/// ln(y) for y in [0.5, 2] by the atanh series (compile time only).
const fn ln_series(y: f64) -> f64 {
    let s = (y - 1.0) / (y + 1.0);
    let s2 = s * s;
    let mut pow = s;
    let mut sum = 0.0;
    let mut k = 0;
    while k < 40 {
        sum += pow / (2 * k + 1) as f64;
        pow *= s2;
        k += 1;
    }
    2.0 * sum
}

/// 2^(j/64), j in 0..64.
const EXP2_64: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut j = 0;
    while j < 64 {
        t[j] = exp_series(j as f64 * std::f64::consts::LN_2 / 64.0);
        j += 1;
    }
    t
};

/// For i in 0..128: an approximation c of 1/(1 + (i + 0.5)/128), and -ln(c) for exactly
/// that c.
const LN_TABLE: [(f64, f64); 128] = {
    let mut t = [(0.0, 0.0); 128];
    let mut i = 0;
    while i < 128 {
        let c = 1.0 / (1.0 + (i as f64 + 0.5) / 128.0);
        t[i] = (c, -ln_series(c));
        i += 1;
    }
    t
};

/// e^x, relative error below 1e-13; `x` is clamped to ±700.
#[inline]
fn exp(x: f64) -> f64 {
    const LN2_64_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000) / 64.0;
    const LN2_64_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76) / 64.0;
    let x = x.clamp(-700.0, 700.0);
    let k = (x * (64.0 * std::f64::consts::LOG2_E) + ROUND_MAGIC) - ROUND_MAGIC;
    let r = (x - k * LN2_64_HI) - k * LN2_64_LO;
    let k = k as i64;
    // |r| <= ln(2)/128.
    let r2 = r * r;
    let p = 1.0 + r + r2 * (0.5 + r * (1.0 / 6.0) + r2 * (1.0 / 24.0 + r * (1.0 / 120.0)));
    let scale = f64::from_bits((((k >> 6) + 1023) as u64) << 52);
    scale * EXP2_64[(k & 63) as usize] * p
}

/// The natural logarithm of a positive, normal `x`, absolute error below 1e-14.
#[inline]
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    let (c, ln_m_over) = LN_TABLE[((bits >> 45) & 127) as usize];
    // m * c is within 1/256 of 1.
    let t = m * c - 1.0;
    let t2 = t * t;
    let log1p = t - t2 * (0.5 - t * (1.0 / 3.0) + t2 * (0.25 - t * 0.2));
    e as f64 * std::f64::consts::LN_2 + ln_m_over + log1p
}

// ---------------------------------------------------------------------------------------------
// The host: devices and their latency models.

/// Device indices (nvme0n1 itself, index 0, carries no filesystem).
const D_BOOT: usize = 1;
const D_ROOT: usize = 2;
const D_SDA: usize = 3;
const D_BACKUP: usize = 4;
const D_VDA: usize = 5;
const D_ZRAM: usize = 6;
const N_DEV: usize = 7;

/// Size of each device in 512-byte sectors.
const DEV_SECTORS: [u64; N_DEV] = [
    3_907_029_168,
    2_097_152,
    3_904_927_744,
    7_814_037_168,
    7_814_033_408,
    536_870_912,
    16_777_216,
];

fn devices() -> Vec<Device> {
    let dev = |maj, min, name: &str, part: Option<DevT>, ss, start, bio| Device {
        dev: DevT::new(maj, min),
        name: name.to_string(),
        partition_of: part,
        sector_size: ss,
        start_sector: start,
        bio_based: bio,
    };
    let nvme = Some(DevT::new(259, 0));
    let sda = Some(DevT::new(8, 0));
    vec![
        dev(259, 0, "nvme0n1", None, 4096, 0, false),
        dev(259, 1, "nvme0n1p1", nvme, 4096, 2048, false),
        dev(259, 2, "nvme0n1p2", nvme, 4096, 2_099_200, false),
        dev(8, 0, "sda", None, 512, 0, false),
        dev(8, 1, "sda1", sda, 512, 2048, false),
        dev(254, 0, "vda", None, 512, 0, false),
        dev(252, 0, "zram0", None, 4096, 0, true),
    ]
}

/// Service-time model of a device: medians in ns, log-normal spread.
#[derive(Clone, Copy)]
struct DevModel {
    read_ns: f64,
    seq_read_ns: f64,
    write_ns: f64,
    seq_write_ns: f64,
    read_ns_per_byte: f64,
    write_ns_per_byte: f64,
    flush_ns: f64,
    discard_ns: f64,
    discard_ns_per_byte: f64,
    sigma: f64,
    /// Queueing multiplier (deep queues on slow disks).
    queue_mult: f64,
}

/// A fast NVMe SSD.
const NVME: DevModel = DevModel {
    read_ns: 96_000.0,
    seq_read_ns: 75_000.0,
    write_ns: 26_000.0,
    seq_write_ns: 22_000.0,
    read_ns_per_byte: 0.17,
    write_ns_per_byte: 0.31,
    flush_ns: 750_000.0,
    discard_ns: 160_000.0,
    discard_ns_per_byte: 0.0008,
    sigma: 0.2,
    queue_mult: 1.0,
};

/// A 7200 rpm SATA disk: seeks dominate random I/O.
const SATA_HDD: DevModel = DevModel {
    read_ns: 4_300_000.0,
    seq_read_ns: 420_000.0,
    write_ns: 3_100_000.0,
    seq_write_ns: 330_000.0,
    read_ns_per_byte: 5.2,
    write_ns_per_byte: 5.5,
    flush_ns: 12_000_000.0,
    discard_ns: 4_000_000.0,
    discard_ns_per_byte: 0.0,
    sigma: 0.33,
    queue_mult: 4.0,
};

/// A virtio-blk disk backed by the hypervisor's SSDs.
const VIRTIO: DevModel = DevModel {
    read_ns: 185_000.0,
    seq_read_ns: 150_000.0,
    write_ns: 230_000.0,
    seq_write_ns: 185_000.0,
    read_ns_per_byte: 0.8,
    write_ns_per_byte: 1.0,
    flush_ns: 1_300_000.0,
    discard_ns: 420_000.0,
    discard_ns_per_byte: 0.002,
    sigma: 0.3,
    queue_mult: 1.5,
};

/// zram: (de)compression in RAM.
const ZRAM: DevModel = DevModel {
    read_ns: 8_500.0,
    seq_read_ns: 8_500.0,
    write_ns: 12_500.0,
    seq_write_ns: 12_500.0,
    read_ns_per_byte: 0.5,
    write_ns_per_byte: 1.1,
    flush_ns: 3_000.0,
    discard_ns: 15_000.0,
    discard_ns_per_byte: 0.0,
    sigma: 0.25,
    queue_mult: 1.0,
};

const MODELS: [DevModel; N_DEV] = [NVME, NVME, NVME, SATA_HDD, SATA_HDD, VIRTIO, ZRAM];

// ---------------------------------------------------------------------------------------------
// The host: processes.

const CG_ROOT: u64 = 1;
const CG_JOURNALD: u64 = 5_127;
const CG_RSYSLOG: u64 = 5_391;
const CG_UDISKS: u64 = 5_846;
const CG_NGINX: u64 = 6_012;
const CG_MYSQL: u64 = 6_298;
const CG_POSTGRES: u64 = 6_517;
const CG_APP: u64 = 7_043;
const CG_SESSION: u64 = 91_247;
const CG_BACKUP: u64 = 104_833;
const CG_FSTRIM: u64 = 104_861;

/// A group of consecutive thread indices.
#[derive(Clone, Copy, Default)]
struct Grp {
    first: u16,
    n: u16,
}

/// Thread indices of the actors.
#[derive(Default)]
struct Ids {
    kswapd: u16,
    jbd2_root: u16,
    jbd2_vda: u16,
    xfsaild: u16,
    xfslog: u16,
    wb_root: u16,
    wb_backup: u16,
    wb_vda: u16,
    journald: u16,
    rsyslog: u16,
    udisksd: u16,
    nginx: Grp,
    mysqld: u16,
    my_conn: Grp,
    my_rd: Grp,
    my_wr: Grp,
    my_flush_co: u16,
    my_log_writer: u16,
    my_log_flush: u16,
    pg_postmaster: u16,
    pg_checkpointer: u16,
    pg_bgwriter: u16,
    pg_walwriter: u16,
    pg_backends: Grp,
    java: u16,
    java_workers: Grp,
    firefox: u16,
    fio_rr: [u16; 8],
    fio_seq: [u16; 2],
    dd: u16,
    tar: u16,
    zstd: u16,
    pg_basebackup: u16,
    rsync_sender: u16,
    rsync_receiver: u16,
    cp: u16,
    cat: u16,
    vim: u16,
    git: u16,
    code: u16,
    python3: u16,
    bash: u16,
    grep: u16,
    find: u16,
    fstrim: u16,
    blkid: u16,
}

/// The command line of a synthetic process, as `/proc/PID/cmdline` would show it (arguments
/// joined by spaces); `None` for kernel threads.
fn command_line(pid: u32) -> Option<String> {
    let pg = |role: &str| Some(format!("postgres: 16/main: {role}"));
    match pid {
        389 => Some("/usr/lib/systemd/systemd-journald".into()),
        812 => Some("/usr/sbin/rsyslogd -n -iNONE".into()),
        901 => Some("/usr/libexec/udisks2/udisksd".into()),
        1204 => Some("nginx: worker process".into()),
        1423 => Some("/usr/sbin/mysqld".into()),
        1502 => Some(
            "/usr/lib/postgresql/16/bin/postgres -D /var/lib/postgresql/16/main -c \
             config_file=/etc/postgresql/16/main/postgresql.conf"
                .into(),
        ),
        1510 => pg("checkpointer"),
        1511 => pg("background writer"),
        1512 => pg("walwriter"),
        1513 => pg("autovacuum launcher"),
        2101..=2300 if (pid - 2101).is_multiple_of(17) => pg("app shop [local] idle"),
        2287 => Some("java -Xmx4g -jar /opt/app/app.jar --server.port=8080".into()),
        25_100 => Some("/usr/lib/firefox/firefox -contentproc -isForBrowser".into()),
        26_001 => Some("/usr/share/code/code --unity-launch".into()),
        27_001 => Some("-bash".into()),
        28_110 => Some("vim notes.md".into()),
        30_211..=30_232 => Some(format!("fio --name=job{} jobs.fio", pid - 30_211)),
        30_301 => Some("dd if=/dev/zero of=/data/zero bs=1M count=4096 oflag=direct".into()),
        30_330 => Some("tar -cf - /var/lib/postgresql".into()),
        30_331 => Some("zstd -T0 -o /backup/pg.tar.zst".into()),
        30_402 => Some("pg_basebackup -D /backup/base -X stream".into()),
        30_510 => Some("rsync -a /srv/ backup:/srv/".into()),
        30_511 => Some("rsync --server -logDtpre.iLsfxCIvu . /srv/".into()),
        30_620 => Some("cp -r /srv/media /data/media".into()),
        30_701 => Some("cat /var/log/syslog".into()),
        30_780 => Some("git status".into()),
        30_820 => Some("python3 etl.py --day 2026-01-01".into()),
        30_850 => Some("grep -r TODO /home/dev/src".into()),
        30_870 => Some("find / -xdev -name *.conf".into()),
        30_901 => Some("/sbin/fstrim --listed-in /etc/fstab --verbose".into()),
        30_950 => Some("blkid -o udev -p /dev/sdb1".into()),
        _ => None,
    }
}

fn threads() -> (Vec<Process>, Ids) {
    let mut v: Vec<Process> = Vec::new();
    let mut add = |pid: u32, tid: u32, comm: &str, cg: u64| -> u16 {
        v.push(Process {
            tid,
            pid,
            comm: comm.as_bytes().to_vec(),
            cgroup_id: cg,
            args: command_line(pid).map(|a| a.into_bytes()),
        });
        (v.len() - 1) as u16
    };
    let mut ids = Ids {
        kswapd: add(98, 98, "kswapd0", CG_ROOT),
        xfslog: add(201, 201, "kworker/1:1H", CG_ROOT),
        // The kernel keeps 15 bytes of a comm: "jbd2/nvme0n1p2-8" is seen as "jbd2/nvme0n1p2-".
        jbd2_root: add(412, 412, "jbd2/nvme0n1p2-", CG_ROOT),
        jbd2_vda: add(731, 731, "jbd2/vda-8", CG_ROOT),
        xfsaild: add(755, 755, "xfsaild/sda1", CG_ROOT),
        wb_root: add(17_920, 17_920, "kworker/u8:0", CG_ROOT),
        wb_backup: add(18_233, 18_233, "kworker/u8:2", CG_ROOT),
        wb_vda: add(18_410, 18_410, "kworker/u8:5", CG_ROOT),
        journald: add(389, 389, "systemd-journal", CG_JOURNALD),
        ..Ids::default()
    };
    add(812, 812, "rsyslogd", CG_RSYSLOG);
    add(812, 843, "in:imuxsock", CG_RSYSLOG);
    ids.rsyslog = add(812, 845, "rs:main Q:Reg", CG_RSYSLOG);
    ids.udisksd = add(901, 901, "udisksd", CG_UDISKS);
    let first = add(1204, 1204, "nginx", CG_NGINX);
    for i in 0..4 {
        add(1204, 1205 + i, "nginx", CG_NGINX);
    }
    ids.nginx = Grp { first, n: 5 };
    // mysqld: one process, many named threads.
    ids.mysqld = add(1423, 1423, "mysqld", CG_MYSQL);
    ids.my_log_writer = add(1423, 1426, "ib_log_writer", CG_MYSQL);
    ids.my_log_flush = add(1423, 1427, "ib_log_flush", CG_MYSQL);
    add(1423, 1428, "ib_log_checkpt", CG_MYSQL);
    add(1423, 1429, "ib_srv_purge", CG_MYSQL);
    let first = add(1423, 1430, "ib_io_rd-1", CG_MYSQL);
    for i in 2..=4u32 {
        add(1423, 1429 + i, &format!("ib_io_rd-{i}"), CG_MYSQL);
    }
    ids.my_rd = Grp { first, n: 4 };
    let first = add(1423, 1434, "ib_io_wr-1", CG_MYSQL);
    for i in 2..=4u32 {
        add(1423, 1433 + i, &format!("ib_io_wr-{i}"), CG_MYSQL);
    }
    ids.my_wr = Grp { first, n: 4 };
    ids.my_flush_co = add(1423, 1438, "ib_pg_flush_co", CG_MYSQL);
    let first = add(1423, 1440, "mysqld", CG_MYSQL);
    for i in 1..24 {
        add(1423, 1440 + i * 3, "mysqld", CG_MYSQL);
    }
    ids.my_conn = Grp { first, n: 24 };
    // postgres: one process per backend.
    ids.pg_postmaster = add(1502, 1502, "postgres", CG_POSTGRES);
    ids.pg_checkpointer = add(1510, 1510, "postgres", CG_POSTGRES);
    ids.pg_bgwriter = add(1511, 1511, "postgres", CG_POSTGRES);
    ids.pg_walwriter = add(1512, 1512, "postgres", CG_POSTGRES);
    add(1513, 1513, "postgres", CG_POSTGRES);
    let first = add(2101, 2101, "postgres", CG_POSTGRES);
    for i in 1..8u32 {
        add(2101 + i * 17, 2101 + i * 17, "postgres", CG_POSTGRES);
    }
    ids.pg_backends = Grp { first, n: 8 };
    // A java service with named threads.
    ids.java = add(2287, 2287, "java", CG_APP);
    add(2287, 2295, "GC Thread#0", CG_APP);
    add(2287, 2299, "VM Thread", CG_APP);
    add(2287, 2301, "C2 CompilerThre", CG_APP);
    let first = add(2287, 2340, "http-nio-8080-e", CG_APP);
    for i in 1..8 {
        add(2287, 2340 + i, "http-nio-8080-e", CG_APP);
    }
    add(2287, 2360, "Lucene Merge Th", CG_APP);
    ids.java_workers = Grp { first, n: 9 };
    // An interactive session.
    ids.firefox = add(25_100, 25_131, "Cache2 I/O", CG_SESSION);
    ids.code = add(26_001, 26_001, "code", CG_SESSION);
    ids.bash = add(27_001, 27_001, "bash", CG_SESSION);
    ids.vim = add(28_110, 28_110, "vim", CG_SESSION);
    // fio: four forked jobs (libaio, io_uring) and four threads of the main process (psync).
    for j in 0..4u32 {
        ids.fio_rr[j as usize] = add(30_215 + j, 30_215 + j, "fio", CG_SESSION);
    }
    for j in 0..4u32 {
        ids.fio_rr[4 + j as usize] = add(30_211, 30_220 + j, "fio", CG_SESSION);
    }
    ids.fio_seq = [
        add(30_231, 30_231, "fio", CG_SESSION),
        add(30_232, 30_232, "fio", CG_SESSION),
    ];
    ids.dd = add(30_301, 30_301, "dd", CG_SESSION);
    ids.tar = add(30_330, 30_330, "tar", CG_BACKUP);
    ids.zstd = add(30_331, 30_331, "zstd", CG_BACKUP);
    ids.pg_basebackup = add(30_402, 30_402, "pg_basebackup", CG_BACKUP);
    ids.rsync_sender = add(30_510, 30_510, "rsync", CG_BACKUP);
    ids.rsync_receiver = add(30_511, 30_511, "rsync", CG_BACKUP);
    ids.cp = add(30_620, 30_620, "cp", CG_SESSION);
    ids.cat = add(30_701, 30_701, "cat", CG_SESSION);
    ids.git = add(30_780, 30_780, "git", CG_SESSION);
    ids.python3 = add(30_820, 30_820, "python3", CG_SESSION);
    ids.grep = add(30_850, 30_850, "grep", CG_SESSION);
    ids.find = add(30_870, 30_870, "find", CG_SESSION);
    ids.fstrim = add(30_901, 30_901, "fstrim", CG_FSTRIM);
    ids.blkid = add(30_950, 30_950, "blkid", CG_UDISKS);
    (v, ids)
}

// ---------------------------------------------------------------------------------------------
// The host: files.

/// What a file is, which decides who touches it and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Fio,
    MysqlTable,
    MysqlSys,
    Redo,
    Dblwr,
    Binlog,
    PgRel,
    PgWal,
    Home,
    SysLib,
    Log,
    JavaApp,
    Boot,
    Backup,
    Label,
}

/// Where a path table entry lives: its partition and extent, in 512-byte sectors relative to
/// the partition (a multiple of 8 long, starting on a multiple of 8).
#[derive(Clone, Copy)]
struct FileInfo {
    dev: u8,
    class: Class,
    start: u64,
    len: u64,
    /// The thread that usually dirties the file (logs), or [`NO_OWNER`].
    owner: u16,
}

const NO_OWNER: u16 = u16::MAX;

/// Per-filesystem extent and inode allocator.
struct FsAlloc {
    cursor: u64,
    size: u64,
    ino: u64,
}

impl FsAlloc {
    fn alloc(&mut self, rng: &mut Rng, bytes: u64) -> (u64, u64) {
        let len = (bytes.div_ceil(4096).max(1) * 8).min(self.size / 32 * 8);
        if self.cursor + len > self.size {
            self.cursor = rng.below(self.size / 64) & !7;
        }
        let start = self.cursor;
        let gap = if rng.chance(0.1) {
            rng.below(1 << 16)
        } else {
            rng.below(256)
        };
        self.cursor += len + gap * 8;
        (start, len)
    }
}

/// Popularity-ordered files: rank r is drawn with probability ∝ 1/(r+1).
struct Pool {
    files: Vec<u32>,
    ln_n1: f64,
}

impl Pool {
    fn new(mut files: Vec<u32>, rng: &mut Rng) -> Pool {
        assert!(!files.is_empty());
        rng.shuffle(&mut files);
        let ln_n1 = ln((files.len() + 1) as f64);
        Pool { files, ln_n1 }
    }

    #[inline]
    fn zipf(&self, rng: &mut Rng) -> u32 {
        let r = exp(rng.f64() * self.ln_n1) as usize;
        self.files[r.saturating_sub(1).min(self.files.len() - 1)]
    }
}

/// Labels (per filesystem) and notable files.
#[derive(Default)]
struct Special {
    meta: [u32; N_DEV],
    journal: [u32; N_DEV],
    unknown: [u32; N_DEV],
    swap: u32,
    raw_sda: u32,
    fio_rr: [u32; 8],
    fio_seq: [u32; 2],
    vm_image: u32,
    tarball: u32,
}

/// File lists the streams and pools are made of.
#[derive(Default)]
struct Lists {
    mysql_tables: Vec<u32>,
    mysql_sys: Vec<u32>,
    redo: Vec<u32>,
    dblwr: Vec<u32>,
    binlog: Vec<u32>,
    pg_rels: Vec<u32>,
    pg_wal: Vec<u32>,
    system: Vec<u32>,
    mapped: Vec<u32>,
    home: Vec<u32>,
    projects: Vec<u32>,
    pictures: Vec<u32>,
    readable: Vec<u32>,
    deleted_root: Vec<u32>,
    backup_pg: Vec<u32>,
    backup_rsync: Vec<u32>,
    import: Vec<u32>,
}

struct Builder {
    rng: Rng,
    fs: Vec<FsAlloc>,
    files: Vec<FileInfo>,
    paths: Vec<PathEntry>,
    sp: Special,
    ls: Lists,
}

impl Builder {
    fn new(seed: u64) -> Builder {
        let mut rng = Rng::new(seed ^ 0x5EED_7AB1_E5F1_1E5A);
        let fs = (0..N_DEV)
            .map(|d| FsAlloc {
                cursor: 2048 + rng.below(4096) * 8,
                size: DEV_SECTORS[d],
                ino: match d {
                    D_BACKUP => 1_073_741_952,
                    D_BOOT => 11,
                    _ => 131_073 + rng.below(100_000),
                },
            })
            .collect();
        Builder {
            rng,
            fs,
            files: Vec::new(),
            paths: Vec::new(),
            sp: Special::default(),
            ls: Lists::default(),
        }
    }

    fn push(&mut self, fi: FileInfo, path: Vec<u8>, inode: u64, kind: PathKind) -> u32 {
        let id = self.files.len() as u32;
        self.files.push(fi);
        self.paths.push(PathEntry {
            path_id: id + 1,
            dev: DevT::new(0, 0),
            inode,
            kind,
            truncated: false,
            deleted: false,
            path,
            // Files have a generation (any fixed value: synth reuses no inode).
            generation: (inode != 0).then(|| (inode as u32).wrapping_mul(0x9E37_79B9)),
        });
        id
    }

    /// Starts a new directory: inode numbers jump (ext4's Orlov allocator spreads
    /// directories over block groups; xfs over allocation groups).
    fn dir(&mut self, dev: usize) {
        let jump = if dev == D_BACKUP {
            (1 << 20) + self.rng.below(1 << 26)
        } else {
            200 + self.rng.below(30_000)
        };
        self.fs[dev].ino += jump;
    }

    fn file(&mut self, dev: usize, path: impl Into<Vec<u8>>, bytes: u64, class: Class) -> u32 {
        let (start, len) = self.fs[dev].alloc(&mut self.rng, bytes);
        self.fs[dev].ino += 1 + self.rng.below(3);
        let ino = self.fs[dev].ino;
        let fi = FileInfo {
            dev: dev as u8,
            class,
            start,
            len,
            owner: NO_OWNER,
        };
        self.push(fi, path.into(), ino, PathKind::File)
    }

    fn label(&mut self, dev: usize, name: &str, kind: PathKind, start: u64, len: u64) -> u32 {
        let fi = FileInfo {
            dev: dev as u8,
            class: Class::Label,
            start,
            len,
            owner: NO_OWNER,
        };
        self.push(fi, name.as_bytes().to_vec(), 0, kind)
    }

    /// A log-normal size in bytes, clamped.
    fn size(&mut self, median: f64, sigma: f64, min: u64, max: u64) -> u64 {
        ((median * exp(sigma * self.rng.normal())) as u64).clamp(min, max)
    }

    fn finish(mut self, devs: &[Device]) -> (Vec<FileInfo>, Vec<PathEntry>, Special, Lists) {
        for (fi, p) in self.files.iter().zip(self.paths.iter_mut()) {
            p.dev = devs[fi.dev as usize].dev;
        }
        (self.files, self.paths, self.sp, self.ls)
    }
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

const MYSQL_TABLES: [&str; 22] = [
    "orders",
    "order_items",
    "customers",
    "addresses",
    "products",
    "product_images",
    "inventory",
    "payments",
    "refunds",
    "shipments",
    "carts",
    "cart_items",
    "sessions",
    "users",
    "user_roles",
    "audit_log",
    "coupons",
    "reviews",
    "categories",
    "warehouses",
    "invoices",
    "tax_rates",
];

const PG_CATALOGS: [u32; 24] = [
    1247, 1249, 1255, 1259, 2600, 2601, 2602, 2603, 2604, 2605, 2606, 2607, 2608, 2609, 2610, 2612,
    2615, 2618, 2619, 2620, 2662, 2663, 2673, 2674,
];

const PROJECTS: [(&str, &str, &str); 5] = [
    ("iodump", "rs", "Cargo.toml"),
    ("webshop", "ts", "package.json"),
    ("ml-pipeline", "py", "pyproject.toml"),
    ("blog", "md", "config.toml"),
    ("infra", "tf", "versions.tf"),
];

const MODULES: [&str; 12] = [
    "core", "api", "storage", "util", "net", "cli", "config", "db", "auth", "metrics", "worker",
    "tests",
];

const WORDS: [&str; 32] = [
    "parser", "writer", "reader", "index", "cache", "server", "client", "types", "main", "lib",
    "handler", "router", "model", "schema", "queue", "session", "codec", "segment", "table",
    "stream", "buffer", "pool", "retry", "backoff", "hash", "encode", "decode", "format", "layout",
    "sink", "source", "event",
];

const DOCUMENTS: [&str; 14] = [
    "Quarterly Report Q4.pdf",
    "taxes 2025.ods",
    "sales,2025,final.csv",
    "Meeting notes, January.md",
    "CV - Alice Martin.pdf",
    "lease agreement (signed).pdf",
    "budget.xlsx",
    "todo.txt",
    "passport scan.jpg",
    "recipes/pasta, tomato & basil.md",
    "recipes/bread.md",
    "talks/io tracing 101.odp",
    "talks/notes.md",
    "insurance/claim 2025-11.pdf",
];

const THE_WALL: [&str; 26] = [
    "In the Flesh?",
    "The Thin Ice",
    "Another Brick in the Wall, Part 1",
    "The Happiest Days of Our Lives",
    "Another Brick in the Wall, Part 2",
    "Mother",
    "Goodbye Blue Sky",
    "Empty Spaces",
    "Young Lust",
    "One of My Turns",
    "Don't Leave Me Now",
    "Another Brick in the Wall, Part 3",
    "Goodbye Cruel World",
    "Hey You",
    "Is There Anybody Out There?",
    "Nobody Home",
    "Vera",
    "Bring the Boys Back Home",
    "Comfortably Numb",
    "The Show Must Go On",
    "In the Flesh",
    "Run Like Hell",
    "Waiting for the Worms",
    "Stop",
    "The Trial",
    "Outside the Wall",
];

const LIBS: [&str; 56] = [
    "libc.so.6",
    "libm.so.6",
    "libssl.so.3",
    "libcrypto.so.3",
    "libz.so.1.3",
    "libzstd.so.1.5.5",
    "libstdc++.so.6.0.33",
    "libgcc_s.so.1",
    "libsystemd.so.0.38.0",
    "libglib-2.0.so.0.8000.0",
    "libgio-2.0.so.0.8000.0",
    "libpython3.12.so.1.0",
    "libicuuc.so.74.2",
    "libicudata.so.74.2",
    "libicui18n.so.74.2",
    "libxml2.so.2.9.14",
    "libsqlite3.so.0.8.6",
    "libcurl.so.4.8.0",
    "libnghttp2.so.14.28.0",
    "libgnutls.so.30.37.1",
    "libkrb5.so.3.3",
    "libgssapi_krb5.so.2.2",
    "libpcre2-8.so.0.11.2",
    "libselinux.so.1",
    "libmount.so.1.1.0",
    "libblkid.so.1.1.0",
    "libudev.so.1.7.8",
    "libdbus-1.so.3.32.4",
    "libcap.so.2.66",
    "libaio.so.1t64.0.2",
    "liburing.so.2.5",
    "libnuma.so.1.0.0",
    "libtinfo.so.6.4",
    "libreadline.so.8.2",
    "libncursesw.so.6.4",
    "libffi.so.8.1.4",
    "libexpat.so.1.9.1",
    "libuuid.so.1.3.0",
    "liblzma.so.5.4.5",
    "libbz2.so.1.0.4",
    "libbrotlidec.so.1.1.0",
    "libjpeg.so.8.2.2",
    "libpng16.so.16.43.0",
    "libfreetype.so.6.20.1",
    "libfontconfig.so.1.12.1",
    "libX11.so.6.4.0",
    "libgtk-3.so.0.2409.32",
    "libLLVM.so.18.1",
    "libmysqlclient.so.21.2.40",
    "libpq.so.5.16",
    "libprotobuf.so.32.0.12",
    "libsnappy.so.1.1.10",
    "liblz4.so.1.9.4",
    "libevent-2.1.so.7.0.1",
    "libgmp.so.10.5.0",
    "libp11-kit.so.0.3.1",
];

const BINS: [&str; 40] = [
    "bash",
    "ls",
    "cat",
    "cp",
    "tar",
    "rsync",
    "python3.12",
    "perl",
    "git",
    "vim.basic",
    "ssh",
    "grep",
    "sed",
    "mawk",
    "find",
    "du",
    "df",
    "top",
    "htop",
    "curl",
    "wget",
    "gzip",
    "zstd",
    "xz",
    "make",
    "gcc-13",
    "ld.bfd",
    "node",
    "fio",
    "dd",
    "systemctl",
    "journalctl",
    "sudo",
    "less",
    "man",
    "dpkg",
    "apt",
    "strace",
    "iostat",
    "jq",
];

const PY_MODULES: [&str; 40] = [
    "os",
    "re",
    "io",
    "abc",
    "ast",
    "json/__init__",
    "json/decoder",
    "json/encoder",
    "typing",
    "functools",
    "collections/__init__",
    "enum",
    "pathlib",
    "subprocess",
    "threading",
    "logging/__init__",
    "argparse",
    "datetime",
    "socket",
    "ssl",
    "selectors",
    "shutil",
    "tempfile",
    "random",
    "hashlib",
    "base64",
    "struct",
    "copy",
    "inspect",
    "dis",
    "tokenize",
    "linecache",
    "traceback",
    "warnings",
    "weakref",
    "contextlib",
    "dataclasses",
    "email/parser",
    "http/client",
    "urllib/parse",
];

const PY_PACKAGES: [&str; 10] = [
    "requests", "urllib3", "yaml", "jinja2", "certifi", "idna", "six", "apt", "gi", "dbus",
];

const LOCALES: [&str; 16] = [
    "de", "fr", "es", "it", "pt_BR", "ru", "ja", "zh_CN", "ko", "nl", "pl", "sv", "cs", "tr", "uk",
    "fi",
];

const DOMAINS: [&str; 6] = ["coreutils", "libc", "tar", "grep", "bash", "apt"];

const JARS: [&str; 30] = [
    "spring-core-6.1.4.jar",
    "spring-beans-6.1.4.jar",
    "spring-context-6.1.4.jar",
    "spring-web-6.1.4.jar",
    "spring-webmvc-6.1.4.jar",
    "spring-boot-3.2.3.jar",
    "spring-boot-autoconfigure-3.2.3.jar",
    "jackson-databind-2.16.1.jar",
    "jackson-core-2.16.1.jar",
    "jackson-annotations-2.16.1.jar",
    "tomcat-embed-core-10.1.19.jar",
    "netty-buffer-4.1.107.Final.jar",
    "netty-codec-http-4.1.107.Final.jar",
    "netty-transport-4.1.107.Final.jar",
    "lucene-core-9.10.0.jar",
    "lucene-analysis-common-9.10.0.jar",
    "lucene-queryparser-9.10.0.jar",
    "lucene-backward-codecs-9.10.0.jar",
    "guava-33.0.0-jre.jar",
    "commons-lang3-3.14.0.jar",
    "commons-io-2.15.1.jar",
    "slf4j-api-2.0.12.jar",
    "logback-classic-1.4.14.jar",
    "logback-core-1.4.14.jar",
    "hibernate-core-6.4.4.Final.jar",
    "HikariCP-5.1.0.jar",
    "mysql-connector-j-8.3.0.jar",
    "postgresql-42.7.2.jar",
    "micrometer-core-1.12.3.jar",
    "app-2.14.0.jar",
];

const LUCENE_EXT: [&str; 12] = [
    "cfs", "cfe", "si", "fdt", "fdx", "tim", "tip", "doc", "pos", "dvd", "dvm", "nvd",
];

fn build_files(
    seed: u64,
    ids: &Ids,
    devs: &[Device],
) -> (Vec<FileInfo>, Vec<PathEntry>, Special, Lists) {
    let mut b = Builder::new(seed);

    // Labels. Metadata and unknown span their whole filesystem; journals are 1 GiB regions.
    for d in [D_BOOT, D_ROOT, D_BACKUP, D_VDA] {
        let size = DEV_SECTORS[d];
        b.sp.meta[d] = b.label(d, "[metadata]", PathKind::Metadata, 0, size / 8 * 8);
    }
    for d in [D_ROOT, D_BACKUP, D_VDA] {
        let (start, len) = b.fs[d].alloc(&mut b.rng, GIB);
        b.sp.journal[d] = b.label(d, "[journal]", PathKind::Journal, start, len);
        let size = DEV_SECTORS[d];
        b.sp.unknown[d] = b.label(d, "[unknown]", PathKind::Unknown, 0, size / 8 * 8);
    }
    b.sp.swap = b.label(D_ZRAM, "[swap]", PathKind::Swap, 0, DEV_SECTORS[D_ZRAM]);
    b.sp.raw_sda = b.label(
        D_SDA,
        "/dev/sda",
        PathKind::RawDevice,
        0,
        DEV_SECTORS[D_SDA] / 8 * 8,
    );

    // MySQL.
    b.dir(D_ROOT);
    for name in ["ibdata1", "mysql.ibd", "undo_001", "undo_002"] {
        let size = match name {
            "ibdata1" => 76 * MIB,
            "mysql.ibd" => 36 * MIB,
            _ => 512 * MIB,
        };
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/{name}"),
            size,
            Class::MysqlSys,
        );
        b.ls.mysql_sys.push(f);
    }
    for i in 0..2 {
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/#ib_16384_{i}.dblwr"),
            if i == 0 {
                192 * KIB * 64
            } else {
                8 * MIB + 384 * KIB
            },
            Class::Dblwr,
        );
        b.ls.dblwr.push(f);
    }
    b.dir(D_ROOT);
    for i in 1..=10 {
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/#innodb_temp/temp_{i}.ibt"),
            160 * KIB,
            Class::MysqlSys,
        );
        b.ls.mysql_sys.push(f);
    }
    b.dir(D_ROOT);
    let redo0 = 1184 + b.rng.below(4000);
    for i in 0..32 {
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/#innodb_redo/#ib_redo{}", redo0 + i),
            100 * MIB,
            Class::Redo,
        );
        b.ls.redo.push(f);
    }
    let binlog0 = 400 + b.rng.below(500);
    for i in 0..5 {
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/binlog.{:06}", binlog0 + i),
            GIB,
            Class::Binlog,
        );
        b.ls.binlog.push(f);
    }
    b.dir(D_ROOT);
    for t in MYSQL_TABLES {
        let size = b.size(300.0 * MIB as f64, 1.2, 112 * KIB, 40 * GIB);
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/shop/{t}.ibd"),
            size,
            Class::MysqlTable,
        );
        b.ls.mysql_tables.push(f);
    }
    for m in 1..=12 {
        let size = b.size(2.0 * GIB as f64, 0.3, 112 * KIB, 8 * GIB);
        let f = b.file(
            D_ROOT,
            format!("/var/lib/mysql/shop/orders#p#p2025{m:02}.ibd"),
            size,
            Class::MysqlTable,
        );
        b.ls.mysql_tables.push(f);
    }
    let mut tenant = 1000u64;
    for _ in 0..110 {
        tenant += b.rng.range(1, 6);
        b.dir(D_ROOT);
        for t in MYSQL_TABLES {
            let size = b.size(6.0 * MIB as f64, 1.3, 112 * KIB, 4 * GIB);
            let f = b.file(
                D_ROOT,
                format!("/var/lib/mysql/tenant_{tenant:04}/{t}.ibd"),
                size,
                Class::MysqlTable,
            );
            b.ls.mysql_tables.push(f);
        }
    }
    let tmp = format!(
        "/var/lib/mysql/#sql-ib{}-{}.ibd",
        1400 + b.rng.below(100),
        2_900_000_000 + b.rng.below(100_000_000)
    );
    let f = b.file(D_ROOT, tmp, 96 * MIB, Class::MysqlTable);
    b.paths[f as usize].deleted = true;
    b.ls.mysql_tables.push(f);
    b.ls.deleted_root.push(f);

    // PostgreSQL 15, database 16384.
    let pg = "/var/lib/postgresql/15/main";
    b.dir(D_ROOT);
    let mut relnodes: Vec<(u32, u64)> = Vec::new();
    for c in PG_CATALOGS {
        let size = b.size(200.0 * KIB as f64, 1.0, 8 * KIB, 64 * MIB);
        relnodes.push((c, size));
    }
    let mut node = 16_385u32;
    for _ in 0..260 {
        node += b.rng.range(1, 9) as u32;
        let size = b.size(2.0 * MIB as f64, 2.2, 8 * KIB, 6 * GIB);
        relnodes.push((node, size));
    }
    for (node, size) in relnodes {
        let mut left = size;
        let mut seg = 0;
        while left > 0 {
            let this = left.min(GIB);
            let name = if seg == 0 {
                format!("{pg}/base/16384/{node}")
            } else {
                format!("{pg}/base/16384/{node}.{seg}")
            };
            let f = b.file(D_ROOT, name, this, Class::PgRel);
            b.ls.pg_rels.push(f);
            left -= this;
            seg += 1;
        }
        if b.rng.chance(0.5) {
            let f = b.file(
                D_ROOT,
                format!("{pg}/base/16384/{node}_fsm"),
                24 * KIB,
                Class::PgRel,
            );
            b.ls.pg_rels.push(f);
            let f = b.file(
                D_ROOT,
                format!("{pg}/base/16384/{node}_vm"),
                8 * KIB,
                Class::PgRel,
            );
            b.ls.pg_rels.push(f);
        }
    }
    b.dir(D_ROOT);
    for name in [
        "global/1262",
        "global/1260",
        "global/pg_control",
        "pg_xact/0A1F",
    ] {
        let f = b.file(D_ROOT, format!("{pg}/{name}"), 256 * KIB, Class::PgRel);
        b.ls.pg_rels.push(f);
    }
    b.dir(D_ROOT);
    let wal_log = 0x2A + b.rng.below(16);
    let wal_seg = 0xC0 + b.rng.below(32);
    for i in 0..32 {
        let f = b.file(
            D_ROOT,
            format!("{pg}/pg_wal/{:08X}{:08X}{:08X}", 1, wal_log, wal_seg + i),
            16 * MIB,
            Class::PgWal,
        );
        b.ls.pg_wal.push(f);
    }

    // fio data files.
    b.dir(D_ROOT);
    for j in 0..8 {
        b.sp.fio_rr[j] = b.file(
            D_ROOT,
            format!("/data/fio/randread.{j}.0"),
            4 * GIB,
            Class::Fio,
        );
    }
    for j in 0..2 {
        b.sp.fio_seq[j] = b.file(
            D_ROOT,
            format!("/data/fio/seqwrite.{j}.0"),
            16 * GIB,
            Class::Fio,
        );
    }

    // Home directories.
    for (proj, ext, manifest) in PROJECTS {
        let base = format!("/home/alice/projects/{proj}");
        b.dir(D_ROOT);
        for name in [manifest, "README.md", ".gitignore", "LICENSE"] {
            let size = b.size(4.0 * KIB as f64, 0.8, 200, 64 * KIB);
            let f = b.file(D_ROOT, format!("{base}/{name}"), size, Class::Home);
            b.ls.projects.push(f);
        }
        for m in MODULES {
            b.dir(D_ROOT);
            let mut words = WORDS;
            b.rng.shuffle(&mut words);
            for w in &words[..10] {
                let size = b.size(9.0 * KIB as f64, 1.0, 300, 400 * KIB);
                let f = b.file(
                    D_ROOT,
                    format!("{base}/src/{m}/{w}.{ext}"),
                    size,
                    Class::Home,
                );
                b.ls.projects.push(f);
            }
        }
        b.dir(D_ROOT);
        for _ in 0..2 {
            let h = b.rng.hex(40);
            let size = b.size(60.0 * MIB as f64, 0.8, 2 * MIB, GIB);
            let f = b.file(
                D_ROOT,
                format!("{base}/.git/objects/pack/pack-{h}.pack"),
                size,
                Class::Home,
            );
            b.ls.projects.push(f);
            let f = b.file(
                D_ROOT,
                format!("{base}/.git/objects/pack/pack-{h}.idx"),
                size / 40,
                Class::Home,
            );
            b.ls.projects.push(f);
        }
        for name in ["index", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "packed-refs"] {
            let f = b.file(D_ROOT, format!("{base}/.git/{name}"), 64 * KIB, Class::Home);
            b.ls.projects.push(f);
        }
        for _ in 0..50 {
            let h = b.rng.hex(40);
            let size = b.size(3.0 * KIB as f64, 1.0, 100, 256 * KIB);
            let f = b.file(
                D_ROOT,
                format!("{base}/.git/objects/{}/{}", &h[..2], &h[2..]),
                size,
                Class::Home,
            );
            b.ls.projects.push(f);
        }
    }
    let f = b.file(
        D_ROOT,
        "…/node_modules/.pnpm/@babel+core@7.24.0/node_modules/@babel/core/lib/transformation/file/index.js",
        24 * KIB,
        Class::Home,
    );
    b.paths[f as usize].truncated = true;
    b.ls.projects.push(f);
    b.dir(D_ROOT);
    for i in 0..200 {
        let n = 1000 + i * 3 + b.rng.below(3);
        let size = b.size(3.5 * MIB as f64, 0.35, MIB, 12 * MIB);
        let f = b.file(
            D_ROOT,
            format!("/home/alice/Pictures/2025/IMG_{n:04}.jpg"),
            size,
            Class::Home,
        );
        b.ls.pictures.push(f);
    }
    b.dir(D_ROOT);
    let mut home: Vec<u32> = Vec::new();
    for d in DOCUMENTS {
        let size = b.size(300.0 * KIB as f64, 1.2, KIB, 40 * MIB);
        home.push(b.file(
            D_ROOT,
            format!("/home/alice/Documents/{d}"),
            size,
            Class::Home,
        ));
    }
    home.push(b.file(
        D_ROOT,
        "/home/alice/Downloads/ubuntu-24.04.1-desktop-amd64.iso",
        6 * GIB,
        Class::Home,
    ));
    home.push(b.file(
        D_ROOT,
        "/home/alice/Downloads/linux-6.18.tar.xz",
        146 * MIB,
        Class::Home,
    ));
    for name in [
        ".bashrc",
        ".bash_history",
        ".profile",
        ".gitconfig",
        ".viminfo",
    ] {
        home.push(b.file(D_ROOT, format!("/home/alice/{name}"), 12 * KIB, Class::Home));
    }
    b.dir(D_ROOT);
    for _ in 0..3 {
        let h = b.rng.hex(32);
        let f = b.file(
            D_ROOT,
            format!("/home/alice/.cache/thumbnails/large/{h}.png"),
            96 * KIB,
            Class::Home,
        );
        b.paths[f as usize].deleted = true;
        b.ls.deleted_root.push(f);
        home.push(f);
    }
    b.dir(D_ROOT);
    for (i, t) in THE_WALL.iter().enumerate() {
        let size = b.size(28.0 * MIB as f64, 0.4, 4 * MIB, 120 * MIB);
        home.push(b.file(
            D_ROOT,
            format!(
                "/home/bob/Music/Pink Floyd/The Wall (1979)/{:02} {t}.flac",
                i + 1
            ),
            size,
            Class::Home,
        ));
    }
    b.dir(D_ROOT);
    home.push(b.file(
        D_ROOT,
        b"/home/bob/old/r\xe9sum\xe9.txt".to_vec(),
        6 * KIB,
        Class::Home,
    ));
    home.push(b.file(
        D_ROOT,
        b"/home/bob/old/caf\xe9 menu.odt".to_vec(),
        40 * KIB,
        Class::Home,
    ));
    b.dir(D_ROOT);
    let profile = format!(
        "/home/bob/.mozilla/firefox/{}.default-release",
        b.rng.hex(8)
    );
    for name in [
        "places.sqlite",
        "places.sqlite-wal",
        "cookies.sqlite",
        "favicons.sqlite",
        "sessionstore.jsonlz4",
    ] {
        let f = b.file(D_ROOT, format!("{profile}/{name}"), 10 * MIB, Class::Home);
        b.files[f as usize].owner = ids.firefox;
        home.push(f);
    }
    b.dir(D_ROOT);
    for i in 0..320 {
        let h = b.rng.hex(40).to_uppercase();
        let size = b.size(40.0 * KIB as f64, 1.5, 512, 8 * MIB);
        let f = b.file(
            D_ROOT,
            format!("/home/bob/.cache/mozilla/firefox/cache2/entries/{h}"),
            size,
            Class::Home,
        );
        b.files[f as usize].owner = ids.firefox;
        if i % 160 == 7 {
            b.paths[f as usize].deleted = true;
            b.ls.deleted_root.push(f);
        }
        home.push(f);
    }
    b.ls.home = home;
    b.ls.home.extend_from_slice(&b.ls.projects);
    b.ls.home.extend_from_slice(&b.ls.pictures);

    // System files.
    let mut sys: Vec<u32> = Vec::new();
    b.dir(D_ROOT);
    for l in LIBS {
        let size = b.size(900.0 * KIB as f64, 1.2, 16 * KIB, 120 * MIB);
        let f = b.file(
            D_ROOT,
            format!("/usr/lib/x86_64-linux-gnu/{l}"),
            size,
            Class::SysLib,
        );
        b.ls.mapped.push(f);
        sys.push(f);
    }
    b.dir(D_ROOT);
    for x in BINS {
        let size = b.size(300.0 * KIB as f64, 1.0, 16 * KIB, 90 * MIB);
        let f = b.file(D_ROOT, format!("/usr/bin/{x}"), size, Class::SysLib);
        b.ls.mapped.push(f);
        sys.push(f);
    }
    for (path, size) in [
        ("/usr/sbin/mysqld", 68 * MIB),
        ("/usr/lib/postgresql/15/bin/postgres", 9 * MIB),
        ("/usr/libexec/gcc/x86_64-linux-gnu/13/cc1", 34 * MIB),
        ("/usr/lib/jvm/java-21-openjdk-amd64/lib/modules", 138 * MIB),
        (
            "/usr/lib/jvm/java-21-openjdk-amd64/lib/server/libjvm.so",
            22 * MIB,
        ),
        (
            "/usr/lib/jvm/java-21-openjdk-amd64/lib/libjava.so",
            200 * KIB,
        ),
        (
            "/usr/lib/jvm/java-21-openjdk-amd64/lib/libnio.so",
            100 * KIB,
        ),
        (
            "/usr/lib/jvm/java-21-openjdk-amd64/lib/libzip.so",
            100 * KIB,
        ),
        (
            "/usr/lib/jvm/java-21-openjdk-amd64/lib/libnet.so",
            120 * KIB,
        ),
        ("/usr/lib/jvm/java-21-openjdk-amd64/bin/java", 16 * KIB),
        ("/usr/lib/locale/locale-archive", 3 * MIB),
        ("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 240 * KIB),
    ] {
        let f = b.file(D_ROOT, path, size, Class::SysLib);
        b.ls.mapped.push(f);
        sys.push(f);
    }
    b.dir(D_ROOT);
    for m in PY_MODULES {
        let size = b.size(40.0 * KIB as f64, 0.9, 2 * KIB, 400 * KIB);
        sys.push(b.file(
            D_ROOT,
            format!("/usr/lib/python3.12/{m}.py"),
            size,
            Class::SysLib,
        ));
        let (dir, leaf) = match m.rsplit_once('/') {
            Some((d, l)) => (format!("/usr/lib/python3.12/{d}"), l),
            None => ("/usr/lib/python3.12".to_string(), m),
        };
        sys.push(b.file(
            D_ROOT,
            format!("{dir}/__pycache__/{leaf}.cpython-312.pyc"),
            size / 2 + 1024,
            Class::SysLib,
        ));
    }
    for p in PY_PACKAGES {
        b.dir(D_ROOT);
        let mut words = WORDS;
        b.rng.shuffle(&mut words);
        for w in std::iter::once("__init__").chain(words[..9].iter().copied()) {
            let size = b.size(12.0 * KIB as f64, 1.0, KIB, 300 * KIB);
            sys.push(b.file(
                D_ROOT,
                format!("/usr/lib/python3/dist-packages/{p}/{w}.py"),
                size,
                Class::SysLib,
            ));
        }
    }
    for l in LOCALES {
        b.dir(D_ROOT);
        for d in DOMAINS {
            let size = b.size(60.0 * KIB as f64, 0.7, 4 * KIB, 600 * KIB);
            sys.push(b.file(
                D_ROOT,
                format!("/usr/share/locale/{l}/LC_MESSAGES/{d}.mo"),
                size,
                Class::SysLib,
            ));
        }
    }
    b.dir(D_ROOT);
    for x in BINS {
        let size = b.size(6.0 * KIB as f64, 0.8, KIB, 100 * KIB);
        sys.push(b.file(
            D_ROOT,
            format!("/usr/share/man/man1/{x}.1.gz"),
            size,
            Class::SysLib,
        ));
    }
    b.dir(D_ROOT);
    for name in [
        "passwd",
        "group",
        "hosts",
        "resolv.conf",
        "nsswitch.conf",
        "ld.so.cache",
        "ssl/certs/ca-certificates.crt",
        "mysql/mysql.conf.d/mysqld.cnf",
        "postgresql/15/main/postgresql.conf",
        "nginx/nginx.conf",
        "nginx/sites-enabled/default",
        "systemd/journald.conf",
        "fstab",
        "sudoers",
        "services",
        "protocols",
    ] {
        sys.push(b.file(D_ROOT, format!("/etc/{name}"), 8 * KIB, Class::SysLib));
    }

    // Logs, each dirtied by its writer.
    b.dir(D_ROOT);
    let machine_id = b.rng.hex(32);
    let mut logs: Vec<(String, u16)> = vec![
        ("/var/log/syslog".into(), ids.rsyslog),
        ("/var/log/syslog.1".into(), ids.rsyslog),
        ("/var/log/auth.log".into(), ids.rsyslog),
        ("/var/log/kern.log".into(), ids.rsyslog),
        ("/var/log/dpkg.log".into(), ids.bash),
        ("/var/log/nginx/access.log".into(), ids.nginx.first + 1),
        ("/var/log/nginx/error.log".into(), ids.nginx.first + 2),
        ("/var/log/mysql/error.log".into(), ids.mysqld),
        (
            "/var/log/mysql/mysql-slow.log".into(),
            ids.my_conn.first + 5,
        ),
        (
            "/var/log/postgresql/postgresql-15-main.log".into(),
            ids.pg_postmaster,
        ),
        (
            format!("/var/log/journal/{machine_id}/system.journal"),
            ids.journald,
        ),
        (
            format!("/var/log/journal/{machine_id}/user-1000.journal"),
            ids.journald,
        ),
    ];
    for _ in 0..4 {
        let name = format!(
            "/var/log/journal/{machine_id}/system@{}-{:016x}-{:016x}.journal",
            b.rng.hex(32),
            0x61a2_0000_0000u64 + b.rng.below(1 << 40),
            0x0006_2f00_0000_0000u64 + b.rng.below(1 << 40)
        );
        logs.push((name, ids.journald));
    }
    for (name, owner) in logs {
        let size = b.size(64.0 * MIB as f64, 0.8, 4 * MIB, 512 * MIB);
        let f = b.file(D_ROOT, name, size, Class::Log);
        b.files[f as usize].owner = owner;
        sys.push(f);
    }
    let private = b.rng.hex(32);
    let f = b.file(
        D_ROOT,
        format!("/var/tmp/systemd-private-{private}-nginx.service-Xq3k9a/tmp/upload_0000000123"),
        2 * MIB,
        Class::Log,
    );
    b.files[f as usize].owner = ids.nginx.first + 3;
    b.paths[f as usize].deleted = true;
    b.ls.deleted_root.push(f);
    sys.push(f);

    // /boot.
    b.dir(D_BOOT);
    for (name, size) in [
        ("vmlinuz-6.18.0-synth", 15 * MIB),
        ("initrd.img-6.18.0-synth", 74 * MIB),
        ("System.map-6.18.0-synth", 9 * MIB),
        ("config-6.18.0-synth", 290 * KIB),
        ("grub/grub.cfg", 12 * KIB),
        ("grub/grubenv", 4 * KIB),
        ("grub/x86_64-efi/normal.mod", 60 * KIB),
        ("grub/fonts/unicode.pf2", 2 * MIB),
    ] {
        sys.push(b.file(D_BOOT, format!("/boot/{name}"), size, Class::Boot));
    }

    // The java service on vda.
    b.dir(D_VDA);
    for j in JARS {
        let size = b.size(1.5 * MIB as f64, 0.9, 40 * KIB, 30 * MIB);
        let f = b.file(D_VDA, format!("/srv/app/lib/{j}"), size, Class::JavaApp);
        b.ls.mapped.push(f);
        sys.push(f);
    }
    for i in 0..8 {
        let uuid = format!("{}-{}", b.rng.hex(10), b.rng.hex(11));
        for shard in 0..2 {
            b.dir(D_VDA);
            let mut seg = b.rng.range(40, 3000);
            for k in 0..24 {
                if k % LUCENE_EXT.len() == 0 {
                    seg += b.rng.range(1, 60);
                }
                let ext = LUCENE_EXT[k % LUCENE_EXT.len()];
                let size = b.size(20.0 * MIB as f64, 1.6, 4 * KIB, 5 * GIB);
                sys.push(b.file(
                    D_VDA,
                    format!(
                        "/srv/app/data/indices/{uuid}/{shard}/index/_{}.{ext}",
                        base36(seg)
                    ),
                    size,
                    Class::JavaApp,
                ));
            }
            let tlog = b.rng.range(100, 900);
            for t in 0..2 {
                sys.push(b.file(
                    D_VDA,
                    format!(
                        "/srv/app/data/indices/{uuid}/{shard}/translog/translog-{}.tlog",
                        tlog + t
                    ),
                    64 * MIB,
                    Class::JavaApp,
                ));
            }
        }
        if i == 0 {
            b.dir(D_VDA);
            for name in ["app.log", "gc.log", "access.log", "app-2026-01-14.log.gz"] {
                let f = b.file(
                    D_VDA,
                    format!("/srv/app/logs/{name}"),
                    50 * MIB,
                    Class::JavaApp,
                );
                b.files[f as usize].owner = ids.java;
                sys.push(f);
            }
        }
    }
    b.ls.system = sys.clone();
    b.ls.system.extend_from_slice(&b.ls.home);

    // What the copy and backup streams write.
    b.dir(D_VDA);
    let pics = b.ls.pictures.clone();
    for &p in &pics {
        let name = b.paths[p as usize].path.clone();
        let leaf = name.rsplit(|&c| c == b'/').next().unwrap_or(b"x").to_vec();
        let mut path = b"/srv/app/import/photos/".to_vec();
        path.extend_from_slice(&leaf);
        let f = b.file(D_VDA, path, b.files[p as usize].len * 512, Class::Backup);
        b.ls.import.push(f);
    }
    b.dir(D_BACKUP);
    b.sp.vm_image = b.file(
        D_BACKUP,
        "/srv/backup/images/vm-disk0.img",
        20 * GIB,
        Class::Backup,
    );
    b.sp.tarball = b.file(
        D_BACKUP,
        "/srv/backup/home-2026-01-15.tar.zst",
        40 * GIB,
        Class::Backup,
    );
    b.file(
        D_BACKUP,
        "/srv/backup/mysql/shop-2026-01-14.sql.gz",
        3 * GIB,
        Class::Backup,
    );
    let rels = b.ls.pg_rels.clone();
    let mut last_dir: Vec<u8> = Vec::new();
    for &r in &rels {
        let src = b.paths[r as usize].path.clone();
        let rel = &src[pg.len()..];
        let dir = rel[..rel.iter().rposition(|&c| c == b'/').unwrap_or(0)].to_vec();
        if dir != last_dir {
            b.dir(D_BACKUP);
            last_dir = dir;
        }
        let mut path = b"/srv/backup/pg/base_20260115".to_vec();
        path.extend_from_slice(rel);
        let f = b.file(D_BACKUP, path, b.files[r as usize].len * 512, Class::Backup);
        b.ls.backup_pg.push(f);
    }
    let projects = b.ls.projects.clone();
    for &p in &projects {
        let src = b.paths[p as usize].path.clone();
        let Some(rel) = src.strip_prefix(b"/home/alice/") else {
            continue;
        };
        let mut path = b"/srv/backup/rsync/alice/".to_vec();
        path.extend_from_slice(rel);
        let f = b.file(D_BACKUP, path, b.files[p as usize].len * 512, Class::Backup);
        b.ls.backup_rsync.push(f);
    }

    // What readers stream through: home, logs, a few big files.
    b.ls.readable = b.ls.home.clone();
    b.ls.readable.extend(
        sys.iter()
            .copied()
            .filter(|&f| b.files[f as usize].dev as usize == D_ROOT),
    );

    b.finish(devs)
}

fn base36(mut n: u64) -> String {
    const D: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(D[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The generator.

const SYNC: Flags = Flags::SYNC;
const SYNC_FUA: Flags = Flags(Flags::SYNC.0 | Flags::FUA.0);
const META_SYNC: Flags = Flags(Flags::META.0 | Flags::SYNC.0);
const COMMIT: Flags = Flags(Flags::META.0 | Flags::SYNC.0 | Flags::PREFLUSH.0 | Flags::FUA.0);
const PREFLUSH_SYNC: Flags = Flags(Flags::PREFLUSH.0 | Flags::SYNC.0);
const META_BG: Flags = Flags(Flags::META.0 | Flags::BACKGROUND.0);
const NONE: Flags = Flags(0);
const OPENAT: Syscall = Syscall(19);

/// An I/O being put together, before timing.
#[derive(Clone, Copy)]
struct Draft {
    thread: u16,
    file: u32,
    sector: u64,
    bytes: u32,
    op: Op,
    flags: Flags,
    syscall: Option<Syscall>,
    dirtier: Option<u16>,
    seq: bool,
}

impl Draft {
    fn new(
        thread: u16,
        file: u32,
        at: (u64, u32),
        op: Op,
        flags: Flags,
        syscall: Option<Syscall>,
    ) -> Draft {
        Draft {
            thread,
            file,
            sector: at.0,
            bytes: at.1,
            op,
            flags,
            syscall,
            dirtier: None,
            seq: false,
        }
    }
}

/// Who issues a stream's I/O.
#[derive(Clone, Copy)]
enum Mode {
    /// The writer itself, with this syscall and these flags.
    Direct {
        thread: Grp,
        syscall: Syscall,
        flags: Flags,
    },
    /// A flusher thread on behalf of the dirtier.
    Writeback { flusher: u16, dirtier: u16 },
    /// Readahead in the reader's context.
    Readahead { thread: u16 },
}

/// What to do after some chunks of a stream.
#[derive(Clone, Copy)]
enum SyncPolicy {
    Never,
    /// A cache flush by this thread every n chunks.
    FlushEvery {
        n: u32,
        thread: u16,
        syscall: Syscall,
    },
    /// A journal commit every n chunks.
    CommitEvery {
        n: u32,
    },
    /// A journal commit at the end of every file.
    CommitAtFileEnd,
}

/// A sequential stream through a list of files.
struct Stream {
    files: Vec<u32>,
    cur: usize,
    pos: u64,
    /// Chunk size range, in 4 KiB pages.
    min_pages: u32,
    max_pages: u32,
    mode: Mode,
    sync: SyncPolicy,
    chunks: u32,
}

const S_REDO: u8 = 0;
const S_DBLWR: u8 = 1;
const S_BINLOG: u8 = 2;
const S_WAL: u8 = 3;
const S_FIO_SEQ0: u8 = 4;
const S_FIO_SEQ1: u8 = 5;
const S_DD: u8 = 6;
const S_TAR: u8 = 7;
const S_BASEBACKUP: u8 = 8;
const S_RSYNC: u8 = 9;
const S_CP: u8 = 10;
const S_TAR_READ: u8 = 11;
const S_RSYNC_READ: u8 = 12;
const S_CP_READ: u8 = 13;
const S_CAT: u8 = 14;

/// A filesystem journal: a circular log inside its `[journal]` extent.
struct Journal {
    file: u32,
    pos: u64,
    until_commit: u32,
    thread: u16,
    xfs: bool,
}

/// What the next event is about.
#[derive(Clone, Copy)]
enum Act {
    FioRand,
    MysqlRead,
    MysqlFlush,
    MysqlUndo,
    PgRead,
    PgWrite,
    System,
    PageFault,
    Swap,
    MetaIo,
    FlushOp,
    Discard,
    RawDev,
    Journal(u8),
    Stream(u8),
}

/// An I/O that must follow the current one (fsync consequences).
#[derive(Clone, Copy)]
enum Follow {
    JournalBlocks(u8),
    JournalCommit(u8),
    Flush {
        thread: u16,
        syscall: Syscall,
        dev: u8,
    },
}

/// A small FIFO of follow-ups (no allocation).
struct Pending {
    q: [Follow; 8],
    head: usize,
    len: usize,
}

impl Pending {
    fn push(&mut self, f: Follow) {
        if self.len < self.q.len() {
            self.q[(self.head + self.len) % self.q.len()] = f;
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<Follow> {
        if self.len == 0 {
            return None;
        }
        let f = self.q[self.head];
        self.head = (self.head + 1) % self.q.len();
        self.len -= 1;
        Some(f)
    }
}

/// Journal indices.
const J_ROOT: u8 = 0;
const J_BACKUP: u8 = 1;
const J_VDA: u8 = 2;

fn journal_of(dev: u8) -> Option<u8> {
    match dev as usize {
        D_ROOT => Some(J_ROOT),
        D_BACKUP => Some(J_BACKUP),
        D_VDA => Some(J_VDA),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Normal,
    Burst,
}

struct Gen {
    rng: Rng,
    devices: Vec<Device>,
    threads: Vec<Process>,
    thread_sent: Vec<bool>,
    files: Vec<FileInfo>,
    paths: Vec<PathEntry>,
    path_sent: Vec<bool>,
    ids: Ids,
    sp: Special,
    deleted_root: Vec<u32>,
    mysql_sys: Vec<u32>,
    mysql: Pool,
    pg: Pool,
    system: Pool,
    mapped: Pool,
    streams: Vec<Stream>,
    journals: [Journal; 3],
    pend: Pending,
    /// Activities, each repeated as many times as its weight (per mille).
    acts: Vec<Act>,
    meta_users: Vec<u16>,
    flushers: Vec<(u16, Syscall, u8)>,
    home_readers: [u16; 8],
    home_writers: [u16; 5],
    lib_users: Vec<u16>,
    swap_users: Vec<u16>,
    trim_pos: u64,
    // Time.
    clock: u64,
    mean_gap: f64,
    phase: Phase,
    phase_left: u64,
    // Losses.
    next_loss: u64,
    error_p: f64,
}

impl Gen {
    fn new(params: &SynthParams) -> Gen {
        let devices = devices();
        let (threads, ids) = threads();
        let (files, paths, sp, ls) = build_files(params.seed, &ids, &devices);
        let w = params.workload;
        let mut rng = Rng::new(
            params.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
                ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9),
        );
        let mysql = Pool::new(ls.mysql_tables.clone(), &mut rng);
        let pg = Pool::new(ls.pg_rels.clone(), &mut rng);
        let system = Pool::new(ls.system.clone(), &mut rng);
        let mapped = Pool::new(ls.mapped.clone(), &mut rng);

        let one = |t: u16| Grp { first: t, n: 1 };
        let shuffled = |v: &[u32], rng: &mut Rng| {
            let mut v = v.to_vec();
            rng.shuffle(&mut v);
            v
        };
        let mut streams = Vec::new();
        let mut stream = |files: Vec<u32>, pages: (u32, u32), mode: Mode, sync: SyncPolicy| {
            streams.push(Stream {
                files,
                cur: 0,
                pos: 0,
                min_pages: pages.0,
                max_pages: pages.1,
                mode,
                sync,
                chunks: 0,
            });
        };
        let direct = |thread: Grp, syscall: Syscall, flags: Flags| Mode::Direct {
            thread,
            syscall,
            flags,
        };
        // S_REDO
        stream(
            ls.redo.clone(),
            (1, 16),
            direct(one(ids.my_log_writer), Syscall::PWRITE64, SYNC_FUA),
            SyncPolicy::FlushEvery {
                n: 4,
                thread: ids.my_log_flush,
                syscall: Syscall::FSYNC,
            },
        );
        // S_DBLWR
        stream(
            ls.dblwr.clone(),
            (4, 128),
            direct(one(ids.my_flush_co), Syscall::PWRITE64, SYNC),
            SyncPolicy::Never,
        );
        // S_BINLOG
        stream(
            ls.binlog.clone(),
            (1, 16),
            direct(ids.my_conn, Syscall::FDATASYNC, SYNC),
            SyncPolicy::CommitEvery { n: 6 },
        );
        // S_WAL
        stream(
            ls.pg_wal.clone(),
            (2, 32),
            direct(one(ids.pg_walwriter), Syscall::FDATASYNC, SYNC),
            SyncPolicy::CommitEvery { n: 16 },
        );
        // S_FIO_SEQ0, S_FIO_SEQ1
        stream(
            vec![sp.fio_seq[0]],
            (64, 64),
            direct(one(ids.fio_seq[0]), Syscall::IO_SUBMIT, SYNC),
            SyncPolicy::FlushEvery {
                n: 64,
                thread: ids.fio_seq[0],
                syscall: Syscall::FSYNC,
            },
        );
        stream(
            vec![sp.fio_seq[1]],
            (256, 256),
            direct(one(ids.fio_seq[1]), Syscall::IO_URING_ENTER, SYNC),
            SyncPolicy::Never,
        );
        // S_DD
        stream(
            vec![sp.vm_image],
            (256, 256),
            direct(one(ids.dd), Syscall::WRITE, SYNC),
            SyncPolicy::Never,
        );
        // S_TAR
        stream(
            vec![sp.tarball],
            (32, 256),
            Mode::Writeback {
                flusher: ids.wb_backup,
                dirtier: ids.zstd,
            },
            SyncPolicy::Never,
        );
        // S_BASEBACKUP
        stream(
            ls.backup_pg.clone(),
            (32, 256),
            Mode::Writeback {
                flusher: ids.wb_backup,
                dirtier: ids.pg_basebackup,
            },
            SyncPolicy::CommitAtFileEnd,
        );
        // S_RSYNC
        stream(
            ls.backup_rsync.clone(),
            (32, 256),
            Mode::Writeback {
                flusher: ids.wb_backup,
                dirtier: ids.rsync_receiver,
            },
            SyncPolicy::Never,
        );
        // S_CP
        stream(
            ls.import.clone(),
            (32, 256),
            Mode::Writeback {
                flusher: ids.wb_vda,
                dirtier: ids.cp,
            },
            SyncPolicy::Never,
        );
        // S_TAR_READ, S_RSYNC_READ, S_CP_READ, S_CAT
        stream(
            shuffled(&ls.home, &mut rng),
            (32, 64),
            Mode::Readahead { thread: ids.tar },
            SyncPolicy::Never,
        );
        stream(
            ls.projects.clone(),
            (32, 64),
            Mode::Readahead {
                thread: ids.rsync_sender,
            },
            SyncPolicy::Never,
        );
        stream(
            ls.pictures.clone(),
            (32, 64),
            Mode::Readahead { thread: ids.cp },
            SyncPolicy::Never,
        );
        stream(
            shuffled(&ls.readable, &mut rng),
            (4, 64),
            Mode::Readahead { thread: ids.cat },
            SyncPolicy::Never,
        );
        // Start every stream somewhere in its list, at the start of a file.
        for s in &mut streams {
            s.cur = rng.below(s.files.len() as u64) as usize;
        }

        let journal = |file: u32, thread: u16, xfs: bool, rng: &mut Rng| Journal {
            file,
            pos: rng.below(files[file as usize].len / 8) * 8,
            until_commit: 2,
            thread,
            xfs,
        };
        let journals = [
            journal(sp.journal[D_ROOT], ids.jbd2_root, false, &mut rng),
            journal(sp.journal[D_BACKUP], ids.xfslog, true, &mut rng),
            journal(sp.journal[D_VDA], ids.jbd2_vda, false, &mut rng),
        ];

        let acts: Vec<(u32, Act)> = match w {
            Workload::RandRead => vec![
                (760, Act::FioRand),
                (190, Act::System),
                (15, Act::Journal(J_ROOT)),
                (15, Act::MetaIo),
                (10, Act::Swap),
                (5, Act::FlushOp),
                (5, Act::PageFault),
            ],
            Workload::SeqWrite => vec![
                (150, Act::Stream(S_FIO_SEQ0)),
                (120, Act::Stream(S_FIO_SEQ1)),
                (120, Act::Stream(S_DD)),
                (120, Act::Stream(S_TAR)),
                (150, Act::Stream(S_BASEBACKUP)),
                (120, Act::Stream(S_RSYNC)),
                (60, Act::Stream(S_CP)),
                (60, Act::Stream(S_TAR_READ)),
                (40, Act::Stream(S_RSYNC_READ)),
                (20, Act::Stream(S_CP_READ)),
                (10, Act::Journal(J_ROOT)),
                (10, Act::Journal(J_BACKUP)),
                (5, Act::Journal(J_VDA)),
                (10, Act::MetaIo),
                (5, Act::Swap),
            ],
            Workload::Oltp => vec![
                (520, Act::MysqlRead),
                (150, Act::MysqlFlush),
                (40, Act::Stream(S_DBLWR)),
                (120, Act::Stream(S_REDO)),
                (40, Act::Stream(S_BINLOG)),
                (30, Act::MysqlUndo),
                (30, Act::Journal(J_ROOT)),
                (20, Act::MetaIo),
                (10, Act::FlushOp),
                (30, Act::System),
                (10, Act::Swap),
            ],
            Workload::Mixed => vec![
                (60, Act::FioRand),
                (140, Act::MysqlRead),
                (40, Act::MysqlFlush),
                (40, Act::Stream(S_REDO)),
                (10, Act::Stream(S_DBLWR)),
                (10, Act::Stream(S_BINLOG)),
                (10, Act::MysqlUndo),
                (80, Act::PgRead),
                (30, Act::PgWrite),
                (30, Act::Stream(S_WAL)),
                (260, Act::System),
                (40, Act::Stream(S_CAT)),
                (20, Act::Stream(S_CP_READ)),
                (40, Act::PageFault),
                (20, Act::Swap),
                (10, Act::Discard),
                (30, Act::Journal(J_ROOT)),
                (5, Act::Journal(J_BACKUP)),
                (10, Act::Journal(J_VDA)),
                (30, Act::MetaIo),
                (10, Act::FlushOp),
                (25, Act::Stream(S_TAR)),
                (25, Act::Stream(S_RSYNC)),
                (20, Act::Stream(S_RSYNC_READ)),
                (5, Act::RawDev),
            ],
        };
        let acts: Vec<Act> = acts
            .into_iter()
            .flat_map(|(weight, a)| std::iter::repeat_n(a, weight as usize))
            .collect();

        let conn = |i: u16| ids.my_conn.first + i;
        let meta_users = match w {
            Workload::RandRead => vec![ids.find, ids.git, ids.bash, ids.python3, ids.grep],
            Workload::SeqWrite => vec![
                ids.tar,
                ids.rsync_sender,
                ids.rsync_receiver,
                ids.pg_basebackup,
                ids.cp,
            ],
            Workload::Oltp => vec![conn(0), conn(3), conn(7), conn(11), ids.mysqld, ids.rsyslog],
            Workload::Mixed => vec![
                ids.find,
                ids.git,
                ids.bash,
                ids.python3,
                conn(2),
                conn(9),
                ids.pg_backends.first,
                ids.java_workers.first + 2,
                ids.rsync_sender,
                ids.cat,
            ],
        };
        let root = D_ROOT as u8;
        let flushers = match w {
            Workload::RandRead => vec![
                (ids.journald, Syscall::FSYNC, root),
                (ids.fio_rr[5], Syscall::FDATASYNC, root),
            ],
            Workload::SeqWrite => vec![(ids.fio_seq[0], Syscall::FSYNC, root)],
            Workload::Oltp => vec![
                (ids.my_log_flush, Syscall::FSYNC, root),
                (ids.my_log_flush, Syscall::FSYNC, root),
                (conn(4), Syscall::FDATASYNC, root),
            ],
            Workload::Mixed => vec![
                (ids.my_log_flush, Syscall::FSYNC, root),
                (ids.pg_checkpointer, Syscall::FSYNC, root),
                (ids.journald, Syscall::FSYNC, root),
                (ids.java_workers.first + 8, Syscall::FSYNC, D_VDA as u8),
            ],
        };
        let home_readers = [
            ids.cat,
            ids.cp,
            ids.rsync_sender,
            ids.git,
            ids.vim,
            ids.code,
            ids.grep,
            ids.python3,
        ];
        let home_writers = [ids.vim, ids.code, ids.git, ids.python3, ids.bash];
        let mut lib_users = vec![
            ids.bash,
            ids.python3,
            ids.git,
            ids.code,
            ids.java,
            ids.mysqld,
        ];
        lib_users.push(ids.pg_backends.first + 3);
        lib_users.push(ids.java_workers.first + 1);
        let swap_users = vec![
            ids.java_workers.first,
            ids.java_workers.first + 4,
            ids.mysqld,
            conn(6),
            ids.code,
            ids.firefox,
        ];

        let next_loss = if w.has_losses() {
            rng.range(50_000, 150_000)
        } else {
            u64::MAX
        };
        let trim_pos = rng.below(DEV_SECTORS[D_ROOT] / 8) * 8;
        let mut g = Gen {
            rng,
            thread_sent: vec![false; threads.len()],
            threads,
            path_sent: vec![false; files.len()],
            files,
            paths,
            ids,
            deleted_root: ls.deleted_root.clone(),
            mysql_sys: ls.mysql_sys.clone(),
            sp,
            mysql,
            pg,
            system,
            mapped,
            streams,
            journals,
            pend: Pending {
                q: [Follow::JournalBlocks(0); 8],
                head: 0,
                len: 0,
            },
            acts,
            meta_users,
            flushers,
            home_readers,
            home_writers,
            lib_users,
            swap_users,
            trim_pos,
            devices,
            clock: MONO_BASE_NS + 1_500_000,
            mean_gap: 1e9 / w.iops(),
            phase: Phase::Normal,
            phase_left: 0,
            next_loss,
            error_p: if w == Workload::Mixed { 1.2e-5 } else { 0.0 },
        };
        g.clock += g.rng.below(1_000_000);
        g
    }

    fn run<S: SynthSink>(&mut self, n: u64, sink: &mut S) -> Result<SynthSummary, S::Error> {
        let mut sum = SynthSummary::default();
        for d in &self.devices {
            sink.device(d)?;
            sum.devices += 1;
        }
        for i in 0..n {
            if i == self.next_loss {
                let l = self.loss();
                sink.loss(&l)?;
                sum.lost_events += l.count;
            }
            let d = match self.pend.pop() {
                Some(f) => self.follow(f),
                None => self.activity(),
            };
            let ts = self.next_ts();
            let ev = self.finish(&d, ts);
            self.send_thread(d.thread, sink, &mut sum)?;
            if let Some(t) = d.dirtier {
                self.send_thread(t, sink, &mut sum)?;
            }
            let f = d.file as usize;
            if !self.path_sent[f] {
                self.path_sent[f] = true;
                sink.path(&self.paths[f])?;
                sum.paths += 1;
            }
            sink.event(&ev)?;
            if i == 0 {
                sum.first_timestamp_ns = ts;
            }
            sum.last_timestamp_ns = ts;
        }
        sum.events = n;
        Ok(sum)
    }

    #[inline]
    fn send_thread<S: SynthSink>(
        &mut self,
        t: u16,
        sink: &mut S,
        sum: &mut SynthSummary,
    ) -> Result<(), S::Error> {
        let t = t as usize;
        if !self.thread_sent[t] {
            self.thread_sent[t] = true;
            sink.process(&self.threads[t])?;
            sum.processes += 1;
        }
        Ok(())
    }

    /// A burst of events lost on one CPU; the clock jumps over the window.
    fn loss(&mut self) -> Loss {
        let dur = self.rng.log_uniform(200_000.0, 20_000_000.0);
        let start_ns = self.clock + 1;
        let end_ns = start_ns + dur as u64;
        let count = ((dur / self.mean_gap / 4.0) as u64).clamp(1, 5_000);
        self.clock = end_ns;
        self.next_loss = self
            .next_loss
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
    fn next_ts(&mut self) -> u64 {
        if self.phase_left == 0 {
            let r = self.rng.f64();
            if self.phase == Phase::Normal && r < 0.25 {
                self.phase = Phase::Burst;
                self.phase_left = self.rng.range(300, 3_000);
            } else {
                self.phase = Phase::Normal;
                self.phase_left = self.rng.range(2_000, 40_000);
                if r > 0.88 {
                    self.clock += self.rng.log_uniform(20e6, 2e9) as u64;
                }
            }
        }
        self.phase_left -= 1;
        let factor = if self.phase == Phase::Burst { 0.2 } else { 1.0 };
        self.clock += (self.rng.exp1() * self.mean_gap * factor) as u64;
        self.clock
    }

    fn finish(&mut self, d: &Draft, ts: u64) -> Event {
        let fi = self.files[d.file as usize];
        let dev = fi.dev as usize;
        let m = &MODELS[dev];
        let bytes = d.bytes as f64;
        let median = match d.op {
            Op::Read => {
                (if d.seq { m.seq_read_ns } else { m.read_ns }) + m.read_ns_per_byte * bytes
            }
            Op::Flush => m.flush_ns,
            Op::Discard | Op::SecureErase => m.discard_ns + m.discard_ns_per_byte * bytes,
            _ => {
                let base = if d.seq { m.seq_write_ns } else { m.write_ns };
                let fua = if d.flags.contains(Flags::FUA) {
                    1.6
                } else {
                    1.0
                };
                (base + m.write_ns_per_byte * bytes) * fua
            }
        };
        let burst = self.phase == Phase::Burst;
        let mut dev_ns = median * exp(m.sigma * self.rng.normal());
        if burst {
            dev_ns *= 1.4;
        }
        let tail = self.rng.next_u64();
        if tail < u64::MAX / 200 {
            // 0.5 %: 10–100× slower (GC, media retries, firmware hiccups).
            dev_ns *= self.rng.log_uniform(10.0, 100.0);
        }
        let queue_ns = if self.devices[dev].bio_based {
            None
        } else {
            let med = 2_600.0 * m.queue_mult * if burst { 14.0 } else { 1.0 };
            let mut q = med * exp(0.7 * self.rng.normal());
            if tail & 0xFFF < 8 {
                q *= self.rng.log_uniform(10.0, 100.0);
            }
            Some(q as u64 + 300)
        };
        let mut error = 0;
        if self.error_p > 0.0
            && self.rng.chance(self.error_p)
            && matches!(d.op, Op::Read | Op::Write)
        {
            error = 5;
            dev_ns = dev_ns * 20.0 + 30e6;
        }
        let latency_ns = dev_ns as u64 + 1 + queue_ns.unwrap_or(0);
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
        }
    }

    // --- helpers -------------------------------------------------------------------------

    #[inline]
    fn grp(&mut self, g: Grp) -> u16 {
        g.first + self.rng.below(g.n as u64) as u16
    }

    /// A random place for `pages` pages in `file`, aligned to `align` pages (shrunk to fit).
    #[inline]
    fn place(&mut self, file: u32, pages: u32, align: u32) -> (u64, u32) {
        let fi = &self.files[file as usize];
        let fpages = fi.len / 8;
        let p = (pages as u64).min(fpages);
        let slots = (fpages - p) / align as u64 + 1;
        let off = self.rng.below(slots) * align as u64;
        (fi.start + off * 8, (p * 4096) as u32)
    }

    // --- activities ------------------------------------------------------------------------

    fn activity(&mut self) -> Draft {
        let act = self.acts[self.rng.below(self.acts.len() as u64) as usize];
        match act {
            Act::FioRand => {
                let j = self.rng.below(8) as usize;
                let (thread, file) = (self.ids.fio_rr[j], self.sp.fio_rr[j]);
                let (sc, flags) = match j {
                    0 | 1 => (Syscall::IO_SUBMIT, NONE),
                    2 | 3 => (Syscall::IO_URING_ENTER, Flags::NOWAIT),
                    _ => (Syscall::PREAD64, NONE),
                };
                let r = self.rng.below(100);
                let pages = if r < 85 {
                    1
                } else if r < 95 {
                    2
                } else {
                    4
                };
                let at = self.place(file, pages, 1);
                Draft::new(thread, file, at, Op::Read, flags, Some(sc))
            }
            Act::MysqlRead => {
                let file = self.mysql.zipf(&mut self.rng);
                let at = self.place(file, 4, 4);
                if self.rng.chance(0.9) {
                    let t = self.grp(self.ids.my_conn);
                    Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
                } else {
                    let t = self.grp(self.ids.my_rd);
                    Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::IO_SUBMIT))
                }
            }
            Act::MysqlFlush => {
                let file = self.mysql.zipf(&mut self.rng);
                let at = self.place(file, 4, 4);
                let t = if self.rng.chance(0.3) {
                    self.ids.my_flush_co
                } else {
                    self.grp(self.ids.my_wr)
                };
                Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::IO_SUBMIT))
            }
            Act::MysqlUndo => {
                let file = self.mysql_sys[self.rng.below(self.mysql_sys.len() as u64) as usize];
                let at = self.place(file, 4, 4);
                if self.rng.chance(0.6) {
                    let t = self.grp(self.ids.my_conn);
                    Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
                } else {
                    let t = self.grp(self.ids.my_wr);
                    Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::IO_SUBMIT))
                }
            }
            Act::PgRead => {
                let file = self.pg.zipf(&mut self.rng);
                let t = self.grp(self.ids.pg_backends);
                if self.rng.chance(0.85) {
                    let at = self.place(file, 2, 2);
                    Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
                } else {
                    let at = self.place(file, 32, 32);
                    let mut d = Draft::new(
                        t,
                        file,
                        at,
                        Op::Read,
                        Flags::READAHEAD,
                        Some(Syscall::READAHEAD),
                    );
                    d.seq = true;
                    d
                }
            }
            Act::PgWrite => {
                let file = self.pg.zipf(&mut self.rng);
                if self.rng.chance(0.5) {
                    let pages = self.rng.pow2(2, 64);
                    let at = self.place(file, pages, 2);
                    if self.rng.chance(0.03) {
                        self.pend.push(Follow::JournalCommit(J_ROOT));
                        self.pend.push(Follow::Flush {
                            thread: self.ids.pg_checkpointer,
                            syscall: Syscall::FSYNC,
                            dev: D_ROOT as u8,
                        });
                    }
                    Draft::new(
                        self.ids.pg_checkpointer,
                        file,
                        at,
                        Op::Write,
                        SYNC,
                        Some(Syscall::FSYNC),
                    )
                } else {
                    let pages = self.rng.pow2(2, 32);
                    let at = self.place(file, pages, 2);
                    let dirtier = if self.rng.chance(0.4) {
                        self.ids.pg_bgwriter
                    } else {
                        self.grp(self.ids.pg_backends)
                    };
                    let mut d = Draft::new(
                        self.ids.wb_root,
                        file,
                        at,
                        Op::Write,
                        Flags::BACKGROUND,
                        Some(Syscall::WRITEBACK),
                    );
                    d.dirtier = Some(dirtier);
                    d
                }
            }
            Act::System => self.system_io(),
            Act::PageFault => {
                let file = self.mapped.zipf(&mut self.rng);
                let t = if self.files[file as usize].class == Class::JavaApp || self.rng.chance(0.5)
                {
                    self.grp(self.ids.java_workers)
                } else {
                    let i = self.rng.below(self.lib_users.len() as u64) as usize;
                    self.lib_users[i]
                };
                let pages = self.rng.pow2(4, 32);
                let at = self.place(file, pages, 4);
                let flags = if self.rng.chance(0.4) {
                    Flags::READAHEAD
                } else {
                    NONE
                };
                Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
            }
            Act::Swap => {
                let file = self.sp.swap;
                if self.rng.chance(0.6) {
                    let pages = self.rng.pow2(1, 8);
                    let at = self.place(file, pages, 1);
                    Draft::new(self.ids.kswapd, file, at, Op::Write, NONE, None)
                } else {
                    let i = self.rng.below(self.swap_users.len() as u64) as usize;
                    let t = self.swap_users[i];
                    let at = self.place(file, 1, 1);
                    let flags = if self.rng.chance(0.3) {
                        Flags::READAHEAD
                    } else {
                        NONE
                    };
                    Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
                }
            }
            Act::MetaIo => self.meta_io(),
            Act::FlushOp => {
                let (thread, syscall, dev) =
                    self.flushers[self.rng.below(self.flushers.len() as u64) as usize];
                self.flush(thread, syscall, dev)
            }
            Act::Discard => {
                if self.rng.chance(0.7) {
                    let bytes = self.rng.log_uniform(MIB as f64, 256.0 * MIB as f64) as u64 & !4095;
                    let size = DEV_SECTORS[D_ROOT];
                    let len = bytes / 512;
                    if self.trim_pos + len >= size {
                        self.trim_pos = self.rng.below(1 << 20) * 8;
                    }
                    let sector = self.trim_pos;
                    self.trim_pos += len + self.rng.below(1 << 18) * 8;
                    let file = self.sp.unknown[D_ROOT];
                    Draft::new(
                        self.ids.fstrim,
                        file,
                        (sector, bytes as u32),
                        Op::Discard,
                        NONE,
                        None,
                    )
                } else {
                    let file =
                        self.deleted_root[self.rng.below(self.deleted_root.len() as u64) as usize];
                    let pages = self.rng.pow2(8, 1024);
                    let at = self.place(file, pages, 1);
                    Draft::new(self.ids.jbd2_root, file, at, Op::Discard, NONE, None)
                }
            }
            Act::RawDev => {
                let file = self.sp.raw_sda;
                let last = DEV_SECTORS[D_SDA] / 8 * 8 - 8;
                let sector = match self.rng.below(4) {
                    0 => 0,
                    1 => 8,
                    2 => last,
                    _ => self.rng.below(DEV_SECTORS[D_SDA] / 8) * 8,
                };
                let t = if self.rng.chance(0.5) {
                    self.ids.udisksd
                } else {
                    self.ids.blkid
                };
                Draft::new(t, file, (sector, 4096), Op::Read, NONE, Some(Syscall::READ))
            }
            Act::Journal(j) => self.journal(j, false),
            Act::Stream(s) => self.stream(s as usize),
        }
    }

    fn follow(&mut self, f: Follow) -> Draft {
        match f {
            Follow::JournalBlocks(j) => self.journal(j, false),
            Follow::JournalCommit(j) => self.journal(j, true),
            Follow::Flush {
                thread,
                syscall,
                dev,
            } => self.flush(thread, syscall, dev),
        }
    }

    fn flush(&mut self, thread: u16, syscall: Syscall, dev: u8) -> Draft {
        let file = self.sp.unknown[dev as usize];
        Draft::new(
            thread,
            file,
            (0, 0),
            Op::Flush,
            PREFLUSH_SYNC,
            Some(syscall),
        )
    }

    /// A journal write: descriptor and metadata blocks, then a commit block (ext4), or log
    /// buffer writes (xfs).
    fn journal(&mut self, j: u8, commit: bool) -> Draft {
        let jr = &mut self.journals[j as usize];
        let fi = self.files[jr.file as usize];
        let commit = commit || jr.until_commit == 0;
        let pages = if jr.xfs {
            8 * (1 + self.rng.below(8)) as u32
        } else if commit {
            1
        } else {
            self.rng.pow2(1, 16)
        };
        let len_pages = fi.len / 8;
        if jr.pos / 8 + pages as u64 > len_pages {
            jr.pos = 0;
        }
        let sector = fi.start + jr.pos;
        jr.pos += pages as u64 * 8;
        let flags = if commit || (jr.xfs && self.rng.chance(0.5)) {
            COMMIT
        } else {
            META_SYNC
        };
        if commit {
            jr.until_commit = self.rng.range(1, 6) as u32;
        } else {
            jr.until_commit -= 1;
        }
        let (thread, file) = (jr.thread, jr.file);
        let mut d = Draft::new(
            thread,
            file,
            (sector, pages * 4096),
            Op::Write,
            flags,
            Some(Syscall::JOURNAL),
        );
        d.seq = true;
        d
    }

    fn stream(&mut self, s: usize) -> Draft {
        let st = &mut self.streams[s];
        let file = st.files[st.cur];
        let fi = self.files[file as usize];
        let pages = if st.min_pages == st.max_pages {
            st.min_pages
        } else {
            // Mostly large chunks for big streams, a spread for small ones.
            let lo = st.min_pages as u64;
            let hi = st.max_pages as u64;
            let x = self.rng.range(lo, hi);
            let y = self.rng.range(lo, hi);
            x.min(y) as u32
        };
        let left = fi.len - st.pos;
        let n = (pages as u64 * 8).min(left);
        let sector = fi.start + st.pos;
        st.pos += n;
        let mut file_end = false;
        if st.pos >= fi.len {
            st.cur = (st.cur + 1) % st.files.len();
            st.pos = 0;
            file_end = true;
        }
        st.chunks += 1;
        let at = (sector, (n * 512) as u32);
        let mode = st.mode;
        match st.sync {
            SyncPolicy::Never => {}
            SyncPolicy::FlushEvery { n, thread, syscall } => {
                if st.chunks.is_multiple_of(n) {
                    self.pend.push(Follow::Flush {
                        thread,
                        syscall,
                        dev: fi.dev,
                    });
                }
            }
            SyncPolicy::CommitEvery { n } => {
                if st.chunks.is_multiple_of(n) {
                    if let Some(j) = journal_of(fi.dev) {
                        self.pend.push(Follow::JournalBlocks(j));
                        self.pend.push(Follow::JournalCommit(j));
                    }
                }
            }
            SyncPolicy::CommitAtFileEnd => {
                if file_end {
                    if let Some(j) = journal_of(fi.dev) {
                        self.pend.push(Follow::JournalCommit(j));
                    }
                }
            }
        }
        let mut d = match mode {
            Mode::Direct {
                thread,
                syscall,
                flags,
            } => {
                let t = self.grp(thread);
                Draft::new(t, file, at, Op::Write, flags, Some(syscall))
            }
            Mode::Writeback { flusher, dirtier } => {
                let mut d = Draft::new(
                    flusher,
                    file,
                    at,
                    Op::Write,
                    Flags::BACKGROUND,
                    Some(Syscall::WRITEBACK),
                );
                d.dirtier = Some(dirtier);
                d
            }
            Mode::Readahead { thread } => Draft::new(
                thread,
                file,
                at,
                Op::Read,
                Flags::READAHEAD,
                Some(Syscall::READAHEAD),
            ),
        };
        d.seq = true;
        d
    }

    /// Metadata: inode table / directory / bitmap reads, and their writeback.
    fn meta_io(&mut self) -> Draft {
        let r = self.rng.below(100);
        let dev = if r < 75 {
            D_ROOT
        } else if r < 88 {
            D_BACKUP
        } else if r < 97 {
            D_VDA
        } else {
            D_BOOT
        };
        let file = self.sp.meta[dev];
        if self.rng.chance(0.25) {
            let pages = self.rng.pow2(1, 8);
            let at = self.place(file, pages, 1);
            let t = match dev {
                D_BACKUP => self.ids.xfsaild,
                D_VDA => self.ids.wb_vda,
                _ => self.ids.wb_root,
            };
            let sc = if dev == D_BACKUP {
                None
            } else {
                Some(Syscall::WRITEBACK)
            };
            Draft::new(t, file, at, Op::Write, META_BG, sc)
        } else {
            let i = self.rng.below(self.meta_users.len() as u64) as usize;
            let t = self.meta_users[i];
            let at = self.place(file, 1, 1);
            let sc = match self.rng.below(3) {
                0 => Some(OPENAT),
                1 => Some(Syscall::GETDENTS64),
                _ => None,
            };
            Draft::new(t, file, at, Op::Read, Flags::META, sc)
        }
    }

    /// The long tail: a file from the system pool, touched the way its class is.
    fn system_io(&mut self) -> Draft {
        let file = self.system.zipf(&mut self.rng);
        let fi = self.files[file as usize];
        let wb = match fi.dev as usize {
            D_VDA => self.ids.wb_vda,
            D_BACKUP => self.ids.wb_backup,
            _ => self.ids.wb_root,
        };
        let writeback = |d: &mut Draft, dirtier: u16| {
            d.thread = wb;
            d.flags = Flags::BACKGROUND;
            d.syscall = Some(Syscall::WRITEBACK);
            d.dirtier = Some(dirtier);
        };
        match fi.class {
            Class::Home => {
                if self.rng.chance(0.65) {
                    let t = self.home_readers[self.rng.below(8) as usize];
                    if t == self.ids.cat || t == self.ids.cp {
                        let pages = self.rng.pow2(4, 32);
                        let at = self.place(file, pages, 4);
                        Draft::new(
                            t,
                            file,
                            at,
                            Op::Read,
                            Flags::READAHEAD,
                            Some(Syscall::READAHEAD),
                        )
                    } else {
                        let pages = self.rng.pow2(1, 16);
                        let at = self.place(file, pages, 1);
                        Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::READ))
                    }
                } else {
                    let pages = self.rng.pow2(1, 128);
                    let at = self.place(file, pages, 1);
                    let dirtier = if fi.owner != NO_OWNER {
                        fi.owner
                    } else {
                        self.home_writers[self.rng.below(5) as usize]
                    };
                    let mut d = Draft::new(dirtier, file, at, Op::Write, NONE, None);
                    writeback(&mut d, dirtier);
                    d
                }
            }
            Class::SysLib | Class::Boot => {
                let i = self.rng.below(self.lib_users.len() as u64) as usize;
                let t = self.lib_users[i];
                if self.rng.chance(0.55) {
                    let pages = self.rng.pow2(4, 32);
                    let at = self.place(file, pages, 4);
                    let flags = if self.rng.chance(0.4) {
                        Flags::READAHEAD
                    } else {
                        NONE
                    };
                    Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
                } else {
                    let pages = self.rng.pow2(1, 32);
                    let at = self.place(file, pages, 1);
                    let (flags, sc) = if pages >= 4 {
                        (Flags::READAHEAD, Syscall::READAHEAD)
                    } else {
                        (NONE, Syscall::READ)
                    };
                    Draft::new(t, file, at, Op::Read, flags, Some(sc))
                }
            }
            Class::Log => {
                let owner = if fi.owner != NO_OWNER {
                    fi.owner
                } else {
                    self.ids.rsyslog
                };
                let pages = self.rng.pow2(1, 16);
                let at = self.place(file, pages, 1);
                if self.rng.chance(0.75) {
                    let mut d = Draft::new(owner, file, at, Op::Write, NONE, None);
                    writeback(&mut d, owner);
                    d
                } else {
                    if self.rng.chance(0.3) {
                        self.pend.push(Follow::JournalCommit(J_ROOT));
                    }
                    Draft::new(owner, file, at, Op::Write, SYNC, Some(Syscall::FSYNC))
                }
            }
            Class::JavaApp => {
                let t = self.grp(self.ids.java_workers);
                let r = self.rng.below(100);
                if r < 45 {
                    let pages = self.rng.pow2(4, 16);
                    let at = self.place(file, pages, 4);
                    Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
                } else if r < 65 {
                    let pages = self.rng.pow2(4, 32);
                    let at = self.place(file, pages, 4);
                    Draft::new(
                        t,
                        file,
                        at,
                        Op::Read,
                        Flags::READAHEAD,
                        Some(Syscall::PAGE_FAULT),
                    )
                } else if r < 92 {
                    let pages = self.rng.pow2(1, 256);
                    let at = self.place(file, pages, 1);
                    let mut d = Draft::new(t, file, at, Op::Write, NONE, None);
                    writeback(&mut d, self.ids.java);
                    d
                } else {
                    let pages = self.rng.pow2(1, 64);
                    let at = self.place(file, pages, 1);
                    self.pend.push(Follow::JournalCommit(J_VDA));
                    Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::FSYNC))
                }
            }
            _ => {
                let t = self.home_readers[self.rng.below(8) as usize];
                let at = self.place(file, 1, 1);
                Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::READ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// Every call a sink receives, in order.
    #[derive(Clone, Debug, PartialEq)]
    enum Call {
        Device(Device),
        Process(Process),
        Path(PathEntry),
        Event(Event),
        Loss(Loss),
    }

    #[derive(Default)]
    struct Record(Vec<Call>);

    impl SynthSink for Record {
        type Error = ();
        fn device(&mut self, d: &Device) -> Result<(), ()> {
            self.0.push(Call::Device(d.clone()));
            Ok(())
        }
        fn process(&mut self, p: &Process) -> Result<(), ()> {
            self.0.push(Call::Process(p.clone()));
            Ok(())
        }
        fn path(&mut self, p: &PathEntry) -> Result<(), ()> {
            self.0.push(Call::Path(p.clone()));
            Ok(())
        }
        fn event(&mut self, e: &Event) -> Result<(), ()> {
            self.0.push(Call::Event(*e));
            Ok(())
        }
        fn loss(&mut self, l: &Loss) -> Result<(), ()> {
            self.0.push(Call::Loss(*l));
            Ok(())
        }
    }

    fn params(workload: Workload, events: u64, seed: u64) -> SynthParams {
        SynthParams {
            events,
            workload,
            seed,
        }
    }

    fn record(w: Workload, events: u64, seed: u64) -> (Vec<Call>, SynthSummary) {
        let mut r = Record::default();
        let sum = generate(&params(w, events, seed), &mut r).unwrap();
        (r.0, sum)
    }

    fn events(calls: &[Call]) -> impl Iterator<Item = &Event> {
        calls.iter().filter_map(|c| match c {
            Call::Event(e) => Some(e),
            _ => None,
        })
    }

    #[test]
    fn portable_exp_and_ln_are_accurate() {
        let mut rng = Rng::new(1);
        for _ in 0..100_000 {
            let x = (rng.f64() - 0.5) * 1400.0;
            let (a, b) = (exp(x), x.exp());
            assert!(((a - b) / b).abs() < 1e-13, "exp({x}) = {a}, not {b}");
            let y = exp((rng.f64() - 0.5) * 1400.0);
            let (a, b) = (ln(y), y.ln());
            assert!(
                (a - b).abs() <= 1e-13 * b.abs().max(1.0),
                "ln({y}) = {a}, not {b}"
            );
            let z = rng.f64() + 0.5;
            assert!((ln(z) - z.ln()).abs() < 1e-14, "ln({z})");
        }
        assert!(ln(1.0).abs() < 1e-15);
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["randread", "seqwrite", "oltp", "mixed"]);
        assert_eq!(Workload::from_name("nope"), None);
    }

    #[test]
    fn header_describes_the_run() {
        let h = header(&params(Workload::Oltp, 1234, 42));
        assert_eq!(h.hostname, "synth-oltp");
        assert_eq!(h.kernel_release, "6.18.0-synth");
        assert!(h.tool_version.starts_with("iodump ") && h.tool_version.ends_with(" synth"));
        assert_eq!(
            h.recorder_argv,
            [
                "iodump",
                "synth",
                "--workload",
                "oltp",
                "--events",
                "1234",
                "--seed",
                "42"
            ]
        );
        assert!(h.metadata.contains(&("workload".into(), "oltp".into())));
        assert!(h.metadata.contains(&("seed".into(), "42".into())));
        assert_eq!(h.monotonic_ns, MONO_BASE_NS);
        assert_eq!(h.wall_clock_ns, WALL_BASE_NS + 42_000_000_000);
        assert_eq!(h, header(&params(Workload::Oltp, 1234, 42)));
    }

    #[test]
    fn deterministic_per_params() {
        for w in Workload::ALL {
            let (a, sa) = record(w, 30_000, 7);
            let (b, sb) = record(w, 30_000, 7);
            assert_eq!(sa, sb);
            assert!(a == b, "{} not deterministic", w.name());
            let (c, _) = record(w, 30_000, 8);
            assert!(a != c, "{}: seed has no effect", w.name());
            // A shorter run is a prefix of a longer one.
            let (d, _) = record(w, 10_000, 7);
            assert_eq!(&a[..d.len()], &d[..]);
        }
    }

    #[test]
    fn exact_event_count_and_summary() {
        for w in Workload::ALL {
            for n in [0, 1, 2, 17, 5_000] {
                let (calls, sum) = record(w, n, 3);
                let count = |f: fn(&Call) -> bool| calls.iter().filter(|c| f(c)).count() as u64;
                assert_eq!(count(|c| matches!(c, Call::Event(_))), n);
                assert_eq!(sum.events, n);
                assert_eq!(sum.devices, count(|c| matches!(c, Call::Device(_))));
                assert_eq!(sum.devices, 7);
                assert_eq!(sum.processes, count(|c| matches!(c, Call::Process(_))));
                assert_eq!(sum.paths, count(|c| matches!(c, Call::Path(_))));
                let lost: u64 = calls
                    .iter()
                    .map(|c| if let Call::Loss(l) = c { l.count } else { 0 })
                    .sum();
                assert_eq!(sum.lost_events, lost);
                let ts: Vec<u64> = events(&calls).map(|e| e.timestamp_ns).collect();
                assert_eq!(sum.first_timestamp_ns, ts.first().copied().unwrap_or(0));
                assert_eq!(sum.last_timestamp_ns, ts.last().copied().unwrap_or(0));
                if n == 0 {
                    assert_eq!((sum.processes, sum.paths), (0, 0));
                }
            }
        }
    }

    #[test]
    fn sink_errors_stop_generation() {
        struct Fail(u64);
        impl SynthSink for Fail {
            type Error = u64;
            fn device(&mut self, _: &Device) -> Result<(), u64> {
                Ok(())
            }
            fn process(&mut self, _: &Process) -> Result<(), u64> {
                Ok(())
            }
            fn path(&mut self, _: &PathEntry) -> Result<(), u64> {
                Ok(())
            }
            fn event(&mut self, _: &Event) -> Result<(), u64> {
                self.0 += 1;
                if self.0 == 100 {
                    Err(self.0)
                } else {
                    Ok(())
                }
            }
            fn loss(&mut self, _: &Loss) -> Result<(), u64> {
                Ok(())
            }
        }
        let mut s = Fail(0);
        assert_eq!(
            generate(&params(Workload::Mixed, 1000, 1), &mut s),
            Err(100)
        );
        assert_eq!(s.0, 100);
    }

    /// Ordering, references, extents, alignment, queue/latency relations, for every workload.
    #[test]
    fn traces_are_well_formed() {
        for w in Workload::ALL {
            let (calls, sum) = record(w, 200_000, 11);
            let mut devs: HashMap<DevT, Device> = HashMap::new();
            let mut tids: HashMap<u32, Process> = HashMap::new();
            let mut pids: HashSet<u32> = HashSet::new();
            let mut paths: HashMap<u32, PathEntry> = HashMap::new();
            let mut last_ts = 0u64;
            let mut losses = 0;
            let g = Gen::new(&params(w, 0, 11));
            for c in &calls {
                match c {
                    Call::Device(d) => {
                        if let Some(p) = d.partition_of {
                            assert!(devs.contains_key(&p), "disk before partition");
                        }
                        assert!(devs.insert(d.dev, d.clone()).is_none());
                    }
                    Call::Process(p) => {
                        assert!(
                            tids.insert(p.tid, p.clone()).is_none(),
                            "tid {} twice",
                            p.tid
                        );
                        assert!(!p.comm.is_empty() && p.comm.len() <= 15);
                        assert!(p.cgroup_id != 0);
                        pids.insert(p.pid);
                    }
                    Call::Path(p) => {
                        assert!(p.path_id >= 1);
                        assert!(devs.contains_key(&p.dev));
                        assert!(paths.insert(p.path_id, p.clone()).is_none());
                    }
                    Call::Loss(l) => {
                        assert!(l.start_ns >= last_ts && l.end_ns >= l.start_ns);
                        assert!(l.count > 0 && l.cpu < 4);
                        assert_eq!(l.reason, LossReason::RingBufferFull);
                        last_ts = l.end_ns;
                        losses += 1;
                    }
                    Call::Event(e) => {
                        assert!(e.timestamp_ns >= last_ts, "out of order");
                        last_ts = e.timestamp_ns;
                        let d = &devs[&e.dev];
                        let t = &tids[&e.tid];
                        assert_eq!((t.pid, t.cgroup_id), (e.pid, e.cgroup_id));
                        if let Some(dp) = e.dirtier_pid {
                            assert!(pids.contains(&dp), "dirtier {dp} not delivered");
                            assert_eq!(e.syscall, Some(Syscall::WRITEBACK));
                        }
                        let p = &paths[&e.path_id];
                        assert_eq!(p.dev, e.dev, "path and event on different devices");
                        // Inside the path's extent.
                        let fi = g.files[e.path_id as usize - 1];
                        assert!(e.sector >= fi.start);
                        assert!(e.sector + (e.bytes as u64).div_ceil(512) <= fi.start + fi.len);
                        // Sector-size aligned.
                        let ss = d.sector_size as u64 / 512;
                        assert_eq!(e.sector % ss, 0);
                        assert_eq!(e.bytes as u64 % d.sector_size as u64, 0);
                        assert_eq!(e.bytes == 0, e.op == Op::Flush);
                        // Queueing exists exactly on request-based devices.
                        assert_eq!(e.queue_ns.is_none(), d.bio_based);
                        assert!(e.queue_ns.unwrap_or(0) <= e.latency_ns);
                        assert!(e.latency_ns > 0);
                        assert!(e.cpu < 4);
                        assert!(e.error == 0 || e.error == 5);
                        assert!(e.timestamp_ns > MONO_BASE_NS);
                    }
                }
            }
            assert_eq!(sum.paths as usize, paths.len());
            if w.has_losses() {
                assert!(losses >= 1 && sum.lost_events > 0, "{}: no loss", w.name());
            } else {
                assert_eq!((losses, sum.lost_events), (0, 0), "{}: losses", w.name());
            }
            if w != Workload::SeqWrite {
                assert!(
                    paths.len() >= 2000,
                    "{}: only {} paths",
                    w.name(),
                    paths.len()
                );
            } else {
                assert!(paths.len() >= 300, "seqwrite: only {} paths", paths.len());
            }
            let bio = events(&calls).filter(|e| e.queue_ns.is_none()).count();
            assert!(bio > 0, "{}: no zram I/O", w.name());
        }
    }

    #[test]
    fn path_table_is_realistic() {
        let g = Gen::new(&params(Workload::Mixed, 0, 5));
        let ps = &g.paths;
        assert!(ps.len() >= 5000, "{} paths", ps.len());
        for (i, p) in ps.iter().enumerate() {
            assert_eq!(p.path_id as usize, i + 1);
        }
        let has = |f: &dyn Fn(&PathEntry) -> bool| ps.iter().any(f);
        assert!(has(&|p| p.path == b"[metadata]"
            && p.kind == PathKind::Metadata
            && p.inode == 0));
        assert!(has(
            &|p| p.path == b"[journal]" && p.kind == PathKind::Journal
        ));
        assert!(has(&|p| p.path == b"[swap]" && p.kind == PathKind::Swap));
        assert!(has(
            &|p| p.path == b"[unknown]" && p.kind == PathKind::Unknown
        ));
        assert!(has(
            &|p| p.path == b"/dev/sda" && p.kind == PathKind::RawDevice
        ));
        assert!(has(&|p| std::str::from_utf8(&p.path).is_err()));
        assert!(has(&|p| p.path.contains(&b' ')));
        assert!(has(&|p| p.path.contains(&b',')));
        assert!(has(&|p| p.truncated && p.path.starts_with("…/".as_bytes())));
        assert!(ps.iter().filter(|p| p.deleted).count() >= 3);
        for needle in [
            "/var/lib/mysql/shop/orders.ibd",
            "/var/lib/postgresql/15/main/base/16384/2619",
            "/usr/lib/x86_64-linux-gnu/libssl.so.3",
            "/var/log/syslog",
            "/data/fio/randread.0.0",
            "/srv/backup/home-2026-01-15.tar.zst",
        ] {
            assert!(has(&|p| p.path == needle.as_bytes()), "{needle} missing");
        }
        for p in ps.iter().filter(|p| p.kind == PathKind::File) {
            assert!(p.path.starts_with(b"/") || p.truncated);
            assert!(p.inode != 0);
        }
        let inodes: HashSet<(DevT, u64)> = ps
            .iter()
            .filter(|p| p.kind == PathKind::File)
            .map(|p| (p.dev, p.inode))
            .collect();
        assert_eq!(
            inodes.len(),
            ps.iter().filter(|p| p.kind == PathKind::File).count()
        );
        // Thread table: unique tids, shared pids for threaded processes.
        let tids: HashSet<u32> = g.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids.len(), g.threads.len());
        let mysqld = g.threads.iter().filter(|t| t.pid == 1423).count();
        assert!(mysqld >= 20);
    }

    #[test]
    fn seqwrite_is_sequential_per_stream() {
        let (calls, _) = record(Workload::SeqWrite, 200_000, 2);
        let mut end: HashMap<u32, u64> = HashMap::new();
        let (mut cont, mut total, mut big) = (0u64, 0u64, 0u64);
        let mut writeback = 0;
        for e in events(&calls) {
            if e.op != Op::Write || e.syscall == Some(Syscall::JOURNAL) {
                continue;
            }
            if e.bytes >= 128 * 1024 {
                big += 1;
            }
            if let Some(&prev) = end.get(&e.path_id) {
                total += 1;
                cont += (prev == e.sector) as u64;
            }
            end.insert(e.path_id, e.sector + e.bytes as u64 / 512);
            if e.syscall == Some(Syscall::WRITEBACK) && !e.flags.contains(Flags::META) {
                writeback += 1;
                assert!(e.dirtier_pid.is_some() && e.dirtier_pid != Some(e.pid));
            }
        }
        assert!(cont * 100 >= total * 90, "{cont}/{total} contiguous");
        assert!(big * 100 >= total * 80, "{big}/{total} large");
        assert!(writeback > 10_000);
        let commits = events(&calls)
            .filter(|e| e.flags.contains(Flags::PREFLUSH) && e.flags.contains(Flags::FUA))
            .count();
        assert!(commits > 0);
    }

    fn median(mut v: Vec<u64>) -> u64 {
        v.sort_unstable();
        v[v.len() / 2]
    }

    #[test]
    fn latencies_are_plausible() {
        let (calls, _) = record(Workload::Mixed, 200_000, 9);
        let lat = |f: &dyn Fn(&Event) -> bool| -> Vec<u64> {
            events(&calls)
                .filter(|e| f(e))
                .map(|e| e.latency_ns)
                .collect()
        };
        let nvme = lat(&|e| {
            e.dev.major() == 259 && e.op == Op::Read && e.bytes == 4096 && e.flags == Flags(0)
        });
        let m = median(nvme.clone());
        assert!((80_000..=150_000).contains(&m), "nvme 4k read median {m}");
        let slow = nvme.iter().filter(|&&l| l > 10 * m).count();
        assert!(
            slow * 1000 >= nvme.len() && slow * 100 <= nvme.len(),
            "{slow} slow of {}",
            nvme.len()
        );
        let zram = median(lat(&|e| e.dev.major() == 252));
        assert!((5_000..=20_000).contains(&zram), "zram median {zram}");
        let (calls2, _) = record(Workload::Oltp, 50_000, 9);
        let sata: Vec<u64> = events(&calls2)
            .filter(|e| e.dev.major() == 8 && e.op == Op::Read)
            .map(|e| e.latency_ns)
            .collect();
        if !sata.is_empty() {
            let m = median(sata);
            assert!((2_000_000..=8_000_000).contains(&m), "sata read median {m}");
        }
        // Not rounded.
        assert!(events(&calls).filter(|e| e.latency_ns % 1000 != 0).count() > 1000);
    }

    #[test]
    fn workloads_have_their_character() {
        let (calls, _) = record(Workload::Mixed, 300_000, 4);
        let ev: Vec<&Event> = events(&calls).collect();
        let any = |f: &dyn Fn(&Event) -> bool| ev.iter().any(|e| f(e));
        assert!(any(&|e| e.op == Op::Discard));
        assert!(any(&|e| e.op == Op::Flush));
        assert!(any(
            &|e| e.flags.contains(Flags::READAHEAD) && e.syscall == Some(Syscall::READAHEAD)
        ));
        assert!(any(&|e| e.syscall == Some(Syscall::PAGE_FAULT)));
        assert!(any(&|e| e.syscall.is_none()));
        assert!(any(&|e| e.error == 5));
        let errors = ev.iter().filter(|e| e.error != 0).count();
        assert!(errors < 50, "{errors} errors");

        let (calls, _) = record(Workload::RandRead, 100_000, 4);
        let fio = events(&calls)
            .filter(|e| e.op == Op::Read && e.path_id as usize <= 200_000)
            .filter(|e| {
                matches!(
                    e.syscall,
                    Some(Syscall::IO_SUBMIT | Syscall::IO_URING_ENTER | Syscall::PREAD64)
                )
            })
            .count();
        assert!(fio > 70_000);
        let small = events(&calls)
            .filter(|e| e.op == Op::Read && e.bytes == 4096)
            .count();
        assert!(small > 60_000);

        let (calls, _) = record(Workload::Oltp, 100_000, 4);
        let ev: Vec<&Event> = events(&calls).collect();
        let count = |f: &dyn Fn(&Event) -> bool| ev.iter().filter(|e| f(e)).count();
        assert!(
            count(&|e| e.op == Op::Read && e.bytes == 16384 && e.syscall == Some(Syscall::PREAD64))
                > 40_000
        );
        assert!(count(&|e| e.flags.contains(Flags::SYNC) && e.flags.contains(Flags::FUA)) > 1_000);
        assert!(count(&|e| e.op == Op::Flush) > 100);
        assert!(
            count(&|e| e.syscall == Some(Syscall::JOURNAL) && e.flags.contains(Flags::META))
                > 1_000
        );
        assert!(count(&|e| e.flags.contains(Flags::META) && e.op == Op::Read) > 100);
        let pids: HashSet<u32> = ev.iter().filter(|e| e.pid == 1423).map(|e| e.tid).collect();
        assert!(pids.len() >= 20, "mysqld threads: {}", pids.len());
    }

    #[test]
    fn timestamps_follow_the_workload_rate() {
        for w in Workload::ALL {
            let (_, sum) = record(w, 200_000, 21);
            let secs = (sum.last_timestamp_ns - sum.first_timestamp_ns) as f64 / 1e9;
            let rate = 200_000.0 / secs;
            assert!(
                rate > w.iops() * 0.4 && rate < w.iops() * 2.5,
                "{}: {rate} IOPS",
                w.name()
            );
        }
    }
}
