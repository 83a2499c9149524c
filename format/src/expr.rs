//! The filter expression language shared by `iodump record -f`, `iodump analyze --filter` and
//! `iodump replay -f` (grammar in `schemas/filter-expressions.md`): parse once into an
//! [`Expr`], evaluate per event against an [`EventView`], and extract the conjunctive
//! constraints a recorder can push into the kernel ([`Expr::pushdown`]).
//!
//! Parsing type-checks every comparison (a number against a text field is an error, an op has
//! no order…) and bounds the expression: at most [`MAX_DEPTH`] nested parentheses and `!`, at
//! most [`MAX_TERMS`] terms. Chains of `&&` and `||` are flattened into one n-ary node, so the
//! tree is never deeper than the nesting and evaluating it costs one visit per term at most
//! (it stops at the first false operand of `&&`, the first true one of `||`).

use std::fmt;

use crate::cgroup::Cgroup;
use crate::event::{DevT, Event, Flags, Op};
use crate::segment::{col, Columns, EventBatch};

/// Most nested parentheses and `!` an expression may have: `!(a && (b || !c))` has 4.
pub const MAX_DEPTH: usize = 64;

/// Most terms an expression may have: comparisons, flags, `true` and `false`.
pub const MAX_TERMS: usize = 1024;

/// A parse error, with the byte offset in the expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError {
    /// Byte offset of the problem.
    pub at: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.at + 1, self.message)
    }
}

impl std::error::Error for ExprError {}

/// Fields an expression can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `iosize`, `bytes`, `size`.
    Bytes,
    /// `rw`, `op`.
    Op,
    /// `lba`, `sector`.
    Sector,
    /// `pid`.
    Pid,
    /// `tid`.
    Tid,
    /// `comm`.
    Comm,
    /// `path`.
    Path,
    /// `dev`, `device` (name or MAJ:MIN).
    Dev,
    /// `latency`, `latency_ns`.
    Latency,
    /// `queue`, `queue_ns` (0 when absent).
    Queue,
    /// `device_ns`, `service`.
    DeviceTime,
    /// `cpu`.
    Cpu,
    /// `error`, `errno`.
    Error,
    /// `syscall`.
    Syscall,
    /// `cgroup`, `cgroup_id`.
    Cgroup,
    /// `dirtier`, `dirtier_pid` (0 when absent).
    Dirtier,
    /// `cgroup_path`: the submitter's cgroup path under the cgroup2 mount (cgroups table).
    CgroupPath,
    /// `container`: the container id of the submitter's cgroup (cgroups table).
    Container,
    /// `pod`: the Kubernetes pod UID of the submitter's cgroup (cgroups table).
    Pod,
    /// `runtime`: the container runtime of the submitter's cgroup (cgroups table).
    Runtime,
    /// `time`, `ts`: when the I/O entered the block layer, in UTC (the trace's clock).
    Time,
    /// A flag used as a boolean: `sync`, `meta`, `fua`, `preflush`, `readahead`,
    /// `background`, `nowait`.
    Flag(Flags),
}

/// The type of a field (schemas/filter-expressions.md, "Fields"), which decides the operators
/// and values it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Compared with numbers: `==` `!=` `<` `<=` `>` `>=`.
    Number,
    /// Compared with text: every operator, `=~` and `!~` as globs.
    Text,
    /// `rw`: `==`, `!=` and `=~` with an op letter or name.
    Op,
    /// Stands alone (`sync`, `!fua`); takes no operator.
    Flag,
    /// `time`: compared with a UTC time (`2026-12-04T03:12:00Z`): `==` `!=` `<` `<=` `>` `>=`.
    Time,
}

/// Every field name the language takes, with its aliases after it: the first name of each
/// field is the one messages list (the flags' names follow, from [`Flags::NAMES`]).
const FIELD_NAMES: [(&str, Field); 37] = [
    ("iosize", Field::Bytes),
    ("bytes", Field::Bytes),
    ("size", Field::Bytes),
    ("rw", Field::Op),
    ("op", Field::Op),
    ("lba", Field::Sector),
    ("sector", Field::Sector),
    ("pid", Field::Pid),
    ("tid", Field::Tid),
    ("comm", Field::Comm),
    ("path", Field::Path),
    ("file", Field::Path),
    ("dev", Field::Dev),
    ("device", Field::Dev),
    ("latency", Field::Latency),
    ("latency_ns", Field::Latency),
    ("lat", Field::Latency),
    ("queue_ns", Field::Queue),
    ("queue", Field::Queue),
    ("device_ns", Field::DeviceTime),
    ("service", Field::DeviceTime),
    ("cpu", Field::Cpu),
    ("error", Field::Error),
    ("errno", Field::Error),
    ("syscall", Field::Syscall),
    ("cgroup", Field::Cgroup),
    ("cgroup_id", Field::Cgroup),
    ("dirtier", Field::Dirtier),
    ("dirtier_pid", Field::Dirtier),
    ("cgroup_path", Field::CgroupPath),
    ("container", Field::Container),
    ("container_id", Field::Container),
    ("pod", Field::Pod),
    ("pod_uid", Field::Pod),
    ("runtime", Field::Runtime),
    ("time", Field::Time),
    ("ts", Field::Time),
];

