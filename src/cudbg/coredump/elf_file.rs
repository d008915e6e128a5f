//! The ELF64 container of a CUDA core dump: identification, section header table, section data and names.
//!
//! Every read is an explicit little-endian read at a checked offset; anything the file declares that lies outside
//! it is a [`CoreDumpError`], never a panic.

use super::error::{CoreDumpError, SectionId};

/// `ELFOSABI_CUDA`.
pub(super) const ELFOSABI_CUDA: u8 = 0x33;
/// The ELF ABI version of the dumps NVIDIA's reader accepts (`ELFOSABIV_LATEST` in cuda-gdb's libcudacore).
pub(super) const CUDA_CORE_ABI_VERSION: u8 = 7;
/// `ET_CORE`.
const ET_CORE: u16 = 4;
/// `EM_CUDA`.
const EM_CUDA: u16 = 0xbe;
/// `SHN_XINDEX`: the string table index lives in section 0's `sh_link`.
const SHN_XINDEX: u16 = 0xffff;
/// `SHT_NOBITS`: a section with no bytes in the file.
const SHT_NOBITS: u32 = 8;
/// Size of an ELF64 header and of the part of a section header this reader uses.
const EHDR_SIZE: usize = 64;
const SHDR_SIZE: usize = 64;

/// `N` bytes at `at`, or `None` outside `b`.
fn array<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}
pub(super) fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    array(b, at).map(u16::from_le_bytes)
}
pub(super) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    array(b, at).map(u32::from_le_bytes)
}
pub(super) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    array(b, at).map(u64::from_le_bytes)
}

/// One section header, as read.
#[derive(Debug, Clone)]
pub(super) struct SectionHeader {
    pub index: usize,
    name_index: u32,
    pub name: String,
    pub kind: u32,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub entsize: u64,
}

impl SectionHeader {
    pub fn id(&self) -> SectionId {
        SectionId {
            index: self.index,
            name: self.name.clone(),
        }
    }
}

/// A parsed ELF container: the dump's ABI version and its sections.
pub(super) struct ElfFile {
    pub abi_version: u8,
    pub sections: Vec<SectionHeader>,
}

fn out_of_bounds(what: impl Into<String>, offset: u64, len: u64, file: &[u8]) -> CoreDumpError {
    CoreDumpError::OutOfBounds {
        what: what.into(),
        offset,
        len,
        file_len: file.len() as u64,
    }
}

/// `b[offset..offset + len]`, or [`CoreDumpError::OutOfBounds`] naming `what`.
pub(super) fn slice(
    b: &[u8],
    offset: u64,
    len: u64,
    what: impl FnOnce() -> String,
) -> Result<&[u8], CoreDumpError> {
    let range = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(o, l)| Some(o..o.checked_add(l)?));
    range
        .and_then(|r| b.get(r))
        .ok_or_else(|| out_of_bounds(what(), offset, len, b))
}

/// The bytes of a section (empty for `SHT_NOBITS`).
pub(super) fn section_data<'a>(b: &'a [u8], s: &SectionHeader) -> Result<&'a [u8], CoreDumpError> {
    if s.kind == SHT_NOBITS {
        return Ok(&[]);
    }
    slice(b, s.offset, s.size, || format!("data of {}", s.id()))
}

/// The NUL-terminated string at `index` of string table `table`, or `None` outside it (or unterminated).
pub(super) fn string_at(table: &[u8], index: u64) -> Option<String> {
    let tail = table.get(usize::try_from(index).ok()?..)?;
    let end = tail.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&tail[..end]).into_owned())
}

