//! `iodump-format` owns the `.iod` trace format: the logical model of a trace (events, device,
//! process and path tables, losses, header), the streaming [`Writer`], the [`Reader`] that
//! validates, iterates and decodes segments in parallel, and what is shared by the tools that
//! read traces: the summary `iodump info` reports, the filter expression language, text
//! renderings of events and x86_64 syscall names. The byte layout is specified in
//! `schemas/iod-format.md`. Synthetic traces are made by `iodump-synth`.
//!
//! This crate depends on nothing kernel-related: it builds and runs on any OS.

pub mod bytes;
pub mod cgroup;
pub mod chunk;
pub mod column;
pub mod error;
pub mod event;
pub mod expr;
pub mod inthash;
pub mod reader;
pub mod recording;
pub mod segment;
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
