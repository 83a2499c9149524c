//! What the running kernel offers the BPF program, found by probing — its BTF (vmlinux and
//! module BTF), the tracepoints and kfuncs that BTF names, and a BPF instruction the kernel
//! accepts or refuses — never by kernel version numbers.
//!
//! CO-RE relocation needs the types of every struct the program reads. Distributions build
//! btrfs as a module, so `struct btrfs_bio` and `struct btrfs_inode` are in
//! `/sys/kernel/btf/btrfs` (split BTF on top of vmlinux), not in vmlinux BTF. aya-obj 0.3
//! reads vmlinux BTF only; [`KernelBtf::load`] gives it the union instead. Split BTF continues
//! its base: its first type id is one past the base's last, its string offsets start at the
//! base's string-section length, so the union is the two type sections and the two string
//! sections, each concatenated.

use std::path::{Path, PathBuf};

use aya::Btf;
use aya_obj::btf::BtfKind;

use crate::error::RecordError;

/// Modules whose structs the program reads (CO-RE relocated), merged into the BTF when
/// they are loaded and have BTF of their own.
pub const MODULES_READ: [&str; 1] = ["btrfs"];

/// Where the running kernel keeps its BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF as the loader uses it, and what it says about the kernel.
pub struct KernelBtf {
    /// vmlinux BTF with the BTF of the loaded [`MODULES_READ`] appended.
    pub btf: Btf,
    /// vmlinux BTF alone (ids of vmlinux types, tracepoint and kfunc look-ups).
    pub vmlinux: Btf,
    /// Its bytes.
    vmlinux_raw: Vec<u8>,
    /// The file vmlinux BTF came from.
    pub source: PathBuf,
    /// The running kernel exposes its own BTF (`tp_btf` programs need it; with `--btf` on
    /// a kernel without it, only raw tracepoints can attach).
    pub kernel_has_btf: bool,
    /// Modules whose BTF was merged.
    pub merged: Vec<String>,
    /// Modules of [`MODULES_READ`] that are loaded but have no BTF (kernels built without
    /// CONFIG_DEBUG_INFO_BTF_MODULES): what the program reads of them stays off.
    pub without_btf: Vec<String>,
}

/// The sections of a BTF blob: (type bytes, string bytes).
fn sections(data: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let u32_at = |off: usize| -> Result<u32, String> {
        data.get(off..off + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "truncated BTF header".to_string())
    };
    if data.len() < 24 || data[0..2] != [0x9f, 0xeb] {
        return Err("not little-endian BTF (bad magic)".into());
    }
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
    let body = data
        .get(hdr_len..)
        .ok_or("BTF header longer than the file")?;
    let types = body
        .get(type_off..type_off + type_len)
        .ok_or("BTF type section out of bounds")?;
    let strings = body
        .get(str_off..str_off + str_len)
        .ok_or("BTF string section out of bounds")?;
    Ok((types, strings))
}

