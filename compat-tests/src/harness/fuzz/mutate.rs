//! The mutations of a fuzz input: byte and bit flips, interesting values, insertion, erasure,
//! a repeated range, a splice with another corpus entry; one to four stacked per new input.

use crate::harness::random::{Draw, Rng};

/// Longest input kept (the decoder reads fewer than 128 bytes for any scenario).
pub const MAX_INPUT: usize = 160;

const INTERESTING: &[u8] = &[
    0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 99, 100, 127, 128, 255,
];

/// A mutation of `base`; `other` is a second corpus entry to splice with.
pub fn mutate(r: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    if v.is_empty() {
        v.push(r.next_u64() as u8);
    }
    for _ in 0..1 + r.below(4) {
        let n = v.len() as u64;
        let i = r.below(n) as usize;
        match r.below(8) {
            0 => v[i] ^= 1 << r.below(8),
            1 => v[i] = r.next_u64() as u8,
            2 => v[i] = r.pick(INTERESTING),
            3 => v[i] = v[i].wrapping_add(1 + r.below(8) as u8),
            4 => v.insert(i, r.next_u64() as u8),
            5 if v.len() > 1 => {
                v.remove(i);
            }
            6 => {
                let len = 1 + r.below(8) as usize;
                let part: Vec<u8> = v[i..(i + len).min(v.len())].to_vec();
                let at = r.below(v.len() as u64 + 1) as usize;
                v.splice(at..at, part);
            }
            _ if !other.is_empty() => {
                let cut = r.below(other.len() as u64) as usize;
                v.truncate(i);
                v.extend_from_slice(&other[cut..]);
            }
            _ => v[i] = !v[i],
        }
        if v.is_empty() {
            v.push(0);
        }
    }
    v.truncate(MAX_INPUT);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_change_the_input_and_stay_bounded() {
        let mut r = Rng::new(1);
        let base = vec![7u8; 40];
        let other = vec![9u8; 200];
        let mut changed = 0;
        for _ in 0..1000 {
            let m = mutate(&mut r, &base, &other);
            assert!(!m.is_empty() && m.len() <= MAX_INPUT);
            changed += usize::from(m != base);
        }
        assert!(
            changed > 900,
            "{changed} of 1000 mutations changed the input"
        );
    }
}
