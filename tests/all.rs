//! The integration suite as one test binary: one build, one link, and the
//! tests of every area run side by side on libtest's threads. Each former
//! suite is a module of `suite/`; what they share lives in `support/`.

mod suite;
mod support;
