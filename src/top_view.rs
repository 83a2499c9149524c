//! The text and JSON of `iodump top`: an [`Interval`] the recorder's aggregator
//! ([`iodump_record::live`]) made, drawn as the full screen's or `-b`'s table ([`render`]) or
//! as one JSON line ([`to_json`]); and the sink of `-b` ([`BatchSink`]) that prints them.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

// Names (files, processes, containers, cgroups) may hold control characters; each is
// escaped before it is drawn.
use iodump_format::text::escape_controls as shown;
use iodump_format::units::{format_duration_ns, DurationStyle};
use iodump_format::Event;
use iodump_record::abi::IoEvent;
use iodump_record::convert::Converter;
use iodump_record::live::{Aggregator, Interval, Key, Metrics, Row, Sort, View};
use iodump_record::{LiveSink, RecorderStatus};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// A rate for a narrow column: `0`, `3.5`, `1234`.
fn rate(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// MB/s for a narrow column.
fn mbps(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// "3 files", "1 process".
fn rows_text(view: View, n: usize) -> String {
    let (one, many) = match view {
        View::File => ("file", "files"),
        View::Proc => ("process", "processes"),
        View::Dev => ("device", "devices"),
        View::Cgroup => ("cgroup", "cgroups"),
    };
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A latency for a narrow column: `850ns`, `12us`, `1.25ms`, `2.1s`; `-` for none.
pub fn latency(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        format_duration_ns(ns as f64, DurationStyle::Narrow)
    }
}

/// Local time of day, `HH:MM:SS`.
fn local_hms(wall_ns: i64) -> String {
    let t: libc::time_t = (wall_ns / 1_000_000_000) as libc::time_t;
    // SAFETY: localtime_r writes only the tm we pass, on our stack.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Cuts `s` to `w` characters: from the left for paths (`…/dir/file`), else from the right.
fn fit(s: &str, w: usize, keep_end: bool) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    // The characters that fit in w - 1 columns (a wide one takes two), then `…`.
    let mut room = w - 1;
    let mut take = |c: &char| {
        let cw = UnicodeWidthChar::width(*c).unwrap_or(0);
        let fits = cw <= room;
        if fits {
            room -= cw;
        }
        fits
    };
    if keep_end {
        let mut tail: Vec<char> = s.chars().rev().take_while(&mut take).collect();
        tail.reverse();
        format!("…{}", tail.into_iter().collect::<String>())
    } else {
        let head: String = s.chars().take_while(&mut take).collect();
        format!("{head}…")
    }
}

/// The columns `s` takes on a terminal: a wide character (CJK, most emoji) two, a combining
/// one none ([`shown`] text holds no control character).
fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` padded with spaces to `w` columns (format's `{:<w$}` counts characters, not columns).
fn padded(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

const NUM_HEADER: &str = "  READ/s WRITE/s  RMB/s  WMB/s    P50    P99  QUEUE";

fn num_cols(l: &mut String, m: &Metrics) {
    let _ = write!(
        l,
        "{:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}",
        rate(m.read_iops()),
        rate(m.write_iops()),
        mbps(m.read_mbps()),
        mbps(m.write_mbps()),
        latency(m.p50_ns),
        latency(m.p99_ns),
        m.queue_ns.map_or_else(|| "-".to_string(), latency),
    );
}

/// What [`render`] draws besides the rows.
#[derive(Clone, Debug, Default)]
pub struct Screen<'a> {
    /// Interval length shown in the title.
    pub interval: Duration,
    /// Appended to the title (`[paused]`).
    pub status: &'a str,
    /// Most rows (None: all).
    pub limit: Option<usize>,
    /// Width to fit (None: lines as long as they come).
    pub width: Option<usize>,
}

/// An interval as text: a title, the totals line, a column header and the rows of `view`
/// (as sorted), each line at most `width` characters.
pub fn render(iv: &Interval, view: View, sort: Sort, scr: &Screen<'_>) -> Vec<String> {
    let rows = iv.rows(view);
    let mut out = vec![title_line(iv, view, sort, scr, rows.len()), totals_line(iv)];
    let fitted = 3 + usize::from(!iv.in_flight_slow.is_empty());
    if !iv.in_flight_slow.is_empty() {
        out.push(in_flight_line(iv));
    }
    let limit = scr.limit.map(|n| n.saturating_sub(fitted - 3));
    let shown = &rows[..limit.map_or(rows.len(), |n| n.min(rows.len()))];
    let widths = ColumnWidths::of(shown);
    out.push(widths.header(view));
    for r in shown {
        out.push(widths.row(r, scr.width));
    }
    if let Some(w) = scr.width {
        for l in out.iter_mut().take(fitted) {
            if width(l) > w {
                *l = fit(l, w, false);
            }
        }
    }
    out
}

fn title_line(iv: &Interval, view: View, sort: Sort, scr: &Screen<'_>, rows: usize) -> String {
    format!(
        "iodump top - {}  every {}  by {} (v)  sort {} (s)  {}{}",
        local_hms(iv.wall_ns),
        show_duration(scr.interval),
        view.name(),
        sort.name(),
        rows_text(view, rows),
        scr.status,
    )
}

fn totals_line(iv: &Interval) -> String {
    let t = &iv.total;
    format!(
        "Total: {} IOPS (r {} w {})  {} MB/s (r {} w {})  p50 {}  p99 {}  queue {}  errors {}  lost {} ({} total)",
        rate(t.iops()),
        rate(t.read_iops()),
        rate(t.write_iops()),
        mbps(t.read_mbps() + t.write_mbps()),
        mbps(t.read_mbps()),
        mbps(t.write_mbps()),
        latency(t.p50_ns),
        latency(t.p99_ns),
        t.queue_ns.map_or_else(|| "-".to_string(), latency),
        t.errors,
        iv.lost,
        iv.lost_total,
    )
}

/// The devices with I/O in flight for a second or more at the last look (an I/O that hangs is
/// in no other figure until it completes), the longest first.
fn in_flight_line(iv: &Interval) -> String {
    format!(
        "In flight 1 s or more: {}",
        iodump_record::in_flight::slow_text(&iv.in_flight_slow)
    )
}

/// The widths of the columns whose width follows the rows shown.
struct ColumnWidths {
    /// The container column: as wide as its widest label (within limits).
    container: usize,
    /// The file view's process column, `comm[pid]`, as wide as its widest entry.
    process: usize,
}

impl ColumnWidths {
    fn of(rows: &[Row]) -> ColumnWidths {
        let container = rows
            .iter()
            .map(|r| match &r.key {
                Key::Proc { container, .. } => width(&shown(container)),
                Key::Cgroup { identity, .. } => width(&shown(&identity.label())),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .clamp(9, 40);
        let process = rows
            .iter()
            .map(|r| match &r.key {
                Key::File { pid, comm, .. } => width(&shown(comm)) + pid.to_string().len() + 2,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .clamp(7, 24);
        ColumnWidths { container, process }
    }

    fn header(&self, view: View) -> String {
        let (cw, pw) = (self.container, self.process);
        let mut header = NUM_HEADER.to_string();
        match view {
            View::File => {
                let _ = write!(header, " {:<pw$} FILE", "PROCESS");
            }
            View::Proc => {
                let _ = write!(header, "     PID COMM            {:<cw$} ARGV", "CONTAINER");
            }
            View::Dev => header.push_str(" DEVICE       MAJ:MIN"),
            View::Cgroup => {
                let _ = write!(header, " {:<cw$} CGROUP", "CONTAINER");
            }
        }
        header
    }

    /// One row: the numbers, the view's key columns, and the last column (a path, the argv)
    /// cut to what is left of `width`.
    fn row(&self, r: &Row, width: Option<usize>) -> String {
        let (cw, pw) = (self.container, self.process);
        let mut l = String::new();
        num_cols(&mut l, &r.m);
        let (last, keep_end) = match &r.key {
            Key::File {
                path, pid, comm, ..
            } => {
                let who = format!("{}[{pid}]", shown(comm));
                let _ = write!(l, " {} ", padded(&fit(&who, pw, false), pw));
                (shown(path), true)
            }
            Key::Proc {
                pid,
                comm,
                argv,
                container,
            } => {
                let _ = write!(
                    l,
                    " {pid:>7} {} {} ",
                    padded(&fit(&shown(comm), 15, false), 15),
                    padded(&fit(&shown(container), cw, false), cw)
                );
                (shown(if argv.is_empty() { comm } else { argv }), false)
            }
            Key::Dev { dev, name } => {
                let _ = write!(l, " {} ", padded(&fit(&shown(name), 12, false), 12));
                l.push_str(&dev.to_string());
                (Cow::Borrowed(""), false)
            }
            Key::Cgroup { path, identity, .. } => {
                let _ = write!(
                    l,
                    " {} ",
                    padded(&fit(&shown(&identity.label()), cw, false), cw)
                );
                (shown(path), true)
            }
        };
        match width {
            Some(w) => {
                let used = self::width(&l);
                if used >= w {
                    l = fit(&l, w, false);
                } else {
                    l.push_str(&fit(&last, w - used, keep_end));
                }
            }
            None => l.push_str(&last),
        }
        l
    }
}

/// `1s`, `500ms`, `2.5s`.
pub fn show_duration(d: Duration) -> String {
    format_duration_ns(d.as_nanos() as f64, DurationStyle::Exact)
}

fn metrics_json(m: &Metrics) -> serde_json::Map<String, serde_json::Value> {
    let us = |ns: u64| ns as f64 / 1e3;
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let mut o = serde_json::Map::new();
    let mut put = |k: &str, v: serde_json::Value| {
        o.insert(k.to_string(), v);
    };
    put("reads", m.ios[0].into());
    put("writes", m.ios[1].into());
    put("other", m.ios[2].into());
    put("read_bytes", m.bytes[0].into());
    put("write_bytes", m.bytes[1].into());
    put("read_iops", round(m.read_iops()).into());
    put("write_iops", round(m.write_iops()).into());
    put("read_mbps", round(m.read_mbps()).into());
    put("write_mbps", round(m.write_mbps()).into());
    // No I/O, no latency: null (as the text view's `-`), not 0.
    let latency = |ns: u64| match m.ios.iter().sum::<u64>() {
        0 => serde_json::Value::Null,
        _ => round(us(ns)).into(),
    };
    put("p50_us", latency(m.p50_ns));
    put("p99_us", latency(m.p99_ns));
    put("max_us", latency(m.max_ns));
    put(
        "queue_us",
        m.queue_ns
            .map_or(serde_json::Value::Null, |q| round(us(q)).into()),
    );
    put("errors", m.errors.into());
    o
}

/// An interval as one JSON object (one line): time, interval, view, sort, totals with
/// losses, and the first `limit` rows of `view`.
pub fn to_json(iv: &Interval, view: View, sort: Sort, limit: Option<usize>) -> String {
    use serde_json::Value;
    let rows = iv.rows(view);
    let shown = &rows[..limit.map_or(rows.len(), |n| n.min(rows.len()))];
    let mut total = metrics_json(&iv.total);
    total.insert("lost_events".into(), iv.lost.into());
    total.insert("lost_events_total".into(), iv.lost_total.into());
    let rows: Vec<Value> = shown
        .iter()
        .map(|r| {
            let mut o = serde_json::Map::new();
            match &r.key {
                Key::File {
                    path,
                    dev,
                    pid,
                    comm,
                    ..
                } => {
                    o.insert("path".into(), path.as_str().into());
                    o.insert("device".into(), dev.as_str().into());
                    o.insert("pid".into(), (*pid).into());
                    o.insert("comm".into(), comm.as_str().into());
                }
                Key::Proc {
                    pid,
                    comm,
                    argv,
                    container,
                } => {
                    o.insert("pid".into(), (*pid).into());
                    o.insert("comm".into(), comm.as_str().into());
                    o.insert("argv".into(), argv.as_str().into());
                    o.insert("container".into(), container.as_str().into());
                }
                Key::Dev { dev, name } => {
                    o.insert("device".into(), name.as_str().into());
                    o.insert("dev".into(), dev.to_string().into());
                }
                Key::Cgroup { id, path, identity } => {
                    o.insert("cgroup_id".into(), (*id).into());
                    o.insert("cgroup".into(), path.as_str().into());
                    let opt = |v: &Option<String>| v.as_deref().map_or(Value::Null, Value::from);
                    o.insert(
                        "runtime".into(),
                        identity.runtime.map_or(Value::Null, |r| r.name().into()),
                    );
                    o.insert("container_id".into(), opt(&identity.container_id));
                    o.insert("pod_uid".into(), opt(&identity.pod_uid));
                    o.insert("qos".into(), opt(&identity.qos));
                    o.insert("unit".into(), opt(&identity.unit));
                    o.insert("label".into(), identity.label().into());
                }
            }
            o.extend(metrics_json(&r.m));
            Value::Object(o)
        })
        .collect();
    let mut o = serde_json::Map::new();
    o.insert("timestamp_ns".into(), iv.wall_ns.into());
    o.insert("interval_s".into(), iv.total.secs.into());
    o.insert("by".into(), view.name().into());
    o.insert("sort".into(), sort.name().into());
    o.insert("total".into(), Value::Object(total));
    let slow: Vec<Value> = iv
        .in_flight_slow
        .iter()
        .map(|(name, d)| {
            serde_json::json!({
                "device": name,
                "ios": d.slow,
                "oldest_s": d.oldest_ns as f64 / 1e9,
            })
        })
        .collect();
    o.insert("in_flight_slow".into(), Value::Array(slow));
    o.insert("rows".into(), Value::Array(rows));
    Value::Object(o).to_string()
}

/// `iodump top -b`: an interval's text or JSON each `interval`, `iterations` times (None:
/// until stopped).
pub struct BatchSink<W: Write> {
    /// The aggregator fed by the recorder.
    pub agg: Aggregator,
    out: W,
    interval: Duration,
    ticking: bool,
    next: Instant,
    last: Instant,
    iterations: Option<u64>,
    done: u64,
    view: View,
    sort: Sort,
    limit: Option<usize>,
    json: bool,
    /// The first error writing to `out` (the sink stops then).
    pub error: Option<std::io::Error>,
}

impl<W: Write> BatchSink<W> {
    /// A batch printer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        agg: Aggregator,
        out: W,
        interval: Duration,
        iterations: Option<u64>,
        view: View,
        sort: Sort,
        limit: Option<usize>,
        json: bool,
    ) -> BatchSink<W> {
        let now = Instant::now();
        BatchSink {
            agg,
            out,
            interval,
            ticking: false,
            next: now + interval,
            last: now,
            iterations,
            done: 0,
            view,
            sort,
            limit,
            json,
            error: None,
        }
    }

    fn print(&mut self, iv: &Interval) -> std::io::Result<()> {
        if self.json {
            writeln!(
                self.out,
                "{}",
                to_json(iv, self.view, self.sort, self.limit)
            )?;
        } else {
            if self.done > 0 {
                writeln!(self.out)?;
            }
            let scr = Screen {
                interval: self.interval,
                limit: self.limit,
                ..Screen::default()
            };
            for l in render(iv, self.view, self.sort, &scr) {
                writeln!(self.out, "{l}")?;
            }
        }
        self.out.flush()
    }
}

impl<W: Write> LiveSink for BatchSink<W> {
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        self.agg.add(e, r, conv);
    }

    fn wants_in_flight(&self) -> bool {
        true
    }

    fn in_flight(&mut self, look: &iodump_record::in_flight::InFlightLook, conv: &Converter) {
        self.agg.set_in_flight(look, conv);
    }

    fn tick(&mut self, status: &RecorderStatus) -> bool {
        let lost_events = status.lost_events;
        let now = Instant::now();
        if !self.ticking {
            // The first tick: recording has started, the first interval starts now.
            self.ticking = true;
            self.agg.end_interval(0.0, lost_events);
            self.last = now;
            self.next = now + self.interval;
            return false;
        }
        if now < self.next {
            return false;
        }
        // Skipped intervals (a stall) are not made up for.
        while self.next <= now {
            self.next += self.interval;
        }
        let secs = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        let mut iv = self.agg.end_interval(secs, lost_events);
        iv.sort(self.sort);
        if let Err(e) = self.print(&iv) {
            self.error = Some(e);
            return true;
        }
        self.done += 1;
        self.iterations.is_some_and(|n| self.done >= n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_shown_as_typed() {
        assert_eq!(show_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(show_duration(Duration::from_secs(2)), "2s");
    }

    fn sample_interval() -> Interval {
        let m = |reads: u64, p99: u64| Metrics {
            secs: 2.0,
            ios: [reads, 10, 0],
            bytes: [reads * 4096, 10 * 65536],
            p50_ns: 50_000,
            p99_ns: p99,
            max_ns: p99,
            queue_ns: None,
            errors: 0,
        };
        Interval {
            wall_ns: 0,
            total: m(300, 3_000_000),
            lost: 1,
            lost_total: 5,
            files: vec![
                Row {
                    key: Key::File {
                        path_id: 1,
                        path: "/mnt/data/a-very-long-directory-name/file.bin".into(),
                        dev: "zram0".into(),
                        pid: 42,
                        comm: "fio".into(),
                    },
                    m: m(100, 3_000_000),
                },
                Row {
                    key: Key::File {
                        path_id: 2,
                        path: "/mnt/data/b".into(),
                        dev: "zram0".into(),
                        pid: 43,
                        comm: "dd".into(),
                    },
                    m: m(200, 1_000_000),
                },
            ],
            ..Interval::default()
        }
    }

    #[test]
    fn text_fits_and_sorts() {
        let mut iv = sample_interval();
        iv.sort(Sort::Iops);
        let scr = Screen {
            interval: Duration::from_secs(1),
            ..Screen::default()
        };
        let lines = render(&iv, View::File, Sort::Iops, &scr);
        assert!(
            lines[1].starts_with("Total: 155 IOPS (r 150 w 5.0)"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("lost 1 (5 total)"), "{}", lines[1]);
        assert!(lines[2].contains("FILE"));
        assert!(lines[3].ends_with("/mnt/data/b") && lines[3].contains(" dd[43] "));
        assert!(lines[4].ends_with("/file.bin"));
        iv.sort(Sort::Latency);
        let lines = render(&iv, View::File, Sort::Latency, &scr);
        assert!(lines[3].contains("fio[42]"), "{}", lines[3]);
        let narrow = Screen {
            width: Some(80),
            ..scr.clone()
        };
        for l in render(&iv, View::File, Sort::Latency, &narrow) {
            assert!(width(&l) <= 80, "{l}");
        }
        let l = &render(&iv, View::File, Sort::Latency, &narrow)[3];
        assert!(l.ends_with("/file.bin") && l.contains('…'), "{l}");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&iv, View::File, Sort::Latency, Some(1))).unwrap();
        assert_eq!(json["rows"].as_array().unwrap().len(), 1);
        assert_eq!(json["rows"][0]["comm"], "fio");
        assert_eq!(json["rows"][0]["read_iops"], 50.0);
        assert_eq!(json["total"]["lost_events"], 1);
        assert_eq!(json["rows"][0]["queue_us"], serde_json::Value::Null);
    }

    /// Wide characters (CJK, emoji) take two columns: a name is cut to the columns it has,
    /// not to as many characters (the row then wrapped and the next overwrote it).
    #[test]
    fn wide_characters_are_fitted_by_their_columns() {
        let name = "/data/日本語ファイル名🎉🎉全角.dat";
        assert_eq!(width(name), 6 + 2 * 12 + 4);
        let tail = fit(name, 20, true);
        assert!(
            tail.ends_with("全角.dat") && tail.starts_with('…'),
            "{tail}"
        );
        assert!(width(&tail) <= 20, "{tail}");
        let head = fit(name, 10, false);
        // 9 columns: 本 would make 11.
        assert_eq!(head, "/data/日…");
        assert_eq!(padded(&head, 12), "/data/日…   ");
        assert_eq!(width(&padded("🎉", 4)), 4);
    }

    /// An interval of no I/O has no latency: null in the JSON (as `-` on the screen), not 0.
    #[test]
    fn no_io_is_no_latency() {
        let o = metrics_json(&iodump_record::live::Metrics::default());
        for k in ["p50_us", "p99_us", "max_us", "queue_us"] {
            assert_eq!(o[k], serde_json::Value::Null, "{k}");
        }
        assert_eq!(o["reads"], 0);
    }

    /// Devices with I/O in flight for a second or more get a line under the totals (the
    /// longest first), one row less, and the JSON lists them.
    #[test]
    fn io_in_flight_for_a_second_or_more_is_a_line_of_its_own() {
        use iodump_record::in_flight::DeviceInFlight;
        let mut iv = sample_interval();
        iv.sort(Sort::Iops);
        let d = |dev, n, oldest_ns| DeviceInFlight {
            dev,
            ios: n,
            slow: n,
            oldest_ns,
        };
        iv.in_flight_slow = vec![
            (
                "loop0".into(),
                d(iodump_format::DevT::new(7, 0), 1, 3_000_000_000),
            ),
            (
                "sda".into(),
                d(iodump_format::DevT::new(8, 0), 2, 35_240_000_000),
            ),
        ];
        let scr = Screen {
            interval: Duration::from_secs(1),
            limit: Some(2),
            ..Screen::default()
        };
        let lines = render(&iv, View::File, Sort::Iops, &scr);
        assert!(lines[1].starts_with("Total: "), "{}", lines[1]);
        assert_eq!(
            lines[2],
            "In flight 1 s or more: sda 2 I/Os (oldest 35.2 s), loop0 1 I/O (oldest 3.0 s)"
        );
        assert!(lines[3].contains("FILE"));
        assert_eq!(lines.len(), 5, "one row less for the line: {lines:?}");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&iv, View::File, Sort::Iops, None)).unwrap();
        assert_eq!(json["in_flight_slow"][1]["device"], "sda");
        assert_eq!(json["in_flight_slow"][1]["ios"], 2);
        assert_eq!(json["in_flight_slow"][1]["oldest_s"], 35.24);
        iv.in_flight_slow.clear();
        let lines = render(&iv, View::File, Sort::Iops, &scr);
        assert!(lines[2].contains("FILE"), "no line without: {lines:?}");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&iv, View::File, Sort::Iops, None)).unwrap();
        assert_eq!(json["in_flight_slow"], serde_json::json!([]));
    }

    /// A file or process name with control characters is drawn escaped: no escape sequence
    /// reaches the terminal, no row is broken in two.
    #[test]
    fn names_are_drawn_without_control_characters() {
        let mut iv = sample_interval();
        if let Key::File { path, comm, .. } = &mut iv.files[0].key {
            *path = "/mnt/x\u{1b}[2J\nrow".into();
            *comm = "d\u{1b}]0;t\u{7}".into();
        }
        let scr = Screen {
            interval: Duration::from_secs(1),
            ..Screen::default()
        };
        let lines = render(&iv, View::File, Sort::Iops, &scr);
        for l in &lines {
            assert!(!l.chars().any(char::is_control), "{l:?}");
        }
        assert!(
            lines
                .iter()
                .any(|l| l.ends_with("/mnt/x\\x1b[2J\\nrow") && l.contains("d\\x1b]0;t\\x07[42]")),
            "{lines:?}"
        );
    }

    #[test]
    fn latency_text() {
        assert_eq!(latency(0), "-");
        assert_eq!(latency(850), "850ns");
        assert_eq!(latency(12_340), "12us");
        assert_eq!(latency(1_250_000), "1.25ms");
        assert_eq!(latency(2_100_000_000), "2.10s");
    }
}