/// One BTF blob holding `base` and the split BTF `split` built on it.
pub fn merge_split(base: &[u8], split: &[u8]) -> Result<Vec<u8>, String> {
    let (bt, bs) = sections(base)?;
    let (st, ss) = sections(split)?;
    let type_len = bt.len() + st.len();
    let str_len = bs.len() + ss.len();
    let mut out = Vec::with_capacity(24 + type_len + str_len);
    out.extend_from_slice(&[0x9f, 0xeb, 1, 0]);
    for v in [24u32, 0, type_len as u32, type_len as u32, str_len as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(bt);
    out.extend_from_slice(st);
    out.extend_from_slice(bs);
    out.extend_from_slice(ss);
    Ok(out)
}

fn parse(data: &[u8], what: &Path) -> Result<Btf, RecordError> {
    Btf::parse(data, aya::Endianness::Little).map_err(|e| RecordError::NoBtf {
        what: what.display().to_string(),
        source: Some(Box::new(e)),
    })
}

impl KernelBtf {
    /// The kernel's BTF from `btf_file` (`--btf`, e.g. from BTFHub, for a kernel without
    /// `/sys/kernel/btf/vmlinux`) or from sysfs, with loaded modules' BTF merged in.
    pub fn load(btf_file: Option<&Path>) -> Result<KernelBtf, RecordError> {
        let kernel_has_btf = Path::new(VMLINUX_BTF).exists();
        let source = match btf_file {
            Some(p) => p.to_path_buf(),
            None if kernel_has_btf => PathBuf::from(VMLINUX_BTF),
            None => {
                return Err(RecordError::NoBtf {
                    source: None,
                    what: format!(
                        "{VMLINUX_BTF} does not exist (kernel built without \
                         CONFIG_DEBUG_INFO_BTF): pass --btf FILE with this kernel's BTF \
                         (BTFHub has files for many distribution kernels)"
                    ),
                })
            }
        };
        let base = std::fs::read(&source).map_err(|e| RecordError::NoBtf {
            what: source.display().to_string(),
            source: Some(Box::new(e)),
        })?;
        let vmlinux = parse(&base, &source)?;
        let mut merged = Vec::new();
        let mut without_btf = Vec::new();
        let mut btf = None;
        for m in MODULES_READ {
            if !Path::new("/sys/module").join(m).exists() {
                continue;
            }
            let path = Path::new("/sys/kernel/btf").join(m);
            // Module BTF only goes with the running kernel's own vmlinux BTF.
            let split = match std::fs::read(&path) {
                Ok(b) if btf_file.is_none() => b,
                _ => {
                    without_btf.push(m.to_string());
                    continue;
                }
            };
            match merge_split(&base, &split) {
                Ok(all) => {
                    btf = Some(parse(&all, &path)?);
                    merged.push(m.to_string());
                }
                Err(_) => without_btf.push(m.to_string()),
            }
            // One split BTF at a time: two modules' ids would overlap.
            break;
        }
        let btf = match btf {
            Some(b) => b,
            None => parse(&base, &source)?,
        };
        Ok(KernelBtf {
            btf,
            vmlinux,
            vmlinux_raw: base,
            source,
            kernel_has_btf: kernel_has_btf && btf_file.is_none(),
            merged,
            without_btf,
        })
    }

    /// The tracepoint exists (vmlinux BTF has its `btf_trace_NAME` typedef).
    pub fn has_tracepoint(&self, name: &str) -> bool {
        self.vmlinux
            .id_by_type_name_kind(&format!("btf_trace_{name}"), BtfKind::Typedef)
            .is_ok()
    }

    /// The number of arguments the tracepoint passes (its BTF prototype, less the context
    /// pointer), if vmlinux BTF has it.
    pub fn tracepoint_args(&self, name: &str) -> Option<usize> {
        let (types, strings) = sections(&self.vmlinux_raw).ok()?;
        tracepoint_args(types, strings, &format!("btf_trace_{name}"))
    }

    /// True when vmlinux's `struct NAME` has the member `path` (`d_u.d_alias`: through
    /// anonymous members too, as CO-RE relocation matches them).
    pub fn struct_has(&self, name: &str, path: &str) -> bool {
        let Ok((types, strings)) = sections(&self.vmlinux_raw) else {
            return false;
        };
        let t = RawTypes::new(types, strings);
        let parts: Vec<&str> = path.split('.').collect();
        t.find(BTF_STRUCT, name)
            .is_some_and(|id| t.has_path(id, &parts, 0))
    }

    /// The id of a kernel function (kfunc) in vmlinux BTF.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        self.vmlinux.id_by_type_name_kind(name, BtfKind::Func).ok()
    }

    /// The id of a struct in vmlinux BTF (0: not there, e.g. it lives in a module).
    pub fn vmlinux_struct_id(&self, name: &str) -> u32 {
        self.vmlinux
            .id_by_type_name_kind(name, BtfKind::Struct)
            .unwrap_or(0)
    }
}

