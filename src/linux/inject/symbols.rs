//! The dynamic symbols of a shared library as another process maps it: read from the library's file (through that
//! process's root, so a container's own libc is read), and placed at the addresses that process loaded it at.
//!
//! Only `.dynsym` is read: what the loader itself can resolve. Every offset and size the file declares is checked
//! by the `object` crate's reader; a malformed file is an error, never a panic.

use std::path::Path;

use object::LittleEndian as Le;
use object::elf::{FileHeader64, PT_LOAD, SHN_UNDEF, SHT_DYNSYM, SHT_GNU_VERSYM, STT_FUNC};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};

use crate::linux::procfs::Mapping;

/// A function symbol of a loaded library, at its address in the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadedSymbol {
    pub(crate) name: String,
    pub(crate) address: u64,
    pub(crate) size: u64,
}

/// The exported functions of one library in one process, sorted by address.
#[derive(Debug, Clone, Default)]
pub(crate) struct LoadedLibrary {
    functions: Vec<LoadedSymbol>,
}

/// `VERSYM_HIDDEN`: a symbol version that is not the default one (`name@VERSION`, not `name@@VERSION`).
const VERSYM_HIDDEN: u16 = 0x8000;

impl LoadedLibrary {
    /// Reads the file at `file` (the library as the process sees it, reached from here) and places its symbols
    /// with the process's mappings of that file (`mappings`: every line of its memory map for that file).
    pub(crate) fn read(file: &Path, mappings: &[&Mapping]) -> Result<Self, String> {
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        Self::parse(&bytes, mappings)
    }

    pub(crate) fn parse(bytes: &[u8], mappings: &[&Mapping]) -> Result<Self, String> {
        let header =
            FileHeader64::<Le>::parse(bytes).map_err(|e| format!("not an ELF64 file: {e}"))?;
        if !header.is_little_endian() {
            return Err("not a little-endian ELF file".into());
        }
        let bias = load_bias(header, bytes, mappings)?;
        let headers = header
            .section_headers(Le, bytes)
            .map_err(|e| format!("section headers: {e}"))?;
        let sections = SectionTable::<FileHeader64<Le>, &[u8]>::new(headers, Default::default());
        let mut functions = Vec::new();
        // Names whose only entry so far is an older (hidden) version.
        let mut older: Vec<String> = Vec::new();
        for (index, section) in sections.enumerate() {
            if section.sh_type(Le) != SHT_DYNSYM {
                continue;
            }
            let table = object::read::elf::SymbolTable::parse(Le, bytes, &sections, index, section)
                .map_err(|e| format!("dynamic symbol table: {e}"))?;
            let versions = versym(bytes, &sections, table.len());
            for (i, sym) in table.iter().enumerate() {
                if sym.st_type() != STT_FUNC || sym.st_shndx(Le) == SHN_UNDEF {
                    continue;
                }
                let hidden = versions.get(i).is_some_and(|v| v & VERSYM_HIDDEN != 0);
                let Ok(name) = sym.name(Le, table.strings()) else {
                    continue;
                };
                let name = String::from_utf8_lossy(name).into_owned();
                // A default version of a name wins over an older one at another address, in either order:
                // glibc lists some old versions before their default one.
                if hidden && functions.iter().any(|f: &LoadedSymbol| f.name == name) {
                    continue;
                }
                if hidden {
                    older.push(name.clone());
                } else if let Some(at) = older.iter().position(|o| *o == name) {
                    older.swap_remove(at);
                    functions.retain(|f| f.name != name);
                }
                functions.push(LoadedSymbol {
                    name,
                    address: bias.wrapping_add(sym.st_value(Le)),
                    size: sym.st_size(Le),
                });
            }
        }
        functions.sort_by_key(|f| f.address);
        Ok(LoadedLibrary { functions })
    }

    /// The address of the function `name` (its default version, where it has several).
    pub(crate) fn function(&self, name: &str) -> Option<u64> {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.address)
    }

    /// The function `name` (its default version, where it has several): its address and size.
    pub(crate) fn symbol(&self, name: &str) -> Option<&LoadedSymbol> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The exported function that covers `pc`, or the nearest one below it (code between exported functions
    /// belongs to some internal function that follows one of them).
    pub(crate) fn nearest_below(&self, pc: u64) -> Option<&LoadedSymbol> {
        let at = self.functions.partition_point(|f| f.address <= pc);
        self.functions[..at]
            .iter()
            .rev()
            .find(|f| f.address <= pc && pc < f.address.saturating_add(f.size.max(1)))
            .or_else(|| at.checked_sub(1).map(|i| &self.functions[i]))
    }
}

#[cfg(test)]
impl LoadedLibrary {
    /// A table of (name, address, size) for tests.
    pub(crate) fn for_tests(functions: &[(&str, u64, u64)]) -> Self {
        let mut functions: Vec<LoadedSymbol> = functions
            .iter()
            .map(|&(name, address, size)| LoadedSymbol {
                name: name.into(),
                address,
                size,
            })
            .collect();
        functions.sort_by_key(|f| f.address);
        LoadedLibrary { functions }
    }
}

/// The `SHT_GNU_VERSYM` entries (one `u16` per dynamic symbol), or none.
fn versym<'d>(
    bytes: &'d [u8],
    sections: &SectionTable<'d, FileHeader64<Le>, &'d [u8]>,
    count: usize,
) -> Vec<u16> {
    for section in sections.iter() {
        if section.sh_type(Le) != SHT_GNU_VERSYM {
            continue;
        }
        let Ok(data) = section.data(Le, bytes) else {
            return Vec::new();
        };
        return data
            .chunks_exact(2)
            .take(count)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
    }
    Vec::new()
}

