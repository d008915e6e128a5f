//! The few parts of an ELF64 file that the search for NVTX state reads, from the file with positioned reads: the
//! program headers (to check that a file is the one the process maps), the symbols of one name prefix in the full
//! symbol table (`.symtab`), and whether the read-only data holds a string. Every offset, size and count the file
//! declares is checked against its length and against fixed bounds before it is used; a malformed file is an
//! [`ElfError`], never a panic. Nothing is read whole: the symbol table goes by in pieces, names are read one at a
//! time for the few symbols that can match, the read-only data in chunks, and at most a limit of it.

use std::fmt;
use std::io;

const ELF_HEADER: usize = 64;
const PROGRAM_HEADER: usize = 56;
const SECTION_HEADER: usize = 64;
const SYMBOL: usize = 24;
/// Program and section headers past these counts are a malformed file (real ones have tens, and tens of thousands).
const MAX_PROGRAM_HEADERS: u64 = 1 << 12;
const MAX_SECTIONS: u64 = 1 << 20;
/// Symbols read at once: 192 KiB.
const SYMBOL_CHUNK: usize = 8192;
/// Read-only data read at once.
const DATA_CHUNK: usize = 1 << 20;

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const STT_OBJECT: u8 = 1;
const STB_LOCAL: u8 = 0;
const STV_HIDDEN: u8 = 2;
const SHN_UNDEF: u16 = 0;
pub(super) const PT_LOAD: u32 = 1;
pub(super) const PF_X: u32 = 1;
pub(super) const PF_W: u32 = 2;

/// A file that is not the ELF64 little-endian file it should be, or that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ElfError(String);

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn malformed(what: impl Into<String>) -> ElfError {
    ElfError(what.into())
}

/// Bytes read at an offset: a file, or bytes in memory (in tests).
pub(super) trait ReadAt {
    /// The length in bytes.
    fn len(&self) -> u64;
    /// Fills `buf` from `offset`; the caller checked that the range is inside [`len`](Self::len).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

/// A file and its length, read at the time it was opened.
pub(super) struct FileBytes {
    file: std::fs::File,
    len: u64,
}

impl FileBytes {
    pub(super) fn open(path: &std::path::Path) -> io::Result<FileBytes> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileBytes { file, len })
    }
}