impl Field {
    fn parse(name: &str) -> Option<Field> {
        if let Some((_, f)) = FIELD_NAMES.iter().find(|(n, _)| *n == name) {
            return Some(*f);
        }
        let f = Flags::NAMES.iter().find(|(_, n, _)| *n == name)?.0;
        Some(Field::Flag(f))
    }
    /// The fields' names as messages list them: each field's first name, then the flags.
    pub fn names() -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        let mut seen: Vec<Field> = Vec::new();
        for (n, f) in FIELD_NAMES {
            if !seen.contains(&f) {
                seen.push(f);
                out.push(n);
            }
        }
        out.extend(Flags::NAMES.iter().map(|(_, n, _)| *n));
        out
    }
    fn kind(self) -> Kind {
        match self {
            Field::Comm
            | Field::Path
            | Field::Dev
            | Field::Syscall
            | Field::CgroupPath
            | Field::Container
            | Field::Pod
            | Field::Runtime => Kind::Text,
            Field::Op => Kind::Op,
            Field::Flag(_) => Kind::Flag,
            Field::Time => Kind::Time,
            Field::Bytes
            | Field::Sector
            | Field::Pid
            | Field::Tid
            | Field::Latency
            | Field::Queue
            | Field::DeviceTime
            | Field::Cpu
            | Field::Error
            | Field::Cgroup
            | Field::Dirtier => Kind::Number,
        }
    }
    /// A number of nanoseconds (`latency`, `queue_ns`, `device_ns`).
    fn is_time(self) -> bool {
        matches!(self, Field::Latency | Field::Queue | Field::DeviceTime)
    }
    /// The event columns ([`col`]) the field is computed from, in a trace: a filter that
    /// names only some fields is evaluated on a segment decoded with only these.
    fn columns(self) -> Columns {
        Columns::of(match self {
            Field::Bytes => &[col::BYTES],
            Field::Op => &[col::OP],
            Field::Sector => &[col::SECTOR],
            Field::Pid => &[col::PID],
            // The process entry of the thread, else of the process.
            Field::Comm => &[col::PID, col::TID],
            Field::Tid => &[col::TID],
            Field::Path => &[col::PATH_ID],
            Field::Dev => &[col::DEV],
            Field::Latency => &[col::LATENCY_NS],
            Field::Queue => &[col::QUEUE_NS],
            Field::DeviceTime => &[col::LATENCY_NS, col::QUEUE_NS],
            Field::Cpu => &[col::CPU],
            Field::Error => &[col::ERROR],
            Field::Syscall => &[col::SYSCALL],
            Field::Cgroup | Field::CgroupPath | Field::Container | Field::Pod | Field::Runtime => {
                &[col::CGROUP_ID]
            }
            Field::Dirtier => &[col::DIRTIER_PID],
            Field::Time => &[col::TIMESTAMP_NS],
            Field::Flag(_) => &[col::FLAGS],
        })
    }
    /// The field's value on `e` when it is numeric.
    fn number(self, e: &Event) -> Option<f64> {
        Some(match self {
            Field::Bytes => e.bytes as f64,
            Field::Sector => e.sector as f64,
            Field::Pid => e.pid as f64,
            Field::Tid => e.tid as f64,
            Field::Latency => e.latency_ns as f64,
            Field::Queue => e.queue_ns.unwrap_or(0) as f64,
            Field::DeviceTime => e.device_ns() as f64,
            Field::Cpu => e.cpu as f64,
            Field::Error => e.error as f64,
            Field::Cgroup => e.cgroup_id as f64,
            Field::Dirtier => e.dirtier_pid.unwrap_or(0) as f64,
            _ => return None,
        })
    }
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=~` glob match
    Match,
    /// `!~` glob non-match
    NotMatch,
}

impl CmpOp {
    /// Whether `x OP y` holds for an ordering operator; the glob operators order nothing.
    fn orders<T: PartialOrd>(self, x: T, y: T) -> bool {
        match self {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            CmpOp::Lt => x < y,
            CmpOp::Le => x <= y,
            CmpOp::Gt => x > y,
            CmpOp::Ge => x >= y,
            CmpOp::Match | CmpOp::NotMatch => false,
        }
    }

    fn parse(s: &str) -> Option<CmpOp> {
        Some(match s {
            "==" => CmpOp::Eq,
            "!=" => CmpOp::Ne,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            "=~" => CmpOp::Match,
            "!~" => CmpOp::NotMatch,
            _ => return None,
        })
    }
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Match => "=~",
            CmpOp::NotMatch => "!~",
        }
    }
}

/// The bytes of a command name the kernel keeps (`TASK_COMM_LEN` less its NUL).
const COMM_BYTES: usize = 15;

/// A literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number (sizes and durations already scaled to bytes and ns), for numeric fields.
    Num(f64),
    /// A string or bare word, for text fields.
    Text(String),
    /// An operation, for `rw`.
    Op(Op),
    /// A device number, for `dev ==` and `dev !=` with `MAJ:MIN` (compares numbers: the same
    /// result as comparing the text, without formatting the event's device).
    Dev(DevT),
    /// A UTC time in ns since the epoch, for `time`.
    Time(i64),
}

/// A parsed, type-checked expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `a && b && …`: two or more operands, none of them itself an `And`.
    And(Vec<Expr>),
    /// `a || b || …`: two or more operands, none of them itself an `Or`.
    Or(Vec<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `field op value`, with a value of the field's type.
    Cmp(Field, CmpOp, Value),
    /// A flag on its own: true when the request has it.
    Flag(Flags),
    /// `true` (`false` is `Not(True)`).
    True,
}

/// What an expression reads of an event besides the event itself.
pub trait EventView {
    /// The submitter's command name.
    fn comm(&self) -> &[u8];
    /// The path or label of the file.
    fn path(&self) -> &[u8];
    /// The device's name (`sda1`).
    fn dev_name(&self) -> &str;
    /// The cgroups table entry of the event's `cgroup_id`, if known.
    fn cgroup(&self) -> Option<&Cgroup>;
    /// When the event entered the block layer, in UTC ns since the epoch (its timestamp on
    /// the trace's clock), if known; a `time` comparison is false without it.
    fn utc_ns(&self, e: &Event) -> Option<i64> {
        let _ = e;
        None
    }
}

/// An [`EventView`] over names already resolved by the caller.
#[derive(Clone, Copy, Debug)]
pub struct ResolvedView<'a> {
    /// The submitter's command name.
    pub comm: &'a [u8],
    /// The path or label of the file.
    pub path: &'a [u8],
    /// The device's name.
    pub dev: &'a str,
    /// The cgroups table entry of the event's cgroup.
    pub cgroup: Option<&'a Cgroup>,
    /// When the event entered the block layer, in UTC ns ([`EventView::utc_ns`]).
    pub utc_ns: Option<i64>,
}

impl Expr {
    /// Evaluates the expression on event `e` of segment `segment` of trace `r`, resolving the
    /// command name and path from the trace's tables and the device name from `dev_names`
    /// (device number → name; `?` when absent).
    pub fn eval_in(
        &self,
        r: &crate::reader::Reader,
        segment: usize,
        e: &Event,
        dev_names: &std::collections::HashMap<u32, String>,
    ) -> bool {
        let v = TraceView {
            r,
            segment,
            e,
            dev_names,
        };
        self.eval(e, &v)
    }
}

impl Expr {
    /// Puts in `keep` the rows of `b` (segment `segment` of `r`, decoded with at least
    /// [`Expr::columns`]) that [`Expr::eval_in`] keeps, in order: the same answer, a column
    /// at a time (a comparison of a number, the op, the device number, a flag or the time is
    /// a loop over its column; a text comparison looks up the rows' names, and only of the
    /// rows the rest of an `&&` still keeps).
    pub fn select_in(
        &self,
        r: &crate::reader::Reader,
        segment: usize,
        b: &EventBatch,
        dev_names: &std::collections::HashMap<u32, String>,
        keep: &mut Vec<u32>,
    ) {
        let h = r.header();
        self.select(
            b,
            &|ts| h.to_utc_ns(ts),
            &|x, i| x.eval_in(r, segment, &b.get_projected(i), dev_names),
            keep,
        );
    }

    /// [`Expr::select_in`] with the trace's clock (`utc`: a timestamp → UTC ns) and, for a
    /// comparison of text, `row(comparison, row)`: what [`Expr::eval`] says of it on that row.
    pub fn select(
        &self,
        b: &EventBatch,
        utc: &dyn Fn(u64) -> i64,
        row: &dyn Fn(&Expr, usize) -> bool,
        keep: &mut Vec<u32>,
    ) {
        let mut m = vec![true; b.len()];
        self.refine(&Batch { b, utc, row }, &mut m);
        keep.extend((0..m.len() as u32).filter(|&k| m[k as usize]));
    }

    /// `m[i] &= self(row i)`; `self` is evaluated only where it can change `m` (a text
    /// comparison only on the rows `m` still keeps).
    fn refine(&self, c: &Batch<'_>, m: &mut [bool]) {
        match self {
            Expr::True => {}
            Expr::And(xs) => xs.iter().for_each(|x| x.refine(c, m)),
            Expr::Or(xs) => {
                // Each operand on the rows kept so far by none of those before it.
                let mut any = vec![false; m.len()];
                let mut rest = Vec::with_capacity(m.len());
                for x in xs {
                    rest.clear();
                    rest.extend(m.iter().zip(&any).map(|(&m, &a)| m && !a));
                    x.refine(c, &mut rest);
                    any.iter_mut().zip(&rest).for_each(|(a, &r)| *a |= r);
                }
                m.copy_from_slice(&any);
            }
            Expr::Not(a) => {
                let mut t = m.to_vec();
                a.refine(c, &mut t);
                m.iter_mut().zip(&t).for_each(|(m, &t)| *m &= !t);
            }
            Expr::Flag(f) => refine_col(c, self, m, &c.b.flags, |v| v & f.0 == f.0),
            Expr::Cmp(f, op, Value::Num(y)) => {
                let (b, op, y) = (c.b, *op, *y);
                match f {
                    Field::Bytes => refine_num(c, self, m, &b.bytes, op, y, |v| v as f64),
                    Field::Sector => refine_num(c, self, m, &b.sector, op, y, |v| v as f64),
                    Field::Pid => refine_num(c, self, m, &b.pid, op, y, |v| v as f64),
                    Field::Tid => refine_num(c, self, m, &b.tid, op, y, |v| v as f64),
                    Field::Latency => refine_num(c, self, m, &b.latency_ns, op, y, |v| v as f64),
                    // Null rows hold 0, the value `eval` takes for them.
                    Field::Queue => refine_num(c, self, m, &b.queue_ns.values, op, y, |v| v as f64),
                    Field::Cpu => refine_num(c, self, m, &b.cpu, op, y, |v| v as f64),
                    Field::Error => refine_num(c, self, m, &b.error, op, y, |v| v as f64),
                    Field::Cgroup => refine_num(c, self, m, &b.cgroup_id, op, y, |v| v as f64),
                    Field::Dirtier => {
                        refine_num(c, self, m, &b.dirtier_pid.values, op, y, |v| v as f64)
                    }
                    Field::DeviceTime
                        if b.latency_ns.len() == m.len() && b.queue_ns.values.len() == m.len() =>
                    {
                        let rows = m.iter_mut().zip(&b.latency_ns).zip(&b.queue_ns.values);
                        for ((m, &lat), &q) in rows {
                            *m &= op.orders(lat.saturating_sub(q) as f64, y);
                        }
                    }
                    _ => refine_rows(c, self, m),
                }
            }
            Expr::Cmp(Field::Time, op, Value::Time(t)) => {
                let (op, t, utc) = (*op, *t, c.utc);
                refine_col(c, self, m, &c.b.timestamp_ns, |v| op.orders(utc(v), t))
            }
            Expr::Cmp(_, op, Value::Dev(d)) => {
                let (d, eq) = (d.0, *op == CmpOp::Eq);
                match op {
                    CmpOp::Eq | CmpOp::Ne => refine_col(c, self, m, &c.b.dev, |v| (v == d) == eq),
                    _ => m.fill(false),
                }
            }
            Expr::Cmp(_, op, Value::Op(o)) => {
                let code = o.code();
                // `Op::from_code`: an unknown code is `Other`.
                let is = |v: u8| Op::from_code(v).code() == code;
                match op {
                    CmpOp::Eq | CmpOp::Match => refine_col(c, self, m, &c.b.op, is),
                    CmpOp::Ne | CmpOp::NotMatch => refine_col(c, self, m, &c.b.op, |v| !is(v)),
                    _ => m.fill(false),
                }
            }
            Expr::Cmp(f, _, Value::Text(_)) => {
                // What a text comparison reads is the same for every row of the segment with
                // the same key (the thread, the path id, the device, the cgroup, the syscall):
                // evaluated once per key.
                let b = c.b;
                let n = m.len();
                match f {
                    Field::Comm if b.pid.len() == n && b.tid.len() == n => {
                        refine_keyed(c, self, m, |i| {
                            u64::from(b.pid[i]) << 32 | u64::from(b.tid[i])
                        })
                    }
                    Field::Path if b.path_id.len() == n => {
                        refine_keyed(c, self, m, |i| u64::from(b.path_id[i]))
                    }
                    Field::Dev if b.dev.len() == n => {
                        refine_keyed(c, self, m, |i| u64::from(b.dev[i]))
                    }
                    Field::CgroupPath | Field::Container | Field::Pod | Field::Runtime
                        if b.cgroup_id.len() == n =>
                    {
                        refine_keyed(c, self, m, |i| b.cgroup_id[i])
                    }
                    Field::Syscall if b.syscall.values.len() == n => {
                        refine_keyed(c, self, m, |i| b.syscall.get(i).map_or(u64::MAX, u64::from))
                    }
                    _ => refine_rows(c, self, m),
                }
            }
            Expr::Cmp(..) => refine_rows(c, self, m),
        }
    }
}

/// [`refine_rows`] for a comparison whose answer on a row depends only on `key(row)`: asked
/// once per key (the same key on the row before costs no lookup).
fn refine_keyed(c: &Batch<'_>, x: &Expr, m: &mut [bool], key: impl Fn(usize) -> u64) {
    let mut seen: crate::inthash::IntMap<u64, bool> = Default::default();
    let mut last: Option<(u64, bool)> = None;
    for (i, m) in m.iter_mut().enumerate() {
        if !*m {
            continue;
        }
        let k = key(i);
        let keeps = match last {
            Some((l, keeps)) if l == k => keeps,
            _ => *seen.entry(k).or_insert_with(|| (c.row)(x, i)),
        };
        last = Some((k, keeps));
        *m = keeps;
    }
}

/// What [`Expr::select`] evaluates on.
struct Batch<'a> {
    b: &'a EventBatch,
    utc: &'a dyn Fn(u64) -> i64,
    row: &'a dyn Fn(&Expr, usize) -> bool,
}

/// `m[i] &= keeps(col[i])`, a loop over the column; a column not decoded for every row (a
/// caller that did not decode [`Expr::columns`]) is evaluated row by row instead, as `eval`
/// on [`EventBatch::get_projected`]'s placeholders.
fn refine_col<T: Copy>(
    c: &Batch<'_>,
    x: &Expr,
    m: &mut [bool],
    col: &[T],
    mut keeps: impl FnMut(T) -> bool,
) {
    if col.len() != m.len() {
        return refine_rows(c, x, m);
    }
    for (m, &v) in m.iter_mut().zip(col) {
        *m &= keeps(v);
    }
}

/// [`refine_col`] of a numeric comparison `value(col[i]) op y`, as `eval` compares: in `f64`.
fn refine_num<T: Copy>(
    c: &Batch<'_>,
    x: &Expr,
    m: &mut [bool],
    col: &[T],
    op: CmpOp,
    y: f64,
    mut value: impl FnMut(T) -> f64,
) {
    match op {
        CmpOp::Eq => refine_col(c, x, m, col, |v| value(v) == y),
        CmpOp::Ne => refine_col(c, x, m, col, |v| value(v) != y),
        CmpOp::Lt => refine_col(c, x, m, col, |v| value(v) < y),
        CmpOp::Le => refine_col(c, x, m, col, |v| value(v) <= y),
        CmpOp::Gt => refine_col(c, x, m, col, |v| value(v) > y),
        CmpOp::Ge => refine_col(c, x, m, col, |v| value(v) >= y),
        CmpOp::Match | CmpOp::NotMatch => m.fill(false),
    }
}

/// `m[i] &= row(x, i)` on the rows `m` keeps.
fn refine_rows(c: &Batch<'_>, x: &Expr, m: &mut [bool]) {
    for (i, m) in m.iter_mut().enumerate() {
        if *m {
            *m = (c.row)(x, i);
        }
    }
}

/// The [`EventView`] of [`Expr::eval_in`]: each name is looked up in the trace's tables only
/// when the expression reads it (a filter on `latency` looks up no process, path or device),
/// so that the event's other columns need not even be decoded ([`Expr::columns`]).
struct TraceView<'a> {
    r: &'a crate::reader::Reader,
    segment: usize,
    e: &'a Event,
    dev_names: &'a std::collections::HashMap<u32, String>,
}

impl EventView for TraceView<'_> {
    fn comm(&self) -> &[u8] {
        self.r
            .comm(self.e.pid, self.e.tid, self.segment)
            .unwrap_or(b"")
    }
    fn path(&self) -> &[u8] {
        self.r
            .tables()
            .path(self.e.path_id)
            .map_or(&b""[..], |p| &p.path)
    }
    fn dev_name(&self) -> &str {
        self.dev_names
            .get(&self.e.dev.0)
            .map_or("?", |s| s.as_str())
    }
    fn cgroup(&self) -> Option<&Cgroup> {
        self.r.tables().cgroup(self.e.cgroup_id)
    }
    fn utc_ns(&self, e: &Event) -> Option<i64> {
        Some(self.r.header().to_utc_ns(e.timestamp_ns))
    }
}

impl EventView for ResolvedView<'_> {
    fn comm(&self) -> &[u8] {
        self.comm
    }
    fn path(&self) -> &[u8] {
        self.path
    }
    fn dev_name(&self) -> &str {
        self.dev
    }
    fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup
    }
    fn utc_ns(&self, _: &Event) -> Option<i64> {
        self.utc_ns
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A bare word: a field name, a number, or a text or op value.
    Word(String),
    /// A quoted string.
    Str(String),
    Op(&'static str),
    LParen,
    RParen,
}

/// Operators, longest first; a lone `=` means `==`.
const OPERATORS: [&str; 12] = [
    "&&", "||", "==", "!=", "<=", ">=", "=~", "!~", "<", ">", "!", "=",
];

/// Bytes that end a bare word (besides white space).
fn ends_word(c: u8) -> bool {
    c.is_ascii_whitespace()
        || matches!(
            c,
            b'(' | b')' | b'&' | b'|' | b'=' | b'!' | b'<' | b'>' | b'"' | b'\''
        )
}

/// Splits an expression into tokens one at a time, so that a parse error or a limit stops it
/// without tokenising the rest.
struct Lexer<'a> {
    s: &'a str,
    i: usize,
}

impl Lexer<'_> {
    fn next_token(&mut self) -> Result<Option<(usize, Tok)>, ExprError> {
        let b = self.s.as_bytes();
        while self.i < b.len() && b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
        let start = self.i;
        let Some(&c) = b.get(start) else {
            return Ok(None);
        };
        let tok = if c == b'(' {
            self.i += 1;
            Tok::LParen
        } else if c == b')' {
            self.i += 1;
            Tok::RParen
        } else if c == b'"' || c == b'\'' {
            let mut v = String::new();
            let mut chars = self.s[start + 1..].char_indices();
            loop {
                match chars.next() {
                    Some((k, ch)) if ch as u32 == c as u32 => {
                        self.i = start + 1 + k + 1;
                        break;
                    }
                    Some((_, '\\')) => match chars.next() {
                        Some((_, n)) => v.push(n),
                        None => v.push('\\'),
                    },
                    Some((_, ch)) => v.push(ch),
                    None => {
                        return Err(ExprError {
                            at: start,
                            message: "unterminated string".into(),
                        })
                    }
                }
            }
            Tok::Str(v)
        } else if let Some(op) = OPERATORS
            .iter()
            .find(|op| self.s[start..].starts_with(**op))
        {
            self.i += op.len();
            Tok::Op(if *op == "=" { "==" } else { op })
        } else if ends_word(c) {
            // A lone `&` or `|`.
            return Err(ExprError {
                at: start,
                message: format!(
                    "unexpected character {:?} (&& and || are written doubled)",
                    c as char
                ),
            });
        } else {
            while self.i < b.len() && !ends_word(b[self.i]) {
                self.i += 1;
            }
            Tok::Word(self.s[start..self.i].to_string())
        };
        Ok(Some((start, tok)))
    }
}

/// What a unit of [`UNITS`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// Bytes, in powers of 1024.
    Size,
    /// Nanoseconds.
    Duration,
}

/// A unit of the numbers in filter expressions.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    /// Its spellings, matched without regard to case; the first is the one messages show.
    pub names: &'static [&'static str],
    /// What it measures.
    pub kind: UnitKind,
    /// The value of 1 of it (bytes or nanoseconds).
    pub scale: f64,
}

/// The units of the filter language: [`parse_number`] reads them, its error messages and
/// [`units_help`] list them (schemas/filter-expressions.md says the same). Unlike durations
/// on the command line ([`crate::units`]), `m` here is a size (MiB), and there are no minutes:
/// `m` on a time field (`latency > 1m`) is refused as ambiguous.
pub const UNITS: [Unit; 9] = [
    Unit {
        names: &["B"],
        kind: UnitKind::Size,
        scale: 1.0,
    },
    Unit {
        names: &["K", "KB", "KiB"],
        kind: UnitKind::Size,
        scale: 1024.0,
    },
    Unit {
        names: &["M", "MB", "MiB"],
        kind: UnitKind::Size,
        scale: 1024.0 * 1024.0,
    },
    Unit {
        names: &["G", "GB", "GiB"],
        kind: UnitKind::Size,
        scale: 1024.0 * 1024.0 * 1024.0,
    },
    Unit {
        names: &["T", "TB", "TiB"],
        kind: UnitKind::Size,
        scale: 1024.0 * 1024.0 * 1024.0 * 1024.0,
    },
    Unit {
        names: &["ns"],
        kind: UnitKind::Duration,
        scale: 1.0,
    },
    Unit {
        names: &["us", "µs"],
        kind: UnitKind::Duration,
        scale: 1e3,
    },
    Unit {
        names: &["ms"],
        kind: UnitKind::Duration,
        scale: 1e6,
    },
    Unit {
        names: &["s", "sec"],
        kind: UnitKind::Duration,
        scale: 1e9,
    },
];

/// The unit of [`UNITS`] spelled `u` (any case).
fn unit(u: &str) -> Option<&'static Unit> {
    UNITS
        .iter()
        .find(|x| x.names.iter().any(|n| n.eq_ignore_ascii_case(u)))
}

/// The units of filter numbers, for messages: `sizes (powers of 1024): B, K (KB, KiB), …;
/// times: ns, us (µs), …`.
pub fn units_help() -> String {
    let list = |kind| {
        UNITS
            .iter()
            .filter(|u| u.kind == kind)
            .map(|u| match u.names {
                [one] => one.to_string(),
                [first, rest @ ..] => format!("{first} ({})", rest.join(", ")),
                [] => String::new(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "sizes (powers of 1024; M is MiB): {}; times: {}",
        list(UnitKind::Size),
        list(UnitKind::Duration)
    )
}

/// Splits `4k` into (`4`, `k`); `None` for hexadecimal or what does not start with a digit.
fn split_unit(s: &str) -> Option<(&str, &str)> {
    let s = s.trim();
    if s.starts_with("0x") {
        return None;
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    num.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        .then_some((num, unit))
}

/// Parses `4096`, `0x1000`, `64k`, `1M`, `1MiB`, `2G`, `500us`, `1.5ms`, `2s`: sizes
/// in bytes (binary multiples), durations in nanoseconds, with the units of [`UNITS`]. `None`
/// when `s` is not such a number or its value is not finite.
pub fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok().map(|v| v as f64);
    }
    let (num, u) = split_unit(s)?;
    let v: f64 = num.parse().ok()?;
    let mult = if u.is_empty() { 1.0 } else { unit(u)?.scale };
    Some(v * mult).filter(|v| v.is_finite())
}

/// Recursive descent over the grammar, one token of lookahead, counting nesting and terms.
struct Parser<'a> {
    lex: Lexer<'a>,
    /// The current token and its byte offset; `None` at the end.
    tok: Option<(usize, Tok)>,
    /// Nested parentheses and `!` around the current position.
    depth: usize,
    /// Terms parsed so far.
    terms: usize,
}

impl Parser<'_> {
    fn bump(&mut self) -> Result<(), ExprError> {
        self.tok = self.lex.next_token()?;
        Ok(())
    }
    fn peek(&self) -> Option<&Tok> {
        self.tok.as_ref().map(|(_, t)| t)
    }
    fn at(&self) -> usize {
        self.tok.as_ref().map_or(self.lex.s.len(), |(a, _)| *a)
    }
    fn err<T>(&self, m: impl Into<String>) -> Result<T, ExprError> {
        Err(ExprError {
            at: self.at(),
            message: m.into(),
        })
    }
    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(o)) if *o == op)
    }
    /// One more level of `(` or `!`.
    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!(
                "nested too deeply: at most {MAX_DEPTH} levels of parentheses and !"
            ));
        }
        Ok(())
    }
    fn or(&mut self) -> Result<Expr, ExprError> {
        let first = self.and()?;
        if !self.is_op("||") {
            return Ok(first);
        }
        let mut v = Vec::new();
        push_flat(&mut v, first, false);
        while self.is_op("||") {
            self.bump()?;
            let e = self.and()?;
            push_flat(&mut v, e, false);
        }
        Ok(Expr::Or(v))
    }
    fn and(&mut self) -> Result<Expr, ExprError> {
        let first = self.unary()?;
        if !self.is_op("&&") {
            return Ok(first);
        }
        let mut v = Vec::new();
        push_flat(&mut v, first, true);
        while self.is_op("&&") {
            self.bump()?;
            let e = self.unary()?;
            push_flat(&mut v, e, true);
        }
        Ok(Expr::And(v))
    }
    fn unary(&mut self) -> Result<Expr, ExprError> {
        match self.peek() {
            Some(Tok::Op("!")) => {
                self.enter()?;
                self.bump()?;
                let e = self.unary()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(e)))
            }
            Some(Tok::LParen) => {
                self.enter()?;
                self.bump()?;
                let e = self.or()?;
                if self.peek() != Some(&Tok::RParen) {
                    return self.err("expected )");
                }
                self.bump()?;
                self.depth -= 1;
                Ok(e)
            }
            Some(Tok::Word(_)) => self.term(),
            Some(Tok::Str(_)) => self.err("expected a field, ! or (, found a string"),
            Some(_) => self.err("expected a field, ! or ("),
            None => self.err("unexpected end of expression"),
        }
    }
    /// `true`, `false`, a flag, or `field op value`, type-checked.
    fn term(&mut self) -> Result<Expr, ExprError> {
        let field_at = self.at();
        self.terms += 1;
        if self.terms > MAX_TERMS {
            return self.err(format!(
                "too many terms: at most {MAX_TERMS} comparisons and flags"
            ));
        }
        let Some((_, Tok::Word(name))) = self.tok.take() else {
            unreachable!("term() is only called on a word");
        };
        self.bump()?;
        match name.as_str() {
            "true" => return Ok(Expr::True),
            "false" => return Ok(Expr::Not(Box::new(Expr::True))),
            _ => {}
        }
        let Some(field) = Field::parse(&name) else {
            return Err(ExprError {
                at: field_at,
                message: format!("unknown field {name:?} ({})", Field::names().join(", ")),
            });
        };
        let kind = field.kind();
        let op = match self.peek() {
            Some(Tok::Op(o)) => CmpOp::parse(o),
            _ => None,
        };
        let Some(op) = op else {
            if let Field::Flag(f) = field {
                return Ok(Expr::Flag(f));
            }
            let example = match kind {
                Kind::Number => format!("{name} > 0"),
                Kind::Time => format!("{name} >= 2026-12-04T03:12:00Z"),
                Kind::Op => format!("{name} == W"),
                _ => format!("{name} == \"…\""),
            };
            return Err(ExprError {
                at: field_at,
                message: format!(
                    "{name} is {}, not a condition: compare it ({example}); only flags stand alone",
                    kind_name(kind)
                ),
            });
        };
        let op_symbol = op.symbol();
        match (kind, op) {
            (Kind::Flag, _) => {
                return self.err(format!("{name} is a flag: use it alone, or !{name}"));
            }
            (Kind::Number, CmpOp::Match | CmpOp::NotMatch) => {
                return self.err(format!(
                    "{name} is a number: {op_symbol} matches text (use ==, !=, <, <=, > or >=)"
                ));
            }
            (Kind::Time, CmpOp::Match | CmpOp::NotMatch) => {
                return self.err(format!(
                    "{name} is a time: {op_symbol} matches text (use ==, !=, <, <=, > or >=)"
                ));
            }
            (Kind::Op, CmpOp::Eq | CmpOp::Ne | CmpOp::Match)
            | (Kind::Number | Kind::Text | Kind::Time, _) => {}
            (Kind::Op, _) => {
                return self.err(format!(
                    "{name} is an op: it takes ==, != or =~, not {op_symbol}"
                ));
            }
        }
        self.bump()?;
        let value_at = self.at();
        let value_err = |message: String| {
            Err(ExprError {
                at: value_at,
                message,
            })
        };
        let value = match self.tok.take() {
            Some((_, Tok::Word(w) | Tok::Str(w))) if kind == Kind::Time => {
                match crate::summary::parse_rfc3339(&w) {
                    Some(t) => Value::Time(t),
                    None => {
                        return value_err(format!(
                            "{name} is a time, {w:?} is not one: write it as \
                             2026-12-04T03:12:00Z (UTC), 2026-12-04T03:12:00.250Z or with an \
                             offset, 2026-12-04T04:12:00+01:00"
                        ))
                    }
                }
            }
            Some((_, Tok::Word(w))) => match kind {
                Kind::Number => match parse_number(&w) {
                    // `m` is MiB in filters but minutes on the command line: on a time, say so.
                    Some(_)
                        if field.is_time()
                            && split_unit(&w).is_some_and(|(_, u)| u.eq_ignore_ascii_case("m")) =>
                    {
                        let n = split_unit(&w).map_or("", |(n, _)| n);
                        let minutes = n.parse::<f64>().unwrap_or(0.0) * 60.0;
                        return value_err(format!(
                            "{name} is a time and {w} is ambiguous: m is MiB in filters, not \
                             minutes; write {minutes}s for minutes or {n}MiB for {} ns",
                            parse_number(&w).unwrap_or(0.0)
                        ));
                    }
                    Some(n) => Value::Num(n),
                    None => {
                        return value_err(format!(
                            "{name} is a number, {w:?} is not one (e.g. 4096, 64k, 500us; {})",
                            units_help()
                        ))
                    }
                },
                Kind::Text if parse_number(&w).is_some() => {
                    return value_err(format!(
                        "{name} is text, {w} is a number: quote it to compare text ({name} {op_symbol} \"{w}\")"
                    ))
                }
                Kind::Op if parse_number(&w).is_some() => {
                    return value_err(format!(
                        "{name} is an op (R, W, F, D, E, Z, N or read, write…), {w} is a number"
                    ))
                }
                _ => self.text_value(field, op, &name, w, value_at)?,
            },
            Some((_, Tok::Str(s))) => match kind {
                Kind::Number => {
                    return value_err(format!(
                        "{name} is a number, {s:?} is text (write numbers without quotes)"
                    ))
                }
                _ => self.text_value(field, op, &name, s, value_at)?,
            },
            other => {
                self.tok = other;
                return self.err("expected a value");
            }
        };
        self.bump()?;
        Ok(Expr::Cmp(field, op, value))
    }
    /// The value of a text or op comparison.
    fn text_value(
        &self,
        field: Field,
        op: CmpOp,
        name: &str,
        t: String,
        at: usize,
    ) -> Result<Value, ExprError> {
        if field == Field::Dev && matches!(op, CmpOp::Eq | CmpOp::Ne) {
            if let Some(d) = canonical_devt(&t) {
                return Ok(Value::Dev(d));
            }
        }
        if field != Field::Op {
            return Ok(Value::Text(t));
        }
        op_from_text(&t).map(Value::Op).ok_or_else(|| ExprError {
            at,
            message: format!("unknown op {t:?} for {name} (R, W, F, D, E, Z, N or read, write…)"),
        })
    }
}

