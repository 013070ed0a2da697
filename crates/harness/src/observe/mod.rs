//! What a run writes for a person to look at, after or beside the verdict:
//! swimlane traces ([`trace`], `--trace`), task dependency graphs
//! ([`dep_graph`], `--dep-graph`), every task's arguments for `scene
//! replay` ([`args_dump`], `--dump-args`) and case tensor dumps ([`dump`]).
//! None of it decides a verdict.

pub mod args_dump;
pub mod dep_graph;
pub mod dump;
pub mod trace;
