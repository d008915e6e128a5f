//! A callback payload read as its struct only after its own leading `size` field says it holds the whole struct:
//! an SDK older than the bindings may hand a smaller one.

use std::ffi::c_void;

/// Decodes a payload of `T` after checking its leading `size` field.
///
/// # Safety
/// `payload` must be null or point at a `T`-like record, aligned for `T`, readable for 'a, whose first 8 bytes are
/// its size.
pub(crate) unsafe fn sized<'a, T>(payload: *const c_void) -> Result<Option<&'a T>, (u64, usize)> {
    if payload.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract: at least the 8-byte size is readable.
    let size = unsafe { payload.cast::<u64>().read_unaligned() };
    if size < size_of::<T>() as u64 {
        return Err((size, size_of::<T>()));
    }
    // SAFETY: the record holds at least size_of::<T>() bytes, readable for 'a and aligned for T (the caller's
    // contract: the SDK hands its own struct of that type); T is plain data.
    Ok(Some(unsafe { &*payload.cast::<T>() }))
}