/// The difference between the addresses the file's symbols name and where the process loaded them: the mapping
/// of file offset 0 holds the first loadable segment.
fn load_bias(
    header: &FileHeader64<Le>,
    bytes: &[u8],
    mappings: &[&Mapping],
) -> Result<u64, String> {
    let segments = header
        .program_headers(Le, bytes)
        .map_err(|e| format!("program headers: {e}"))?;
    let first = segments
        .iter()
        .filter(|p| p.p_type(Le) == PT_LOAD)
        .min_by_key(|p| p.p_offset(Le))
        .ok_or("no loadable segment")?;
    let page = 4096u64;
    let first_vaddr = first.p_vaddr(Le) & !(page - 1);
    let offset = first.p_offset(Le) & !(page - 1);
    if !mappings.iter().any(|m| m.offset == offset) {
        return Err("the process maps no part of the file at its first segment's offset".into());
    }
    // Not a mapping of the file as data (a symbolizer's), which would place every symbol in memory that is not
    // code: a call there faults.
    let base = *crate::linux::procfs::loaded_at(mappings, offset)
        .first()
        .ok_or("the process maps the file only as data, not as a library the loader loaded")?;
    Ok(base.wrapping_sub(first_vaddr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::procfs::Process;

    /// This process's libc, read and placed with this process's map.
    fn own_libc() -> LoadedLibrary {
        let maps = Process::current().maps().unwrap();
        let libc_map = maps
            .iter()
            .find(|m| {
                m.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
            })
            .expect("this test links libc dynamically");
        let same: Vec<&Mapping> = maps.iter().filter(|m| m.same_file(libc_map)).collect();
        LoadedLibrary::read(libc_map.path().unwrap(), &same).unwrap()
    }

    /// This process's libc, placed with this process's map, names `getpid` where this process calls it.
    #[test]
    fn own_libc_symbols_land_where_they_are() {
        let lib = own_libc();
        // SAFETY: only the address of libc's getpid is taken, through the loader, as the process resolved it.
        let local = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as u64;
        assert_eq!(lib.function("getpid"), Some(local));
        let found = lib.nearest_below(local + 1).unwrap();
        assert!(found.address <= local + 1, "{found:?}");
        assert!(lib.function("no_such_function_here").is_none());
    }

    /// A process that also maps its libc's file as data (a symbolizer printing a backtrace maps it read-only, whole,
    /// at offset 0), below or above the loaded library: the symbols are still placed where the loader put them.
    /// Before, the lowest mapping at offset 0 was taken, and an attach called `dlopen` inside the data mapping.
    #[test]
    fn a_library_also_mapped_as_data_is_placed_where_it_was_loaded() {
        let maps = Process::current().maps().unwrap();
        let libc_map = maps
            .iter()
            .find(|m| {
                m.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
            })
            .expect("this test links libc dynamically");
        // SAFETY: only the address of libc's getpid is taken, through the loader, as the process resolved it.
        let local = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as u64;
        let mut same: Vec<Mapping> = maps
            .iter()
            .filter(|m| m.same_file(libc_map))
            .cloned()
            .collect();
        let lowest = same.iter().map(|m| m.start).min().unwrap();
        let highest = same.iter().map(|m| m.end).max().unwrap();
        for data_at in [lowest - (64 << 20), highest + (64 << 20)] {
            let mut data = libc_map.clone();
            (data.start, data.end, data.offset) = (data_at, data_at + (2 << 20), 0);
            data.permissions = *b"r--p";
            same.push(data);
            let refs: Vec<&Mapping> = same.iter().collect();
            let lib = LoadedLibrary::read(libc_map.path().unwrap(), &refs).unwrap();
            assert_eq!(
                lib.function("getpid"),
                Some(local),
                "data mapped at {data_at:#x}"
            );
        }
        // The file mapped only as data is no library the loader loaded.
        let mut data = libc_map.clone();
        (data.offset, data.permissions) = (0, *b"r--p");
        let only_data = LoadedLibrary::read(libc_map.path().unwrap(), &[&data]);
        assert!(only_data.is_err(), "{:?}", only_data.map(|_| ()));
    }

    /// glibc keeps the old `pthread_cond_*` of GLIBC_2.2.5 beside the default ones of GLIBC_2.3.2, at lower
    /// addresses, and lists some of the old ones first in `.dynsym`: the name still finds the default version, the
    /// one the loader gives a caller.
    #[test]
    fn a_default_version_listed_after_an_older_one_is_the_one_found() {
        let lib = own_libc();
        let mut compared = 0;
        for name in [
            c"pthread_cond_init",
            c"pthread_cond_destroy",
            c"pthread_cond_signal",
            c"pthread_cond_wait",
            c"pthread_cond_broadcast",
            c"pthread_cond_timedwait",
            c"glob64",
            c"realpath",
        ] {
            // SAFETY: only the address of the function is taken, through the loader, as the process resolved it.
            let local = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as u64;
            if local == 0 {
                continue;
            }
            let name = name.to_str().unwrap();
            if let Some(found) = lib.function(name) {
                assert_eq!(found, local, "{name}");
                compared += 1;
            }
        }
        // The pthread_cond_* names are in every glibc: a run that compared none checked nothing.
        assert!(
            compared > 0,
            "no name was found both by dlsym and in libc's .dynsym"
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(LoadedLibrary::parse(b"not an elf file at all", &[]).is_err());
        let mut cut = std::fs::read("/proc/self/exe").unwrap();
        cut.truncate(100);
        assert!(LoadedLibrary::parse(&cut, &[]).is_err());
    }
}
