//! The daemon's pure core: when triggers fire and whether a fire starts a run.
//!
//! Layout:
//! - [`cron`]: cron expressions (5 fields, or 6 with seconds first; names, steps, macros) and
//!   matching against wall-clock times.
//! - [`schedule`]: a cron expression in an IANA time zone: the instants it fires at, correct across
//!   DST (a skipped time fires once at the next valid instant, a repeated one once).
//! - [`policy`]: catch-up after downtime, overlap with a running run, daily quotas — each a pure
//!   decision with a reason a user reads.
//!
//! What it is not: no clock, no I/O, no store. The daemon reads the clock, keeps the fire records
//! and starts runs; everything it decides with goes through here, so tests drive it with instants.
//!
//! Time zones come from the system's tzdb (`/usr/share/zoneinfo`, kept current by the OS) and,
//! where there is none (distroless images, bare CI runners), from the copy bundled into the binary.

pub mod cron;
pub mod policy;
pub mod schedule;

pub use cron::{Cron, CronError};
pub use jiff::Timestamp;
pub use policy::{
    CatchUp, CatchUpPlan, Decision, FirePolicy, Overlap, PolicyError, Quota, Running, UsedToday,
    catch_up,
};
pub use schedule::{Schedule, ScheduleError};

#[cfg(test)]
mod tests;
