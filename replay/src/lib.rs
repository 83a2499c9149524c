//! `iodump-replay` owns re-issuing a recorded workload: turning a trace into per-thread
//! streams with their timing and depth ([`plan`]), opening targets safely ([`target`]), the
//! io_uring and thread-pool engines ([`engine`]), the scheduler ([`run`]) and the
//! recorded-versus-replayed report ([`report`]). It depends on `iodump-format` only.

pub mod engine;
pub mod error;
pub mod plan;
pub mod report;
pub mod run;
pub mod target;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use iodump_format::expr::Expr;
use iodump_format::{DevT, Reader};

pub use engine::EngineKind;
pub use error::ReplayError;
pub use plan::{Beyond, IoKind, Plan, PlanOptions};
pub use run::{RunOptions, RunResult};
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

/// Reads the trace, opens the targets (safety checks included) and builds the plan.
pub fn prepare(cfg: &ReplayConfig) -> Result<Prepared, ReplayError> {
    let reader = Reader::open(&cfg.trace).map_err(|source| ReplayError::Trace {
        path: cfg.trace.clone(),
        source,
    })?;
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
        targets.push(Target::open(p, oo)?);
        let i = (targets.len() - 1) as u16;
        index_of.insert(p.clone(), i);
        Ok(i)
    };
    let mut device_map = HashMap::new();
    for (spec, path) in &cfg.map {
        let dev = resolve_dev(&reader, spec)?;
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
    let po = PlanOptions {
        allow_writes: cfg.allow_writes,
        beyond: cfg.beyond,
        filter: cfg.filter.clone(),
        loops: cfg.loops,
        device_map,
        default_target,
        targets: targets
            .iter()
            .map(|t| plan::Geometry {
                size_bytes: t.size_bytes,
                align_bytes: t.align_bytes,
            })
            .collect(),
    };
    let plan = Plan::build(&reader, &po)?;
    let slot_bytes = u64::from(plan.max_len_bytes.max(4096)).div_ceil(4096) * 4096;
    let mut slots = (plan.max_in_flight.saturating_mul(2)).clamp(64, 4096);
    while slots > 1 && u64::from(slots) * slot_bytes > cfg.memory_limit_bytes {
        slots /= 2;
    }
    if slot_bytes > cfg.memory_limit_bytes {
        return Err(ReplayError::TooMuchMemory {
            needed_bytes: slot_bytes,
            limit_bytes: cfg.memory_limit_bytes,
        });
    }
    let device_names = reader
        .tables()
        .devices()
        .map(|d| (d.dev, d.name.clone()))
        .collect();
    Ok(Prepared {
        plan,
        targets,
        device_names,
        slots,
    })
}

/// Runs a prepared replay on `threads` scheduler threads (streams are split between them;
/// each has its own engine) until it ends or `stop` is set; completed I/Os are added to
/// `done_ios` as they finish (in batches), for progress displays.
pub fn execute(
    p: &Prepared,
    engine: EngineKind,
    threads: usize,
    o: RunOptions,
    stop: &AtomicBool,
    done_ios: &std::sync::atomic::AtomicU64,
) -> Result<RunResult, ReplayError> {
    let shards = run::shard_streams(&p.plan, threads);
    let slots = (p.slots / shards.len().max(1) as u32).max(16);
    let is_block: Vec<bool> = p.targets.iter().map(|t| t.is_block_device()).collect();
    let slot_bytes = (p.plan.max_len_bytes as usize).max(4096);
    let files = || {
        p.targets
            .iter()
            .map(|t| {
                t.file.try_clone().map_err(|source| ReplayError::Open {
                    path: t.path.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let mut engines: Vec<Box<dyn engine::Engine>> = Vec::new();
    let mut fell_back = false;
    for _ in &shards {
        // io_uring may be disabled (kernel.io_uring_disabled, seccomp): fall back to the
        // thread pool, and say so in the result's engine name.
        let uring = match engine {
            EngineKind::IoUring => {
                engine::UringEngine::new(files()?, is_block.clone(), slots as usize, slot_bytes)
                    .ok()
            }
            EngineKind::Psync => None,
        };
        engines.push(match uring {
            Some(u) => Box::new(u),
            None => {
                fell_back |= engine == EngineKind::IoUring;
                Box::new(engine::PsyncEngine::new(
                    files()?,
                    is_block.clone(),
                    (p.plan.max_in_flight as usize + 2)
                        .min(slots as usize)
                        .min(256),
                    slot_bytes,
                )?)
            }
        });
    }
    // Time zero a little in the future so that no thread's first I/O is late by the setup.
    let start = std::time::Instant::now() + std::time::Duration::from_micros(500);
    let results: Vec<Result<RunResult, ReplayError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .zip(engines.iter_mut())
            .map(|(shard, eng)| {
                let plan = &p.plan;
                scope.spawn(move || {
                    let shared = run::Shared {
                        start,
                        stop,
                        done_ios,
                    };
                    run::run(plan, shard, eng.as_mut(), slots, o, shared)
                })
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
    let mut parts = Vec::new();
    for r in results {
        parts.push(r?);
    }
    let mut r = run::merge(parts);
    if fell_back {
        r.engine = "psync (io_uring unavailable)";
    }
    Ok(r)
}
