//! C++ names as people read them: demangled as torch.profiler and cuda-gdb print them.

/// The demangled form of an Itanium C++ name, `None` for a plain C name or one the demangler rejects.
///
/// `cpp_demangle` writes integer literals of template arguments as casts (`(unsigned long)1`); libstdc++'s
/// demangler, which torch.profiler uses, writes them with suffixes (`1ul`). They are rewritten to match.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    symbol.demangle().ok().map(|s| literal_suffixes(&s))
}

/// The demangled form of `name`, or `name` as it is.
pub fn readable(name: &str) -> String {
    demangle(name).unwrap_or_else(|| name.to_owned())
}

/// `(unsigned long)1` → `1ul`, `(int)-3` → `-3`, `(bool)1` → `true`, as libstdc++ prints literals.
fn literal_suffixes(s: &str) -> String {
    const CASTS: [(&str, &str); 6] = [
        ("(unsigned long long)", "ull"),
        ("(unsigned long)", "ul"),
        ("(unsigned int)", "u"),
        ("(long long)", "ll"),
        ("(long)", "l"),
        ("(int)", ""),
    ];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    'scan: while let Some(open) = rest.find('(') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        for (cast, suffix) in CASTS {
            if let Some(after) = tail.strip_prefix(cast) {
                let sign = usize::from(after.starts_with('-'));
                let digits = after[sign..].bytes().take_while(u8::is_ascii_digit).count();
                if digits > 0 {
                    out.push_str(&after[..sign + digits]);
                    out.push_str(suffix);
                    rest = &after[sign + digits..];
                    continue 'scan;
                }
            }
        }
        for (lit, word) in [("(bool)0", "false"), ("(bool)1", "true")] {
            if let Some(after) = tail.strip_prefix(lit) {
                out.push_str(word);
                rest = after;
                continue 'scan;
            }
        }
        out.push('(');
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangle_as_torch_profiler_prints_them() {
        assert_eq!(
            demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_")
                .as_deref(),
            Some(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                 std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
            )
        );
        assert_eq!(
            demangle("_Z7add_onePji").as_deref(),
            Some("add_one(unsigned int*, int)")
        );
        assert_eq!(demangle("add_one"), None);
        assert_eq!(demangle("_Znot a name"), None);
        assert_eq!(readable("add_one"), "add_one");
    }

    #[test]
    fn literals_get_suffixes_and_other_parentheses_stay() {
        assert_eq!(
            literal_suffixes(
                "f<(unsigned long long)2, (long)-1, (unsigned int)7, (int)0, (bool)1, (bool)0>(int)"
            ),
            "f<2ull, -1l, 7u, 0, true, false>(int)"
        );
        assert_eq!(
            literal_suffixes("g<(unsigned long)(sizeof (T))>()"),
            "g<(unsigned long)(sizeof (T))>()"
        );
        assert_eq!(
            literal_suffixes("(anonymous namespace)::k(int)"),
            "(anonymous namespace)::k(int)"
        );
    }
}