/// The raw type records of a BTF blob, walked once (aya-obj keeps the fields of its types
/// private): each type's kind, member count, size-or-type word and where its records start.
struct RawTypes<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// (kind, vlen, size_or_type, name offset, offset of what follows the 12-byte header),
    /// by id (index 0 is void).
    recs: Vec<(u32, u32, u32, u32, usize)>,
    /// Ids whose info word has the kind flag (a struct's members then give bitfield size
    /// and bit offset in one word).
    kind_flag: Vec<bool>,
}

const BTF_INT: u32 = 1;
const BTF_PTR: u32 = 2;
const BTF_ARRAY: u32 = 3;
const BTF_STRUCT: u32 = 4;
const BTF_UNION: u32 = 5;
const BTF_ENUM: u32 = 6;
const BTF_TYPEDEF: u32 = 8;
const BTF_FUNC_PROTO: u32 = 13;
const BTF_VAR: u32 = 14;
const BTF_DATASEC: u32 = 15;
const BTF_DECL_TAG: u32 = 17;
const BTF_ENUM64: u32 = 19;

impl<'a> RawTypes<'a> {
    fn new(types: &'a [u8], strings: &'a [u8]) -> RawTypes<'a> {
        let mut t = RawTypes {
            types,
            strings,
            recs: vec![(0, 0, 0, 0, 0)],
            kind_flag: vec![false],
        };
        let mut off = 0;
        while off + 12 <= types.len() {
            let (Some(name_off), Some(info), Some(st)) =
                (t.u32_at(off), t.u32_at(off + 4), t.u32_at(off + 8))
            else {
                break;
            };
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            t.recs.push((kind, vlen, st, name_off, off + 12));
            t.kind_flag.push(info >> 31 == 1);
            off += 12
                + match kind {
                    BTF_INT | BTF_VAR | BTF_DECL_TAG => 4,
                    BTF_ARRAY => 12,
                    BTF_STRUCT | BTF_UNION | BTF_DATASEC => 12 * vlen as usize,
                    BTF_ENUM | BTF_FUNC_PROTO => 8 * vlen as usize,
                    BTF_ENUM64 => 12 * vlen as usize,
                    _ => 0,
                };
        }
        t
    }
    fn u32_at(&self, off: usize) -> Option<u32> {
        let b = self.types.get(off..off + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn name_at(&self, off: u32) -> &[u8] {
        let rest = self.strings.get(off as usize..).unwrap_or(&[]);
        &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())]
    }
    fn find(&self, kind: u32, name: &str) -> Option<usize> {
        self.recs
            .iter()
            .position(|r| r.0 == kind && self.name_at(r.3) == name.as_bytes())
    }
    /// Through typedefs and modifiers (const, volatile, restrict, type tags) to the type.
    fn resolve(&self, mut id: usize) -> usize {
        for _ in 0..8 {
            match self.recs.get(id) {
                Some((8 | 9 | 10 | 11 | 18, _, st, _, _)) => id = *st as usize,
                _ => break,
            }
        }
        id
    }
    /// True when struct or union `id` has `path` (`a.b`), looking through anonymous members
    /// as CO-RE does.
    fn has_path(&self, id: usize, path: &[&str], depth: u32) -> bool {
        self.member(id, path, depth).is_some()
    }
    /// The member at `path` of struct or union `id`, through anonymous members as CO-RE
    /// does: its bit offset from the start of `id` and its type id.
    fn member(&self, id: usize, path: &[&str], depth: u32) -> Option<(u32, usize)> {
        let id = self.resolve(id);
        let &(kind, vlen, _, _, at) = self.recs.get(id)?;
        if !(kind == BTF_STRUCT || kind == BTF_UNION) || depth > 8 || path.is_empty() {
            return None;
        }
        let flag = self.kind_flag.get(id).copied().unwrap_or(false);
        (0..vlen as usize).find_map(|i| {
            let m = at + 12 * i;
            let (name, ty, off) = (self.u32_at(m)?, self.u32_at(m + 4)?, self.u32_at(m + 8)?);
            let off = if flag { off & 0x00ff_ffff } else { off };
            let n = self.name_at(name);
            let rest = if n.is_empty() {
                path
            } else if n == path[0].as_bytes() {
                if path.len() == 1 {
                    return Some((off, ty as usize));
                }
                &path[1..]
            } else {
                return None;
            };
            let (inner, inner_ty) = self.member(ty as usize, rest, depth + 1)?;
            Some((off + inner, inner_ty))
        })
    }
    /// The byte size of type `id` (through typedefs and modifiers): a struct's, union's or
    /// integer's own size, 8 for a pointer.
    fn size_of(&self, id: usize) -> Option<u32> {
        match *self.recs.get(self.resolve(id))? {
            (BTF_STRUCT | BTF_UNION | BTF_INT | BTF_ENUM | BTF_ENUM64, _, size, _, _) => Some(size),
            (BTF_PTR, ..) => Some(8),
            _ => None,
        }
    }
}

