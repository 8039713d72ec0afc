//! (in progress)
pub struct Condition; pub struct ConditionSet; pub enum ContextSource {}
