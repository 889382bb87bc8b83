//! The integration suite as one test binary: one build, one link, and the
//! tests of every area run side by side on libtest's threads. Each former
//! suite is a module of `suite/`; what they share lives in `support/`.

// A test that unwraps fails at that line, which is what a test should do;
// the helpers in `support/` are test code too.
#![allow(clippy::unwrap_used)]

mod suite;
mod support;
