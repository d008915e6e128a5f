//! The ELF64 container of a CUDA core dump, read with the `object` crate: the identification, checked field by
//! field, then the section header table, each section's name and data.
//!
//! The bounds a reading depends on are checked here before `object` reads, so that what does not fit is reported
//! precisely ([`CoreDumpError::OutOfBounds`] names what, where and how long, [`CoreDumpError::NotCudaCoreDump`] the
//! field that differs); anything `object` refuses beyond that is wrapped into a [`CoreDumpError`]. Nothing panics.

use object::LittleEndian as Le;
use object::elf::{FileHeader64, SHN_XINDEX, SectionHeader64};
use object::read::ReadRef;
use object::read::elf::{FileHeader, SectionHeader as _};

use super::error::{CoreDumpError, SectionId};
use crate::bytes;

/// `ELFOSABI_CUDA`.
pub(super) const ELFOSABI_CUDA: u8 = 0x33;
/// The ELF ABI version of the dumps NVIDIA's reader accepts (`ELFOSABIV_LATEST` in cuda-gdb's libcudacore).
pub(super) const CUDA_CORE_ABI_VERSION: u8 = 7;
/// `ET_CORE`.
const ET_CORE: u16 = 4;
/// `EM_CUDA`.
const EM_CUDA: u16 = 0xbe;
/// Size of an ELF64 header and of an ELF64 section header.
const EHDR_SIZE: u64 = 64;
const SHDR_SIZE: u64 = 64;

/// One section header, as read.
#[derive(Debug, Clone)]
pub(super) struct SectionHeader<'a> {
    pub index: usize,
    pub name: String,
    pub kind: u32,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub entsize: u64,
    raw: &'a SectionHeader64<Le>,
}

impl SectionHeader<'_> {
    pub fn id(&self) -> SectionId {
        SectionId {
            index: self.index,
            name: self.name.clone(),
        }
    }
}

/// A parsed ELF container: the dump's ABI version and its sections.
pub(super) struct ElfFile<'a> {
    pub abi_version: u8,
    pub sections: Vec<SectionHeader<'a>>,
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
    bytes::range(b, offset, len).ok_or_else(|| out_of_bounds(what(), offset, len, b))
}

/// The bytes of a section (empty for `SHT_NOBITS`), read by `object`; a range outside the file is
/// [`CoreDumpError::OutOfBounds`] naming the section.
pub(super) fn section_data<'a>(
    b: &'a [u8],
    s: &SectionHeader<'_>,
) -> Result<&'a [u8], CoreDumpError> {
    s.raw
        .data(Le, b)
        .map_err(|_| out_of_bounds(format!("data of {}", s.id()), s.offset, s.size, b))
}

/// The NUL-terminated string at `index` of string table `table`, or `None` outside it (or unterminated).
pub(super) fn string_at(table: &[u8], index: u64) -> Option<String> {
    let index = u32::try_from(index).ok()?;
    let s = object::read::StringTable::new(table, 0, table.len() as u64)
        .get(index)
        .ok()?;
    Some(String::from_utf8_lossy(s).into_owned())
}

/// Checks the identification and header fields that make a file a CUDA core dump; returns its ABI version.
fn check_ident(b: &[u8]) -> Result<u8, CoreDumpError> {
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(CoreDumpError::NotElf);
    }
    if (b.len() as u64) < EHDR_SIZE {
        return Err(out_of_bounds("ELF header", 0, EHDR_SIZE, b));
    }
    // `e_ident` (inside the 64 bytes checked above): class, data encoding, OS/ABI, ABI version. `EI_VERSION` is not
    // looked at (NVIDIA's writers set it to 1).
    let ident = |at| u64::from(bytes::u8_at(b, at).unwrap_or(0));
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
    field("class", ident(4), 2, "ELFCLASS64")?;
    field("data encoding", ident(5), 1, "ELFDATA2LSB, little endian")?;
    field("OS/ABI", ident(7), ELFOSABI_CUDA.into(), "ELFOSABI_CUDA")?;
    // Inside the 64-byte header checked above.
    let e_type = bytes::le_u16(b, 0x10).unwrap_or(0);
    field("type", e_type.into(), ET_CORE.into(), "ET_CORE")?;
    let machine = bytes::le_u16(b, 0x12).unwrap_or(0);
    field("machine", machine.into(), EM_CUDA.into(), "EM_CUDA")?;
    let abi_version = bytes::u8_at(b, 8).unwrap_or(0);
    if abi_version != CUDA_CORE_ABI_VERSION {
        return Err(CoreDumpError::UnsupportedAbiVersion(abi_version));
    }
    Ok(abi_version)
}

