//! One `iodump replay`, step by step: [`Session::prepare`] checks the configuration, reads
//! the trace, opens the targets and builds the plan; [`Session::notices`] says what the user
//! should know before it runs; [`Session::start_recording`] starts the `-o` recorder;
//! [`Session::execute`] replays; [`Session::finish`] stops the recorder and computes the
//! [`Report`].

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::error::ReplayError;
use crate::plan::Plan;
use crate::recorder::{self, Recorder};
use crate::report::Report;
use crate::run::{RunOptions, RunResult};
use crate::{prepare, Prepared, ReplayConfig};

/// Something to tell the user before the replay runs (it runs anyway).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A target refused O_DIRECT: it is replayed through the page cache.
    PageCache {
        /// The target.
        path: PathBuf,
    },
    /// Several recorded devices go to one target, where their offsets overlap.
    Overlap {
        /// The devices' names in the trace.
        devices: Vec<String>,
        /// The target.
        target: PathBuf,
    },
    /// The trace is damaged: what is intact is replayed.
    Damaged {
        /// The trace.
        trace: PathBuf,
        /// Damaged or missing parts.
        parts: usize,
        /// The first of them, in words.
        first: String,
    },
}

impl fmt::Display for Notice {
    /// The notice as it follows `iodump: ` on stderr.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::PageCache { path } => write!(
                f,
                "{} does not support O_DIRECT: replaying through the page cache",
                path.display()
            ),
            Notice::Overlap { devices, target } => write!(
                f,
                "warning: {} are replayed onto {}: their offsets overlap (give each its own target with --map DEV=PATH)",
                devices.join(", "),
                target.display()
            ),
            Notice::Damaged {
                trace,
                parts,
                first,
            } => write!(
                f,
                "warning: {} is damaged, replaying what is intact ({parts} damaged parts; first: {first})",
                trace.display()
            ),
        }
    }
}

/// What a finished replay hands back.
#[derive(Debug)]
pub struct Finished {
    /// The report.
    pub report: Report,
    /// What the recorder said on stderr (with `-o`).
    pub recorder_lines: Vec<String>,
}

/// A prepared replay, and its recorder once started.
pub struct Session {
    cfg: ReplayConfig,
    prepared: Prepared,
    recorder: Option<Recorder>,
}

/// A file's identity (device, inode), to compare paths.
type FileId = (u64, u64);

impl Session {
    /// Checks `cfg` (nothing runs when `-o` is refused), reads the trace, opens the targets
    /// and builds the plan.
    pub fn prepare(cfg: ReplayConfig) -> Result<Session, ReplayError> {
        cfg.check()?;
        let output = check_output(&cfg)?;
        let prepared = prepare(&cfg)?;
        check_output_is_no_target(&cfg, output, &prepared)?;
        check_clock(&cfg, &prepared.plan)?;
        Ok(Session {
            cfg,
            prepared,
            recorder: None,
        })
    }

    /// The plan and its targets.
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// I/Os to replay, every loop.
    pub fn planned_ios(&self) -> u64 {
        self.prepared.plan.planned_ios()
    }

    /// What to tell the user before the replay runs.
    pub fn notices(&self) -> Vec<Notice> {
        let p = &self.prepared;
        let mut out: Vec<Notice> = p
            .targets
            .iter()
            .filter(|t| !t.direct)
            .map(|t| Notice::PageCache {
                path: t.path.clone(),
            })
            .collect();
        for (ti, devs) in p.plan.devices_on_target.iter().enumerate() {
            if devs.len() > 1 {
                out.push(Notice::Overlap {
                    devices: devs.iter().map(|d| p.device_name(*d)).collect(),
                    target: p.targets[ti].path.clone(),
                });
            }
        }
        if let Some(first) = p.plan.damage.first() {
            out.push(Notice::Damaged {
                trace: self.cfg.trace.clone(),
                parts: p.plan.damage.len(),
                first: first.clone(),
            });
        }
        out
    }

    /// With `-o`: starts recording the targets' devices (without it: nothing to do).
    pub fn start_recording(&mut self) -> Result<(), ReplayError> {
        if let Some(out) = &self.cfg.output {
            let devs = recorder::devices_to_record(&self.prepared.targets)?;
            self.recorder = Some(Recorder::start(&devs, out)?);
        }
        Ok(())
    }

    /// Replays until the plan ends or `stop` is set; completed I/Os are added to `done_ios`
    /// in batches (for progress displays).
    pub fn execute(
        &self,
        stop: &AtomicBool,
        done_ios: &AtomicU64,
    ) -> Result<RunResult, ReplayError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let o = RunOptions {
            speed: self.cfg.speed,
            no_stall: self.cfg.no_stall,
        };
        let threads = self.cfg.scheduler_threads(cpus);
        let helpers = self.cfg.helper_threads(cpus, threads);
        self.prepared
            .execute(self.cfg.engine, threads, helpers, o, stop, done_ios)
    }

    /// Stops the recorder whatever `result` is, so that its trace is complete; then the
    /// report of `result`, with the block-layer latencies of the recording under `-o`.
    pub fn finish(self, result: Result<RunResult, ReplayError>) -> Result<Finished, ReplayError> {
        let lines = self.recorder.map(Recorder::stop);
        let res = result?;
        let lines = lines.transpose()?;
        let plan = &self.prepared.plan;
        let mut report = Report::new(plan, &res, self.cfg.speed, self.cfg.no_stall);
        if let (Some(out), Some(_)) = (&self.cfg.output, &lines) {
            report.block_latency = Some(recorder::block_latencies(plan, out)?);
        }
        Ok(Finished {
            report,
            recorder_lines: lines.unwrap_or_default(),
        })
    }
}

