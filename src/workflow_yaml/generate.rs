//! `agentfile create` / `promote`: the generation run's manifest, the built-in
//! generator workflow, and promotion (CONTRACT §10).
