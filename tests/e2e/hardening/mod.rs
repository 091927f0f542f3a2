//! Issue 30: the new formats under hostile and careless input. One test (at
//! least) per item of the issue, named `item_NN_…` so it can be found; every
//! process these tests start runs under a 4 GiB address-space limit and a
//! deadline, and a test fails if one dies of a signal (abort, OOM kill,
//! segfault) or runs past its deadline.
//!
//! The modules split the items by area: `js` (1, 2), `host` (7, 8), `yaml`
//! (3, 14), `runtime` (5, 12, 13, 16), `templates` (4, 6, 15, 17), `policy`
//! (9, 10, 11), `config` (18, 19).

mod limited;

mod config;
mod host;
mod js;
mod policy;
mod runtime;
mod templates;
mod yaml;
