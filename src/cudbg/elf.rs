//! Just enough ELF64 reading to name kernels: the function symbols of a CUDA module's image.
//!
//! Every offset and size is bounds-checked; a malformed image yields fewer symbols, never a panic.

/// A function symbol of an ELF image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// Symbol name (mangled, as in the image).
    pub name: String,
    /// `st_value`: in a relocated CUDA image, the function's device address.
    pub value: u64,
    /// `st_size` in bytes.
    pub size: u64,
}

/// True when `bytes` starts like a 64-bit little-endian ELF file.
pub fn is_elf64(bytes: &[u8]) -> bool {
    bytes.len() >= 64 && bytes[..4] == *b"\x7fELF" && bytes[4] == 2 && bytes[5] == 1
}

/// `N` bytes at `base + off`, or `None` when that lies outside the image (or overflows).
fn bytes_at<const N: usize>(b: &[u8], base: usize, off: usize) -> Option<[u8; N]> {
    let start = base.checked_add(off)?;
    b.get(start..start.checked_add(N)?)?.try_into().ok()
}
fn u16_at(b: &[u8], base: usize, off: usize) -> Option<u16> {
    bytes_at(b, base, off).map(u16::from_le_bytes)
}
fn u32_at(b: &[u8], base: usize, off: usize) -> Option<u32> {
    bytes_at(b, base, off).map(u32::from_le_bytes)
}
fn u64_at(b: &[u8], base: usize, off: usize) -> Option<u64> {
    bytes_at(b, base, off).map(u64::from_le_bytes)
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    entsize: usize,
}

fn sections(b: &[u8]) -> Option<Vec<Section>> {
    let shoff = usize::try_from(u64_at(b, 0, 0x28)?).ok()?;
    let shentsize = usize::from(u16_at(b, 0, 0x3a)?);
    let shnum = usize::from(u16_at(b, 0, 0x3c)?);
    if shentsize < 64 {
        return None;
    }
    (0..shnum)
        .map(|i| {
            let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some(Section {
                kind: u32_at(b, at, 4)?,
                offset: usize::try_from(u64_at(b, at, 0x18)?).ok()?,
                size: usize::try_from(u64_at(b, at, 0x20)?).ok()?,
                link: usize::try_from(u32_at(b, at, 0x28)?).ok()?,
                entsize: usize::try_from(u64_at(b, at, 0x38)?).ok()?,
            })
        })
        .collect()
}

fn c_str(b: &[u8], at: usize) -> Option<String> {
    let tail = b.get(at..)?;
    let end = tail.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&tail[..end]).into_owned())
}

/// The `STT_FUNC` symbols of every symbol table in the image (empty for anything that is not a readable ELF64).
pub fn function_symbols(bytes: &[u8]) -> Vec<FunctionSymbol> {
    const SHT_SYMTAB: u32 = 2;
    const STT_FUNC: u8 = 2;
    let mut out = Vec::new();
    if !is_elf64(bytes) {
        return out;
    }
    let Some(secs) = sections(bytes) else {
        return out;
    };
    for s in secs
        .iter()
        .filter(|s| s.kind == SHT_SYMTAB && s.entsize >= 24)
    {
        let Some(strtab) = secs.get(s.link) else {
            continue;
        };
        for i in 0..s.size / s.entsize {
            let at = s.offset.saturating_add(i.saturating_mul(s.entsize));
            let (Some(name), Some(info), Some(value), Some(size)) = (
                u32_at(bytes, at, 0),
                bytes_at::<1>(bytes, at, 4).map(|b| b[0]),
                u64_at(bytes, at, 8),
                u64_at(bytes, at, 16),
            ) else {
                break;
            };
            if info & 0xf != STT_FUNC {
                continue;
            }
            let name_at = strtab.offset.saturating_add(name as usize);
            if name_at >= strtab.offset.saturating_add(strtab.size) {
                continue;
            }
            if let Some(name) = c_str(bytes, name_at) {
                out.push(FunctionSymbol { name, value, size });
            }
        }
    }
    out
}

/// The name of the function whose symbol covers `address` (exact start preferred).
pub fn function_at(symbols: &[FunctionSymbol], address: u64) -> Option<&str> {
    symbols
        .iter()
        .find(|s| s.value == address)
        .or_else(|| {
            symbols
                .iter()
                .find(|s| s.size > 0 && address >= s.value && address - s.value < s.size)
        })
        .map(|s| s.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a minimal ELF64 with a symbol table of (name, info, value, size).
    pub(crate) fn tiny_elf(syms: &[(&str, u8, u64, u64)]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24]; // the null symbol
        for (name, info, value, size) in syms {
            let off = strtab.len() as u32;
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
            symtab.extend_from_slice(&off.to_le_bytes());
            symtab.push(*info);
            symtab.push(0);
            symtab.extend_from_slice(&1u16.to_le_bytes());
            symtab.extend_from_slice(&value.to_le_bytes());
            symtab.extend_from_slice(&size.to_le_bytes());
        }
        let strtab_off = 64;
        let symtab_off = strtab_off + strtab.len();
        let shoff = symtab_off + symtab.len();
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(&strtab);
        b.extend_from_slice(&symtab);
        let section = |kind: u32, off: usize, size: usize, link: u32, entsize: u64| {
            let mut s = vec![0u8; 64];
            s[4..8].copy_from_slice(&kind.to_le_bytes());
            s[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            s[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            s[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
            s[0x38..0x40].copy_from_slice(&entsize.to_le_bytes());
            s
        };
        b.extend_from_slice(&section(0, 0, 0, 0, 0));
        b.extend_from_slice(&section(3, strtab_off, strtab.len(), 0, 0));
        b.extend_from_slice(&section(2, symtab_off, symtab.len(), 1, 24));
        b
    }

    #[test]
    fn finds_function_symbols_only() {
        let img = tiny_elf(&[
            ("add_one", 0x12, 0x1000, 0x80),
            ("data", 0x11, 0x2000, 8),
            ("fault", 0x12, 0x1080, 0x40),
        ]);
        let syms = function_symbols(&img);
        let names: Vec<_> = syms.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["add_one", "fault"]);
        assert_eq!(function_at(&syms, 0x1000), Some("add_one"));
        assert_eq!(function_at(&syms, 0x1090), Some("fault"));
        assert_eq!(function_at(&syms, 0x3000), None);
    }

    #[test]
    fn malformed_images_give_nothing() {
        assert!(function_symbols(b"not an elf").is_empty());
        let mut img = tiny_elf(&[("k", 0x12, 1, 1)]);
        img.truncate(img.len() - 10);
        // The section header table is cut short: no sections, so no symbols.
        assert!(function_symbols(&img).is_empty());
        let mut bad = tiny_elf(&[("k", 0x12, 1, 1)]);
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(function_symbols(&bad).is_empty());
    }
}
