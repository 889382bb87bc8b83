//! (to be written)
pub fn serve(_app: std::sync::Arc<crate::app::App>) {}