/// The module whose structs say where md RAID4/5/6 keeps its stripes' bios.
pub const RAID456: &str = "raid456";

/// Where md RAID4/5/6's stripe cache keeps each disk's bio and the upper bios waiting on its
/// block: `struct iodump_raid5_layout` of `ebpf/iodump.h`, from raid456's module BTF
/// (`struct stripe_head`, `struct r5dev`). Byte offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raid5Layout {
    /// `stripe_head.dev`: the array of `struct r5dev`, one per disk.
    pub dev_off: u32,
    /// `sizeof(struct r5dev)`.
    pub dev_bytes: u32,
    /// `stripe_head.disks` (an `int`).
    pub disks_off: u32,
    /// `r5dev.req`: the bio sent to the disk.
    pub req_off: u32,
    /// `r5dev.rreq`: the bio sent to the disk's replacement.
    pub rreq_off: u32,
    /// `r5dev.vec`: `req`'s one bio_vec.
    pub vec_off: u32,
    /// `r5dev.rvec`.
    pub rvec_off: u32,
    /// `r5dev.toread`.
    pub toread_off: u32,
    /// `r5dev.towrite`.
    pub towrite_off: u32,
    /// `r5dev.written`.
    pub written_off: u32,
}

impl Raid5Layout {
    /// The layout's fields in the order of `struct iodump_raid5_layout`.
    pub const FIELDS: [&'static str; 10] = [
        "dev_off",
        "dev_bytes",
        "disks_off",
        "req_off",
        "rreq_off",
        "vec_off",
        "rvec_off",
        "toread_off",
        "towrite_off",
        "written_off",
    ];

    /// The map value: the fields as little-endian `u32`s in [`Raid5Layout::FIELDS`] order.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        let v = [
            self.dev_off,
            self.dev_bytes,
            self.disks_off,
            self.req_off,
            self.rreq_off,
            self.vec_off,
            self.rvec_off,
            self.toread_off,
            self.towrite_off,
            self.written_off,
        ];
        for (o, x) in out.chunks_exact_mut(4).zip(v) {
            o.copy_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// The layout the running kernel's raid456 module has: `Ok(None)` when the module is not
    /// loaded, an error saying why it cannot be known when it is (no module BTF, the kernel
    /// without BTF of its own, structs other than expected).
    pub fn of_running_kernel() -> Result<Option<Raid5Layout>, String> {
        of_loaded_module(RAID456, Raid5Layout::from_types)
    }

    /// The layout from BTF holding raid456's types.
    fn from_types(t: &RawTypes) -> Result<Raid5Layout, String> {
        let sh = t
            .find(BTF_STRUCT, "stripe_head")
            .ok_or("no struct stripe_head in raid456's BTF")?;
        let dev = t
            .find(BTF_STRUCT, "r5dev")
            .ok_or("no struct r5dev in raid456's BTF")?;
        // A member's byte offset, and that it has `bytes` bytes when given.
        let at = |id: usize, s: &str, name: &str, bytes: Option<u32>| -> Result<u32, String> {
            let (bits, ty) = t
                .member(id, &[name], 0)
                .ok_or_else(|| format!("no {s}.{name} in raid456's BTF"))?;
            if bits % 8 != 0 || bytes.is_some_and(|b| t.size_of(ty) != Some(b)) {
                return Err(format!("{s}.{name} is not what iodump reads"));
            }
            Ok(bits / 8)
        };
        let (bio, vec) = (
            t.size_of(t.find(BTF_STRUCT, "bio").unwrap_or(0)),
            t.size_of(t.find(BTF_STRUCT, "bio_vec").unwrap_or(0)),
        );
        let l = Raid5Layout {
            dev_off: at(sh, "stripe_head", "dev", None)?,
            dev_bytes: t.size_of(dev).unwrap_or(0),
            disks_off: at(sh, "stripe_head", "disks", Some(4))?,
            req_off: at(dev, "r5dev", "req", bio)?,
            rreq_off: at(dev, "r5dev", "rreq", bio)?,
            vec_off: at(dev, "r5dev", "vec", vec)?,
            rvec_off: at(dev, "r5dev", "rvec", vec)?,
            toread_off: at(dev, "r5dev", "toread", Some(8))?,
            towrite_off: at(dev, "r5dev", "towrite", Some(8))?,
            written_off: at(dev, "r5dev", "written", Some(8))?,
        };
        if l.dev_bytes == 0 || l.written_off >= l.dev_bytes {
            return Err("struct r5dev is not what iodump reads".into());
        }
        Ok(l)
    }
}