/// What `object` refused once the bounds were checked.
fn refused(what: &str, e: object::read::Error) -> CoreDumpError {
    CoreDumpError::BadSectionTable(format!("{what}: {e}"))
}

/// Reads the ELF header and the section table of a CUDA core dump.
pub(super) fn parse(b: &[u8]) -> Result<ElfFile<'_>, CoreDumpError> {
    let abi_version = check_ident(b)?;
    // The header as `object` lays it out; `FileHeader::parse` would also insist on `EI_VERSION` 1.
    let header: &FileHeader64<Le> = b
        .read_at(0)
        .map_err(|()| CoreDumpError::BadSectionTable("the ELF header cannot be read".into()))?;
    let shoff = header.e_shoff(Le);
    let shentsize = header.e_shentsize(Le);
    if shoff == 0 {
        return Err(CoreDumpError::BadSectionTable(
            "the file has no section header table".into(),
        ));
    }
    if u64::from(shentsize) != SHDR_SIZE {
        return Err(CoreDumpError::BadSectionTable(format!(
            "section headers of {shentsize} bytes (ELF64 has {SHDR_SIZE})"
        )));
    }
    // Large dumps have more than 0xff00 sections: then e_shnum is 0 and section 0's sh_size holds the count, and
    // an e_shstrndx of SHN_XINDEX means section 0's sh_link holds the string table index (ELF gABI).
    let first = slice(b, shoff, SHDR_SIZE, || "section header 0".into())?;
    let count = match header.e_shnum(Le) {
        0 => bytes::le_u64(first, 0x20).unwrap_or(0),
        n => n.into(),
    };
    slice(b, shoff, count.saturating_mul(SHDR_SIZE), || {
        "section header table".into()
    })?;
    let raw = header
        .section_headers(Le, b)
        .map_err(|e| refused("the section header table", e))?;
    let shstrndx = match header.e_shstrndx(Le) {
        SHN_XINDEX => bytes::le_u32(first, 0x28).unwrap_or(0) as usize,
        index => index.0.into(),
    };
    let mut sections: Vec<SectionHeader<'_>> = raw
        .iter()
        .enumerate()
        .map(|(index, s)| SectionHeader {
            index,
            name: String::new(),
            kind: s.sh_type(Le).0,
            addr: s.sh_addr(Le),
            offset: s.sh_offset(Le),
            size: s.sh_size(Le),
            link: s.sh_link(Le),
            info: s.sh_info(Le),
            entsize: s.sh_entsize(Le),
            raw: s,
        })
        .collect();
    // Names are for finding `.strtab` and for error messages; without a readable name table they stay empty.
    if shstrndx != 0 {
        let names = sections
            .get(shstrndx)
            .ok_or_else(|| {
                CoreDumpError::BadSectionTable(format!(
                    "the section name table index {shstrndx} is past the {} sections",
                    sections.len()
                ))
            })
            .and_then(|s| section_data(b, s))?;
        for s in &mut sections {
            s.name = string_at(names, s.raw.sh_name(Le).into()).unwrap_or_default();
        }
    }
    Ok(ElfFile {
        abi_version,
        sections,
    })
}
