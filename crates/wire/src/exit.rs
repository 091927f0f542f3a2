//! Process exit codes (CONTRACT §3): the CLI exits with them and every run
//! result carries one (`exit_code`).

pub const OK: i32 = 0;
pub const FAILED: i32 = 1;
pub const USAGE: i32 = 2;
pub const POLICY: i32 = 3;
pub const BUDGET: i32 = 4;
pub const LOOP_LIMIT: i32 = 5;
/// The run waits at a suspend node (CONTRACT §9).
pub const SUSPENDED: i32 = 6;
pub const CANCELLED: i32 = 130;
