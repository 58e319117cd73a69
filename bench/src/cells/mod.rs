//! The cells of the benchmark, one file each; `crate::registry` lists them.

pub mod alloc;
pub mod bandwidth;
pub mod callgrind;
pub mod idle;
pub mod lat;
pub mod paced;
pub mod tput;
pub mod xproc;
