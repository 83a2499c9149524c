//! `iodump-host` owns what the running Linux host says about its mounts and block devices:
//! the mount table of `/proc/self/mountinfo` ([`mounts`]) and the block devices of sysfs,
//! `/sys/class/block`, `/sys/block` and `/sys/dev/block` ([`sysfs`]). It reads and parses;
//! what to make of it (which device to record, whether a target is safe to write) is the
//! recorder's and the replayer's business.
//!
//! It depends on `iodump-format` for [`iodump_format::DevT`] only; `iodump-format` does not
//! depend on it (traces know no host).

pub mod mounts;
pub mod sysfs;
