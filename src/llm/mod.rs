//! LLM providers (issue 3, in progress).
