//! Code-object capture: the code objects loaded while a capture runs. The vendor invalidates a result at the
//! next `get` and at `free`, so a result borrows the capture mutably: neither can happen while it is alive.

use std::ffi::CStr;
use std::marker::PhantomData;

use super::library::sym;
use super::{ProfilerError, Rocprofiler, RocprofilerError, RocprofilerLibrary};
use crate::Result;
use crate::sys::rocprofiler as sys;

/// What a capture keeps of each code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// Symbols only.
    SymbolsOnly,
    /// A copy of code objects loaded from memory.
    CopyMemory,
    /// A copy of every code object, from files too.
    CopyFileAndMemory,
}

impl CaptureMode {
    fn raw(self) -> sys::rocprofiler_codeobj_capture_mode_t {
        match self {
            CaptureMode::SymbolsOnly => sys::ROCPROFILER_CAPTURE_SYMBOLS_ONLY,
            CaptureMode::CopyMemory => sys::ROCPROFILER_CAPTURE_COPY_MEMORY,
            CaptureMode::CopyFileAndMemory => sys::ROCPROFILER_CAPTURE_COPY_FILE_AND_MEMORY,
        }
    }
}

/// A code-object capture (`rocprofiler_codeobj_capture_*`), freed on drop.
pub struct CodeObjectCapture<'g> {
    lib: &'static RocprofilerLibrary,
    id: u64,
    started: bool,
    _rocprofiler: PhantomData<&'g Rocprofiler>,
}

impl std::fmt::Debug for CodeObjectCapture<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeObjectCapture")
            .field("id", &self.id)
            .field("started", &self.started)
            .finish()
    }
}

impl<'g> CodeObjectCapture<'g> {
    /// Creates a capture; `userdata` comes back with every result.
    pub fn new(rocprofiler: &'g Rocprofiler, mode: CaptureMode, userdata: u64) -> Result<Self> {
        let lib = rocprofiler.library();
        let f = sym(
            &lib.t.rocprofiler_codeobj_capture_create,
            "rocprofiler_codeobj_capture_create",
        )?;
        let mut id = sys::rocprofiler_record_id_t::default();
        // SAFETY: initialised library; `id` is a valid out-pointer.
        RocprofilerError::check(unsafe { f(&mut id, mode.raw(), userdata) })?;
        Ok(CodeObjectCapture {
            lib,
            id: id.handle,
            started: false,
            _rocprofiler: PhantomData,
        })
    }

    fn rid(&self) -> sys::rocprofiler_record_id_t {
        sys::rocprofiler_record_id_t { handle: self.id }
    }

    /// Records the loaded code objects and those loaded later, until [`stop`](Self::stop).
    pub fn start(&mut self) -> Result<()> {
        if self.started {
            return Err(ProfilerError::AlreadyStarted.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_codeobj_capture_start,
            "rocprofiler_codeobj_capture_start",
        )?;
        // SAFETY: the capture exists.
        RocprofilerError::check(unsafe { f(self.rid()) })?;
        self.started = true;
        Ok(())
    }

    /// Stops recording new loads.
    pub fn stop(&mut self) -> Result<()> {
        if !self.started {
            return Err(ProfilerError::NotStarted.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_codeobj_capture_stop,
            "rocprofiler_codeobj_capture_stop",
        )?;
        // SAFETY: the capture exists.
        RocprofilerError::check(unsafe { f(self.rid()) })?;
        self.started = false;
        Ok(())
    }

    /// The captured code objects. The result borrows the capture until dropped, because the vendor frees it at
    /// the next `get` or `free`:
    ///
    /// ```compile_fail
    /// # fn f(capture: &mut gpu_tools::rocprofiler::CodeObjectCapture<'_>) -> gpu_tools::Result<()> {
    /// let first = capture.get()?;
    /// let second = capture.get()?; // error: `first` still borrows the capture
    /// println!("{}", first.len());
    /// # Ok(()) }
    /// ```
    pub fn get(&mut self) -> Result<CapturedCodeObjects<'_>> {
        let f = sym(
            &self.lib.t.rocprofiler_codeobj_capture_get,
            "rocprofiler_codeobj_capture_get",
        )?;
        let mut raw = sys::rocprofiler_codeobj_symbols_t::default();
        // SAFETY: the capture exists; `raw` is a valid out-pointer; the previous result's borrow has ended.
        RocprofilerError::check(unsafe { f(self.rid(), &mut raw) })?;
        if raw.symbols.is_null() && raw.count != 0 {
            return Err(super::RocprofilerError::RecordCorrupted.into());
        }
        let count =
            usize::try_from(raw.count).map_err(|_| super::RocprofilerError::RecordCorrupted)?;
        Ok(CapturedCodeObjects {
            raw,
            count,
            _capture: PhantomData,
        })
    }
}

impl Drop for CodeObjectCapture<'_> {
    fn drop(&mut self) {
        if self.started {
            let _ = self.stop();
        }
        if let Ok(f) = sym(
            &self.lib.t.rocprofiler_codeobj_capture_free,
            "rocprofiler_codeobj_capture_free",
        ) {
            // SAFETY: the capture exists, no result borrows it (this is its drop), and it is freed once.
            let _ = unsafe { f(self.rid()) };
        }
    }
}

