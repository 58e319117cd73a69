//! Chunk plan (contract §3.1): `N = ceil(len / 2 MiB)`, at most 7 chunks, only the last one short.

/// `DEFAULT_CHUNK_SIZE`: 2 MiB, fixed.
pub use crate::abi::DEFAULT_CHUNK_SIZE as CHUNK_SIZE;
/// Largest accepted transfer: 7 chunks = 14 MiB.
pub use crate::abi::MAX_TRANSFER as MAX_LEN;
/// `OS_TRANSPORT_MAX_CHUNK_NUM`.
pub use crate::abi::OS_TRANSPORT_MAX_CHUNK_NUM as MAX_CHUNKS;

/// One chunk of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Source address.
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// Length in bytes (1 ..= 2 MiB).
    pub len: u32,
}

/// Number of chunks for `len` bytes, or `None` when `len` is 0 or more than 7 chunks are needed.
pub fn chunk_count(len: u32) -> Option<u8> {
    if len == 0 {
        return None;
    }
    let n = len.div_ceil(CHUNK_SIZE);
    if n > MAX_CHUNKS {
        None
    } else {
        Some(n as u8)
    }
}

/// Chunk `i` of a transfer of `len` bytes from `src` to `dst` (address arithmetic wraps like C).
pub fn chunk(src: u64, dst: u64, len: u32, i: u8) -> Chunk {
    let off = u64::from(i) * u64::from(CHUNK_SIZE);
    let rest = len - (i as u32) * CHUNK_SIZE;
    Chunk {
        src: src.wrapping_add(off),
        dst: dst.wrapping_add(off),
        len: rest.min(CHUNK_SIZE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(chunk_count(0), None);
        assert_eq!(chunk_count(1), Some(1));
        assert_eq!(chunk_count(CHUNK_SIZE), Some(1));
        assert_eq!(chunk_count(CHUNK_SIZE + 1), Some(2));
        assert_eq!(chunk_count(MAX_LEN), Some(7));
        assert_eq!(chunk_count(MAX_LEN + 1), None);
        assert_eq!(chunk_count(u32::MAX), None);
    }

    #[test]
    fn chunks_cover_the_range() {
        let len = 5 * CHUNK_SIZE + 17;
        let n = chunk_count(len).unwrap();
        assert_eq!(n, 6);
        let mut total = 0u64;
        for i in 0..n {
            let c = chunk(0x1000, 0x9000_0000, len, i);
            assert_eq!(c.src, 0x1000 + u64::from(i) * u64::from(CHUNK_SIZE));
            assert_eq!(c.dst, 0x9000_0000 + u64::from(i) * u64::from(CHUNK_SIZE));
            assert_eq!(c.len, if i == n - 1 { 17 } else { CHUNK_SIZE });
            total += u64::from(c.len);
        }
        assert_eq!(total, u64::from(len));
        assert_eq!(
            chunk(u64::MAX, 0, CHUNK_SIZE + 1, 1).src,
            u64::from(CHUNK_SIZE) - 1
        );
    }
}
