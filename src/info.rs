//! `iodump info`: prints a trace's [`Summary`] as text or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use iodump_format::recording::{open_all_traces, InputError, TraceInput};
use iodump_format::summary::{rfc3339_utc, summarize, Summary};
use iodump_format::{DevT, LossReason, Reader};
use serde_json::json;

/// `println!` for the text output, whose lines carry names from the trace (host, command
/// lines, devices, containers, files): their control characters are escaped, so that a
/// trace cannot send the terminal an escape sequence.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", iodump_format::text::escape_controls(&format!($($arg)*)))
    };
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Trace files (.iod).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One JSON object per file, one per line, instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the user named, as traces: the files of one recording in parts together. When that
/// fails (a file that cannot be read), each name on its own, so that the others are still
/// shown.
fn inputs(files: &[std::path::PathBuf]) -> Vec<Result<TraceInput, InputError>> {
    match open_all_traces(files) {
        Ok(v) => v.into_iter().map(Ok).collect(),
        Err(_) => files
            .iter()
            .flat_map(|f| match open_all_traces(std::slice::from_ref(f)) {
                Ok(v) => v.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            })
            .collect(),
    }
}

pub fn run(a: &InfoArgs) -> anyhow::Result<ExitCode> {
    let mut damaged_files = Vec::new();
    let mut failed = false;
    let inputs = inputs(&a.files);
    let many = inputs.len() > 1;
    for (i, t) in inputs.into_iter().enumerate() {
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                let e = anyhow::Error::new(e);
                if !many {
                    return Err(e);
                }
                // One line per input that failed; the others are still shown.
                eprintln!("iodump: error: {}", crate::one_line(&e));
                failed = true;
                continue;
            }
        };
        let r = &t.reader;
        let s = summarize(r);
        let name = match &t.recording {
            Some(_) if t.files.len() > 1 => t.files[0]
                .parent()
                .map_or_else(|| t.name.clone(), |d| d.display().to_string()),
            _ => t.files[0].display().to_string(),
        };
        let rows = part_rows(&t);
        if a.json {
            let mut v = to_json(name, r, &s);
            v["recording"] = json!(t.recording);
            v["parts"] = parts_json(&t, &rows);
            println!("{}", serde_json::to_string(&v).context("formatting JSON")?);
        } else {
            if i > 0 {
                println!();
            }
            print_text(&name, r, &s);
            print_parts(&t, &rows);
        }
        if !s.damaged.is_empty() {
            // A recording in parts: the first damaged part, with offsets in its own file
            // (the whole's are of the parts end to end); a missing part is in no file.
            let in_part = rows.iter().find_map(|(f, _, st)| {
                let d = &st.as_ref()?.4;
                Some((
                    f.clone(),
                    iodump_format::Damage::count_in_words(d),
                    d.first()?.to_string(),
                ))
            });
            let missing = s
                .damaged
                .iter()
                .any(|d| matches!(d.kind, iodump_format::DamageKind::MissingParts { .. }));
            damaged_files.push(match in_part.filter(|_| !missing) {
                Some(p) => p,
                None => (
                    t.files[0].clone(),
                    iodump_format::Damage::count_in_words(&s.damaged),
                    s.damaged[0].to_string(),
                ),
            });
        }
    }
    if let Some((p, n, first)) = damaged_files.first() {
        eprintln!(
            "iodump: error: {}: {n} (first: {first}); intact chunks were read",
            p.display(),
        );
        return Ok(ExitCode::from(1));
    }
    if failed {
        // Its error line is above.
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Events, losses, bytes, time span (UTC) and damage (offsets in the part's file) of one
/// part.
type PartStats = (
    u64,
    u64,
    u64,
    Option<(String, String)>,
    Vec<iodump_format::Damage>,
);

/// One part of a recording: its file, number and figures (none when it cannot be read).
type PartRow = (PathBuf, u32, Option<PartStats>);

/// Each part of a recording: its file, events, losses, time span and damage (each part
/// opened on its own); none for a trace that is not in parts.
fn part_rows(t: &TraceInput) -> Vec<PartRow> {
    if t.recording.is_none() {
        return Vec::new();
    }
    t.files
        .iter()
        .zip(&t.parts)
        .map(|(f, &n)| {
            let stats = Reader::open(f).ok().map(|r| {
                let s = summarize(&r);
                let h = r.header();
                let span = s
                    .first_timestamp_ns
                    .zip(s.last_timestamp_ns)
                    .map(|(a, b)| (rfc3339_utc(h.to_utc_ns(a)), rfc3339_utc(h.to_utc_ns(b))));
                (s.events, s.lost_events, s.file_bytes, span, s.damaged)
            });
            (f.clone(), n, stats)
        })
        .collect()
}

fn print_parts(t: &TraceInput, rows: &[PartRow]) {
    let Some(id) = &t.recording else {
        return;
    };
    let first = t.parts.first().copied().unwrap_or(0);
    let last = t.parts.last().copied().unwrap_or(0);
    let missing = (last.saturating_sub(first) as usize + 1).saturating_sub(t.parts.len());
    let span = if first == last {
        format!("part {first}")
    } else {
        format!("parts {first}–{last}")
    };
    say!(
        "recording     {id}: {} file{} ({span}{}{})",
        t.files.len(),
        if t.files.len() == 1 { "" } else { "s" },
        if first > 1 {
            format!("; parts before {first} deleted")
        } else {
            String::new()
        },
        if missing > 0 {
            format!("; {missing} missing")
        } else {
            String::new()
        }
    );
    for (f, n, st) in rows {
        let f = f.display();
        match st {
            Some((ev, lost, bytes, span, damage)) => say!(
                "  part {n:<6} {f} ({}): {} events, {} lost{}{}",
                human_bytes(*bytes),
                thousands(*ev),
                thousands(*lost),
                span.as_ref()
                    .map_or_else(String::new, |(a, b)| format!(", {a} .. {b}")),
                damage.first().map_or_else(String::new, |d| format!(
                    "; DAMAGED: {} (first: {d})",
                    iodump_format::Damage::count_in_words(damage)
                ))
            ),
            None => say!("  part {n:<6} {f}: cannot be read"),
        }
    }
}

fn parts_json(t: &TraceInput, rows: &[PartRow]) -> serde_json::Value {
    if t.recording.is_none() {
        return serde_json::Value::Null;
    }
    json!(rows
        .iter()
        .map(|(f, n, st)| {
            let (ev, lost, bytes, span, damage) = match st {
                Some((e, l, b, s, d)) => (Some(e), Some(l), Some(b), s.clone(), Some(d)),
                None => (None, None, None, None, None),
            };
            json!({
                "file": f.display().to_string(),
                "part": n,
                "events": ev,
                "lost_events": lost,
                "file_bytes": bytes,
                "first_timestamp": span.as_ref().map(|s| s.0.clone()),
                "last_timestamp": span.map(|s| s.1),
                "damage": damage.map(|d| d.iter().map(|d| d.to_string()).collect::<Vec<_>>()),
            })
        })
        .collect::<Vec<_>>())
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn human_bytes(n: u64) -> String {
    iodump_format::units::format_bytes(n as f64)
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "0%".into()
    } else {
        format!("{:.2}%", a as f64 * 100.0 / b as f64)
    }
}

fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The distinct labels of the cgroups of containers and pods in the trace's cgroups table.
fn container_labels(r: &Reader) -> Vec<String> {
    let mut v: Vec<String> = r
        .tables()
        .cgroups()
        .filter(|c| c.identity.container_id.is_some() || c.identity.pod_uid.is_some())
        .map(|c| c.identity.label())
        .collect();
    v.sort();
    v.dedup();
    v
}

fn print_text(name: &str, r: &Reader, s: &Summary) {
    print_origin(name, r, s);
    print_events(r, s);
    print_devices(r, s);
    print_tables(r, s);
    print_integrity(r, s);
}

/// The file, the recording host and command, the time span.
fn print_origin(name: &str, r: &Reader, s: &Summary) {
    let h = r.header();
    let (maj, min) = r.version();
    say!(
        "file          {name} ({}, format {maj}.{min})",
        human_bytes(s.file_bytes)
    );
    if r.header_ok() {
        say!(
            "host          {} (kernel {}), written by {}",
            h.hostname,
            h.kernel_release,
            h.tool_version
        );
        say!("recorded by   {}", shell_join(&h.recorder_argv));
        if let Some(cmd) = &h.command_argv {
            let status = match r.end().and_then(|e| e.command_exit_status) {
                Some(st) => format!("exit status {st}"),
                None => "exit status unknown".into(),
            };
            say!("command       {} ({status})", shell_join(cmd));
        }
    } else {
        // Damaged, or absent: a file cut before its header chunk (a recording cut at once).
        let why = if s.damaged.iter().any(|d| {
            d.chunk == Some("header") || d.offset == iodump_format::chunk::SIGNATURE_BYTES as u64
        }) {
            "header damaged"
        } else {
            "no header chunk"
        };
        say!("host          unknown ({why})");
    }
    match (s.first_timestamp_ns, s.last_timestamp_ns) {
        (Some(a), Some(b)) => say!(
            "time          {} .. {} ({:.3} s)",
            rfc3339_utc(h.to_utc_ns(a)),
            rfc3339_utc(h.to_utc_ns(b)),
            (b - a) as f64 / 1e9
        ),
        _ => say!("time          no events"),
    }
}

/// Events, losses by reason, segments, bytes per event.
fn print_events(r: &Reader, s: &Summary) {
    let total = s.events + s.lost_events;
    say!(
        "events        {} (lost {} = {} of all I/O seen)",
        thousands(s.events),
        thousands(s.lost_events),
        pct(s.lost_events, total)
    );
    if !r.losses().is_empty() {
        let mut by_reason: Vec<(LossReason, u64)> = Vec::new();
        for l in r.losses() {
            match by_reason.iter_mut().find(|(k, _)| *k == l.reason) {
                Some((_, n)) => *n += l.count,
                None => by_reason.push((l.reason, l.count)),
            }
        }
        let parts: Vec<String> = by_reason
            .iter()
            .map(|(k, n)| format!("{} {}", k.name(), thousands(*n)))
            .collect();
        say!(
            "losses        {} records: {}",
            r.losses().len(),
            parts.join(", ")
        );
    }
    say!(
        "segments      {} ({} damaged), footer index {}",
        s.segments,
        s.damaged_segments,
        if r.has_footer() { "present" } else { "absent" }
    );
    match s.bytes_per_event() {
        Some(b) => say!("bytes/event   {b:.2}"),
        None => say!("bytes/event   -"),
    }
}

/// The stack of the trace's stacked devices, one `dm-0 = vg-lv on sda2` per device.
fn stack_of(r: &Reader) -> Vec<String> {
    let name = |d: DevT| {
        r.tables()
            .device(d)
            .map(|t| t.name.clone())
            .unwrap_or_else(|| d.to_string())
    };
    r.tables()
        .devices()
        .filter(|d| !d.stacked_on.is_empty())
        .map(|d| {
            let below: Vec<String> = d.stacked_on.iter().map(|&s| name(s)).collect();
            let label = if d.label.is_empty() { "?" } else { &d.label };
            format!("{} = {label} on {}", d.name, below.join(", "))
        })
        .collect()
}

/// Devices, those with I/O one per line, then the stack.
fn print_devices(r: &Reader, s: &Summary) {
    let idle = s.devices.iter().filter(|d| d.events == 0).count();
    if idle > 0 {
        say!(
            "devices       {} ({idle} without I/O not shown)",
            s.devices.len()
        );
    } else {
        say!("devices       {}", s.devices.len());
    }
    for d in s.devices.iter().filter(|d| d.events > 0) {
        say!(
            "  {:<14} {:<9} {:>14} events {:>12}",
            d.name,
            d.dev.to_string(),
            thousands(d.events),
            human_bytes(d.bytes)
        );
    }
    let stack = stack_of(r);
    if !stack.is_empty() {
        say!("stack         {}", stack.join("; "));
    }
}

/// Processes, cgroups, paths, how I/O is attributed, errors.
fn print_tables(r: &Reader, s: &Summary) {
    say!(
        "processes     {} ({} threads)",
        thousands(s.processes),
        thousands(s.threads)
    );
    if r.tables().has_cgroup_table() {
        let labels = container_labels(r);
        say!(
            "cgroups       {}{}",
            thousands(r.tables().cgroups().count() as u64),
            if labels.is_empty() {
                String::new()
            } else {
                format!(" (containers and pods: {})", labels.join(", "))
            }
        );
    }
    say!("paths         {}", thousands(s.paths));
    say!(
        "attribution   file path {}, label {}, neither {}",
        pct(s.events_with_file, s.events),
        pct(s.events_with_label, s.events),
        pct(s.events_without_path, s.events)
    );
    if s.events_with_error > 0 {
        say!(
            "errors        {} I/Os failed",
            thousands(s.events_with_error)
        );
    }
}

/// The header's metadata, then damage (or that there is none).
fn print_integrity(r: &Reader, s: &Summary) {
    let h = r.header();
    for (k, v) in &h.metadata {
        say!("meta          {k} = {v}");
    }
    if s.damaged.is_empty() {
        match r.end() {
            Some(_) => say!("integrity     ok"),
            None => {
                say!("integrity     ok, but no end chunk: the recording did not finish cleanly")
            }
        }
    } else {
        say!(
            "integrity     DAMAGED: {}, {} events in damaged segments",
            iodump_format::Damage::count_in_words(&s.damaged),
            thousands(s.damaged_events)
        );
        for d in &s.damaged {
            say!("  {d}");
        }
    }
}

fn to_json(name: String, r: &Reader, s: &Summary) -> serde_json::Value {
    let h = r.header();
    let ts = |t: Option<u64>| t.map(|t| rfc3339_utc(h.to_utc_ns(t)));
    json!({
        "file": name,
        "format_version": format!("{}.{}", r.version().0, r.version().1),
        "file_bytes": s.file_bytes,
        "events": s.events,
        "lost_events": s.lost_events,
        "segments": s.segments,
        "damaged_segments": s.damaged_segments,
        "damaged_events": s.damaged_events,
        "bytes_per_event": s.bytes_per_event(),
        "first_timestamp": ts(s.first_timestamp_ns),
        "last_timestamp": ts(s.last_timestamp_ns),
        "first_timestamp_ns": s.first_timestamp_ns,
        "last_timestamp_ns": s.last_timestamp_ns,
        "duration_ns": s.first_timestamp_ns.zip(s.last_timestamp_ns).map(|(a, b)| b - a),
        "header_ok": r.header_ok(),
        "hostname": h.hostname,
        "kernel_release": h.kernel_release,
        "tool_version": h.tool_version,
        "recorder_argv": h.recorder_argv,
        "command_argv": h.command_argv,
        "command_exit_status": r.end().and_then(|e| e.command_exit_status),
        "finished": r.end().is_some(),
        "metadata": h.metadata.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "devices": s.devices.iter().map(|d| {
            let t = r.tables().device(d.dev);
            json!({
                "name": d.name,
                "dev": d.dev.to_string(),
                "partition_of": t.and_then(|t| t.partition_of).map(|p| p.to_string()),
                "sector_size": t.map(|t| t.sector_size),
                "bio_based": t.map(|t| t.bio_based),
                "label": t.map(|t| t.label.clone()).filter(|l| !l.is_empty()),
                "stacked_on": t.map(|t| t.stacked_on.iter().map(|&s| r.tables().device(s)
                    .map(|x| x.name.clone()).unwrap_or_else(|| s.to_string())).collect::<Vec<_>>()),
                "events": d.events,
                "bytes": d.bytes,
            })
        }).collect::<Vec<_>>(),
        "processes": s.processes,
        "threads": s.threads,
        "paths": s.paths,
        "cgroups": r.tables().has_cgroup_table().then(|| r.tables().cgroups().map(|c| json!({
            "cgroup_id": c.id,
            "path": c.path,
            "label": c.identity.label(),
            "runtime": c.identity.runtime.map(|x| x.name()),
            "container_id": c.identity.container_id,
            "monitor": c.identity.monitor,
            "pod_uid": c.identity.pod_uid,
            "qos": c.identity.qos,
            "unit": c.identity.unit,
        })).collect::<Vec<_>>()),
        "events_with_file_path": s.events_with_file,
        "events_with_label": s.events_with_label,
        "events_without_path": s.events_without_path,
        "events_with_error": s.events_with_error,
        "losses": r.losses().iter().map(|l| json!({
            "cpu": l.cpu, "reason": l.reason.name(), "count": l.count,
            "start_ns": l.start_ns, "end_ns": l.end_ns,
        })).collect::<Vec<_>>(),
        "footer": r.has_footer(),
        "damaged": s.damaged.iter().map(|d| json!({
            "offset": d.offset,
            "chunk": d.chunk,
            "error": d.kind.to_string(),
        })).collect::<Vec<_>>(),
    })
}
