//! The library's bounds-checked little-endian read path for foreign bytes: core-dump tables (`coredump`) and saved
//! counter-data files (`cupti::profiler::image`, through a small cursor). Trace streams have their own, in
//! `gpu-tools-trace` (`wire`, and the packed file reader's cursor). Every read names where it reads and answers
//! `None` when that lies outside the bytes (overflow included), never a panic.

// Not every feature set reads every width.
#![allow(dead_code)]

/// The `N` bytes at `at`.
pub(crate) fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The `u8` at `at`.
pub(crate) fn u8_at(bytes: &[u8], at: usize) -> Option<u8> {
    bytes.get(at).copied()
}

/// The little-endian `u16` at `at`.
pub(crate) fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    array(bytes, at).map(u16::from_le_bytes)
}

/// The little-endian `u32` at `at`.
pub(crate) fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    array(bytes, at).map(u32::from_le_bytes)
}

/// The little-endian `u64` at `at`.
pub(crate) fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    array(bytes, at).map(u64::from_le_bytes)
}

/// `len` bytes at `offset`, both as a file declares them (64-bit, untrusted).
pub(crate) fn range(bytes: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let len = usize::try_from(len).ok()?;
    bytes.get(start..start.checked_add(len)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_outside() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(le_u16(&b, 0), Some(0x0201));
        assert_eq!(le_u32(&b, 5), Some(0x0908_0706));
        assert_eq!(le_u32(&b, 6), None);
        assert_eq!(le_u64(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(le_u64(&b, usize::MAX), None, "overflow");
        assert_eq!(u8_at(&b, 8), Some(9));
        assert_eq!(u8_at(&b, 9), None);
        assert_eq!(range(&b, 2, 3), Some(&b[2..5]));
        assert_eq!(range(&b, 9, 0), Some(&b[9..9]));
        assert_eq!(range(&b, 8, 2), None);
        assert_eq!(range(&b, u64::MAX, 2), None);
        assert_eq!(range(&b, 1, u64::MAX), None);
    }
}