impl ReadAt for FileBytes {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        let src = self.get(start..end).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// `count` items of `size` bytes at `offset`, inside a file of `len` bytes: their byte length, or why not.
fn span(offset: u64, count: u64, size: usize, len: u64, what: &str) -> Result<usize, ElfError> {
    let bytes = count
        .checked_mul(size as u64)
        .ok_or_else(|| malformed(format!("{what}: size overflows")))?;
    let end = offset
        .checked_add(bytes)
        .ok_or_else(|| malformed(format!("{what}: offset overflows")))?;
    if end > len {
        return Err(malformed(format!(
            "{what} ({bytes} bytes at {offset:#x}) past the end of the file ({len} bytes)"
        )));
    }
    usize::try_from(bytes).map_err(|_| malformed(format!("{what}: too large")))
}

fn read<R: ReadAt + ?Sized>(
    bytes: &R,
    offset: u64,
    len: usize,
    what: &str,
) -> Result<Vec<u8>, ElfError> {
    span(offset, len as u64, 1, bytes.len(), what)?;
    let mut buf = vec![0; len];
    bytes
        .read_exact_at(&mut buf, offset)
        .map_err(|e| malformed(format!("{what}: {e}")))?;
    Ok(buf)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0; 2];
    if let Some(s) = b.get(at..at + 2) {
        a.copy_from_slice(s);
    }
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

pub(super) use crate::loaded_modules::ProgramHeader;

impl ProgramHeader {
    /// From the 56 bytes of an `Elf64_Phdr`.
    pub(super) fn from_bytes(b: &[u8]) -> ProgramHeader {
        ProgramHeader {
            p_type: u32_at(b, 0),
            flags: u32_at(b, 4),
            offset: u64_at(b, 8),
            vaddr: u64_at(b, 16),
            filesz: u64_at(b, 32),
            memsz: u64_at(b, 40),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Section {
    name: u32,
    sh_type: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

impl Section {
    fn from_bytes(b: &[u8]) -> Section {
        Section {
            name: u32_at(b, 0),
            sh_type: u32_at(b, 4),
            flags: u64_at(b, 8),
            offset: u64_at(b, 24),
            size: u64_at(b, 32),
            link: u32_at(b, 40),
            entsize: u64_at(b, 56),
        }
    }
}

/// A data symbol of the full symbol table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Symbol {
    pub(super) name: String,
    /// Its address in the file's layout (add the load bias for the process's).
    pub(super) value: u64,
    pub(super) size: u64,
}

/// What a search of the read-only data found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Search {
    Found,
    Absent,
    /// More read-only data than the limit (its size): not searched.
    TooLarge(u64),
}

/// An ELF64 little-endian file: its headers, read and checked.
pub(super) struct ElfFile<R> {
    bytes: R,
    program_headers: Vec<ProgramHeader>,
    sections: Vec<Section>,
    /// The section names' string table (empty where the file has none, or one too large to be real).
    section_names: Vec<u8>,
}

impl<R: ReadAt> ElfFile<R> {
    pub(super) fn parse(bytes: R) -> Result<ElfFile<R>, ElfError> {
        let header = read(&bytes, 0, ELF_HEADER, "ELF header")?;
        if header.get(..4) != Some(b"\x7fELF") {
            return Err(malformed("not an ELF file"));
        }
        if header.get(4) != Some(&2) || header.get(5) != Some(&1) {
            return Err(malformed("not a 64-bit little-endian ELF file"));
        }
        let program_headers = program_headers(&bytes, &header)?;
        let sections = sections(&bytes, &header)?;
        let section_names = section_names(&bytes, &header, &sections)?;
        Ok(ElfFile {
            bytes,
            program_headers,
            sections,
            section_names,
        })
    }

    /// The program headers, as the file declares them.
    pub(super) fn program_headers(&self) -> &[ProgramHeader] {
        &self.program_headers
    }

    /// The data objects of the full symbol table (`.symtab`) whose name starts with `prefix`, local to the file
    /// (bound locally, or hidden: the state NVTX's header defines is one or the other once linked). `None` when the
    /// file has no full symbol table (it was stripped).
    pub(super) fn local_objects(&self, prefix: &[u8]) -> Result<Option<Vec<Symbol>>, ElfError> {
        let Some(symtab) = self.sections.iter().find(|s| s.sh_type == SHT_SYMTAB) else {
            return Ok(None);
        };
        let strtab = usize::try_from(symtab.link)
            .ok()
            .and_then(|i| self.sections.get(i))
            .filter(|s| s.sh_type == SHT_STRTAB)
            .ok_or_else(|| malformed("the symbol table's string table is not one"))?;
        if symtab.entsize != SYMBOL as u64 {
            return Err(malformed(format!(
                "symbol table entries of {} bytes, not {SYMBOL}",
                symtab.entsize
            )));
        }
        let count = symtab.size / SYMBOL as u64;
        span(
            symtab.offset,
            count,
            SYMBOL,
            self.bytes.len(),
            "symbol table",
        )?;
        span(
            strtab.offset,
            strtab.size,
            1,
            self.bytes.len(),
            "string table",
        )?;
        let mut found = Vec::new();
        let mut done = 0u64;
        while done < count {
            let n = (count - done).min(SYMBOL_CHUNK as u64);
            let at = symtab.offset + done * SYMBOL as u64;
            let chunk = read(&self.bytes, at, n as usize * SYMBOL, "symbol table")?;
            for sym in chunk.chunks_exact(SYMBOL) {
                if let Some(s) = self.matching_symbol(sym, strtab, prefix)? {
                    found.push(s);
                }
            }
            done += n;
        }
        Ok(Some(found))
    }

    /// The symbol `sym` (24 bytes of an `Elf64_Sym`) if it is a defined local data object named `prefix...`.
    fn matching_symbol(
        &self,
        sym: &[u8],
        strtab: &Section,
        prefix: &[u8],
    ) -> Result<Option<Symbol>, ElfError> {
        let (name, info, other, shndx) = (
            u32_at(sym, 0),
            sym.get(4).copied().unwrap_or(0),
            sym.get(5).copied().unwrap_or(0),
            u16_at(sym, 6),
        );
        let local = info >> 4 == STB_LOCAL || other & 3 == STV_HIDDEN;
        if info & 0xf != STT_OBJECT || shndx == SHN_UNDEF || !local {
            return Ok(None);
        }
        let name = u64::from(name);
        if name >= strtab.size {
            return Ok(None);
        }
        // The prefix and a few characters more (a version number) and the NUL, within the string table.
        let len = (strtab.size - name).min(prefix.len() as u64 + 16) as usize;
        let text = read(&self.bytes, strtab.offset + name, len, "symbol name")?;
        let Some(end) = text.iter().position(|&c| c == 0) else {
            return Ok(None);
        };
        let text = &text[..end];
        if !text.starts_with(prefix) {
            return Ok(None);
        }
        Ok(Some(Symbol {
            name: String::from_utf8_lossy(text).into_owned(),
            value: u64_at(sym, 8),
            size: u64_at(sym, 16),
        }))
    }

    /// Whether the file's read-only data holds `needle`: its `.rodata` sections, else its allocated sections that
    /// are neither written nor executed, else (without section headers) its read-only segments. More than `limit`
    /// bytes of it are not searched.
    pub(super) fn read_only_data_contains(
        &self,
        needle: &[u8],
        limit: u64,
    ) -> Result<Search, ElfError> {
        let read_only = |s: &&Section| {
            s.sh_type == SHT_PROGBITS
                && s.flags & SHF_ALLOC != 0
                && s.flags & (SHF_WRITE | SHF_EXECINSTR) == 0
        };
        // Named `.rodata` where the names are known: GPU code (`.nv_fatbin`, hundreds of MiB in CUDA's libraries)
        // is read-only data too, and never holds a host string.
        let rodata: Vec<(u64, u64)> = self
            .sections
            .iter()
            .filter(read_only)
            .filter(|s| {
                let name = self.section_name(s);
                name == b".rodata" || name.starts_with(b".rodata.")
            })
            .map(|s| (s.offset, s.size))
            .collect();
        let regions: Vec<(u64, u64)> = if !rodata.is_empty() {
            rodata
        } else if self.sections.is_empty() {
            self.program_headers
                .iter()
                .filter(|p| p.p_type == PT_LOAD && p.flags & (PF_W | PF_X) == 0)
                .map(|p| (p.offset, p.filesz))
                .collect()
        } else {
            self.sections
                .iter()
                .filter(read_only)
                .map(|s| (s.offset, s.size))
                .collect()
        };
        let total = regions
            .iter()
            .fold(0u64, |sum, (_, size)| sum.saturating_add(*size));
        if total > limit {
            return Ok(Search::TooLarge(total));
        }
        for (offset, size) in regions {
            span(offset, size, 1, self.bytes.len(), "read-only data")?;
            if self.region_contains(offset, size, needle)? {
                return Ok(Search::Found);
            }
        }
        Ok(Search::Absent)
    }

    /// A section's name, empty where it cannot be read.
    fn section_name(&self, section: &Section) -> &[u8] {
        let names = self
            .section_names
            .get(section.name as usize..)
            .unwrap_or_default();
        names.split(|&c| c == 0).next().unwrap_or_default()
    }

    fn region_contains(&self, offset: u64, size: u64, needle: &[u8]) -> Result<bool, ElfError> {
        if needle.is_empty() || needle.len() > DATA_CHUNK || size < needle.len() as u64 {
            return Ok(false);
        }
        // Chunks overlap by the needle's length less one, so that a match across two is seen.
        let step = (DATA_CHUNK - needle.len() + 1) as u64;
        let mut at = 0u64;
        while at < size {
            let len = (size - at).min(DATA_CHUNK as u64) as usize;
            let chunk = read(&self.bytes, offset + at, len, "read-only data")?;
            if contains(&chunk, needle) {
                return Ok(true);
            }
            if len < DATA_CHUNK {
                break;
            }
            at += step;
        }
        Ok(false)
    }
}

/// Whether `haystack` holds `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    // SAFETY: both pointers and lengths describe live slices; memmem only reads them and returns an address inside
    // `haystack` or null.
    let at = unsafe {
        libc::memmem(
            haystack.as_ptr().cast(),
            haystack.len(),
            needle.as_ptr().cast(),
            needle.len(),
        )
    };
    !at.is_null()
}

fn program_headers<R: ReadAt + ?Sized>(
    bytes: &R,
    header: &[u8],
) -> Result<Vec<ProgramHeader>, ElfError> {
    let (offset, entsize, count) = (
        u64_at(header, 32),
        u16_at(header, 54),
        u64::from(u16_at(header, 56)),
    );
    if count == 0 {
        return Ok(Vec::new());
    }
    if usize::from(entsize) != PROGRAM_HEADER || count > MAX_PROGRAM_HEADERS {
        return Err(malformed(format!(
            "program headers of {entsize} bytes, {count} of them"
        )));
    }
    let len = span(
        offset,
        count,
        PROGRAM_HEADER,
        bytes.len(),
        "program headers",
    )?;
    let table = read(bytes, offset, len, "program headers")?;
    Ok(table
        .chunks_exact(PROGRAM_HEADER)
        .map(ProgramHeader::from_bytes)
        .collect())
}

/// The section names' string table (`e_shstrndx`); empty where there is none. Past 1 MiB it is not a real one.
fn section_names<R: ReadAt + ?Sized>(
    bytes: &R,
    header: &[u8],
    sections: &[Section],
) -> Result<Vec<u8>, ElfError> {
    const SHN_XINDEX: u16 = 0xffff;
    let index = match u16_at(header, 62) {
        // The index is in the first section header's link (ELF's extended numbering).
        SHN_XINDEX => sections.first().map_or(0, |s| s.link as usize),
        i => usize::from(i),
    };
    let Some(table) = sections
        .get(index)
        .filter(|s| index != 0 && s.sh_type == SHT_STRTAB)
    else {
        return Ok(Vec::new());
    };
    if table.size > 1 << 20 {
        return Err(malformed(format!(
            "a section name table of {} bytes",
            table.size
        )));
    }
    read(bytes, table.offset, table.size as usize, "section names")
}

fn sections<R: ReadAt + ?Sized>(bytes: &R, header: &[u8]) -> Result<Vec<Section>, ElfError> {
    let (offset, entsize, count) = (
        u64_at(header, 40),
        u16_at(header, 58),
        u64::from(u16_at(header, 60)),
    );
    if offset == 0 {
        return Ok(Vec::new());
    }
    if usize::from(entsize) != SECTION_HEADER {
        return Err(malformed(format!("section headers of {entsize} bytes")));
    }
    // Past 65,279 sections the count is in the first section header's size (ELF's extended numbering).
    let count = if count == 0 {
        let first = read(bytes, offset, SECTION_HEADER, "section headers")?;
        Section::from_bytes(&first).size
    } else {
        count
    };
    if count > MAX_SECTIONS {
        return Err(malformed(format!("{count} section headers")));
    }
    let len = span(
        offset,
        count,
        SECTION_HEADER,
        bytes.len(),
        "section headers",
    )?;
    let table = read(bytes, offset, len, "section headers")?;
    Ok(table
        .chunks_exact(SECTION_HEADER)
        .map(Section::from_bytes)
        .collect())
}
