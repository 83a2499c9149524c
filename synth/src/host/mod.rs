//! The host a synthetic trace pretends to come from: its devices (with their latency models)
//! and its threads (with their processes, cgroups and command lines).

pub(crate) mod devices;
pub(crate) mod threads;
