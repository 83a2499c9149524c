//! `iodump-replay` owns re-issuing a recorded workload: turning a trace into per-thread
//! streams with their timing and depth ([`plan`]), opening targets safely ([`target`]), the
//! io_uring and thread-pool engines ([`engine`]), the scheduler ([`run`]), recording the
//! replay with a child recorder ([`recorder`]), the measurements in bounded memory
//! ([`hist`]), the steps of one `iodump replay`
//! ([`session`]) and the recorded-versus-replayed report, as text and JSON ([`report`]).
//!
//! It depends on `iodump-format` (traces), `iodump-output` (the rule for `-o`) and
//! `iodump-host` (mounts and sysfs, for the safety checks), not on the recorder: a replay is
//! recorded by running `iodump record` as a child process.

pub mod engine;
pub mod error;
pub mod helper;
pub mod hist;
pub mod plan;
pub mod recorder;
pub mod report;
pub mod run;
pub mod session;
pub mod target;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use iodump_format::expr::Expr;
use iodump_format::{DevT, Reader};

pub use engine::EngineKind;
pub use error::ReplayError;
pub use plan::{Beyond, IoKind, Plan, PlanOptions};
pub use report::Report;
pub use run::{RunOptions, RunResult};
pub use session::{Finished, Notice, Session};
pub use target::Target;

/// Everything `iodump replay` was asked to do.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The trace.
    pub trace: PathBuf,
    /// Target for every device not in `map`.
    pub target: Option<PathBuf>,
    /// `DEV=PATH` pairs: DEV is a device name (`sda`, `/dev/sda`) or `MAJ:MIN` in the trace.
    pub map: Vec<(String, PathBuf)>,
    /// Time scale (2.0 = twice as fast).
    pub speed: f64,
    /// Ignore recorded time, keep order and depth.
    pub no_stall: bool,
    /// Replay writes, discards and write-zeroes.
    pub allow_writes: bool,
    /// Skip the mounted/in-use/signature checks.
    pub force: bool,
    /// Only I/O matching this.
    pub filter: Option<Expr>,
    /// Replay this many times back to back.
    pub loops: u32,
    /// Engine.
    pub engine: EngineKind,
    /// I/O past a target's end.
    pub beyond: Beyond,
    /// Limit for the I/O buffers, in bytes.
    pub memory_limit_bytes: u64,
    /// Scheduler threads (0: one per CPU but one, or one per CPU with `no_stall`; never more
    /// than there are streams).
    pub threads: usize,
    /// Record the replay's own I/O on the targets into this trace (`-o`).
    pub output: Option<PathBuf>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            trace: PathBuf::new(),
            target: None,
            map: Vec::new(),
            speed: 1.0,
            no_stall: false,
            allow_writes: false,
            force: false,
            filter: None,
            loops: 1,
            engine: EngineKind::IoUring,
            beyond: Beyond::Wrap,
            memory_limit_bytes: 1 << 30,
            threads: 0,
            output: None,
        }
    }
}

impl ReplayConfig {
    /// Checks what needs no trace: a positive, finite speed, at least one loop, a target.
    pub fn check(&self) -> Result<(), ReplayError> {
        if !(self.speed > 0.0 && self.speed.is_finite()) {
            return Err(ReplayError::BadSpeed { speed: self.speed });
        }
        if self.loops == 0 {
            return Err(ReplayError::NoLoops);
        }
        if self.target.is_none() && self.map.is_empty() {
            return Err(ReplayError::NoTarget);
        }
        Ok(())
    }

    /// The scheduler threads to run on a machine of `cpus` CPUs.
    pub fn scheduler_threads(&self, cpus: usize) -> usize {
        match self.threads {
            // Timed replay keeps one CPU free: spinning schedulers on every CPU get
            // preempted by the kernel's own work, which shows as ms of timing error.
            0 if !self.no_stall => cpus.saturating_sub(1).max(1),
            0 => cpus,
            n => n,
        }
    }

    /// Helper threads ([`helper`]) beside `threads` schedulers on `cpus` CPUs: one per CPU
    /// the schedulers leave free, in timed replay only (with `--no-stall` every CPU runs a
    /// scheduler of its own).
    pub fn helper_threads(&self, cpus: usize, threads: usize) -> usize {
        if self.no_stall {
            0
        } else {
            cpus.saturating_sub(threads).min(threads)
        }
    }
}