fn check_ident(b: &[u8]) -> Result<u8, CoreDumpError> {
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(CoreDumpError::NotElf);
    }
    if b.len() < EHDR_SIZE {
        return Err(out_of_bounds("ELF header", 0, EHDR_SIZE as u64, b));
    }
    let field = |field, found: u64, expected: u64, meaning| {
        if found == expected {
            Ok(())
        } else {
            Err(CoreDumpError::NotCudaCoreDump {
                field,
                found,
                expected,
                meaning,
            })
        }
    };
    field("class", b[4].into(), 2, "ELFCLASS64")?;
    field(
        "data encoding",
        b[5].into(),
        1,
        "ELFDATA2LSB, little endian",
    )?;
    field("OS/ABI", b[7].into(), ELFOSABI_CUDA.into(), "ELFOSABI_CUDA")?;
    let e_type = le_u16(b, 0x10).unwrap_or(0);
    field("type", e_type.into(), ET_CORE.into(), "ET_CORE")?;
    let machine = le_u16(b, 0x12).unwrap_or(0);
    field("machine", machine.into(), EM_CUDA.into(), "EM_CUDA")?;
    let abi_version = b[8];
    if abi_version != CUDA_CORE_ABI_VERSION {
        return Err(CoreDumpError::UnsupportedAbiVersion(abi_version));
    }
    Ok(abi_version)
}

/// Reads the ELF header and the section table of a CUDA core dump.
pub(super) fn parse(b: &[u8]) -> Result<ElfFile, CoreDumpError> {
    let abi_version = check_ident(b)?;
    // Inside the 64-byte header checked above.
    let shoff = le_u64(b, 0x28).unwrap_or(0);
    let shentsize = le_u16(b, 0x3a).unwrap_or(0);
    let e_shnum = le_u16(b, 0x3c).unwrap_or(0);
    let e_shstrndx = le_u16(b, 0x3e).unwrap_or(0);
    if shoff == 0 {
        return Err(CoreDumpError::BadSectionTable(
            "the file has no section header table".into(),
        ));
    }
    if usize::from(shentsize) < SHDR_SIZE {
        return Err(CoreDumpError::BadSectionTable(format!(
            "section headers of {shentsize} bytes (ELF64 has {SHDR_SIZE})"
        )));
    }
    let header = |i: usize| -> Result<&[u8], CoreDumpError> {
        let at = (i as u64)
            .checked_mul(shentsize.into())
            .and_then(|o| o.checked_add(shoff))
            .unwrap_or(u64::MAX);
        slice(b, at, SHDR_SIZE as u64, || format!("section header {i}"))
    };
    // Large dumps have more than 0xff00 sections: then e_shnum is 0 and section 0's sh_size holds the count, and
    // an e_shstrndx of SHN_XINDEX means section 0's sh_link holds the string table index (ELF gABI).
    let first = header(0)?;
    let count = if e_shnum == 0 {
        le_u64(first, 0x20).unwrap_or(0)
    } else {
        e_shnum.into()
    };
    let table_len = count.saturating_mul(shentsize.into());
    slice(b, shoff, table_len, || "section header table".into())?;
    // Within the file checked just above, so it fits in usize.
    let count = usize::try_from(count).unwrap_or(0);
    let shstrndx = if e_shstrndx == SHN_XINDEX {
        le_u32(first, 0x28).unwrap_or(0) as usize
    } else {
        e_shstrndx.into()
    };
    let mut sections = Vec::with_capacity(count);
    for index in 0..count {
        let h = header(index)?;
        let u32_at = |at| le_u32(h, at).unwrap_or(0);
        let u64_at = |at| le_u64(h, at).unwrap_or(0);
        sections.push(SectionHeader {
            index,
            name_index: u32_at(0),
            name: String::new(),
            kind: u32_at(4),
            addr: u64_at(0x10),
            offset: u64_at(0x18),
            size: u64_at(0x20),
            link: u32_at(0x28),
            info: u32_at(0x2c),
            entsize: u64_at(0x38),
        });
    }
    // Names are for finding `.strtab` and for error messages; without a readable name table they stay empty.
    if shstrndx != 0 {
        let names = sections
            .get(shstrndx)
            .ok_or_else(|| {
                CoreDumpError::BadSectionTable(format!(
                    "the section name table index {shstrndx} is past the {count} sections"
                ))
            })
            .and_then(|s| section_data(b, s))?;
        for s in &mut sections {
            s.name = string_at(names, s.name_index.into()).unwrap_or_default();
        }
    }
    Ok(ElfFile {
        abi_version,
        sections,
    })
}
