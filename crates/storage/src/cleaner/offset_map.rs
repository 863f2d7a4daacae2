//! Key → latest offset map of fixed memory, as Kafka's `SkimpyOffsetMap`:
//! each slot holds a 16-byte key hash and an 8-byte offset, no key copies.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

const SLOT: usize = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor`.
const LOAD_FACTOR: f64 = 0.9;

/// Open-addressing table in one buffer of `dedupe_buffer_size` bytes.
///
/// Keys are hashed to 128 bits by two independently keyed SipHash
/// instances with random per-map keys: an outsider cannot craft colliding
/// keys without the keys, and accidental collisions need ~2^64 keys.
/// Invariant: `entries <= max_entries`; an empty slot has offset field 0
/// (offsets are stored plus one).
#[derive(Debug)]
pub struct OffsetMap {
    buf: Vec<u8>,
    slots: usize,
    entries: usize,
    max_entries: usize,
    h1: RandomState,
    h2: RandomState,
}

impl OffsetMap {
    /// A map using `memory_bytes` (at least one slot).
    pub fn new(memory_bytes: usize) -> OffsetMap {
        let slots = (memory_bytes / SLOT).max(2);
        OffsetMap {
            buf: vec![0; slots * SLOT],
            slots,
            entries: 0,
            max_entries: ((slots as f64 * LOAD_FACTOR) as usize).clamp(1, slots - 1),
            h1: RandomState::new(),
            h2: RandomState::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// How many more distinct keys fit.
    pub fn free(&self) -> usize {
        self.max_entries - self.entries
    }
    pub fn capacity(&self) -> usize {
        self.max_entries
    }

    fn hash(&self, key: &[u8]) -> [u8; 16] {
        let a = self.h1.hash_one(key).to_le_bytes();
        let b = self.h2.hash_one(key).to_le_bytes();
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&a);
        h[8..].copy_from_slice(&b);
        h
    }

    fn find(&self, h: &[u8; 16]) -> (usize, bool) {
        let mut i =
            (u64::from_le_bytes(h[..8].try_into().unwrap_or([0; 8])) % self.slots as u64) as usize;
        loop {
            let s = &self.buf[i * SLOT..(i + 1) * SLOT];
            if s[16..24] == [0; 8] {
                return (i, false);
            }
            if &s[..16] == h {
                return (i, true);
            }
            i = (i + 1) % self.slots;
        }
    }

    /// Records `offset` as the latest for `key`. Returns false (and changes
    /// nothing) when the key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let h = self.hash(key);
        let (i, found) = self.find(&h);
        if !found {
            if self.entries >= self.max_entries {
                return false;
            }
            self.entries += 1;
        }
        let s = &mut self.buf[i * SLOT..(i + 1) * SLOT];
        s[..16].copy_from_slice(&h);
        s[16..].copy_from_slice(&(offset + 1).to_le_bytes());
        true
    }

    /// The latest offset recorded for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        let h = self.hash(key);
        let (i, found) = self.find(&h);
        found.then(|| {
            let s = &self.buf[i * SLOT + 16..(i + 1) * SLOT];
            i64::from_le_bytes(s.try_into().unwrap_or([0; 8])) - 1
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_wins_and_full_refuses() {
        let mut m = OffsetMap::new(24 * 10);
        assert_eq!(m.capacity(), 9);
        for i in 0..9 {
            assert!(m.put(format!("k{i}").as_bytes(), i));
        }
        assert!(!m.put(b"new", 100));
        assert!(m.put(b"k3", 50));
        assert_eq!(m.get(b"k3"), Some(50));
        assert_eq!(m.get(b"k0"), Some(0));
        assert_eq!(m.get(b"new"), None);
        assert_eq!(m.len(), 9);
    }
}
