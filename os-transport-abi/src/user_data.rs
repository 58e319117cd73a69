//! Bit layout of `os_transport_user_data_t` and the request-id transport encoding (contract §2).
//!
//! `raw64 = (rid & (2^60-1)) | (chunk_type << 60) | (chunk_id << 61)`; gcc on x86_64 allocates the
//! header's bitfields LSB-first, so this is the value C code sees through `.user_ctx`.

pub use crate::REQUEST_ID_BITS;

/// Mask of the request-id field.
pub const REQUEST_ID_MASK: u64 = (1u64 << REQUEST_ID_BITS) - 1;
/// Largest key (`server_key` / `client_key`) the API accepts: 2^40 - 1.
pub const KEY_MAX: u64 = (1u64 << crate::REQUEST_ID_EFFECTIVE_BITS) - 1;
/// Chunk type of every chunk but the last.
pub const CHUNK_TYPE_MIDDLE: u8 = 0;
/// Chunk type of the last chunk of a request.
pub const CHUNK_TYPE_LAST: u8 = 1;
/// Chunk id carried by every SEND_IMM `user_ctx`: its local completion is ignored (§2.4).
pub const SENTINEL_CHUNK_ID: u8 = 7;

const HALF_MASK: u64 = 0xF_FFFF;

/// The three fields of `os_transport_user_data_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserData {
    /// Request id (bits 0..59).
    pub rid: u64,
    /// 1 = last chunk (bit 60).
    pub chunk_type: u8,
    /// Chunk index 0..6, 7 = sentinel (bits 61..63).
    pub chunk_id: u8,
}

impl UserData {
    /// Builds the fields; out-of-range values are truncated to their bit widths like C bitfields.
    pub const fn new(rid: u64, chunk_type: u8, chunk_id: u8) -> Self {
        UserData {
            rid: rid & REQUEST_ID_MASK,
            chunk_type: chunk_type & 1,
            chunk_id: chunk_id & 7,
        }
    }

    /// The 64-bit value (`user_ctx` member of the union).
    pub const fn raw(self) -> u64 {
        (self.rid & REQUEST_ID_MASK)
            | (((self.chunk_type & 1) as u64) << 60)
            | (((self.chunk_id & 7) as u64) << 61)
    }

    /// Splits a 64-bit value into the three fields.
    pub const fn from_raw(raw: u64) -> Self {
        UserData {
            rid: raw & REQUEST_ID_MASK,
            chunk_type: ((raw >> 60) & 1) as u8,
            chunk_id: (raw >> 61) as u8,
        }
    }
}

/// Transport encoding of a 40-bit key: bits 19:0 stay, bits 39:20 move to 59:40 (§2.3).
pub const fn enc(x: u64) -> u64 {
    (x & HALF_MASK) | (((x >> 20) & HALF_MASK) << 40)
}

/// Inverse of [`enc`]; bits 39:20 of the input are ignored.
pub const fn dec(y: u64) -> u64 {
    (y & HALF_MASK) | (((y >> 40) & HALF_MASK) << 20)
}

/// `true` if `key` is an accepted request id (0 ..= 2^40-1).
pub const fn key_valid(key: u64) -> bool {
    key <= KEY_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_positions_match_gcc_layout() {
        assert_eq!(UserData::new(0, 1, 0).raw(), 0x1000_0000_0000_0000);
        assert_eq!(UserData::new(0, 0, 1).raw(), 0x2000_0000_0000_0000);
        assert_eq!(
            UserData::new(0x123456789A, 1, 7).raw(),
            0xF000_0012_3456_789A
        );
        assert_eq!(
            UserData::new(0x123456789A, 1, 1).raw(),
            0x3000_0012_3456_789A
        );
        let u = UserData::from_raw(0xF000_0012_3456_789A);
        assert_eq!(
            u,
            UserData {
                rid: 0x123456789A,
                chunk_type: 1,
                chunk_id: 7
            }
        );
    }

    #[test]
    fn encoding_matches_spec_example() {
        assert_eq!(enc(0xABCDE12345), 0x0ABC_DE00_0001_2345);
        assert_eq!(dec(0x0ABC_DE00_0001_2345), 0xABCDE12345);
        assert_eq!(
            UserData::new(enc(0xABCDE12345), 0, 0).raw(),
            0x0ABCDE0000012345
        );
        assert_eq!(
            UserData::new(enc(0xABCDE12345), 1, 1).raw(),
            0x3ABCDE0000012345
        );
        // bits 39:20 of the input are ignored by dec
        assert_eq!(dec(0x0ABC_DEFF_FFF1_2345), 0xABCDE12345);
    }

    #[test]
    fn enc_dec_roundtrip_over_40_bits() {
        for &k in &[
            0u64,
            1,
            0xFFFFF,
            0x100000,
            KEY_MAX,
            0x12_3456_789A,
            0x80_0000_0001,
        ] {
            assert_eq!(dec(enc(k)), k);
            assert_eq!(enc(k) & 0xFF_FFF0_0000, 0, "bits 39:20 of enc are zero");
        }
        assert!(key_valid(KEY_MAX));
        assert!(!key_valid(KEY_MAX + 1));
        assert!(key_valid(0));
    }
}
