//! Renames, unlinks and links as they return: `on_names_changed` (ebpf/iodump.bpf.c)
//! attached to the syscall tracepoints `syscalls:sys_exit_rename`, `…_renameat`,
//! `…_renameat2`, `…_unlink`, `…_unlinkat`, `…_link` and `…_linkat`, so that a file's names
//! are checked again at its next I/O (ebpf/paths.bpf.h, `names_epoch`): a link gives a file
//! made with `O_TMPFILE` its first name, and with an unlink moves a file (Maildir).
//!
//! Tracepoints of this kind are attached through a perf event, whose id only tracefs tells
//! (`events/syscalls/NAME/id`). When tracefs is not mounted (a fresh machine), it is mounted
//! for the moment the ids are read on a private directory of its own and unmounted at once:
//! the system's mounts are left as they were.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use aya::programs::TracePoint;
use aya::Ebpf;

/// The syscalls whose return moves the names generation.
pub const SYSCALLS: [&str; 7] = [
    "sys_exit_rename",
    "sys_exit_renameat",
    "sys_exit_renameat2",
    "sys_exit_unlink",
    "sys_exit_unlinkat",
    "sys_exit_link",
    "sys_exit_linkat",
];

/// The program's perf event links: dropping them detaches it.
pub struct NamesHooks {
    links: Vec<OwnedFd>,
    /// The tracepoints attached.
    pub attached: Vec<&'static str>,
}

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER0` (64 bytes), enough for a tracepoint.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// Attaches `on_names_changed` to every rename and unlink tracepoint the kernel has. The
/// error says why none could be (the recording goes on, names checked once a second).
pub fn attach(ebpf: &mut Ebpf) -> Result<NamesHooks, String> {
    // To show what the hooks change (tests, bench/paths-ab.sh): names checked once a second.
    if std::env::var("IODUMP_FORCE_NO_NAMES").as_deref() == Ok("1") {
        return Err("IODUMP_FORCE_NO_NAMES=1".into());
    }
    let prog: &mut TracePoint = ebpf
        .program_mut("on_names_changed")
        .ok_or("the object has no on_names_changed program")?
        .try_into()
        .map_err(|e| format!("on_names_changed: {e}"))?;
    prog.load()
        .map_err(|e| format!("loading on_names_changed: {e}"))?;
    let prog_fd = prog
        .fd()
        .map_err(|e| format!("on_names_changed: {e}"))?
        .as_fd()
        .as_raw_fd();
    let ids = tracepoint_ids()?;
    let mut hooks = NamesHooks {
        links: Vec::new(),
        attached: Vec::new(),
    };
    let mut errors = Vec::new();
    for (name, id) in ids {
        match perf_link(id, prog_fd) {
            Ok(fd) => {
                hooks.links.push(fd);
                hooks.attached.push(name);
            }
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    if hooks.links.is_empty() {
        return Err(if errors.is_empty() {
            "the kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS)".into()
        } else {
            errors.join("; ")
        });
    }
    Ok(hooks)
}

/// A perf event on tracepoint `id` with the program `prog_fd` attached, enabled.
fn perf_link(id: u64, prog_fd: i32) -> std::io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        wakeup_events: 1,
        ..PerfEventAttr::default()
    };
    // SAFETY: perf_event_open reads `attr` (a valid, fully initialised struct of the size it
    // says) and returns a new descriptor or -1; pid -1 and cpu 0 is one event for every
    // task, the way a BPF program is attached to a tracepoint (it runs on every CPU).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: ioctls on our own perf event descriptor; SET_BPF takes the program's fd by
    // value, ENABLE takes no argument.
    let ok = unsafe {
        libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF as _, prog_fd) == 0
            && libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) == 0
    };
    if !ok {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// The ids of the [`SYSCALLS`] tracepoints the kernel has, from a mounted tracefs, or from
/// one mounted here for the moment.
fn tracepoint_ids() -> Result<Vec<(&'static str, u64)>, String> {
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let d = Path::new(dir);
        if d.join("events").is_dir() {
            return Ok(read_ids(d));
        }
    }
    let mnt = PrivateTracefs::mount()?;
    Ok(read_ids(&mnt.dir))
}

fn read_ids(tracefs: &Path) -> Vec<(&'static str, u64)> {
    SYSCALLS
        .iter()
        .filter_map(|name| {
            let p = tracefs.join("events/syscalls").join(name).join("id");
            let id = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
            Some((*name, id))
        })
        .collect()
}

/// tracefs mounted on a private directory, unmounted and removed on drop.
struct PrivateTracefs {
    dir: PathBuf,
}

impl PrivateTracefs {
    fn mount() -> Result<PrivateTracefs, String> {
        let dir = std::env::temp_dir().join(format!(".iodump-tracefs-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make {} to mount tracefs on: {e}", dir.display()))?;
        let t = PrivateTracefs { dir };
        let target = CString::new(t.dir.as_os_str().as_encoded_bytes())
            .map_err(|_| "a NUL in the temporary directory's name".to_string())?;
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call and no data.
        let r = unsafe {
            libc::mount(
                c"nodev".as_ptr(),
                target.as_ptr(),
                c"tracefs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(format!(
                "tracefs is not mounted and cannot be: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(t)
    }
}

impl Drop for PrivateTracefs {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.dir.as_os_str().as_encoded_bytes()) {
            // SAFETY: umount2(2) of the directory mounted in `mount`, a NUL-terminated string.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
