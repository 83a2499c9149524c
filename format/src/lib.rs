//! `iodump-format` owns the `.iod` trace format: the logical model of a trace (events, device,
//! process and path tables, losses, header), the streaming [`Writer`], the [`Reader`] that
//! validates, iterates and decodes segments in parallel, and the synthetic trace generator used
//! by tests and benchmarks. The byte layout is specified in `schemas/iod-format.md`.
//!
//! This crate depends on nothing kernel-related: it builds and runs on any OS.

pub mod bytes;
pub mod chunk;
pub mod column;
pub mod error;
pub mod event;
pub mod expr;
pub mod inthash;
pub mod reader;
pub mod segment;
pub mod summary;
pub mod synth;
pub mod synth_writer;
pub mod syscalls;
pub mod text;
pub mod writer;

pub use error::{Damage, DamageKind, DecodeError, ReadError, WriteError};
pub use event::*;
pub use reader::{ChunkInfo, Events, Reader, SegmentDecoder, SegmentInfo, Tables};
pub use segment::{EventBatch, Nullable};
pub use writer::{Writer, WriterOptions, WriterStats};
