//! SIGINT, SIGTERM and SIGHUP → one stop flag that the long-running commands (record,
//! replay) poll, so that they stop cleanly and keep what they did.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first of SIGINT, SIGTERM, SIGHUP once [`install`] ran.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Set by SIGUSR1 once [`install_snapshot`] ran: `iodump record --ring` saves its window.
pub static SNAPSHOT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    SNAPSHOT.store(true, Ordering::Relaxed);
}

/// Routes SIGUSR1 to [`SNAPSHOT`] (instead of ending the process, its default).
pub fn install_snapshot() {
    // SAFETY: as in `install`: the handler only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// Routes SIGINT, SIGTERM and SIGHUP to [`STOP`].
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is zero-initialised and fully set before the call.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