fn file_id(m: &std::fs::Metadata) -> FileId {
    (m.dev(), m.ino())
}

/// `-o` follows the output rule (checked before anything runs; the recorder checks again as
/// it creates the file) and is not the trace replayed. The identity of what is there now,
/// which is replaced once the replay's recording has started.
fn check_output(cfg: &ReplayConfig) -> Result<Option<FileId>, ReplayError> {
    let Some(out) = &cfg.output else {
        return Ok(None);
    };
    let existing = iodump_output::check(out)
        .map_err(ReplayError::Output)?
        .map(|m| file_id(&m));
    if let (Some(id), Ok(m)) = (existing, std::fs::metadata(&cfg.trace)) {
        if id == file_id(&m) {
            return Err(output_is(out, "the trace being replayed"));
        }
    }
    Ok(existing)
}

fn output_is(out: &Path, what: &'static str) -> ReplayError {
    ReplayError::OutputIs {
        path: out.to_path_buf(),
        what,
    }
}

/// The existing `-o` file (identity `output`) is none of the opened targets.
fn check_output_is_no_target(
    cfg: &ReplayConfig,
    output: Option<FileId>,
    p: &Prepared,
) -> Result<(), ReplayError> {
    let (Some(id), Some(out)) = (output, &cfg.output) else {
        return Ok(());
    };
    if p.targets
        .iter()
        .any(|t| t.file.metadata().is_ok_and(|m| file_id(&m) == id))
    {
        return Err(output_is(out, "a replay target"));
    }
    Ok(())
}

/// The scheduler's due times are u64 ns: a replay slowed down past that is refused.
fn check_clock(cfg: &ReplayConfig, plan: &Plan) -> Result<(), ReplayError> {
    if cfg.no_stall {
        return Ok(());
    }
    let stretched_ns = plan.last_sched_ns().map(|ns| ns as f64 / cfg.speed);
    if stretched_ns.is_none_or(|ns| ns >= u64::MAX as f64) {
        return Err(ReplayError::TooSlow {
            speed: cfg.speed,
            loops: plan.loops,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{IoKind, PlannedIo};

    #[test]
    fn clock_check_refuses_what_its_ns_cannot_hold() {
        let mut plan = Plan::default();
        plan.ios.push(PlannedIo {
            sched_ns: 1_000_000_000,
            offset_bytes: 0,
            len_bytes: 512,
            stream: 0,
            depth: 1,
            target: 0,
            kind: IoKind::Read,
            fua: false,
            recorded_latency_ns: 0,
            recorded_offset_bytes: 0,
        });
        let cfg = |speed, no_stall| ReplayConfig {
            speed,
            no_stall,
            ..ReplayConfig::default()
        };
        check_clock(&cfg(1.0, false), &plan).unwrap();
        check_clock(&cfg(1e-9, false), &plan).unwrap();
        // 1 s slowed down 1e11 times: 3170 years.
        let e = check_clock(&cfg(1e-11, false), &plan).unwrap_err();
        assert!(matches!(e, ReplayError::TooSlow { .. }), "{e}");
        // Without stalls recorded times do not count.
        check_clock(&cfg(1e-11, true), &plan).unwrap();
        // Loops of 10 s each, 2^32 − 1 of them: 1360 years at full speed.
        plan.loops = u32::MAX;
        plan.period_ns = 10_000_000_000;
        let e = check_clock(&cfg(1.0, false), &plan).unwrap_err();
        assert!(e.to_string().contains("fewer loops"), "{e}");
        plan.loops = 1000;
        check_clock(&cfg(1.0, false), &plan).unwrap();
    }

    #[test]
    fn output_may_not_be_the_trace() {
        let dir = std::env::temp_dir().join(format!("iodump-replay-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("t.iod");
        std::fs::write(&trace, b"x").unwrap();
        let hard = dir.join("hard.iod");
        let _ = std::fs::remove_file(&hard);
        std::fs::hard_link(&trace, &hard).unwrap();
        let cfg = |out: &Path| ReplayConfig {
            trace: trace.clone(),
            output: Some(out.to_path_buf()),
            ..ReplayConfig::default()
        };
        let e = check_output(&cfg(&hard)).unwrap_err();
        assert!(matches!(e, ReplayError::OutputIs { .. }), "{e}");
        assert!(
            e.to_string().ends_with("it is the trace being replayed"),
            "{e}"
        );
        // A new file: nothing there to compare.
        assert_eq!(check_output(&cfg(&dir.join("new.iod"))).unwrap(), None);
        let other = dir.join("other.iod");
        std::fs::write(&other, b"y").unwrap();
        assert!(check_output(&cfg(&other)).unwrap().is_some());
        assert_eq!(check_output(&ReplayConfig::default()).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn notices_read_as_before() {
        let n = Notice::PageCache {
            path: "/mnt/x".into(),
        };
        assert_eq!(
            n.to_string(),
            "/mnt/x does not support O_DIRECT: replaying through the page cache"
        );
        let n = Notice::Overlap {
            devices: vec!["sda".into(), "sdb".into()],
            target: "img".into(),
        };
        assert_eq!(
            n.to_string(),
            "warning: sda, sdb are replayed onto img: their offsets overlap (give each its own target with --map DEV=PATH)"
        );
        let n = Notice::Damaged {
            trace: "t.iod".into(),
            parts: 2,
            first: "bad checksum".into(),
        };
        assert_eq!(
            n.to_string(),
            "warning: t.iod is damaged, replaying what is intact (2 damaged parts; first: bad checksum)"
        );
    }
}