/// What `from` reads from the running kernel's BTF with module `module`'s merged in:
/// `Ok(None)` when the module is not loaded, an error saying why when the module has no
/// BTF (a kernel built without CONFIG_DEBUG_INFO_BTF_MODULES), a file cannot be read or
/// `from` fails.
fn of_loaded_module<T>(
    module: &str,
    from: fn(&RawTypes) -> Result<T, String>,
) -> Result<Option<T>, String> {
    if !Path::new("/sys/module").join(module).exists() {
        return Ok(None);
    }
    let base = std::fs::read(VMLINUX_BTF).map_err(|e| format!("{VMLINUX_BTF}: {e}"))?;
    let path = Path::new("/sys/kernel/btf").join(module);
    let split = std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{module} has no module BTF ({} is missing: a kernel built without \
             CONFIG_DEBUG_INFO_BTF_MODULES)",
            path.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    let all = merge_split(&base, &split)?;
    let (types, strings) = sections(&all)?;
    from(&RawTypes::new(types, strings)).map(Some)
}

/// The module of bcache devices.
pub const BCACHE_MODULE: &str = "bcache";

/// Where bcache keeps, for a bio it was given, the clone it made of it: bcache's `struct
/// search` (one per bio) holds that clone (`search.bio.bio`, sharing the bio's bio_vec
/// array), and on a cache miss bcache reads the backing device in a bio of its own pages
/// whose `bi_private` is the search's closure (`search.cl`). From bcache's module BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BcacheLayout {
    /// Bytes from `search.cl` to `search.bio.bio.bi_io_vec`: where, from such a bio's
    /// `bi_private`, the bio_vec array of the bio it serves is.
    pub vec_off: u32,
}

impl BcacheLayout {
    /// The layout the running kernel's bcache module has: `Ok(None)` when the module is not
    /// loaded, an error saying why it cannot be known when it is.
    pub fn of_running_kernel() -> Result<Option<BcacheLayout>, String> {
        of_loaded_module(BCACHE_MODULE, BcacheLayout::from_types)
    }

    /// The layout from BTF holding bcache's types: the `struct search` (the name is common:
    /// the one with these members) with `cl` and `bio.bio.bi_io_vec`, a pointer after it.
    fn from_types(t: &RawTypes) -> Result<BcacheLayout, String> {
        let (cl, vec, ty) = (0..t.recs.len())
            .filter(|&id| t.recs[id].0 == BTF_STRUCT && t.name_at(t.recs[id].3) == b"search")
            .find_map(|id| {
                let (cl, _) = t.member(id, &["cl"], 0)?;
                let (vec, ty) = t.member(id, &["bio", "bio", "bi_io_vec"], 0)?;
                Some((cl, vec, ty))
            })
            .ok_or("no struct search with cl and bio.bio.bi_io_vec in bcache's BTF")?;
        if cl % 8 != 0 || vec % 8 != 0 || vec <= cl || t.size_of(ty) != Some(8) {
            return Err("bcache's struct search is not what iodump reads".into());
        }
        Ok(BcacheLayout {
            vec_off: (vec - cl) / 8,
        })
    }
}