/// A plan with its opened targets, ready to run.
#[derive(Debug)]
pub struct Prepared {
    /// The plan.
    pub plan: Plan,
    /// Opened targets, by index.
    pub targets: Vec<Target>,
    /// The trace's device numbers and names.
    pub device_names: Vec<(DevT, String)>,
    /// Buffer slots (most I/Os in flight at once).
    pub slots: u32,
}

fn resolve_dev(reader: &Reader, spec: &str) -> Result<DevT, ReplayError> {
    let name = spec.strip_prefix("/dev/").unwrap_or(spec);
    let by_num = spec
        .split_once(':')
        .and_then(|(a, b)| Some(DevT::new(a.trim().parse().ok()?, b.trim().parse().ok()?)));
    reader
        .tables()
        .devices()
        .find(|d| d.name == name || Some(d.dev) == by_num)
        .map(|d| d.dev)
        .ok_or_else(|| ReplayError::UnknownDevice {
            spec: spec.to_string(),
            available: reader
                .tables()
                .devices()
                .map(|d| format!("{} ({}:{})", d.name, d.dev.major(), d.dev.minor()))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The opened targets and which recorded device goes to which.
struct Targets {
    targets: Vec<Target>,
    device_map: HashMap<DevT, u16>,
    default_target: Option<u16>,
}

/// Opens every target of `cfg` once (a path given twice is one target), safety checks
/// included, and maps the trace's devices to them.
fn open_targets(cfg: &ReplayConfig, reader: &Reader) -> Result<Targets, ReplayError> {
    let oo = target::OpenOptionsReplay {
        writes: cfg.allow_writes,
        force: cfg.force,
    };
    let mut targets: Vec<Target> = Vec::new();
    let mut index_of: HashMap<PathBuf, u16> = HashMap::new();
    let mut open = |p: &PathBuf, targets: &mut Vec<Target>| -> Result<u16, ReplayError> {
        if let Some(&i) = index_of.get(p) {
            return Ok(i);
        }
        // Replaying onto the trace itself would overwrite it (with --allow-writes) or read
        // back a file as if it were a disk: refused whatever the flags.
        if iodump_output::check_not_input(p, std::slice::from_ref(&cfg.trace)).is_err() {
            return Err(ReplayError::TargetIsTrace { path: p.clone() });
        }
        targets.push(Target::open(p, oo)?);
        let i = (targets.len() - 1) as u16;
        index_of.insert(p.clone(), i);
        Ok(i)
    };
    let mut device_map = HashMap::new();
    let mut mapped: HashMap<DevT, String> = HashMap::new();
    for (spec, path) in &cfg.map {
        let dev = resolve_dev(reader, spec)?;
        let given = format!("{spec}={}", path.display());
        if let Some(first) = mapped.insert(dev, given.clone()) {
            return Err(ReplayError::MappedTwice {
                first,
                second: given,
            });
        }
        let t = open(path, &mut targets)?;
        device_map.insert(dev, t);
    }
    let default_target = match &cfg.target {
        Some(p) => Some(open(p, &mut targets)?),
        None => None,
    };
    if targets.is_empty() {
        return Err(ReplayError::NothingToReplay {
            why: "no target: give --target PATH or --map DEV=PATH".into(),
        });
    }
    Ok(Targets {
        targets,
        device_map,
        default_target,
    })
}

/// Buffer slots for `plan` within `memory_limit_bytes`: twice the recorded peak in flight
/// (64 to 4096), halved until they fit.
fn buffer_slots(plan: &Plan, memory_limit_bytes: u64) -> Result<u32, ReplayError> {
    let slot_bytes = u64::from(plan.max_len_bytes.max(4096)).div_ceil(4096) * 4096;
    let mut slots = (plan.max_in_flight.saturating_mul(2)).clamp(64, 4096);
    while slots > 1 && u64::from(slots) * slot_bytes > memory_limit_bytes {
        slots /= 2;
    }
    if slot_bytes > memory_limit_bytes {
        return Err(ReplayError::TooMuchMemory {
            needed_bytes: slot_bytes,
            limit_bytes: memory_limit_bytes,
        });
    }
    Ok(slots)
}

/// `MemAvailable` of /proc/meminfo, when it can be read.
fn mem_available_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The recording at `path`: a trace file (one part of a recording in parts is that part
/// alone), or a directory that holds one recording (`record -o DIR/ --rotate …`: its parts
/// read as one trace).
fn open_recording(path: &std::path::Path) -> Result<Reader, ReplayError> {
    let mut traces = iodump_format::recording::open_traces(&[path.to_path_buf()]).map_err(|e| {
        ReplayError::Trace {
            path: e.path,
            source: e.source,
        }
    })?;
    if traces.len() != 1 {
        return Err(ReplayError::NotOneRecording {
            path: path.to_path_buf(),
            recordings: traces.len(),
        });
    }
    Ok(traces.remove(0).reader)
}

/// Reads the trace, opens the targets (safety checks included) and builds the plan.
pub fn prepare(cfg: &ReplayConfig) -> Result<Prepared, ReplayError> {
    let reader = open_recording(&cfg.trace)?;
    let t = open_targets(cfg, &reader)?;
    let po = PlanOptions {
        allow_writes: cfg.allow_writes,
        beyond: cfg.beyond,
        filter: cfg.filter.clone(),
        loops: cfg.loops,
        device_map: t.device_map,
        default_target: t.default_target,
        targets: t
            .targets
            .iter()
            .map(|t| plan::Geometry {
                size_bytes: t.size_bytes,
                align_bytes: t.align_bytes,
            })
            .collect(),
        available_bytes: mem_available_bytes(),
    };
    let plan = Plan::build(&reader, &po)?;
    let slots = buffer_slots(&plan, cfg.memory_limit_bytes)?;
    let device_names = reader
        .tables()
        .devices()
        .map(|d| (d.dev, d.name.clone()))
        .collect();
    Ok(Prepared {
        plan,
        targets: t.targets,
        device_names,
        slots,
    })
}

impl Prepared {
    /// Runs the replay on `threads` scheduler threads (streams are split between them; each
    /// has its own engine) until it ends or `stop` is set; completed I/Os are added to
    /// `done_ios` as they finish (in batches), for progress displays.
    pub fn execute(
        &self,
        engine: EngineKind,
        threads: usize,
        helpers: usize,
        o: RunOptions,
        stop: &AtomicBool,
        done_ios: &AtomicU64,
    ) -> Result<RunResult, ReplayError> {
        let shards = run::shard_streams(&self.plan, threads);
        let slots = (self.slots / shards.len().max(1) as u32).max(16);
        let (mut engines, fell_back) = self.engines(engine, shards.len(), slots)?;
        let helpers = self.helpers(helpers.min(shards.len()))?;
        // Time zero a little in the future so that no thread's first I/O is late by the setup.
        let shared = run::Shared {
            start: Instant::now() + Duration::from_micros(500),
            stop,
            done_ios,
        };
        let parts = run_shards(
            &self.plan,
            &shards,
            &mut engines,
            &helpers,
            slots,
            o,
            shared,
        )?;
        let mut r = run::merge(parts);
        if fell_back {
            r.engine = "psync (io_uring unavailable)";
        }
        Ok(r)
    }

    /// The name of recorded device `dev` in the trace (its number when it has none).
    pub fn device_name(&self, dev: DevT) -> String {
        self.device_names
            .iter()
            .find(|(d, _)| *d == dev)
            .map_or_else(|| dev.to_string(), |(_, n)| n.clone())
    }

    /// `n` helper threads over their own handles of the targets.
    fn helpers(&self, n: usize) -> Result<Vec<helper::Helper>, ReplayError> {
        let is_block: Vec<bool> = self.targets.iter().map(|t| t.is_block_device()).collect();
        let slot_bytes = (self.plan.max_len_bytes as usize).max(4096);
        (0..n)
            .map(|_| helper::Helper::spawn(self.target_files()?, is_block.clone(), slot_bytes))
            .collect()
    }

    /// `n` engines of `kind` with `slots` buffers each, and whether io_uring was asked for
    /// but the thread pool had to do.
    fn engines(
        &self,
        kind: EngineKind,
        n: usize,
        slots: u32,
    ) -> Result<(Vec<Box<dyn engine::Engine>>, bool), ReplayError> {
        let is_block: Vec<bool> = self.targets.iter().map(|t| t.is_block_device()).collect();
        let slot_bytes = (self.plan.max_len_bytes as usize).max(4096);
        let mut engines: Vec<Box<dyn engine::Engine>> = Vec::new();
        let mut fell_back = false;
        for _ in 0..n {
            // io_uring may be disabled (kernel.io_uring_disabled, seccomp): fall back to the
            // thread pool, and say so in the result's engine name.
            let uring = match kind {
                EngineKind::IoUring => engine::UringEngine::new(
                    self.target_files()?,
                    is_block.clone(),
                    slots as usize,
                    slot_bytes,
                )
                .ok(),
                EngineKind::Psync => None,
            };
            engines.push(match uring {
                Some(u) => Box::new(u),
                None => {
                    fell_back |= kind == EngineKind::IoUring;
                    let workers = (self.plan.max_in_flight as usize + 2)
                        .min(slots as usize)
                        .min(256);
                    Box::new(engine::PsyncEngine::new(
                        self.target_files()?,
                        is_block.clone(),
                        workers,
                        slot_bytes,
                    )?)
                }
            });
        }
        Ok((engines, fell_back))
    }

    /// The targets' files, duplicated (each engine owns its descriptors).
    fn target_files(&self) -> Result<Vec<File>, ReplayError> {
        self.targets
            .iter()
            .map(|t| {
                t.file.try_clone().map_err(|source| ReplayError::Open {
                    path: t.path.clone(),
                    source,
                })
            })
            .collect()
    }
}

/// Runs each shard on its engine in a thread of its own; the results in shard order, or the
/// first shard's error.
fn run_shards(
    plan: &Plan,
    shards: &[Vec<u32>],
    engines: &mut [Box<dyn engine::Engine>],
    helpers: &[helper::Helper],
    slots: u32,
    o: RunOptions,
    shared: run::Shared<'_>,
) -> Result<Vec<RunResult>, ReplayError> {
    let results: Vec<Result<RunResult, ReplayError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .zip(engines.iter_mut())
            .enumerate()
            .map(|(i, (shard, eng))| {
                let helper = helpers.get(i);
                scope.spawn(move || run::run(plan, shard, eng.as_mut(), slots, o, shared, helper))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ReplayError::Engine {
                        what: "a scheduler thread panicked",
                        source: std::io::Error::other("panic"),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_checks_speed_loops_and_target() {
        let ok = ReplayConfig {
            target: Some(PathBuf::from("/dev/null")),
            ..ReplayConfig::default()
        };
        ok.check().unwrap();
        let mapped = ReplayConfig {
            map: vec![("sda".into(), PathBuf::from("img"))],
            ..ReplayConfig::default()
        };
        mapped.check().unwrap();
        for speed in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let c = ReplayConfig {
                speed,
                ..ok.clone()
            };
            assert!(
                matches!(c.check(), Err(ReplayError::BadSpeed { .. })),
                "{speed}"
            );
        }
        let c = ReplayConfig {
            loops: 0,
            ..ok.clone()
        };
        assert!(matches!(c.check(), Err(ReplayError::NoLoops)));
        let c = ReplayConfig::default();
        assert!(matches!(c.check(), Err(ReplayError::NoTarget)));
    }

    #[test]
    fn scheduler_threads_keep_a_cpu_free_when_timed() {
        let c = |threads, no_stall| ReplayConfig {
            threads,
            no_stall,
            ..ReplayConfig::default()
        };
        assert_eq!(c(0, false).scheduler_threads(4), 3);
        assert_eq!(c(0, false).scheduler_threads(1), 1);
        assert_eq!(c(0, true).scheduler_threads(4), 4);
        assert_eq!(c(6, false).scheduler_threads(4), 6);
    }

    #[test]
    fn buffer_slots_fit_the_memory_limit() {
        let plan = |max_in_flight, max_len_bytes| Plan {
            max_in_flight,
            max_len_bytes,
            ..Plan::default()
        };
        // Twice the peak, at least 64, at most 4096.
        assert_eq!(buffer_slots(&plan(100, 4096), 1 << 30).unwrap(), 200);
        assert_eq!(buffer_slots(&plan(3, 4096), 1 << 30).unwrap(), 64);
        assert_eq!(buffer_slots(&plan(10_000, 512), 1 << 30).unwrap(), 4096);
        // 1 MiB I/Os in 16 MiB: 16 slots (64 halved twice).
        assert_eq!(buffer_slots(&plan(3, 1 << 20), 16 << 20).unwrap(), 16);
        let e = buffer_slots(&plan(3, 1 << 20), 1 << 19).unwrap_err();
        assert!(matches!(
            e,
            ReplayError::TooMuchMemory {
                needed_bytes: 1048576,
                limit_bytes: 524288
            }
        ));
    }
}
