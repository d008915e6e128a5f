//! Why a file could not be read as a CUDA core dump.

use std::path::PathBuf;

/// A section of the dump, named for error messages: its index in the section table and, where the name could be
/// read, its name.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionId {
    /// Index in the section header table.
    pub index: usize,
    /// Name from the section-name string table (empty when unreadable).
    pub name: String,
}

impl std::fmt::Display for SectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name.is_empty() {
            write!(f, "section {}", self.index)
        } else {
            write!(f, "section {} ({})", self.index, self.name)
        }
    }
}

/// A file could not be read as a CUDA core dump. The reader only reads the file; nothing is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreDumpError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes do not start with the ELF magic (`\x7fELF`).
    #[error("not an ELF file (a CUDA core dump is an ELF file)")]
    NotElf,
    /// An ELF file, but not a CUDA core dump: one identifying header field differs.
    #[error(
        "not a CUDA core dump: ELF {field} is {found:#x}, a CUDA core dump has {expected:#x} ({meaning})"
    )]
    NotCudaCoreDump {
        /// `"class"`, `"data encoding"`, `"OS/ABI"`, `"type"` or `"machine"`.
        field: &'static str,
        /// The value in the file.
        found: u64,
        /// The value a CUDA core dump has.
        expected: u64,
        /// What the expected value means, for example `"ELFOSABI_CUDA"`.
        meaning: &'static str,
    },
    /// A CUDA core dump of an ELF ABI version this reader does not know.
    #[error(
        "CUDA core dump of ELF ABI version {0}; this reader knows version 7 (the only one NVIDIA's own reader accepts)"
    )]
    UnsupportedAbiVersion(u8),
    /// A structure the file declares lies (partly) outside the file: the file is truncated or corrupt.
    #[error(
        "{what} at offset {offset:#x}, {len} bytes, lies outside the file ({file_len} bytes): truncated or corrupt"
    )]
    OutOfBounds {
        /// What was being read.
        what: String,
        /// Its declared offset.
        offset: u64,
        /// Its declared length.
        len: u64,
        /// The file's length.
        file_len: u64,
    },
    /// The ELF header's section table description is unusable.
    #[error("bad section header table: {0}")]
    BadSectionTable(String),
    /// A table section's entry size is smaller than the oldest layout of its entries, or its size is not a multiple
    /// of its entry size.
    #[error(
        "{section}: {size} bytes of entries of {entsize} bytes; this table's entries have at least {baseline} bytes"
    )]
    BadEntrySize {
        /// The table.
        section: SectionId,
        /// `sh_size`.
        size: u64,
        /// `sh_entsize`.
        entsize: u64,
        /// The size of the oldest layout (driver r346) of this table's entries.
        baseline: usize,
    },
    /// A section's `sh_link` does not name a section of the kind the format requires.
    #[error("{section}: sh_link {link} does not name a {expected} section")]
    BadLink {
        /// The section.
        section: SectionId,
        /// Its `sh_link`.
        link: u32,
        /// The kind of section it must name.
        expected: &'static str,
    },
    /// A section's `sh_info` (its index in the parent table) is past the parent table's end.
    #[error("{section}: sh_info {info} is past the end of its parent table ({count} entries)")]
    BadIndex {
        /// The section.
        section: SectionId,
        /// Its `sh_info`.
        info: u32,
        /// Entries in the parent table.
        count: usize,
    },
    /// Two sections claim the same place (two device tables, two warp tables for one block, ...).
    #[error("{section} duplicates {first}")]
    Duplicate {
        /// The later section.
        section: SectionId,
        /// The section that claimed the place first.
        first: SectionId,
    },
    /// The dump has no device table.
    #[error("the dump has no device table (.cudbg.devtbl)")]
    MissingDeviceTable,
    /// A device-table entry claims more SMs than the dump has SM-table entries for that device: the format holds
    /// one entry per SM of the device (`cudacoredump.h`), and NVIDIA's reader looks one up for every SM below the
    /// count.
    #[error(
        "{section}: device {device} claims {sm_count} SMs, but the dump holds SM-table entries for {entries}: corrupt"
    )]
    SmCountBeyondTable {
        /// The device table.
        section: SectionId,
        /// The device's index in it (its entry).
        device: u32,
        /// The entry's `numSMs`.
        sm_count: u32,
        /// SM-table entries the dump holds for the device (0 without an SM table).
        entries: usize,
    },
    /// A string-table index in an entry points outside the string table (or there is none).
    #[error("{section}: string index {index:#x} is outside the string table ({len} bytes)")]
    BadString {
        /// The section whose entry holds the index.
        section: SectionId,
        /// The index.
        index: u64,
        /// The string table's length (0 when the dump has none).
        len: usize,
    },
}