/// The parameter count, less one (the context), of the function prototype that the typedef
/// `name` points to.
fn tracepoint_args(types: &[u8], strings: &[u8], name: &str) -> Option<usize> {
    let t = RawTypes::new(types, strings);
    let mut id = t.find(BTF_TYPEDEF, name)?;
    for _ in 0..4 {
        let (kind, vlen, st, _, _) = *t.recs.get(id)?;
        match kind {
            BTF_TYPEDEF | BTF_PTR => id = st as usize,
            BTF_FUNC_PROTO => return Some((vlen as usize).saturating_sub(1)),
            _ => return None,
        }
    }
    None
}

/// Whether the kernel accepts BPF atomic compare-and-exchange (Linux 5.12+): loads a
/// five-instruction socket filter that does one on the stack. Without the privilege to
/// load anything the answer is yes: the main object's load then says what is missing.
pub fn has_bpf_cmpxchg() -> bool {
    // r1 = 0; *(u64 *)(r10 - 8) = r1; r0 = 0;
    // r0 = cmpxchg((u64 *)(r10 - 8), r0, r1); r0 = 0; exit
    let insns: [u64; 6] = [
        insn(0xb7, 1, 0, 0, 0),             // mov64 r1, 0
        insn(0x7b, 10, 1, -8, 0),           // stxdw [r10-8], r1
        insn(0xb7, 0, 0, 0, 0),             // mov64 r0, 0
        insn(0xdb, 10, 1, -8, 0xf0 | 0x01), // atomic64 cmpxchg [r10-8], r1
        insn(0xb7, 0, 0, 0, 0),             // mov64 r0, 0
        insn(0x95, 0, 0, 0, 0),             // exit
    ];
    match prog_loads(&insns) {
        Ok(()) => true,
        Err(e) => matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)),
    }
}

/// One BPF instruction as its 8 bytes (little-endian): opcode, dst, src, offset, imm.
const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    (code as u64)
        | ((dst as u64 & 0xf) << 8)
        | ((src as u64 & 0xf) << 12)
        | ((off as u16 as u64) << 16)
        | ((imm as u32 as u64) << 32)
}

