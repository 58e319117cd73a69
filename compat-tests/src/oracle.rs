//! The tests' own model of `os_transport_user_data_t` and of the request-id transport encoding
//! (contract §2), written once for every Rust test and independently of the library's codec
//! (`os_transport_abi::user_data`): the tests compare the library with this, so a mistake in the
//! codec is caught. The C programs have the same oracle in `tests/c/urma_fixture.h` (`ufx_enc`).

/// `os_transport_user_data_t`'s bitfields: `request_id` bits 0..59, `chunk_type` bit 60,
/// `chunk_id` bits 61..63.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserData {
    pub request_id: u64,
    pub chunk_type: u8,
    pub chunk_id: u8,
}

impl UserData {
    /// Encodes into the 64-bit `user_ctx` value.
    pub fn encode(self) -> u64 {
        (self.request_id & ((1u64 << 60) - 1))
            | ((self.chunk_type as u64 & 1) << 60)
            | ((self.chunk_id as u64 & 7) << 61)
    }
    /// Decodes a 64-bit `user_ctx` value.
    pub fn decode(v: u64) -> Self {
        UserData {
            request_id: v & ((1u64 << 60) - 1),
            chunk_type: ((v >> 60) & 1) as u8,
            chunk_id: ((v >> 61) & 7) as u8,
        }
    }
}

/// Raw `os_transport_user_data_t` `{rid, last chunk, chunk id}`.
pub fn ud(rid: u64, last: bool, chunk_id: u32) -> u64 {
    UserData {
        request_id: rid,
        chunk_type: u8::from(last),
        chunk_id: chunk_id as u8,
    }
    .encode()
}

/// `enc()` of the contract §2.3: bits 19:0 of a 40-bit key stay, bits 39:20 move to 59:40.
pub fn enc(x: u64) -> u64 {
    (x & 0xFFFFF) | (((x >> 20) & 0xFFFFF) << 40)
}

/// `dec()` of the contract §2.3 (inverse of [`enc`]; bits 39:20 of the input are ignored).
pub fn dec(y: u64) -> u64 {
    (y & 0xFFFFF) | (((y >> 40) & 0xFFFFF) << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trip() {
        let u = UserData {
            request_id: 0xABCDE12345,
            chunk_type: 1,
            chunk_id: 6,
        };
        assert_eq!(u.encode(), 0xABCDE12345 | (1 << 60) | (6u64 << 61));
        assert_eq!(UserData::decode(u.encode()), u);
        // Sentinel chunk id 7 on SEND_IMM.
        assert_eq!(ud(1, false, 7) >> 61, 7);
    }

    #[test]
    fn encoding_matches_the_contract_example() {
        assert_eq!(enc(0xABCDE12345), 0x0ABC_DE00_0001_2345);
        assert_eq!(dec(0x0ABC_DE00_0001_2345), 0xABCDE12345);
        assert_eq!(dec(0x0ABC_DEFF_FFF1_2345), 0xABCDE12345);
    }
}
