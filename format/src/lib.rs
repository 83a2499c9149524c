//! `iodump-format` owns the `.iod` trace format: the logical model of a trace (events, device,
//! process and path tables, losses, header), the streaming [`Writer`], the [`Reader`] that
//! validates, iterates and decodes segments in parallel, and what is shared by the tools that
//! read traces: the summary `iodump info` reports, the filter expression language, text
//! renderings of events and x86_64 syscall names. The byte layout is specified in
//! `schemas/iod-format.md`. Synthetic traces are made by `iodump-synth`.
//!
//! This crate depends on nothing kernel-related: it builds and runs on any OS. On x86-64 its
//! hottest decoding loops also exist compiled for AVX2 (x86-64-v3) and AVX-512, chosen at run
//! time by what the CPU has ([`simd`]); every CPU decodes the same values.
//!
//! Writing a trace and reading it back:
//!
//! ```
//! use iodump_format::{DevT, EndInfo, Event, Header, Op, Reader, Writer, WriterOptions};
//!
//! let header = Header { hostname: "db1".into(), ..Header::default() };
//! let mut w = Writer::new(Vec::new(), &header, WriterOptions::default())?;
//! for i in 0..3u64 {
//!     w.push(&Event {
//!         timestamp_ns: 1_000_000 * (i + 1),
//!         dev: DevT::new(259, 0),
//!         sector: 8 * i,
//!         bytes: 4096,
//!         op: Op::Write,
//!         latency_ns: 50_000,
//!         ..Event::default()
//!     })?;
//! }
//! let bytes: Vec<u8> = w.finish(EndInfo::default())?;
//!
//! let r = Reader::from_bytes(bytes)?;
//! assert_eq!(r.header().hostname, "db1");
//! let events: Vec<Event> = r.events().collect();
//! assert_eq!(events.len(), 3);
//! assert_eq!(events.iter().map(|e| u64::from(e.bytes)).sum::<u64>(), 3 * 4096);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod bytes;
pub mod cgroup;
pub mod chunk;
pub mod column;
pub mod error;
pub mod event;
pub mod expr;
pub mod frames;
pub mod idtable;
pub mod inthash;
pub mod literals;
pub mod reader;
pub mod recording;
pub mod segment;
pub mod simd;
pub mod stats;
pub mod summary;
pub mod syscalls;
pub mod text;
pub mod units;
pub mod writer;

pub use error::{Damage, DamageKind, DecodeError, ReadError, WriteError};
pub use event::*;
pub use reader::{ChunkInfo, Events, Reader, SegmentDecoder, SegmentInfo, Tables};
pub use segment::{EventBatch, Nullable};
pub use writer::{SealedChunk, Writer, WriterOptions, WriterStats};
