//! A raw output pointer for products whose parallel tasks write disjoint elements of one
//! output buffer. The f32 products ([`super::ops`]) and the q8 products ([`super::q8`]) both
//! split their output this way; `ops` dispatches to the q8 driver, so the pointer has a file
//! of its own below both.

/// The output pointer shared by the tasks of one product (each writes its own elements).
pub(super) struct SharedDst(pub(super) *mut f32);
// SAFETY: tasks write disjoint elements through it (see each product's writers), and it does
// not outlive the borrow of the output it points into.
unsafe impl Sync for SharedDst {}