/// Loads a socket filter made of `insns` (and closes it): the kernel's answer.
fn prog_loads(insns: &[u64]) -> std::io::Result<()> {
    #[repr(C)]
    #[derive(Default)]
    struct LoadAttr {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
    }
    const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
    let license = b"GPL\0";
    let attr = LoadAttr {
        prog_type: BPF_PROG_TYPE_SOCKET_FILTER,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..LoadAttr::default()
    };
    // SAFETY: BPF_PROG_LOAD reads `attr` and the instruction and license buffers it points
    // to, which live until the call returns; no log buffer is passed. The kernel zero-extends
    // the attribute union past the size we pass. A returned fd is ours and closed here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            aya_obj::generated::bpf_cmd::BPF_PROG_LOAD as libc::c_long,
            &attr as *const LoadAttr,
            std::mem::size_of::<LoadAttr>() as libc::c_long,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a file descriptor the kernel just gave us and nothing else holds.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of `types` (raw type records) and `strings`.
    fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut out = vec![0x9f, 0xeb, 1, 0];
        for v in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(types);
        out.extend_from_slice(strings);
        out
    }

    /// An INT type record: name offset, info (kind 1), size, encoding word.
    fn int_type(name_off: u32, size: u32) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&name_off.to_le_bytes());
        t.extend_from_slice(&(1u32 << 24).to_le_bytes());
        t.extend_from_slice(&size.to_le_bytes());
        t.extend_from_slice(&(size * 8).to_le_bytes());
        t
    }

    #[test]
    fn a_split_btf_merged_with_its_base_names_both_types() {
        // base: "\0int\0" with type 1 = int; split: strings continue at offset 5
        let base = blob(&int_type(1, 4), b"\0int\0");
        let split = blob(&int_type(5, 8), b"long\0");
        let all = merge_split(&base, &split).unwrap();
        let btf = Btf::parse(&all, aya::Endianness::Little).unwrap();
        assert_eq!(btf.id_by_type_name_kind("int", BtfKind::Int).unwrap(), 1);
        assert_eq!(btf.id_by_type_name_kind("long", BtfKind::Int).unwrap(), 2);
    }

    /// A type record of `kind` (with the kind flag when `flag`): name offset, info, the
    /// size-or-type word, then `members` as (name offset, type, offset) triples.
    fn type_rec(
        name_off: u32,
        kind: u32,
        flag: bool,
        st: u32,
        members: &[(u32, u32, u32)],
    ) -> Vec<u8> {
        let info = (kind << 24) | ((flag as u32) << 31) | members.len() as u32;
        let mut t = Vec::new();
        for v in [name_off, info, st] {
            t.extend_from_slice(&v.to_le_bytes());
        }
        for &(n, ty, off) in members {
            for v in [n, ty, off] {
                t.extend_from_slice(&v.to_le_bytes());
            }
        }
        t
    }

    /// raid456's two structs as a kernel lays them out (byte offsets of 6.12's), the
    /// stripe_head with the kind flag (its members then give bit offsets in the low 24
    /// bits), or without `drop` among r5dev's members.
    fn raid456_btf(drop: &str) -> Vec<u8> {
        let names = "\0int\0bio\0bio_vec\0r5dev\0stripe_head\0req\0rreq\0vec\0rvec\0toread\0read\0towrite\0written\0disks\0dev\0sector\0";
        let off = |n: &str| names.find(&format!("\0{n}\0")).unwrap() as u32 + 1;
        let mut types = int_type(off("int"), 4); // 1
        types.extend(type_rec(off("bio"), BTF_STRUCT, false, 128, &[])); // 2
        types.extend(type_rec(off("bio_vec"), BTF_STRUCT, false, 16, &[])); // 3
        types.extend(type_rec(0, BTF_PTR, false, 2, &[])); // 4: struct bio *
        let dev: Vec<(u32, u32, u32)> = [
            ("req", 2, 0),
            ("rreq", 2, 128),
            ("vec", 3, 256),
            ("rvec", 3, 272),
            ("toread", 4, 296),
            ("read", 4, 304),
            ("towrite", 4, 312),
            ("written", 4, 320),
        ]
        .into_iter()
        .filter(|m| m.0 != drop)
        .map(|(n, ty, b)| (off(n), ty, b * 8))
        .collect();
        types.extend(type_rec(off("r5dev"), BTF_STRUCT, false, 368, &dev)); // 5
        let mut arr = type_rec(0, BTF_ARRAY, false, 0, &[]); // 6: struct r5dev[]
        for v in [5u32, 1, 0] {
            arr.extend_from_slice(&v.to_le_bytes());
        }
        types.extend(arr);
        // a union holding `disks`, anonymous, as a struct may do
        types.extend(type_rec(0, BTF_UNION, false, 4, &[(off("disks"), 1, 0)])); // 7
        types.extend(type_rec(
            off("stripe_head"),
            BTF_STRUCT,
            true,
            480,
            &[
                (off("sector"), 1, 64),
                (0, 7, 40 * 8),
                (off("dev"), 6, 112 * 8),
            ],
        ));
        blob(&types, names.as_bytes())
    }

    #[test]
    fn raid456s_layout_is_read_from_its_btf() {
        let b = raid456_btf("");
        let (types, strings) = sections(&b).unwrap();
        let l = Raid5Layout::from_types(&RawTypes::new(types, strings)).unwrap();
        assert_eq!(
            l,
            Raid5Layout {
                dev_off: 112,
                dev_bytes: 368,
                disks_off: 40,
                req_off: 0,
                rreq_off: 128,
                vec_off: 256,
                rvec_off: 272,
                toread_off: 296,
                towrite_off: 312,
                written_off: 320,
            }
        );
        let bytes = l.to_bytes();
        assert_eq!(bytes[4..8], 368u32.to_le_bytes());
        assert_eq!(bytes[36..40], 320u32.to_le_bytes());
        for m in ["written", "rvec"] {
            let b = raid456_btf(m);
            let (types, strings) = sections(&b).unwrap();
            let e = Raid5Layout::from_types(&RawTypes::new(types, strings)).unwrap_err();
            assert_eq!(e, format!("no r5dev.{m} in raid456's BTF"));
        }
    }

    /// bcache's `struct search` as a kernel lays it out (6.12's offsets: the closure, then
    /// the `struct bbio` whose `bio` is the clone), after another `struct search` without
    /// those members, as vmlinux may have; `drop` leaves a member out.
    fn bcache_btf(drop: &str) -> Vec<u8> {
        let names = "\0int\0bio_vec\0bio\0bbio\0search\0closure\0cl\0bi_io_vec\0submit_time_us\0orig_bio\0len\0";
        let off = |n: &str| names.find(&format!("\0{n}\0")).unwrap() as u32 + 1;
        let mut types = int_type(off("int"), 4); // 1
        types.extend(type_rec(off("bio_vec"), BTF_STRUCT, false, 16, &[])); // 2
        types.extend(type_rec(0, BTF_PTR, false, 2, &[])); // 3: struct bio_vec *
        types.extend(type_rec(
            off("bio"),
            BTF_STRUCT,
            false,
            128,
            &[(off("bi_io_vec"), 3, 104 * 8)],
        )); // 4
        types.extend(type_rec(off("closure"), BTF_STRUCT, false, 64, &[])); // 5
        types.extend(type_rec(
            off("bbio"),
            BTF_STRUCT,
            false,
            160,
            &[(off("submit_time_us"), 1, 0), (off("bio"), 4, 32 * 8)],
        )); // 6
        types.extend(type_rec(
            off("search"),
            BTF_STRUCT,
            false,
            4,
            &[(off("len"), 1, 0)],
        )); // 7
        let m: Vec<(u32, u32, u32)> = [("cl", 5, 0), ("bio", 6, 64), ("orig_bio", 3, 224)]
            .into_iter()
            .filter(|m| m.0 != drop)
            .map(|(n, ty, b)| (off(n), ty, b * 8))
            .collect();
        types.extend(type_rec(off("search"), BTF_STRUCT, false, 400, &m)); // 8
        blob(&types, names.as_bytes())
    }

    #[test]
    fn bcaches_layout_is_read_from_its_btf() {
        let b = bcache_btf("");
        let (types, strings) = sections(&b).unwrap();
        let l = BcacheLayout::from_types(&RawTypes::new(types, strings)).unwrap();
        // the clone at 64, its bio at 32 in it, bi_io_vec at 104 in that
        assert_eq!(
            l,
            BcacheLayout {
                vec_off: 64 + 32 + 104
            }
        );
        for m in ["cl", "bio"] {
            let b = bcache_btf(m);
            let (types, strings) = sections(&b).unwrap();
            let e = BcacheLayout::from_types(&RawTypes::new(types, strings)).unwrap_err();
            assert_eq!(
                e,
                "no struct search with cl and bio.bio.bi_io_vec in bcache's BTF"
            );
        }
    }

    #[test]
    fn damaged_btf_is_an_error_not_a_panic() {
        assert!(merge_split(b"", b"").is_err());
        let mut bad = blob(&int_type(1, 4), b"\0int\0");
        bad[12] = 0xff; // type_len past the end
        assert!(merge_split(&bad, &bad).is_err());
    }

    #[test]
    fn instructions_encode_like_the_kernel_reads_them() {
        // exit: opcode 0x95, nothing else
        assert_eq!(insn(0x95, 0, 0, 0, 0), 0x95);
        // stxdw [r10-8], r1: dst 10, src 1, off -8
        assert_eq!(
            insn(0x7b, 10, 1, -8, 0).to_le_bytes(),
            [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0]
        );
    }
}
