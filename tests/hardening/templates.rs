//! Issue 30 items: see main.rs for which.
