//! The function symbols of a CUDA module's ELF image, which name kernels and device functions: read with the
//! `object` crate, the same ELF reader that reads core dumps.
//!
//! Every offset and size an image declares is checked before it is used; a malformed image yields fewer symbols,
//! never a panic. For many lookups by address in one image, [`SymbolTable`] sorts the symbols once and each lookup
//! is a binary search.
//!
//! ```
//! use gpu_tools::coredump::elf::{FunctionSymbol, SymbolTable};
//!
//! let table: SymbolTable = [
//!     FunctionSymbol { name: "fault".into(), value: 0x1080, size: 0x40 },
//!     FunctionSymbol { name: "add_one".into(), value: 0x1000, size: 0x80 },
//! ]
//! .into_iter()
//! .collect();
//! assert_eq!(table.function_at(0x1090).map(|f| f.name.as_str()), Some("fault"));
//! assert_eq!(table.function_at(0x3000), None);
//! ```

use object::LittleEndian as Le;
use object::elf::{FileHeader64, SHT_SYMTAB, STT_FUNC};
use object::read::ReadRef;
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym};

/// A function symbol of an ELF image.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FunctionSymbol {
    /// Symbol name (mangled, as in the image).
    pub name: String,
    /// `st_value`: in a relocated CUDA image, the function's device address.
    pub value: u64,
    /// `st_size` in bytes.
    pub size: u64,
}

impl FunctionSymbol {
    /// Whether the symbol covers `address` (a symbol of size 0 covers nothing).
    pub fn covers(&self, address: u64) -> bool {
        address
            .checked_sub(self.value)
            .is_some_and(|off| off < self.size)
    }
}

/// True when `bytes` starts like a 64-bit little-endian ELF file.
pub fn is_elf64(bytes: &[u8]) -> bool {
    bytes.len() >= 64 && bytes[..4] == *b"\x7fELF" && bytes[4] == 2 && bytes[5] == 1
}

/// The `STT_FUNC` symbols of every symbol table in the image, in file order (empty for anything that is not a
/// readable little-endian ELF64 file; a symbol table that does not fit in the file is skipped).
pub fn function_symbols(bytes: &[u8]) -> Vec<FunctionSymbol> {
    let mut out = Vec::new();
    if !is_elf64(bytes) {
        return out;
    }
    // The header as `object` lays it out (`FileHeader::parse` would also refuse an `EI_VERSION` other than 1, which
    // this reader never required).
    let Ok(header) = bytes.read_at::<FileHeader64<Le>>(0) else {
        return out;
    };
    // Section names are not needed (and an image without a name table is still read).
    let Ok(headers) = header.section_headers(Le, bytes) else {
        return out;
    };
    let sections = SectionTable::<FileHeader64<Le>, &[u8]>::new(headers, Default::default());
    for (index, section) in sections.enumerate() {
        if section.sh_type(Le) != SHT_SYMTAB {
            continue;
        }
        let Ok(table) = object::read::elf::SymbolTable::parse(Le, bytes, &sections, index, section)
        else {
            continue;
        };
        for sym in table.iter().filter(|s| s.st_type() == STT_FUNC) {
            // A name outside the string table, or not terminated inside it, leaves the symbol out.
            if let Ok(name) = sym.name(Le, table.strings()) {
                out.push(FunctionSymbol {
                    name: String::from_utf8_lossy(name).into_owned(),
                    value: sym.st_value(Le),
                    size: sym.st_size(Le),
                });
            }
        }
    }
    out
}

/// The name of the function whose symbol starts at, or covers, `address` in `symbols` (exact start preferred).
///
/// A linear scan of any slice; for many lookups, build a [`SymbolTable`] once.
pub fn function_at(symbols: &[FunctionSymbol], address: u64) -> Option<&str> {
    symbols
        .iter()
        .find(|s| s.value == address)
        .or_else(|| symbols.iter().find(|s| s.covers(address)))
        .map(|s| s.name.as_str())
}

/// Function symbols sorted by address, for lookups by address: sorted once, then each lookup is a binary search.
///
/// It dereferences to the sorted symbols (`&[FunctionSymbol]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct SymbolTable {
    /// Sorted by `value`; equal values keep their original order.
    symbols: Vec<FunctionSymbol>,
    /// `reach[i]`: the highest end address (`value + size`) among `symbols[..=i]`, which bounds the search for a
    /// symbol that covers an address.
    #[cfg_attr(feature = "serde", serde(skip))]
    reach: Vec<u64>,
}

