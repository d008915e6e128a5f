//! Interning of names, so that a record of a kernel launched a million times shares one allocation, and the fast
//! hash the name maps use (names come from the vendor, not from an adversary; the decoder, which reads bytes from
//! another process, keys by integer id).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A multiply-rotate hasher (the Fx hash of rustc): a few cycles per word, against SipHash's tens.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastBuild = BuildHasherDefault<FastHasher>;

/// A set of shared names: `intern` returns the same `Arc<str>` for equal text and allocates only for new text.
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    names: HashSet<Arc<str>, FastBuild>,
}

impl NameTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared copy of `name`.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.names.get(name) {
            return Arc::clone(n);
        }
        let n: Arc<str> = Arc::from(name);
        self.names.insert(Arc::clone(&n));
        n
    }

    /// The shared copy of a name given as bytes (a C string's bytes); invalid UTF-8 is replaced.
    pub fn intern_bytes(&mut self, name: &[u8]) -> Arc<str> {
        match std::str::from_utf8(name) {
            Ok(s) => self.intern(s),
            Err(_) => self.intern(&String::from_utf8_lossy(name)),
        }
    }

    /// Number of distinct names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name was interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn equal_text_shares_one_allocation() {
        let mut t = NameTable::new();
        let a = t.intern("add_one");
        let b = t.intern_bytes(b"add_one");
        assert!(Arc::ptr_eq(&a, &b));
        let c = t.intern("other");
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(t.len(), 2);
        assert_eq!(&*t.intern_bytes(b"bad\xff"), "bad\u{fffd}");
    }

    #[test]
    fn the_fast_hash_tells_lengths_and_tails_apart() {
        let h = |s: &str| FastBuild::default().hash_one(s);
        assert_ne!(h("a"), h("a\0"));
        assert_ne!(h("abcdefgh"), h("abcdefgi"));
        assert_ne!(h("abcdefghX"), h("abcdefghY"));
        assert_eq!(h("same"), h("same"));
    }
}
