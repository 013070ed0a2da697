//! The integration tests of `scene`: one test binary (fewer, faster links,
//! as cargo-nextest's own), a module per area. Each runs the real binary
//! (`CARGO_BIN_EXE_scene`, or `NEXTEST_BIN_EXE_scene` from an archive)
//! against scenes copied into temp dirs, with private lock and cache dirs.

mod common;

mod architecture;
mod archive;
mod bounds;
mod bundle;
mod cache;
mod cards;
mod ci;
mod cli;
mod compare;
mod compile;
mod crash;
mod device;
mod device_memory;
mod golden;
mod habits;
mod hardening;
mod host_steps;
mod hosted;
mod html_report;
mod install;
mod isolation;
mod junit;
mod level3;
mod lock_accounting;
mod manual_dep;
mod mixed;
mod orch_v2;
mod outputs;
mod params;
mod persistent_worker;
mod platform;
mod port_matmul;
mod port_paged_attention;
mod port_scalar_data;
mod python_compare;
mod python_golden;
mod python_isolation;
mod python_provision;
mod relocate;
mod remote_cache;
mod replay;
mod rounds;
mod scale;
mod signal;
mod simpler_compat;
mod simpler_tests;
mod terminal;
mod trace;
