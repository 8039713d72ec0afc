//! (in progress)
pub enum Split {} pub struct SplitAssignment; pub struct SplitConfig;
