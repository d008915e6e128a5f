//! Interning of names, so that a record of a kernel launched a million times shares one allocation.

use std::collections::HashSet;
use std::sync::Arc;

/// A set of shared names: `intern` returns the same `Arc<str>` for equal text and allocates only for new text.
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    names: HashSet<Arc<str>>,
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
}