/// The result of [`CodeObjectCapture::get`], valid while it borrows the capture.
pub struct CapturedCodeObjects<'c> {
    raw: sys::rocprofiler_codeobj_symbols_t,
    count: usize,
    _capture: PhantomData<&'c mut ()>,
}

impl<'c> CapturedCodeObjects<'c> {
    /// Number of code objects.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The user data given at creation.
    pub fn userdata(&self) -> u64 {
        self.raw.userdata
    }

    /// The code object at `index`.
    pub fn get(&self, index: usize) -> Option<CodeObject<'c>> {
        if index >= self.count {
            return None;
        }
        // SAFETY: `symbols` points to `count` entries, valid until the next get or free, which the borrow
        // of the capture rules out while `self` lives.
        let raw = unsafe { &*self.raw.symbols.add(index) };
        Some(CodeObject {
            raw,
            _capture: PhantomData,
        })
    }

    /// Every code object.
    pub fn iter(&self) -> impl Iterator<Item = CodeObject<'c>> + '_ {
        (0..self.count).filter_map(|i| self.get(i))
    }
}

impl std::fmt::Debug for CapturedCodeObjects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// One captured code object.
pub struct CodeObject<'c> {
    raw: &'c sys::rocprofiler_intercepted_codeobj_t,
    _capture: PhantomData<&'c mut ()>,
}

impl<'c> CodeObject<'c> {
    /// URI of the code object (`file://...` or `memory://...`).
    pub fn uri(&self) -> Option<&'c CStr> {
        if self.raw.filepath.is_null() {
            return None;
        }
        // SAFETY: a non-null path is a NUL-terminated string owned by the capture result.
        Some(unsafe { CStr::from_ptr(self.raw.filepath) })
    }
    /// Load address.
    pub fn base_address(&self) -> u64 {
        self.raw.base_address
    }
    /// Bytes in memory.
    pub fn mem_size(&self) -> u64 {
        self.raw.mem_size
    }
    /// The copied bytes (copy modes), if any.
    pub fn data(&self) -> Option<&'c [u8]> {
        let len = usize::try_from(self.raw.data_size).ok()?;
        if self.raw.data.is_null() || len == 0 {
            return None;
        }
        // SAFETY: the vendor's copy of `data_size` bytes, owned by the capture result.
        Some(unsafe { std::slice::from_raw_parts(self.raw.data.cast::<u8>(), len) })
    }
    /// Clock at load.
    pub fn clock_start(&self) -> u64 {
        self.raw.clock_start.value
    }
    /// Clock at unload.
    pub fn clock_end(&self) -> u64 {
        self.raw.clock_end.value
    }
    /// ATT marker id.
    pub fn att_marker_id(&self) -> u32 {
        self.raw.att_marker_id
    }
}

impl std::fmt::Debug for CodeObject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeObject")
            .field("uri", &self.uri())
            .field("base_address", &self.base_address())
            .field("mem_size", &self.mem_size())
            .finish_non_exhaustive()
    }
}
