//! The engine: executor, run preparation, telemetry; it knows no format.

pub mod executor;
pub mod run;
pub mod telemetry;
