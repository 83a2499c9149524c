//! The filter expression language shared by `iodump record -f` and `iodump analyze --filter`
//! (grammar in `schemas/filter-expressions.md`): parse once into an [`Expr`], evaluate per
//! event against an [`EventView`], and extract the conjunctive constraints a recorder can push
//! into the kernel ([`Expr::pushdown`]).

use std::fmt;

use crate::event::{Event, Flags, Op};

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
    /// A flag used as a boolean: `sync`, `meta`, `fua`, `preflush`, `readahead`,
    /// `background`, `nowait`.
    Flag(Flags),
}

impl Field {
    fn parse(name: &str) -> Option<Field> {
        Some(match name {
            "iosize" | "bytes" | "size" => Field::Bytes,
            "rw" | "op" => Field::Op,
            "lba" | "sector" => Field::Sector,
            "pid" => Field::Pid,
            "tid" => Field::Tid,
            "comm" => Field::Comm,
            "path" | "file" => Field::Path,
            "dev" | "device" => Field::Dev,
            "latency" | "latency_ns" | "lat" => Field::Latency,
            "queue" | "queue_ns" => Field::Queue,
            "device_ns" | "service" => Field::DeviceTime,
            "cpu" => Field::Cpu,
            "error" | "errno" => Field::Error,
            "syscall" => Field::Syscall,
            "cgroup" | "cgroup_id" => Field::Cgroup,
            "dirtier" | "dirtier_pid" => Field::Dirtier,
            other => {
                let f = Flags::NAMES.iter().find(|(_, n, _)| *n == other)?.0;
                Field::Flag(f)
            }
        })
    }
    fn is_text(self) -> bool {
        matches!(
            self,
            Field::Comm | Field::Path | Field::Dev | Field::Op | Field::Syscall
        )
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

/// A literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number (sizes and durations already scaled to bytes and ns).
    Num(f64),
    /// A string or bare word.
    Text(String),
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `a && b`
    And(Box<Expr>, Box<Expr>),
    /// `a || b`
    Or(Box<Expr>, Box<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `field op value`
    Cmp(Field, CmpOp, Value),
    /// A flag or `true`/`false` on its own.
    Bool(Field),
    /// `true`
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
        let v = ResolvedView {
            comm: r.comm(e.pid, e.tid, segment).unwrap_or(b""),
            path: r.tables().path(e.path_id).map_or(&b""[..], |p| &p.path),
            dev: dev_names.get(&e.dev.0).map_or("?", |s| s.as_str()),
        };
        self.eval(e, &v)
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
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Str(String),
    Op(&'static str),
    LParen,
    RParen,
}

fn lex(s: &str) -> Result<Vec<(usize, Tok)>, ExprError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c == b'(' {
            out.push((i, Tok::LParen));
            i += 1;
        } else if c == b')' {
            out.push((i, Tok::RParen));
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let q = c;
            i += 1;
            let mut v = String::new();
            let mut closed = false;
            let mut chars = s[i..].char_indices();
            while let Some((k, ch)) = chars.next() {
                if ch as u32 == q as u32 {
                    i += k + 1;
                    closed = true;
                    break;
                }
                if ch == '\\' {
                    if let Some((_, n)) = chars.next() {
                        v.push(n);
                        continue;
                    }
                }
                v.push(ch);
            }
            if !closed {
                return Err(ExprError {
                    at: start,
                    message: "unterminated string".into(),
                });
            }
            out.push((start, Tok::Str(v)));
        } else if let Some(op) = [
            "&&", "||", "==", "!=", "<=", ">=", "=~", "!~", "<", ">", "!", "=",
        ]
        .iter()
        .find(|op| s[i..].starts_with(**op))
        {
            // A lone `=` means `==`.
            out.push((i, Tok::Op(if *op == "=" { "==" } else { op })));
            i += op.len();
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b':') {
                i += 1;
            }
            let word = &s[start..i];
            if word.contains(':') {
                // MAJ:MIN
                out.push((start, Tok::Ident(word.to_string())));
            } else {
                out.push((
                    start,
                    Tok::Num(parse_number(word).ok_or_else(|| ExprError {
                        at: start,
                        message: format!("bad number {word:?}"),
                    })?),
                ));
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'/' || c == b'*' || c == b'[' {
            while i < b.len()
                && !b[i].is_ascii_whitespace()
                && !matches!(
                    b[i],
                    b'(' | b')' | b'&' | b'|' | b'=' | b'!' | b'<' | b'>' | b'"' | b'\''
                )
            {
                i += 1;
            }
            out.push((start, Tok::Ident(s[start..i].to_string())));
        } else {
            return Err(ExprError {
                at: i,
                message: format!(
                    "unexpected character {:?}",
                    s[i..].chars().next().unwrap_or(' ')
                ),
            });
        }
    }
    Ok(out)
}

/// Parses `4096`, `0x1000`, `64k`, `1M`, `1MiB`, `2G`, `500us`, `1.5ms`, `2s`: sizes in bytes
/// (binary multiples), durations in nanoseconds.
pub fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok().map(|v| v as f64);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024f64.powi(4),
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        _ => return None,
    };
    Some(v * mult)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    len: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }
    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.len, |(a, _)| *a)
    }
    fn err<T>(&self, m: impl Into<String>) -> Result<T, ExprError> {
        Err(ExprError {
            at: self.at(),
            message: m.into(),
        })
    }
    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.and()?;
        while self.peek() == Some(&Tok::Op("||")) {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }
    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.unary()?;
        while self.peek() == Some(&Tok::Op("&&")) {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }
    fn unary(&mut self) -> Result<Expr, ExprError> {
        match self.peek().cloned() {
            Some(Tok::Op("!")) => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Tok::LParen) => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(&Tok::RParen) {
                    return self.err("expected )");
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Tok::Ident(name)) => {
                let field_at = self.at();
                self.pos += 1;
                if name == "true" {
                    return Ok(Expr::True);
                }
                if name == "false" {
                    return Ok(Expr::Not(Box::new(Expr::True)));
                }
                let Some(field) = Field::parse(&name) else {
                    return Err(ExprError {
                        at: field_at,
                        message: format!(
                            "unknown field {name:?} (iosize, rw, lba, pid, tid, comm, path, dev, latency, queue_ns, device_ns, cpu, error, syscall, cgroup, dirtier, sync, meta, fua, preflush, readahead, background, nowait)"
                        ),
                    });
                };
                let op = match self.peek() {
                    Some(Tok::Op(o)) => match *o {
                        "==" => CmpOp::Eq,
                        "!=" => CmpOp::Ne,
                        "<" => CmpOp::Lt,
                        "<=" => CmpOp::Le,
                        ">" => CmpOp::Gt,
                        ">=" => CmpOp::Ge,
                        "=~" => CmpOp::Match,
                        "!~" => CmpOp::NotMatch,
                        _ => return Ok(Expr::Bool(field)),
                    },
                    _ => return Ok(Expr::Bool(field)),
                };
                if let Field::Flag(_) = field {
                    return self.err(format!("{name} is a flag: use it alone, or !{name}"));
                }
                self.pos += 1;
                let value = match self.peek().cloned() {
                    Some(Tok::Num(n)) => Value::Num(n),
                    Some(Tok::Str(s)) => Value::Text(s),
                    Some(Tok::Ident(s)) => match parse_number(&s) {
                        Some(n) if !field.is_text() => Value::Num(n),
                        _ => Value::Text(s),
                    },
                    _ => return self.err("expected a value"),
                };
                let value_at = self.at();
                self.pos += 1;
                if matches!(op, CmpOp::Match | CmpOp::NotMatch) && !matches!(value, Value::Text(_))
                {
                    return Err(ExprError {
                        at: value_at,
                        message: "=~ takes a glob pattern in quotes".into(),
                    });
                }
                if !field.is_text() {
                    if let Value::Text(t) = &value {
                        return Err(ExprError {
                            at: value_at,
                            message: format!("{name} is numeric, {t:?} is not a number"),
                        });
                    }
                }
                if field == Field::Op {
                    if let Value::Text(t) = &value {
                        if op_from_text(t).is_none() {
                            return Err(ExprError {
                                at: value_at,
                                message: format!(
                                    "unknown op {t:?} (R, W, F, D, E, Z, N or read, write…)"
                                ),
                            });
                        }
                    }
                }
                Ok(Expr::Cmp(field, op, value))
            }
            Some(_) => self.err("expected a field, ! or ("),
            None => self.err("unexpected end of expression"),
        }
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
    /// Parses an expression.
    pub fn parse(s: &str) -> Result<Expr, ExprError> {
        let toks = lex(s)?;
        if toks.is_empty() {
            return Err(ExprError {
                at: 0,
                message: "empty expression".into(),
            });
        }
        let mut p = Parser {
            toks,
            pos: 0,
            len: s.len(),
        };
        let e = p.or()?;
        if p.pos != p.toks.len() {
            return p.err("unexpected text after the expression (missing && or ||?)");
        }
        Ok(e)
    }

    /// Evaluates the expression on one event.
    pub fn eval(&self, e: &Event, v: &dyn EventView) -> bool {
        match self {
            Expr::True => true,
            Expr::And(a, b) => a.eval(e, v) && b.eval(e, v),
            Expr::Or(a, b) => a.eval(e, v) || b.eval(e, v),
            Expr::Not(a) => !a.eval(e, v),
            Expr::Bool(Field::Flag(f)) => e.flags.contains(*f),
            Expr::Bool(_) => true,
            Expr::Cmp(f, op, val) => {
                let num = |x: u64| -> Option<f64> { Some(x as f64) };
                let n = match f {
                    Field::Bytes => num(e.bytes as u64),
                    Field::Sector => num(e.sector),
                    Field::Pid => num(e.pid as u64),
                    Field::Tid => num(e.tid as u64),
                    Field::Latency => num(e.latency_ns),
                    Field::Queue => num(e.queue_ns.unwrap_or(0)),
                    Field::DeviceTime => num(e.device_ns()),
                    Field::Cpu => num(e.cpu as u64),
                    Field::Error => num(e.error as u64),
                    Field::Cgroup => num(e.cgroup_id),
                    Field::Dirtier => num(e.dirtier_pid.unwrap_or(0) as u64),
                    _ => None,
                };
                if let (Some(x), Value::Num(y)) = (n, val) {
                    return match op {
                        CmpOp::Eq => x == *y,
                        CmpOp::Ne => x != *y,
                        CmpOp::Lt => x < *y,
                        CmpOp::Le => x <= *y,
                        CmpOp::Gt => x > *y,
                        CmpOp::Ge => x >= *y,
                        CmpOp::Match | CmpOp::NotMatch => false,
                    };
                }
                let Value::Text(t) = val else {
                    // A text field against a number: compare its decimal form.
                    return false;
                };
                let text: std::borrow::Cow<'_, [u8]> = match f {
                    Field::Comm => v.comm().into(),
                    Field::Path => v.path().into(),
                    Field::Dev => {
                        if t.contains(':') {
                            e.dev.to_string().into_bytes().into()
                        } else {
                            v.dev_name().as_bytes().into()
                        }
                    }
                    Field::Op => {
                        let want = op_from_text(t);
                        let eq = want == Some(e.op);
                        return match op {
                            CmpOp::Eq | CmpOp::Match => eq,
                            CmpOp::Ne | CmpOp::NotMatch => !eq,
                            _ => false,
                        };
                    }
                    Field::Syscall => e
                        .syscall
                        .map_or_else(String::new, |s| s.to_string())
                        .into_bytes()
                        .into(),
                    _ => return false,
                };
                let t = t.as_bytes();
                match op {
                    CmpOp::Eq => text.as_ref() == t,
                    CmpOp::Ne => text.as_ref() != t,
                    CmpOp::Match => glob(t, &text),
                    CmpOp::NotMatch => !glob(t, &text),
                    CmpOp::Lt => text.as_ref() < t,
                    CmpOp::Le => text.as_ref() <= t,
                    CmpOp::Gt => text.as_ref() > t,
                    CmpOp::Ge => text.as_ref() >= t,
                }
            }
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
            Expr::And(a, b) => {
                a.collect(p);
                b.collect(p);
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
            Expr::Cmp(Field::Op, CmpOp::Eq, Value::Text(t)) => {
                if let Some(o) = op_from_text(t) {
                    p.op_mask &= 1 << o.code();
                }
            }
            Expr::Cmp(Field::Op, CmpOp::Ne, Value::Text(t)) => {
                if let Some(o) = op_from_text(t) {
                    p.op_mask &= !(1 << o.code());
                }
            }
            Expr::Cmp(Field::Pid, CmpOp::Eq, Value::Num(n)) if *n >= 0.0 => {
                p.pids.get_or_insert_with(Vec::new).push(*n as u32);
            }
            Expr::Cmp(Field::Comm, CmpOp::Eq, Value::Text(t)) => {
                p.comms.get_or_insert_with(Vec::new).push(t.clone());
            }
            Expr::Or(a, b) => {
                // `rw == R || rw == W`: the union of two op sets.
                let (pa, pb) = (a.pushdown(), b.pushdown());
                if pa.only_ops() && pb.only_ops() {
                    p.op_mask &= pa.op_mask | pb.op_mask;
                }
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
