//! A value on cache lines of its own, for the parts of the slot table and of the request index
//! that many threads write.

use std::ops::Deref;

/// A value on cache lines of its own (two lines, the unit adjacent-line prefetchers fetch):
/// writing it never invalidates the line of a neighbour that other threads read or write.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

impl<T> Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
