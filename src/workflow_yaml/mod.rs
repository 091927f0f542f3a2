//! The Agentfile spec `workflow.yaml` front end (CONTRACT §10).

pub mod generate;
