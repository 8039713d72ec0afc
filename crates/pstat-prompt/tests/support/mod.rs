//! Helpers shared by the server backend's tests (and its throughput benchmark).

#![allow(dead_code)] // each test binary uses part of them

pub mod fault_proxy;
pub mod llama;
pub mod units;
