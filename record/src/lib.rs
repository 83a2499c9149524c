//! `iodump-record` owns live recording: it loads the eBPF program of `ebpf/` (compiled object
//! embedded at build time), attaches it to the block-layer tracepoints, drains its ring
//! buffer, turns kernel records into trace events and table entries ([`convert`], the ingest
//! layer), and hands them to the `iodump-format` writer or prints them. Run as a service, it
//! tells systemd how it goes ([`notify`]) and serves its metrics ([`metrics`], [`serve`]).

pub mod abi;
pub mod bpf;
pub mod cgroups;
pub mod convert;
pub mod devices;
pub mod error;
pub mod flight;
pub mod in_flight;
pub mod kernel;
pub mod live;
pub mod metrics;
pub mod names;
pub mod notify;
pub mod print;
pub mod serve;
pub mod session;

pub use error::RecordError;
pub use session::{record, record_live, LiveSink, RecordConfig, RecordSummary, RecorderStatus};
