//! Recording a replay (`iodump replay -o`): a child `iodump record` of the targets' devices,
//! in its own process group, started before the replay and stopped after it; then the
//! block-layer latencies of its trace, to set beside the recorded ones.
//!
//! The child is this executable (`std::env::current_exe`) run as `iodump record`: the
//! replayer does not link the recorder.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use iodump_format::Reader;

use crate::error::ReplayError;
use crate::hist::Hist;
use crate::plan::{IoKind, Plan};
use crate::report::{block_latency_rows, LatencyRows};
use crate::target::{Target, TargetKind};

/// How long the recorder may take to say it is recording.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The first words of the recorder's line on stderr once it records.
const RECORDING: &str = "iodump: recording";

fn recorder_err(what: &str) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Recorder {
        what: what.to_string(),
        source: Some(source),
    }
}

fn failed(what: String) -> ReplayError {
    ReplayError::Recorder { what, source: None }
}

/// A running recorder child.
pub struct Recorder {
    child: Child,
    /// Its stderr, line by line.
    lines: mpsc::Receiver<String>,
}

impl Recorder {
    /// Starts `iodump record -d DEV… --pid <this process> -o output` and waits until it
    /// records.
    pub fn start(devices: &[String], output: &Path) -> Result<Recorder, ReplayError> {
        let mut rc = Recorder::spawn(devices, output)?;
        rc.wait_until_recording()?;
        Ok(rc)
    }

    fn spawn(devices: &[String], output: &Path) -> Result<Recorder, ReplayError> {
        let exe =
            std::env::current_exe().map_err(recorder_err("cannot find the iodump executable"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("record");
        for d in devices {
            cmd.arg("-d").arg(d);
        }
        cmd.arg("--pid")
            .arg(std::process::id().to_string())
            .arg("-o")
            .arg(output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C stops the replay, which then stops the recorder.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(recorder_err("cannot start the recorder"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| failed("recorder has no stderr".into()))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Ok(Recorder { child, lines: rx })
    }

    /// Reads the child's stderr until it says it records; fails if it ends or stays silent
    /// for [`START_TIMEOUT`].
    fn wait_until_recording(&mut self) -> Result<(), ReplayError> {
        let mut last = String::new();
        loop {
            match self.lines.recv_timeout(START_TIMEOUT) {
                Ok(l) if l.starts_with(RECORDING) => return Ok(()),
                Ok(l) => last = l,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    return Err(failed("the recorder did not start within 30 s".into()));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    let last = last.trim_start_matches("iodump: error: ");
                    return Err(failed(format!("cannot record the replay (-o): {last}")));
                }
            }
        }
    }

    /// Stops the recorder (SIGINT, as Ctrl-C would) and waits for it; its stderr lines.
    pub fn stop(mut self) -> Result<Vec<String>, ReplayError> {
        // SAFETY: kill only sends a signal to our child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let st = self
            .child
            .wait()
            .map_err(recorder_err("waiting for the recorder"))?;
        let lines: Vec<String> = self.lines.try_iter().collect();
        if !st.success() {
            return Err(failed(format!(
                "the recorder failed: {}",
                lines.last().map(String::as_str).unwrap_or("(no message)")
            )));
        }
        Ok(lines)
    }
}

/// The device to record for a target: itself, or the device holding a file, as `MAJ:MIN`.
pub fn record_device(kind: TargetKind, path: &Path) -> Result<String, ReplayError> {
    match kind {
        TargetKind::BlockDevice { major, minor } => Ok(format!("{major}:{minor}")),
        TargetKind::File { major, minor } => {
            if major == 0 {
                return Err(ReplayError::NoDeviceToRecord {
                    path: path.to_path_buf(),
                });
            }
            Ok(format!("{major}:{minor}"))
        }
    }
}

/// The devices to record for `targets`, each once, in target order.
pub fn devices_to_record(targets: &[Target]) -> Result<Vec<String>, ReplayError> {
    let mut devs = Vec::new();
    for t in targets {
        let d = record_device(t.kind, &t.path)?;
        if !devs.contains(&d) {
            devs.push(d);
        }
    }
    Ok(devs)
}

/// Block-layer latencies of the replay's recording `out` next to the recorded ones of `plan`.
pub fn block_latencies(plan: &Plan, out: &Path) -> Result<LatencyRows, ReplayError> {
    let r = Reader::open(out).map_err(|source| ReplayError::Recording {
        path: out.to_path_buf(),
        source,
    })?;
    let mut lat: [Hist; 5] = Default::default();
    for e in r.events() {
        if let Some(k) = IoKind::from_op(e.op) {
            lat[k as usize].add(e.latency_ns);
        }
    }
    Ok(block_latency_rows(plan, &lat))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_devices_are_the_targets_or_their_filesystems() {
        let p = Path::new("t");
        let dev = |kind| record_device(kind, p).map_err(|e| e.to_string());
        assert_eq!(
            dev(TargetKind::BlockDevice {
                major: 252,
                minor: 1
            })
            .unwrap(),
            "252:1"
        );
        assert_eq!(dev(TargetKind::File { major: 8, minor: 2 }).unwrap(), "8:2");
        // An anonymous device (btrfs, tmpfs, overlay): nothing to record.
        let e = dev(TargetKind::File {
            major: 0,
            minor: 40,
        })
        .unwrap_err();
        assert!(e.contains("without a single block device"), "{e}");
    }
}