impl SymbolTable {
    /// Sorts `symbols` by address.
    pub fn new(mut symbols: Vec<FunctionSymbol>) -> Self {
        symbols.sort_by_key(|s| s.value);
        let mut end = 0;
        let reach = symbols
            .iter()
            .map(|s| {
                end = end.max(s.value.saturating_add(s.size));
                end
            })
            .collect();
        SymbolTable { symbols, reach }
    }

    /// The function symbols of an ELF image ([`function_symbols`]), sorted.
    pub fn from_image(bytes: &[u8]) -> Self {
        Self::new(function_symbols(bytes))
    }

    /// The symbol that starts at `address`, else the nearest symbol below it that covers it. Among symbols that
    /// start at the same address, the first in the image wins.
    pub fn function_at(&self, address: u64) -> Option<&FunctionSymbol> {
        let below = self.symbols.partition_point(|s| s.value < address);
        if let Some(s) = self.symbols.get(below).filter(|s| s.value == address) {
            return Some(s);
        }
        // Walk down from the nearest start below `address` while some symbol at or below can still reach it.
        let mut found: Option<usize> = None;
        for i in (0..below).rev() {
            if self.reach[i] <= address {
                break;
            }
            match found {
                Some(f) if self.symbols[i].value != self.symbols[f].value => break,
                _ if self.symbols[i].covers(address) => found = Some(i),
                _ => {}
            }
        }
        found.map(|i| &self.symbols[i])
    }

    /// The symbols, sorted by address.
    pub fn as_slice(&self) -> &[FunctionSymbol] {
        &self.symbols
    }

    /// The symbols, sorted by address.
    pub fn into_vec(self) -> Vec<FunctionSymbol> {
        self.symbols
    }
}

impl std::ops::Deref for SymbolTable {
    type Target = [FunctionSymbol];
    fn deref(&self) -> &[FunctionSymbol] {
        &self.symbols
    }
}

impl FromIterator<FunctionSymbol> for SymbolTable {
    fn from_iter<I: IntoIterator<Item = FunctionSymbol>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl From<Vec<FunctionSymbol>> for SymbolTable {
    fn from(symbols: Vec<FunctionSymbol>) -> Self {
        Self::new(symbols)
    }
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
        let table = SymbolTable::from_image(&img);
        assert_eq!(
            table.function_at(0x1000).map(|f| f.name.as_str()),
            Some("add_one")
        );
        assert_eq!(
            table.function_at(0x1090).map(|f| f.name.as_str()),
            Some("fault")
        );
        assert_eq!(table.function_at(0x3000), None);
        assert!(is_elf64(&img));
    }

    fn sym(name: &str, value: u64, size: u64) -> FunctionSymbol {
        FunctionSymbol {
            name: name.into(),
            value,
            size,
        }
    }

    /// The sorted table answers as a scan would on tables without overlaps, and picks the nearest start on
    /// tables with them.
    #[test]
    fn the_sorted_table_agrees_with_a_scan() {
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for round in 0..300 {
            let n = next(40) as usize;
            let mut at = next(64);
            let mut syms = Vec::new();
            for i in 0..n {
                let size = next(48);
                syms.push(sym(&format!("f{i}"), at, size));
                at += size + next(16);
            }
            // Shuffled: the table sorts.
            for i in (1..syms.len()).rev() {
                syms.swap(i, next(i as u64 + 1) as usize);
            }
            let table = SymbolTable::new(syms.clone());
            assert!(table.windows(2).all(|w| w[0].value <= w[1].value));
            for addr in 0..at + 8 {
                assert_eq!(
                    table.function_at(addr).map(|f| f.name.as_str()),
                    function_at(&syms, addr),
                    "round {round}, address {addr:#x}"
                );
            }
        }
        let nested = SymbolTable::new(vec![
            sym("outer", 0x100, 0x100),
            sym("inner", 0x140, 0x20),
            sym("alias", 0x100, 0),
        ]);
        let at = |a| nested.function_at(a).map(|f| f.name.as_str());
        assert_eq!(at(0x100), Some("outer"), "the first of equal starts");
        assert_eq!(at(0x150), Some("inner"), "the nearest start that covers");
        assert_eq!(at(0x170), Some("outer"));
        assert_eq!(at(0x200), None);
        assert_eq!(SymbolTable::default().function_at(0), None);
    }

    #[test]
    fn symbol_tables_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<SymbolTable>();
        send_sync::<FunctionSymbol>();
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