/// The device number `t` names when it is written exactly as [`DevT`] displays it (`8:1`, not
/// `08:1`), so that comparing numbers gives what comparing the text would.
fn canonical_devt(t: &str) -> Option<DevT> {
    DevT::parse(t).filter(|d| d.to_string() == t)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Number => "a number",
        Kind::Text => "text",
        Kind::Op => "an op",
        Kind::Flag => "a flag",
        Kind::Time => "a time",
    }
}

/// Appends `e` to the operands of an `&&` (`and`) or `||`, inlining its operands when it is
/// itself one (from parentheses: `a && (b && c)`).
fn push_flat(v: &mut Vec<Expr>, e: Expr, and: bool) {
    match e {
        Expr::And(inner) if and => v.extend(inner),
        Expr::Or(inner) if !and => v.extend(inner),
        e => v.push(e),
    }
}

fn op_from_text(t: &str) -> Option<Op> {
    Op::ALL.iter().copied().find(|o| {
        o.name().eq_ignore_ascii_case(t)
            || (t.len() == 1
                && o.letter()
                    .eq_ignore_ascii_case(&t.chars().next().unwrap_or(' ')))
    })
}

/// Text formatted on the stack (a device's `MAJ:MIN`, an unnamed syscall), so that evaluating
/// a comparison never allocates.
struct StackText {
    buf: [u8; 32],
    len: usize,
}

impl StackText {
    fn new() -> StackText {
        StackText {
            buf: [0; 32],
            len: 0,
        }
    }
    fn format(&mut self, args: fmt::Arguments<'_>) -> &[u8] {
        self.len = 0;
        // Longer text is cut at 32 bytes (never happens: a u32 pair or `syscall#65535`).
        let _ = fmt::Write::write_fmt(self, args);
        &self.buf[..self.len]
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Shell-style glob: `*` any run, `?` one byte, `[abc]` a set; everything else literal.
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let (mut star, mut mark) = (None, 0usize);
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some(p);
                    mark = t;
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some(end) = pattern[p + 1..].iter().position(|&c| c == b']') {
                        let set = &pattern[p + 1..p + 1 + end];
                        if set.contains(&text[t]) {
                            p += end + 2;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == b'[' {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                c if c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some(s) => {
                p = s + 1;
                mark += 1;
                t = mark;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

impl Expr {
    /// Parses and type-checks an expression. Fails on the first error (with its byte offset),
    /// and on expressions nested deeper than [`MAX_DEPTH`] or longer than [`MAX_TERMS`] terms.
    pub fn parse(s: &str) -> Result<Expr, ExprError> {
        let mut p = Parser {
            lex: Lexer { s, i: 0 },
            tok: None,
            depth: 0,
            terms: 0,
        };
        p.bump()?;
        if p.tok.is_none() {
            return Err(ExprError {
                at: 0,
                message: "empty expression".into(),
            });
        }
        let e = p.or()?;
        if p.tok.is_some() {
            return p.err("unexpected text after the expression (missing && or ||?)");
        }
        Ok(e)
    }

    /// Evaluates the expression on one event.
    pub fn eval(&self, e: &Event, v: &dyn EventView) -> bool {
        match self {
            Expr::True => true,
            Expr::And(xs) => xs.iter().all(|x| x.eval(e, v)),
            Expr::Or(xs) => xs.iter().any(|x| x.eval(e, v)),
            Expr::Not(a) => !a.eval(e, v),
            Expr::Flag(f) => e.flags.contains(*f),
            Expr::Cmp(f, op, Value::Num(y)) => f.number(e).is_some_and(|x| op.orders(x, *y)),
            Expr::Cmp(_, op, Value::Time(t)) => v.utc_ns(e).is_some_and(|x| op.orders(x, *t)),
            Expr::Cmp(_, op, Value::Dev(d)) => {
                let eq = e.dev == *d;
                match op {
                    CmpOp::Eq => eq,
                    CmpOp::Ne => !eq,
                    _ => false,
                }
            }
            Expr::Cmp(_, op, Value::Op(o)) => {
                let eq = e.op == *o;
                match op {
                    CmpOp::Eq | CmpOp::Match => eq,
                    CmpOp::Ne | CmpOp::NotMatch => !eq,
                    _ => false,
                }
            }
            Expr::Cmp(f, op, Value::Text(t)) => {
                let mut buf = StackText::new();
                let text: &[u8] = match f {
                    Field::Comm => v.comm(),
                    Field::Path => v.path(),
                    // `dev == 8:1` compares the device number, `dev == sda1` the name.
                    Field::Dev if t.contains(':') => buf.format(format_args!("{}", e.dev)),
                    Field::Dev => v.dev_name().as_bytes(),
                    Field::CgroupPath => v.cgroup().map_or(&b""[..], |c| c.path.as_bytes()),
                    Field::Container => v
                        .cgroup()
                        .and_then(|c| c.identity.container())
                        .map_or(&b""[..], str::as_bytes),
                    Field::Pod => v
                        .cgroup()
                        .and_then(|c| c.identity.pod_uid.as_deref())
                        .map_or(&b""[..], str::as_bytes),
                    Field::Runtime => v
                        .cgroup()
                        .and_then(|c| c.identity.runtime)
                        .map_or(&b""[..], |r| r.name().as_bytes()),
                    Field::Syscall => match e.syscall {
                        None => b"",
                        Some(s) => match s.name() {
                            Some(n) => n.as_bytes(),
                            None => buf.format(format_args!("{s}")),
                        },
                    },
                    _ => return false,
                };
                let t = t.as_bytes();
                match op {
                    CmpOp::Match => glob(t, text),
                    CmpOp::NotMatch => !glob(t, text),
                    _ => op.orders(text, t),
                }
            }
        }
    }

    /// What `--container ID` means: the I/O of a container or pod whose id starts with `id`
    /// (a bare prefix: the container id or the pod UID; `pod:UID`; `RUNTIME:ID`, as
    /// `docker:0123ab`), case-insensitive, as the recorder's `--container` and `iodump top`
    /// read it. Runtime monitors (conmon) are not in their container.
    pub fn for_container(id: &str) -> Expr {
        let id = id.trim().to_ascii_lowercase();
        let prefix = |f: Field, p: &str| Expr::Cmp(f, CmpOp::Match, Value::Text(format!("{p}*")));
        if let Some(uid) = id.strip_prefix("pod:") {
            return prefix(Field::Pod, uid);
        }
        if let Some((rt, p)) = id.split_once(':') {
            return Expr::And(vec![
                Expr::Cmp(Field::Runtime, CmpOp::Eq, Value::Text(rt.to_string())),
                prefix(Field::Container, p),
            ]);
        }
        if id.is_empty() {
            return Expr::Cmp(Field::Container, CmpOp::Ne, Value::Text(String::new()));
        }
        Expr::Or(vec![prefix(Field::Container, &id), prefix(Field::Pod, &id)])
    }

    /// What `--cgroup PATH` means: the I/O of tasks in the cgroup at `path` (from the
    /// cgroup2 mount, or under `/sys/fs/cgroup`) or below it.
    pub fn for_cgroup(path: &str) -> Expr {
        let p = crate::cgroup::cgroup_path_arg(path);
        if p == "/" {
            return Expr::Cmp(Field::CgroupPath, CmpOp::Ne, Value::Text(String::new()));
        }
        Expr::Or(vec![
            Expr::Cmp(Field::CgroupPath, CmpOp::Eq, Value::Text(p.to_string())),
            Expr::Cmp(
                Field::CgroupPath,
                CmpOp::Match,
                Value::Text(format!("{p}/*")),
            ),
        ])
    }

    /// `self && other`.
    pub fn and(self, other: Expr) -> Expr {
        let mut v = Vec::new();
        for e in [self, other] {
            match e {
                Expr::And(inner) => v.extend(inner),
                e => v.push(e),
            }
        }
        Expr::And(v)
    }

    /// The event columns the expression reads ([`col`]): a segment decoded with them (and
    /// what decoding them needs, [`Columns::needed`]) has every value [`Expr::eval`] looks
    /// at, the other fields of [`crate::segment::EventBatch::get_projected`]'s event being
    /// placeholders it never reads.
    pub fn columns(&self) -> Columns {
        match self {
            Expr::And(v) | Expr::Or(v) => v.iter().fold(Columns::NONE, |c, x| c.union(x.columns())),
            Expr::Not(a) => a.columns(),
            Expr::Cmp(f, _, _) => f.columns(),
            Expr::Flag(_) => Columns::of(&[col::FLAGS]),
            Expr::True => Columns::NONE,
        }
    }

    /// What in the expression cannot be what its writer meant, in words: a `comm` compared
    /// with a name longer than the kernel keeps (15 bytes: `comm == "averyverylongname"` is
    /// never true, as a live filter or on a recorded trace).
    pub fn warnings(&self) -> Vec<String> {
        fn walk(x: &Expr, out: &mut Vec<String>) {
            match x {
                Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| walk(x, out)),
                Expr::Not(a) => walk(a, out),
                Expr::Cmp(Field::Comm, op @ (CmpOp::Eq | CmpOp::Ne), Value::Text(t))
                    if t.len() > COMM_BYTES =>
                {
                    let mut cut = COMM_BYTES;
                    while !t.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    out.push(format!(
                        "comm {} {t:?}: a command name is at most {COMM_BYTES} bytes (the \
                         kernel cuts it), so this is {}; its first {COMM_BYTES} bytes are {:?}",
                        op.symbol(),
                        if *op == CmpOp::Eq {
                            "never true"
                        } else {
                            "always true"
                        },
                        &t[..cut]
                    ))
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// The fields the expression names, each once, in order of first appearance (a flag as
    /// [`Field::Flag`]): what a reader of another layout (Parquet) must read for it.
    pub fn fields(&self) -> Vec<Field> {
        fn walk(x: &Expr, out: &mut Vec<Field>) {
            let f = match x {
                Expr::And(v) | Expr::Or(v) => return v.iter().for_each(|x| walk(x, out)),
                Expr::Not(a) => return walk(a, out),
                Expr::True => return,
                Expr::Cmp(f, _, _) => *f,
                Expr::Flag(f) => Field::Flag(*f),
            };
            if !out.contains(&f) {
                out.push(f);
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// True when the expression reads a name of the event (comm, path, device): a
    /// recorder resolves them for it only then.
    pub fn uses_names(&self) -> bool {
        match self {
            Expr::And(v) | Expr::Or(v) => v.iter().any(Expr::uses_names),
            Expr::Not(a) => a.uses_names(),
            Expr::Cmp(f, _, _) => matches!(f, Field::Comm | Field::Path | Field::Dev),
            Expr::Flag(_) | Expr::True => false,
        }
    }

    /// `self && other`, flattened as the parser does (an `&&` never holds an `&&`).
    pub fn and_also(self, other: Expr) -> Expr {
        let mut v = Vec::new();
        push_flat(&mut v, self, true);
        push_flat(&mut v, other, true);
        Expr::And(v)
    }

    /// The UTC window (ns, both ends included) the expression's top-level `&&` of `time`
    /// comparisons implies, `None` for an open end: an I/O outside it is never kept, so a
    /// reader may skip what lies outside without evaluating the rest (a segment whose time
    /// range the trace's footer gives).
    pub fn utc_window(&self) -> (Option<i64>, Option<i64>) {
        let terms: &[Expr] = match self {
            Expr::And(xs) => xs,
            x => std::slice::from_ref(x),
        };
        let (mut lo, mut hi): (Option<i64>, Option<i64>) = (None, None);
        let mut at_least = |t: i64| lo = Some(lo.map_or(t, |l| l.max(t)));
        let mut at_most = |t: i64| hi = Some(hi.map_or(t, |h| h.min(t)));
        for x in terms {
            if let Expr::Cmp(Field::Time, op, Value::Time(t)) = x {
                match op {
                    CmpOp::Ge => at_least(*t),
                    CmpOp::Gt => at_least(t.saturating_add(1)),
                    CmpOp::Le => at_most(*t),
                    CmpOp::Lt => at_most(t.saturating_sub(1)),
                    CmpOp::Eq => {
                        at_least(*t);
                        at_most(*t);
                    }
                    _ => {}
                }
            }
        }
        (lo, hi)
    }

    /// True when the expression is a window of time and nothing else: a `&&` of `time`
    /// comparisons (`>=`, `>`, `<=`, `<`, `==`), which keeps every I/O of its window.
    pub fn is_time_window_only(&self) -> bool {
        let terms: &[Expr] = match self {
            Expr::And(xs) => xs,
            x => std::slice::from_ref(x),
        };
        !terms.is_empty()
            && terms.iter().all(|x| {
                matches!(
                    x,
                    Expr::Cmp(
                        Field::Time,
                        CmpOp::Ge | CmpOp::Gt | CmpOp::Le | CmpOp::Lt | CmpOp::Eq,
                        Value::Time(_)
                    )
                )
            })
    }

    /// True when no I/O of segment `segment` of `r` can be kept: the footer places the
    /// segment's time range outside the expression's [`Expr::utc_window`], so a reader need
    /// not decode it. False whenever that is not known.
    pub fn leaves_out_segment(&self, r: &crate::reader::Reader, segment: usize) -> bool {
        let Some((first, last)) = r.segments().get(segment).and_then(|s| s.time_range_ns) else {
            return false;
        };
        let (lo, hi) = self.utc_window();
        let h = r.header();
        let (a, z) = (h.to_utc_ns(first), h.to_utc_ns(last));
        lo.is_some_and(|lo| a.max(z) < lo) || hi.is_some_and(|hi| a.min(z) > hi)
    }

    /// True when the expression reads the cgroups table (`cgroup_path`, `container`, `pod`):
    /// on input without one (traces before format 1.2) those fields are always empty.
    pub fn uses_cgroup_table(&self) -> bool {
        match self {
            Expr::And(v) | Expr::Or(v) => v.iter().any(Expr::uses_cgroup_table),
            Expr::Not(a) => a.uses_cgroup_table(),
            Expr::Cmp(f, _, _) => matches!(
                f,
                Field::CgroupPath | Field::Container | Field::Pod | Field::Runtime
            ),
            Expr::Flag(_) | Expr::True => false,
        }
    }

    /// Whether the expression can keep an event of device `dev`, named `name` (`?` when the
    /// trace does not name it), whatever its other fields: false only where the device
    /// comparisons rule the device out (`-d` of another device, `dev != dm-0`); true when
    /// unsure.
    pub fn may_keep_device(&self, dev: DevT, name: &str) -> bool {
        self.on_device(dev, name).0
    }

    /// (can keep an event of the device, keeps every event of the device), from the
    /// device comparisons alone: the first is true and the second false when unsure.
    fn on_device(&self, dev: DevT, name: &str) -> (bool, bool) {
        match self {
            Expr::True => (true, true),
            Expr::And(xs) => xs.iter().fold((true, true), |(may, all), x| {
                let (m, a) = x.on_device(dev, name);
                (may && m, all && a)
            }),
            Expr::Or(xs) => xs.iter().fold((false, false), |(may, all), x| {
                let (m, a) = x.on_device(dev, name);
                (may || m, all || a)
            }),
            Expr::Not(x) => {
                let (may, all) = x.on_device(dev, name);
                (!all, !may)
            }
            Expr::Cmp(Field::Dev, op, value) => {
                let known = match value {
                    Value::Dev(d) => match op {
                        CmpOp::Eq => Some(*d == dev),
                        CmpOp::Ne => Some(*d != dev),
                        _ => None,
                    },
                    Value::Text(t) => {
                        // As `eval`: `dev == 8:1` is the number, `dev == sda1` the name.
                        let number = dev.to_string();
                        let text = if t.contains(':') {
                            number.as_str()
                        } else {
                            name
                        };
                        match op {
                            CmpOp::Eq => Some(text == t),
                            CmpOp::Ne => Some(text != t),
                            CmpOp::Match => Some(glob(t.as_bytes(), text.as_bytes())),
                            CmpOp::NotMatch => Some(!glob(t.as_bytes(), text.as_bytes())),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                known.map_or((true, false), |k| (k, k))
            }
            _ => (true, false),
        }
    }

    /// Constraints implied by the expression that a recorder can apply in the kernel: they
    /// only ever keep a superset of the events the expression keeps.
    pub fn pushdown(&self) -> Pushdown {
        let mut p = Pushdown::default();
        self.collect(&mut p);
        p
    }

    fn collect(&self, p: &mut Pushdown) {
        match self {
            Expr::And(xs) => {
                for x in xs {
                    x.collect(p);
                }
            }
            Expr::Cmp(Field::Bytes, op, Value::Num(n)) => {
                let n = *n;
                match op {
                    CmpOp::Gt => {
                        p.min_bytes = p
                            .min_bytes
                            .max((n.floor() + 1.0).clamp(0.0, u32::MAX as f64) as u32)
                    }
                    CmpOp::Ge | CmpOp::Eq => {
                        p.min_bytes = p.min_bytes.max(n.ceil().clamp(0.0, u32::MAX as f64) as u32)
                    }
                    _ => {}
                }
                match op {
                    CmpOp::Lt if n >= 1.0 => {
                        p.max_bytes = Some(
                            p.max_bytes
                                .map_or(n.ceil() as u32 - 1, |m| m.min(n.ceil() as u32 - 1)),
                        )
                    }
                    CmpOp::Le | CmpOp::Eq => {
                        p.max_bytes = Some(
                            p.max_bytes
                                .map_or(n.floor() as u32, |m| m.min(n.floor() as u32)),
                        )
                    }
                    _ => {}
                }
            }
            Expr::Cmp(Field::Op, CmpOp::Eq | CmpOp::Match, Value::Op(o)) => {
                p.op_mask &= 1 << o.code();
            }
            Expr::Cmp(Field::Op, CmpOp::Ne, Value::Op(o)) => {
                p.op_mask &= !(1 << o.code());
            }
            Expr::Cmp(Field::Pid, CmpOp::Eq, Value::Num(n)) if *n >= 0.0 => {
                p.pids.get_or_insert_with(Vec::new).push(*n as u32);
            }
            Expr::Cmp(Field::Comm, CmpOp::Eq, Value::Text(t)) => {
                p.comms.get_or_insert_with(Vec::new).push(t.clone());
            }
            Expr::Or(xs) => {
                // `rw == R || rw == W`: the union of the op sets, when every operand only
                // constrains ops.
                let mut mask = 0;
                for x in xs {
                    let px = x.pushdown();
                    if !px.only_ops() {
                        return;
                    }
                    mask |= px.op_mask;
                }
                p.op_mask &= mask;
            }
            _ => {}
        }
    }
}

/// Kernel-side constraints extracted from an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushdown {
    /// Smallest I/O size kept.
    pub min_bytes: u32,
    /// Largest I/O size kept.
    pub max_bytes: Option<u32>,
    /// Ops kept (bit `1 << op`).
    pub op_mask: u32,
    /// Process ids kept (all of them must match: a conjunction of two pids keeps none).
    pub pids: Option<Vec<u32>>,
    /// Command names kept.
    pub comms: Option<Vec<String>>,
}

impl Default for Pushdown {
    fn default() -> Self {
        Pushdown {
            min_bytes: 0,
            max_bytes: None,
            op_mask: 0x7f,
            pids: None,
            comms: None,
        }
    }
}

impl Pushdown {
    fn only_ops(&self) -> bool {
        self.min_bytes == 0
            && self.max_bytes.is_none()
            && self.pids.is_none()
            && self.comms.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comm_longer_than_the_kernel_keeps_is_warned_of() {
        let w = Expr::parse(r#"comm == "averyveryverylongddname" && iosize > 4k"#)
            .unwrap()
            .warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("never true") && w[0].contains(r#""averyveryverylo""#),
            "{w:?}"
        );
        let w = Expr::parse(r#"!(comm != "averyveryverylongddname")"#)
            .unwrap()
            .warnings();
        assert!(w[0].contains("always true"), "{w:?}");
        for fine in [
            r#"comm == "averyveryverylo""#,
            r#"comm =~ "avery*""#,
            "iosize > 4k",
        ] {
            assert!(Expr::parse(fine).unwrap().warnings().is_empty(), "{fine}");
        }
    }
    use crate::event::DevT;

    struct V(&'static [u8], &'static [u8], &'static str);
    impl EventView for V {
        fn comm(&self) -> &[u8] {
            self.0
        }
        fn path(&self) -> &[u8] {
            self.1
        }
        fn dev_name(&self) -> &str {
            self.2
        }
        fn cgroup(&self) -> Option<&Cgroup> {
            None
        }
    }

    #[test]
    fn device_comparisons_say_which_devices_a_filter_can_keep() {
        let dm = DevT::new(253, 0);
        let may = |text: &str| Expr::parse(text).unwrap().may_keep_device(dm, "dm-0");
        for (text, want) in [
            ("dev == sda", false),
            ("dev == sda || dev == sdb", false),
            ("dev != dm-0", false),
            ("!(dev == dm-0)", false),
            ("dev != 253:0", false),
            ("dev == 8:0 && bytes > 0", false),
            ("dev == dm-0", true),
            ("dev == 253:0", true),
            ("dev == dm-0 && bytes > 4096", true),
            ("bytes > 4096", true),
            ("!(bytes > 4096)", true),
            ("!(dev == sda && bytes > 4096)", true),
            ("dev == sda || bytes > 4096", true),
            ("comm == dd", true),
        ] {
            assert_eq!(may(text), want, "{text}");
        }
        // The same on every event of a few: where it says no, no event of the device passes.
        for text in ["dev == sda", "dev != dm-0", "dev == sda || bytes > 4096"] {
            let x = Expr::parse(text).unwrap();
            let kept = [512u32, 4096, 65536].iter().any(|&bytes| {
                let e = Event {
                    dev: dm,
                    bytes,
                    ..Event::default()
                };
                x.eval(&e, &V(b"dd", b"/f", "dm-0"))
            });
            assert!(!kept || x.may_keep_device(dm, "dm-0"), "{text}");
        }
    }

    /// 2,000 events of varied values in every field (nulls included).
    fn varied_events() -> Vec<Event> {
        use crate::{Syscall, UpperIo};
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        (0..2000u64)
            .map(|i| Event {
                timestamp_ns: 1_000_000 * i + next(1000),
                dev: DevT::new(8, next(3) as u32),
                sector: next(1 << 20),
                bytes: 512 << next(8),
                op: Op::ALL[next(Op::ALL.len() as u64) as usize],
                flags: Flags(next(128) as u8),
                pid: 100 + next(5) as u32,
                tid: 200 + next(9) as u32,
                path_id: next(40) as u32,
                queue_ns: (next(4) != 0).then(|| next(2_000_000)),
                latency_ns: next(5_000_000),
                error: if next(10) == 0 { 5 } else { 0 },
                cpu: next(4) as u16,
                syscall: (next(3) != 0).then(|| Syscall(next(300) as u16)),
                dirtier_pid: (next(5) == 0).then(|| next(1000) as u32),
                cgroup_id: 1 + next(6),
                upper: (next(4) == 0).then(|| UpperIo {
                    dev: DevT::new(253, 0),
                    timestamp_ns: 5,
                }),
            })
            .collect()
    }

    /// Comparisons of every field and flag, each keeping some of [`varied_events`] (but those
    /// of the cgroup table's fields, which the tests' [`view`] leaves empty).
    const LEAVES: [&str; 26] = [
        "bytes >= 16384",
        "op == write",
        "op != read",
        "sector < 500000",
        "pid == 102",
        "tid != 203",
        "comm == dd",
        "path =~ '/data/*'",
        "dev == 8:1",
        "dev == sda",
        "latency > 2ms",
        "queue_ns > 1ms",
        "device_ns > 1ms",
        "cpu == 2",
        "error != 0",
        "syscall == pread64 || syscall == ''",
        "cgroup == 3",
        "dirtier > 500",
        "time >= 1970-01-01T00:00:00.5Z",
        "cgroup_path == ''",
        "container == ''",
        "pod == ''",
        "runtime == ''",
        "sync && !fua",
        "meta || readahead || preflush || background || nowait",
        "!(op == read && latency < 1ms) && (bytes > 4096 || queue > 10us)",
    ];

    /// The tests' view of an event: names that depend on its thread, path id and device
    /// (as a trace's tables give them), the event's timestamp as its UTC time.
    fn view(e: &Event) -> ResolvedView<'static> {
        let comms: [&[u8]; 3] = [b"dd", b"fio", b"postgres"];
        let paths: [&[u8]; 3] = [b"/data/a", b"/var/b", b"/data/c"];
        ResolvedView {
            comm: comms[e.tid as usize % 3],
            path: paths[e.path_id as usize % 3],
            dev: ["sda", "sdb", "sdc"][e.dev.minor() as usize % 3],
            cgroup: None,
            utc_ns: Some(e.timestamp_ns as i64),
        }
    }

    /// A filter evaluated on a segment decoded with only [`Expr::columns`] keeps the rows it
    /// keeps on the whole segment, for every field; and the columns it does not name are not
    /// decoded.
    #[test]
    fn a_filter_needs_only_the_columns_it_names() {
        use crate::segment::{
            decode_segment, decode_segment_projected, encode_segment, DecodeScratch, EventBatch,
            SegmentScratch,
        };
        let mut raw = Vec::new();
        encode_segment(&varied_events(), &mut SegmentScratch::default(), &mut raw);
        let whole = decode_segment(&raw).unwrap();
        let mut named: Vec<Field> = Vec::new();
        let (mut part, mut dec) = (EventBatch::default(), DecodeScratch::default());
        for text in LEAVES {
            let x = Expr::parse(text).unwrap();
            named.extend(x.fields());
            let cols = x.columns();
            decode_segment_projected(&raw, cols, &mut part, &mut dec).unwrap();
            let mut kept = 0;
            for i in 0..whole.len() {
                let want = x.eval(&whole.get(i), &view(&whole.get(i)));
                let e = part.get_projected(i);
                assert_eq!(x.eval(&e, &view(&e)), want, "{text}, row {i}");
                kept += want as usize;
            }
            // Neither all nor none (a test that could not tell), save the cgroup table's.
            assert!(
                (0 < kept && kept < whole.len()) || text.contains("''"),
                "{text}: {kept}"
            );
            if !cols.needed().contains(col::PID) {
                assert!(part.pid.is_empty(), "{text}: pid decoded");
            }
            if !cols.needed().contains(col::LATENCY_NS) {
                assert!(part.latency_ns.is_empty(), "{text}: latency decoded");
            }
        }
        for (name, f) in FIELD_NAMES {
            assert!(named.contains(&f), "no expression names {name}");
        }
        for (f, name, _) in Flags::NAMES {
            assert!(
                named.contains(&Field::Flag(f)),
                "no expression names {name}"
            );
        }
    }

    /// [`Expr::select`], a column at a time, keeps the rows [`Expr::eval`] keeps, for every
    /// comparison and for random `&&`, `||` and `!` of them, on the whole segment and on one
    /// decoded with only [`Expr::columns`].
    #[test]
    fn selecting_a_column_at_a_time_keeps_what_eval_keeps() {
        use crate::segment::{
            decode_segment, decode_segment_projected, encode_segment, DecodeScratch, EventBatch,
            SegmentScratch,
        };
        let mut raw = Vec::new();
        encode_segment(&varied_events(), &mut SegmentScratch::default(), &mut raw);
        let whole = decode_segment(&raw).unwrap();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut pick = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut texts: Vec<String> = LEAVES.iter().map(|s| s.to_string()).collect();
        for _ in 0..300 {
            let mut t = format!("({})", LEAVES[pick(LEAVES.len())]);
            for _ in 0..pick(4) {
                let other = LEAVES[pick(LEAVES.len())];
                let not = if pick(3) == 0 { "!" } else { "" };
                let op = ["&&", "||"][pick(2)];
                t = if pick(2) == 0 {
                    format!("{not}({t}) {op} ({other})")
                } else {
                    format!("({other}) {op} {not}({t})")
                };
            }
            texts.push(t);
        }
        let (mut part, mut dec) = (EventBatch::default(), DecodeScratch::default());
        let (mut some, mut keep) = (0, Vec::new());
        for text in &texts {
            let x = Expr::parse(text).unwrap();
            let want: Vec<u32> = (0..whole.len() as u32)
                .filter(|&i| {
                    let e = whole.get(i as usize);
                    x.eval(&e, &view(&e))
                })
                .collect();
            some += (!want.is_empty() && want.len() < whole.len()) as usize;
            decode_segment_projected(&raw, x.columns(), &mut part, &mut dec).unwrap();
            for b in [&whole, &part] {
                keep.clear();
                x.select(
                    b,
                    &|ts| ts as i64,
                    &|y, i| {
                        let e = b.get_projected(i);
                        y.eval(&e, &view(&e))
                    },
                    &mut keep,
                );
                assert_eq!(keep, want, "{text}");
            }
        }
        assert!(some > texts.len() / 2, "{some} of {}", texts.len());
    }

    #[test]
    fn the_unknown_field_message_lists_every_field() {
        let err = Expr::parse("nosuch > 1").unwrap_err().to_string();
        let names = Field::names();
        for n in [
            "cgroup_path",
            "container",
            "pod",
            "runtime",
            "dirtier",
            "nowait",
        ] {
            assert!(names.contains(&n) && err.contains(n), "{n}: {err}");
        }
        // every name listed is one the parser takes, and each field is listed once
        for n in &names {
            assert!(Field::parse(n).is_some(), "{n}");
        }
        let mut fields: Vec<Field> = names.iter().filter_map(|n| Field::parse(n)).collect();
        let all = fields.len();
        fields.dedup();
        assert_eq!(fields.len(), all);
        assert_eq!(all, names.len());
    }

    fn ev(bytes: u32, op: Op) -> Event {
        Event {
            bytes,
            op,
            pid: 42,
            dev: DevT::new(8, 1),
            latency_ns: 2_000_000,
            flags: Flags::SYNC,
            ..Event::default()
        }
    }

    /// `time` compares the I/O's UTC time with an RFC 3339 time, bare or quoted, with its
    /// zone; a view that does not know the time keeps nothing; its top-level `&&` gives the
    /// window a reader may skip segments by.
    #[test]
    fn time_compares_utc_times() {
        let e = ev(4096, Op::Read);
        let at = |utc_ns| ResolvedView {
            comm: b"dd",
            path: b"",
            dev: "sda",
            cgroup: None,
            utc_ns,
        };
        let t = 1_764_818_000_000_000_000; // 2025-12-04T03:13:20Z
        for (s, want) in [
            ("time == 2025-12-04T03:13:20Z", true),
            ("ts >= 2025-12-04T04:13:20+01:00", true),
            ("time > '2025-12-04 03:13:20Z'", false),
            ("time < 2025-12-04T03:13:20.000000001Z", true),
            (
                "time >= 2025-12-04T03:13Z && time < 2025-12-04T03:14Z",
                true,
            ),
            ("time != 2025-12-04T03:13:20Z || rw == W", false),
        ] {
            let x = Expr::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(x.eval(&e, &at(Some(t))), want, "{s}");
            assert!(!x.eval(&e, &at(None)) || s.contains("!="), "{s}");
        }
        for (s, says) in [
            ("time > 5", "is a time, \"5\" is not one"),
            ("time > 2025-12-04T03:13:20", "is not one"),
            ("time =~ 2025*", "is a time: =~ matches text"),
            ("time", "compare it (time >= 2026-12-04T03:12:00Z)"),
        ] {
            let err = Expr::parse(s).unwrap_err().to_string();
            assert!(err.contains(says), "{s}: {err}");
        }
        let w = |s: &str| Expr::parse(s).unwrap().utc_window();
        assert_eq!(
            w("time >= 2025-12-04T03:13:20Z && iosize > 4k && time < 2025-12-04T03:13:21Z"),
            (Some(t), Some(t + 999_999_999))
        );
        assert_eq!(w("time > 2025-12-04T03:13:20Z"), (Some(t + 1), None));
        assert_eq!(w("time == 2025-12-04T03:13:20Z"), (Some(t), Some(t)));
        // Under an `||` or a `!` a time bounds nothing.
        assert_eq!(w("time < 2025-12-04T03:13:20Z || rw == W"), (None, None));
        assert_eq!(w("!(time < 2025-12-04T03:13:20Z)"), (None, None));
    }

    #[test]
    fn cgroup_fields_read_the_cgroups_table() {
        use crate::cgroup::{Identity, Runtime};
        let cg = Cgroup {
            id: 77,
            path: "/system.slice/docker-0123456789abcdef.scope".into(),
            identity: Identity {
                runtime: Some(Runtime::Docker),
                container_id: Some("0123456789abcdef".into()),
                pod_uid: Some("1a2b3c4d-0000-1111-2222-333344445555".into()),
                ..Identity::default()
            },
        };
        let with = ResolvedView {
            comm: b"dd",
            path: b"",
            dev: "sda",
            cgroup: Some(&cg),
            utc_ns: None,
        };
        let without = ResolvedView {
            cgroup: None,
            ..with
        };
        let e = ev(4096, Op::Read);
        for (s, want) in [
            ("container =~ '0123*'", true),
            ("container_id == '0123456789abcdef'", true),
            ("container == '0123'", false),
            ("pod =~ '1a2b*'", true),
            ("pod_uid != ''", true),
            ("cgroup_path =~ '/system.slice/*'", true),
            ("cgroup_path == '/system.slice'", false),
        ] {
            let x = Expr::parse(s).unwrap();
            assert!(x.uses_cgroup_table(), "{s}");
            assert_eq!(x.eval(&e, &with), want, "{s}");
            // No table entry: the fields are empty text.
            assert!(!x.eval(&e, &without), "{s}");
        }
        assert!(Expr::parse("container == ''").unwrap().eval(&e, &without));
        assert!(!Expr::parse("cgroup == 77 && comm == dd")
            .unwrap()
            .uses_cgroup_table());
        assert!(Expr::parse("container > 5").is_err());
        assert!(Expr::parse("runtime == docker").unwrap().eval(&e, &with));
        for (id, want) in [
            ("0123", true),
            ("0123456789ABCDEF", true),
            ("docker:0123", true),
            ("podman:0123", false),
            ("pod:1a2b", true),
            ("1a2b3c4d", true),
            ("pod:0123", false),
            ("ff", false),
            ("", true),
        ] {
            let x = Expr::for_container(id);
            assert!(x.uses_cgroup_table());
            assert_eq!(x.eval(&e, &with), want, "--container {id}");
            assert!(!x.eval(&e, &without), "--container {id}");
            // The recorder's and `top`'s reading of the same id.
            assert_eq!(cg.identity.matches_container(id), want, "{id}");
        }
        for (p, want) in [
            ("/system.slice", true),
            ("/sys/fs/cgroup/system.slice/", true),
            ("/system.slice/docker-0123456789abcdef.scope", true),
            ("/system", false),
            ("/user.slice", false),
            ("/", true),
        ] {
            let x = Expr::for_cgroup(p);
            assert_eq!(x.eval(&e, &with), want, "--cgroup {p}");
            assert!(!x.eval(&e, &without), "--cgroup {p}");
        }
        let both = Expr::parse("comm == dd")
            .unwrap()
            .and(Expr::for_cgroup("/system.slice"));
        assert!(matches!(&both, Expr::And(v) if v.len() == 2));
        assert!(both.eval(&e, &with));
    }

    #[test]
    fn the_original_example_works() {
        let e = Expr::parse("iosize > 1048576 && rw == W").unwrap();
        let v = V(b"mysqld", b"/var/lib/mysql/ibdata1", "sda1");
        assert!(e.eval(&ev(2 << 20, Op::Write), &v));
        assert!(!e.eval(&ev(2 << 20, Op::Read), &v));
        assert!(!e.eval(&ev(1 << 20, Op::Write), &v));
        let p = e.pushdown();
        assert_eq!(p.min_bytes, 1048577);
        assert_eq!(p.op_mask, 1 << Op::Write.code());
    }

    #[test]
    fn the_units_table_of_the_docs_is_the_code_s() {
        let doc = include_str!("../../schemas/filter-expressions.md");
        let section = doc
            .split("## Units")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a Units section");
        let rows: Vec<&str> = section
            .lines()
            .filter(|l| l.starts_with("| "))
            .skip(1)
            .collect();
        assert_eq!(rows.len(), UNITS.len(), "{section}");
        for (row, u) in rows.iter().zip(&UNITS) {
            let cell = row.split('|').nth(2).unwrap_or("");
            let spelled: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
            assert_eq!(spelled, u.names, "{row}");
        }
    }

    #[test]
    fn units_come_from_one_table() {
        assert_eq!(parse_number("64k"), Some(65536.0));
        assert_eq!(parse_number("1M"), Some(1048576.0));
        assert_eq!(parse_number("1m"), Some(1048576.0), "m is MiB in filters");
        assert_eq!(parse_number("2s"), Some(2e9));
        assert_eq!(parse_number("1min"), None);
        let help = units_help();
        for u in UNITS.iter().flat_map(|u| u.names) {
            assert!(help.contains(u), "{u} missing from {help}");
        }
        // On a size, m is MiB as before; on a time it is an error that says what to write.
        assert!(Expr::parse("iosize > 1m").is_ok());
        assert!(Expr::parse("latency > 10ms").is_ok());
        for t in ["latency > 1m", "queue_ns < 2M", "device_ns >= 1.5m"] {
            let e = Expr::parse(t).unwrap_err().to_string();
            assert!(e.contains("ambiguous") && e.contains("MiB"), "{t}: {e}");
        }
        let e = Expr::parse("latency > 1m").unwrap_err().to_string();
        assert!(
            e.contains("write 60s for minutes or 1MiB for 1048576 ns"),
            "{e}"
        );
        let e = Expr::parse("iosize > 4q").unwrap_err().to_string();
        assert!(e.contains(&units_help()), "{e}");
    }

    #[test]
    fn operators_globs_units_and_flags() {
        let v = V(b"mysqld", b"/var/lib/mysql/ibdata1", "sda1");
        let e = ev(16384, Op::Read);
        for (s, want) in [
            ("comm =~ \"mysql*\"", true),
            ("comm !~ 'mysql*'", false),
            ("path =~ /var/lib/*/ibdata?", true),
            ("!(iosize >= 16k) || pid == 42", true),
            ("iosize == 16KiB && latency > 1ms && latency < 3ms", true),
            ("dev == sda1 && dev == 8:1", true),
            ("dev == sda", false),
            ("sync && !fua", true),
            ("rw == read || rw == W", true),
            ("rw != R", false),
            ("true", true),
            ("false || (pid = 42)", true),
        ] {
            assert_eq!(Expr::parse(s).unwrap().eval(&e, &v), want, "{s}");
        }
        assert_eq!(
            Expr::parse("rw == R || rw == W")
                .unwrap()
                .pushdown()
                .op_mask,
            0b11
        );
        assert_eq!(
            Expr::parse("iosize < 4k").unwrap().pushdown().max_bytes,
            Some(4095)
        );
        assert_eq!(
            Expr::parse("comm == fio && pid == 7").unwrap().pushdown(),
            Pushdown {
                pids: Some(vec![7]),
                comms: Some(vec!["fio".into()]),
                ..Pushdown::default()
            }
        );
        // An || that mixes fields pushes nothing down.
        assert_eq!(
            Expr::parse("rw == R || iosize > 1").unwrap().pushdown(),
            Pushdown::default()
        );
    }

    #[test]
    fn errors_name_the_column() {
        for (s, at) in [
            ("iosize >", 8),
            ("bogus == 1", 0),
            ("iosize > 1 &&", 13),
            ("(iosize > 1", 11),
            ("rw == Q", 6),
            ("iosize > big", 9),
            ("comm == \"x", 8),
            ("iosize > 1 rw == W", 11),
            ("", 0),
            ("sync == 1", 5),
        ] {
            let err = Expr::parse(s).unwrap_err();
            assert_eq!(err.at, at, "{s}: {err}");
        }
    }

    /// Each bad comparison is an error naming what is wrong, at the right column
    /// (schemas/filter-expressions.md, "Types").
    #[test]
    fn type_errors_are_parse_errors() {
        for (s, at, needle) in [
            ("comm != 5", 8, "comm is text, 5 is a number"),
            ("path == 123", 8, "quote it"),
            ("dev > 5", 6, "dev is text"),
            ("syscall == 3", 11, "syscall is text"),
            ("rw != 1", 6, "rw is an op"),
            ("rw < W", 3, "rw is an op: it takes ==, != or =~, not <"),
            ("rw !~ W", 3, "not !~"),
            ("!latency", 1, "latency is a number, not a condition"),
            ("iosize", 0, "iosize is a number, not a condition"),
            ("comm", 0, "comm is text, not a condition"),
            ("rw && sync", 0, "rw is an op, not a condition"),
            ("sync && path", 8, "path is text, not a condition"),
            ("iosize =~ \"4*\"", 7, "=~ matches text"),
            ("latency !~ 1ms", 8, "!~ matches text"),
            ("iosize == \"4k\"", 10, "iosize is a number, \"4k\" is text"),
            ("pid > x1", 6, "pid is a number, \"x1\" is not one"),
            ("iosize > 4kk", 9, "is not one"),
            ("iosize > 1e3", 9, "is not one"),
            ("rw == write_zero", 6, "unknown op"),
            ("\"x\" == comm", 0, "found a string"),
            ("comm == a & pid == 1", 10, "doubled"),
        ] {
            let err = Expr::parse(s).unwrap_err();
            assert_eq!(err.at, at, "{s}: {err}");
            assert!(err.message.contains(needle), "{s}: {err}");
        }
        let huge = format!("iosize > {}", "9".repeat(400));
        assert!(Expr::parse(&huge)
            .unwrap_err()
            .message
            .contains("is not one"));
        // What the types allow.
        let v = V(b"5", b"1.log", "sda1");
        let e = ev(4096, Op::Write);
        for (s, want) in [
            ("comm == \"5\"", true),
            ("path == 1.log", true),
            (
                "dev == 8:1 && dev =~ '8:*' && dev != sda && dev != 8:2",
                true,
            ),
            (
                "dev == 08:1 || dev == 8:01 || dev == 4096:1 || dev < 8:0",
                false,
            ),
            ("rw =~ W && rw != read && rw == 'write'", true),
            ("comm < m || comm >= \"6\"", true),
            ("syscall == ''", true),
            ("iosize == 0x1000 && iosize == 4k && latency == 2ms", true),
        ] {
            let x = Expr::parse(s).unwrap_or_else(|err| panic!("{s}: {err}"));
            assert_eq!(x.eval(&e, &v), want, "{s}");
        }
    }

    /// Nesting and length are bounded, so no input overflows the stack (parsing, evaluating
    /// or dropping) and evaluation costs at most one visit per term.
    #[test]
    fn nesting_and_size_limits() {
        let parens = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
        let nots = |n: usize| format!("{}true", "!".repeat(n));
        let chain = |n: usize, sep: &str| vec!["iosize >= 0"; n].join(sep);
        for (s, at, needle) in [
            (parens(20_000), MAX_DEPTH, "nested too deeply"),
            (parens(MAX_DEPTH + 1), MAX_DEPTH, "nested too deeply"),
            (nots(40_000), MAX_DEPTH, "nested too deeply"),
            (
                format!("({}", nots(MAX_DEPTH)),
                MAX_DEPTH,
                "nested too deeply",
            ),
            (chain(10_000, " && "), 15 * MAX_TERMS, "too many terms"),
            (
                chain(MAX_TERMS + 1, " || "),
                15 * MAX_TERMS,
                "too many terms",
            ),
        ] {
            let err = Expr::parse(&s).unwrap_err();
            assert_eq!(err.at, at, "{}…: {err}", &s[..20]);
            assert!(err.message.contains(needle), "{err}");
        }
        // At the limits: parsed, evaluated and dropped on a thread with a small stack.
        std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn(move || {
                let v = V(b"fio", b"/x", "sda1");
                let e = ev(4096, Op::Read);
                for (s, want) in [
                    (parens(MAX_DEPTH), true),
                    (nots(MAX_DEPTH), true),
                    (nots(MAX_DEPTH - 1), false),
                    (chain(MAX_TERMS, " && "), true),
                    (chain(MAX_TERMS, " || "), true),
                    (format!("{} || {}", "(!".repeat(32), ")".repeat(32)), false),
                ] {
                    let x = match Expr::parse(&s) {
                        Ok(x) => x,
                        // The last one is unbalanced on purpose: an error, not a crash.
                        Err(_) if s.starts_with("(!") => continue,
                        Err(err) => panic!("{}…: {err}", &s[..20]),
                    };
                    assert_eq!(x.eval(&e, &v), want, "{}…", &s[..20]);
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    /// `&&` and `||` chains become one n-ary node (parenthesised ones too), and evaluation
    /// stops at the first operand that decides.
    #[test]
    fn chains_are_flat_and_short_circuit() {
        let x = Expr::parse(
            "pid == 1 && (pid == 2 && pid == 3) && !(pid == 4 || pid == 5 || (pid == 6 || sync))",
        )
        .unwrap();
        let Expr::And(xs) = &x else { panic!("{x:?}") };
        assert_eq!(xs.len(), 4);
        let Expr::Not(inner) = &xs[3] else {
            panic!("{x:?}")
        };
        assert!(matches!(&**inner, Expr::Or(ys) if ys.len() == 4), "{x:?}");

        struct Counting(std::cell::Cell<usize>);
        impl EventView for Counting {
            fn comm(&self) -> &[u8] {
                self.0.set(self.0.get() + 1);
                b"fio"
            }
            fn path(&self) -> &[u8] {
                b""
            }
            fn dev_name(&self) -> &str {
                ""
            }
            fn cgroup(&self) -> Option<&Cgroup> {
                None
            }
        }
        let e = ev(4096, Op::Read);
        for (s, want, reads) in [
            (vec!["comm == fio"; MAX_TERMS].join(" || "), true, 1),
            (vec!["comm == dd"; MAX_TERMS].join(" && "), false, 1),
            (vec!["comm == fio"; MAX_TERMS].join(" && "), true, MAX_TERMS),
        ] {
            let v = Counting(std::cell::Cell::new(0));
            assert_eq!(Expr::parse(&s).unwrap().eval(&e, &v), want);
            assert_eq!(v.0.get(), reads);
        }
        assert_eq!(
            Expr::parse("rw == R || rw =~ W || (rw == F || rw == D)")
                .unwrap()
                .pushdown()
                .op_mask,
            0b1111
        );
    }

    #[test]
    fn glob_cases() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*c", b"abbbc"));
        assert!(!glob(b"a*c", b"abbb"));
        assert!(glob(b"[ab]x", b"bx"));
        assert!(glob(b"*.ibd", b"/var/lib/mysql/t.ibd"));
        assert!(!glob(b"?", b"ab"));
    }
}
